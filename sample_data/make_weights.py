"""Derive a small weighted tabular set from tickets.csv: each ticket carries a sampling weight.

Run: .venv/bin/python sample_data/make_weights.py   (deterministic; writes sample_data/tickets_weighted.csv)

The story (documented, generated): the export is a stratified audit sample in which channels were
kept at different rates, so each ticket's `weight` is the inverse of its channel's keep rate (how many
production tickets it stands for); tickets a dispatcher marked as internal test traffic (every 97th
ticket id here) carry weight 0 — kept in the file and counted, never dropped. Free-text columns are
left out to keep the file small; the rows are the first tickets up to 2024-06-01, in file order.

A second file, tickets_weighted_text.csv (`build_text`), is the same story for a fine-tuned text
classifier (docs/answers-weights-ft.toml): the tickets up to TEXT_CUTOFF with their subject and body,
the same `weight` rule, and no metadata beyond the channel the weight comes from.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
CUTOFF = "2024-06-01"
# Inverse keep rate per channel (a ticket with no channel recorded counts once).
CHANNEL_WEIGHT = {"email": 1.0, "web": 1.5, "chat": 2.0, "phone": 4.0}
TEST_TRAFFIC_EVERY = 97
COLUMNS = ["ticket_id", "channel", "product", "priority", "customer_id", "thread_id", "case_id", "created_at"]
TEXT_CUTOFF = "2024-04-01"
TEXT_COLUMNS = [
    "ticket_id",
    "subject",
    "body",
    "channel",
    "customer_id",
    "thread_id",
    "case_id",
    "created_at",
]


def _weight() -> pl.Expr:
    return (
        pl.when(pl.col("ticket_id").cast(pl.Int64) % TEST_TRAFFIC_EVERY == 0)
        .then(0.0)
        .otherwise(pl.col("channel").replace_strict(CHANNEL_WEIGHT, default=1.0, return_dtype=pl.Float64))
    )


def build(tickets: pl.DataFrame) -> pl.DataFrame:
    return (
        tickets.filter(pl.col("created_at") < CUTOFF)
        .select(*COLUMNS, "queue")
        .with_columns(_weight().alias("weight"))
    )


def build_text(tickets: pl.DataFrame) -> pl.DataFrame:
    """The weighted set with the tickets' text, for a fine-tuned classifier."""
    return (
        tickets.filter(pl.col("created_at") < TEXT_CUTOFF)
        .select(*TEXT_COLUMNS, "queue")
        .with_columns(_weight().alias("weight"))
    )


def main() -> None:
    tickets = pl.read_csv(HERE / "tickets.csv", infer_schema_length=0)
    for name, out in (
        ("tickets_weighted.csv", build(tickets)),
        ("tickets_weighted_text.csv", build_text(tickets)),
    ):
        out.write_csv(HERE / name)
        print(f"wrote {out.height} rows to {HERE / name}")


if __name__ == "__main__":
    main()
