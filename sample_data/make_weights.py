"""Derive a small weighted tabular set from tickets.csv: each ticket carries a sampling weight.

Run: .venv/bin/python sample_data/make_weights.py   (deterministic; writes sample_data/tickets_weighted.csv)

The story (documented, generated): the export is a stratified audit sample in which channels were
kept at different rates, so each ticket's `weight` is the inverse of its channel's keep rate (how many
production tickets it stands for); tickets a dispatcher marked as internal test traffic (every 97th
ticket id here) carry weight 0 — kept in the file and counted, never dropped. Free-text columns are
left out to keep the file small; the rows are the first tickets up to 2024-06-01, in file order.
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


def build(tickets: pl.DataFrame) -> pl.DataFrame:
    weight = (
        pl.when(pl.col("ticket_id").cast(pl.Int64) % TEST_TRAFFIC_EVERY == 0)
        .then(0.0)
        .otherwise(pl.col("channel").replace_strict(CHANNEL_WEIGHT, default=1.0, return_dtype=pl.Float64))
    )
    return (
        tickets.filter(pl.col("created_at") < CUTOFF)
        .select(*COLUMNS, "queue")
        .with_columns(weight.alias("weight"))
    )


def main() -> None:
    out = build(pl.read_csv(HERE / "tickets.csv", infer_schema_length=0))
    out.write_csv(HERE / "tickets_weighted.csv")
    print(f"wrote {out.height} rows to {HERE / 'tickets_weighted.csv'}")


if __name__ == "__main__":
    main()
