"""Derive a small ordinal rating set from tickets.csv: each ticket's customer-satisfaction rating.

Run: .venv/bin/python sample_data/make_ratings.py   (deterministic; writes sample_data/tickets_ratings.csv)

The story (documented, generated): after a ticket is closed the customer rates the support on five
ordered levels, very_poor < poor < fair < good < excellent. The rating is drawn from a latent score
that depends on the ticket's queue, priority and channel, plus a per-ticket noise term taken from a
hash of the ticket id (no random state), cut at fixed thresholds — so neighbouring levels are
confused more often than distant ones, as with real ratings. Free-text columns are left out to keep
the file small; the rows are the tickets up to 2024-06-01, in file order.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
CUTOFF = "2024-06-01"
LEVELS = ["very_poor", "poor", "fair", "good", "excellent"]
QUEUE = {
    "account": 0.3,
    "billing": -0.4,
    "returns": 0.0,
    "security": -0.8,
    "shipping": -0.2,
    "technical": 0.4,
}
PRIORITY = {"low": 0.5, "normal": 0.2, "high": -0.3, "urgent": -0.7}
CHANNEL = {"phone": 0.6, "chat": 0.3, "email": -0.1, "web": -0.4}
CUTS = [-1.3, -0.5, 0.3, 1.1]  # latent score thresholds between the five levels
COLUMNS = [
    "ticket_id",
    "channel",
    "product",
    "priority",
    "queue",
    "customer_id",
    "thread_id",
    "case_id",
    "created_at",
]


def build(tickets: pl.DataFrame) -> pl.DataFrame:
    tid = pl.col("ticket_id").cast(pl.Int64)
    noise = ((tid * 2654435761) % 1_000_003).cast(pl.Float64) / 1_000_003 * 2.4 - 1.2
    latent = (
        pl.col("queue").replace_strict(QUEUE, default=0.0, return_dtype=pl.Float64)
        + pl.col("priority").replace_strict(PRIORITY, default=0.0, return_dtype=pl.Float64)
        + pl.col("channel").replace_strict(CHANNEL, default=0.0, return_dtype=pl.Float64)
        + noise
    )
    level = pl.lit(0, dtype=pl.Int64)
    for cut in CUTS:
        level = level + (latent > cut).cast(pl.Int64)
    return (
        tickets.filter(pl.col("created_at") < CUTOFF)
        .select(COLUMNS)
        .with_columns(level.replace_strict(dict(enumerate(LEVELS)), return_dtype=pl.String).alias("rating"))
    )


def main() -> None:
    out = build(pl.read_csv(HERE / "tickets.csv", infer_schema_length=0))
    out.write_csv(HERE / "tickets_ratings.csv")
    print(f"wrote {out.height} rows to {HERE / 'tickets_ratings.csv'}")


if __name__ == "__main__":
    main()
