"""Derive a small chat-format SFT set from tickets.csv: the model answers with the queue name.

Run: .venv/bin/python sample_data/make_sft.py   (deterministic; writes sample_data/tickets_sft.jsonl)
Each row keeps the ticket's ids, time and queue, so the source and split stages audit it like the CSV.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
ROWS = 4000
SYSTEM = "Route the support ticket to one queue: account, billing, returns, security, shipping or technical."


def main() -> None:
    df = pl.read_csv(HERE / "tickets.csv", infer_schema_length=0).head(ROWS)
    messages = [
        json.dumps(
            [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"{r['subject']}\n{r['body'] or ''}".strip()},
                {"role": "assistant", "content": r["queue"]},
            ]
        )
        for r in df.iter_rows(named=True)
    ]
    out = df.select("ticket_id", "customer_id", "thread_id", "case_id", "created_at", "queue").with_columns(
        pl.Series("messages", messages)
    )
    out.write_ndjson(HERE / "tickets_sft.jsonl")
    print(f"wrote {len(out)} rows to {HERE / 'tickets_sft.jsonl'}")


if __name__ == "__main__":
    main()
