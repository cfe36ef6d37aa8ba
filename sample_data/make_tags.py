"""Generate a small multi-label tagging set: support tickets, each with a set of tags (possibly none).

Run: .venv/bin/python sample_data/make_tags.py   (deterministic, seed SEED; writes sample_data/tickets_tags.csv)

Clearly generated data, documented here: each ticket draws its tags independently with the rates in
TAGS (plus one correlated pair: a refund usually comes with billing), then its subject and body are
written from phrases of its tags (each phrase kept with probability SIGNAL) mixed with phrases of
tags it does not hold (probability NOISE) and neutral filler (with an order number and a product), so the tags are learnable from the text
but not perfectly. The `tags` column is a JSON list of strings; an untagged ticket holds "[]".
Rows are independent (no customer appears twice).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261205
ROWS = 1200
SIGNAL = 0.75
NOISE = 0.06
# tag -> (rate, phrases written for it)
TAGS = {
    "billing": (0.30, ["charged twice", "invoice is wrong", "my card was billed", "payment failed"]),
    "refund": (0.12, ["I want my money back", "please refund", "refund request", "return the payment"]),
    "shipping": (0.25, ["parcel has not arrived", "tracking number", "delivery is late", "courier lost it"]),
    "login": (0.20, ["cannot log in", "password reset", "two-factor code", "locked out of my account"]),
    "bug": (
        0.18,
        ["the app crashes", "error message on screen", "page does not load", "button does nothing"],
    ),
    "feature_request": (
        0.08,
        ["would be nice to have", "please add an option", "suggestion for", "could you support"],
    ),
}
FILLER = ["hello", "thanks in advance", "this is urgent", "since yesterday", "see attached", "regards"]
PRODUCTS = ["the kettle", "my headphones", "the desk lamp", "the blender", "a phone case", "the backpack"]


def _tags(rng: random.Random) -> list[str]:
    tags = [t for t, (rate, _) in TAGS.items() if rng.random() < rate]
    if "refund" in tags and "billing" not in tags and rng.random() < 0.7:
        tags.append("billing")
    return sorted(tags)


def _text(rng: random.Random, tags: list[str]) -> tuple[str, str]:
    parts = [rng.choice(TAGS[t][1]) for t in tags if rng.random() < SIGNAL]
    parts += [rng.choice(p) for t, (_, p) in TAGS.items() if t not in tags and rng.random() < NOISE]
    parts += rng.sample(FILLER, 2) + [f"order {rng.randint(10000, 99999)} for {rng.choice(PRODUCTS)}"]
    rng.shuffle(parts)
    subject = parts[0].capitalize() if parts else "Question"
    return subject, ". ".join(parts[1:]) + "."


def main() -> None:
    import polars as pl

    rng = random.Random(SEED)
    rows = []
    for i in range(ROWS):
        tags = _tags(rng)
        subject, body = _text(rng, tags)
        day = 1 + i * 365 // ROWS
        rows.append(
            {
                "ticket_id": f"TG{i:05d}",
                "created_at": f"2025-{1 + (day - 1) // 31 % 12:02d}-{1 + (day - 1) % 28:02d}",
                "channel": rng.choice(["email", "chat", "web"]),
                "subject": subject,
                "body": body,
                "tags": json.dumps(tags),
            }
        )
    out = HERE / "tickets_tags.csv"
    pl.DataFrame(rows).write_csv(out)
    print(f"wrote {len(rows)} rows to {out}")


if __name__ == "__main__":
    main()
