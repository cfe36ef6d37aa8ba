"""The source input naming a retrieval claim's query and document columns (`[source.retrieval]`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RetrievalColumns(BaseModel):
    """A retrieval claim's query–document pairs: one row per judged pair, the relevance grade in the
    source's label column (0 = not relevant); the corpus is every distinct document of the data."""

    model_config = ConfigDict(extra="forbid")
    query_id_column: str = Field(
        default="", description="The column naming each query (its rows stay in one split)."
    )
    query_column: str = Field(default="", description="The column holding the query text.")
    doc_id_column: str = Field(default="", description="The column naming each document of the corpus.")
    doc_column: str = Field(default="", description="The column holding the document text.")

    def columns(self) -> list[str]:
        return [self.query_id_column, self.query_column, self.doc_id_column, self.doc_column]

    def named(self) -> bool:
        """Whether any column is named (the table is given)."""
        return any(self.columns())
