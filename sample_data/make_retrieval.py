"""Generate a small query–passage relevance set for the retrieval recipe (recipes/retrieval-lora.toml).

Run: .venv/bin/python sample_data/make_retrieval.py   (deterministic; writes sample_data/retrieval_pairs.csv)

The fictional help centre of "Kestrel Home" holds one passage per (product, topic): how the product's
warranty, returns, delivery, setup, cleaning, … work. A customer's question names the product and asks
about one topic in other words than the passage uses (paraphrase pools below), so a lexical ranker
and an embedding model meet different difficulties. Each row is one judged query–passage pair:

    query_id, query, doc_id, passage, relevance, product

relevance 1: the passage answers the question (one per query); relevance 0: a judged hard negative —
the same product on another topic, the same topic for another product, and the product's "lexical
trap" for the question's topic (three per query). A trap passage (TRAPS below) reuses the words the
questions of a topic use but answers something else, so word overlap alone points at the wrong
passage; sibling products of one family ("Aster kettle", "Aster travel kettle") share most of their
name, so the product name alone does not single one passage out either. Passages nobody asked about
appear only as negatives; the corpus is every distinct passage of the file.

This is generated data, written to make the arms of a retrieval claim differ (the unchanged encoder,
BM25, a random ranking and the encoder fine-tuned on the train questions); it is no measurement of
any real help centre.
Four queries (every 40th) carry no relevant passage at all (the answering passage was
never judged), which the source stage's `source.retrieval` check counts and names.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "retrieval_pairs.csv"
SEED = 20251205
QUERIES = 160

PRODUCTS = [
    "Aster kettle",
    "Aster travel kettle",
    "Birch toaster",
    "Birch slot toaster",
    "Cedar blender",
    "Cedar hand blender",
    "Dune air purifier",
    "Dune desk air purifier",
    "Elm desk lamp",
    "Elm floor lamp",
    "Fjord dehumidifier",
    "Fjord mini dehumidifier",
    "Gale ceiling fan",
    "Gale tower fan",
    "Heron coffee grinder",
    "Heron spice grinder",
    "Iris rice cooker",
    "Iris slow cooker",
    "Juniper space heater",
    "Juniper oil heater",
]

# topic -> (passage template, question paraphrases). The passage and the questions share the product
# name only; the topic is said in different words.
TOPICS = {
    "warranty": (
        "The {p} is covered for two years against manufacturing defects; keep the receipt, because repairs under cover need proof of purchase.",
        [
            "is my {p} still under guarantee after 18 months",
            "will you fix a faulty {p} for free",
            "how long is the {p} protected if it breaks by itself",
        ],
    ),
    "returns": (
        "You can send the {p} back within 30 days of delivery in its original packaging for a full refund to the card you paid with.",
        [
            "can I get my money back for the {p}",
            "I changed my mind about the {p}, what now",
            "how do I give back an unwanted {p}",
        ],
    ),
    "delivery": (
        "Orders of the {p} ship from our warehouse within one working day and usually arrive in three to five days by tracked courier.",
        ["when will my {p} show up", "how fast do you post the {p}", "where is the parcel with my {p}"],
    ),
    "setup": (
        "To install the {p}, unpack it, place it on a level surface, plug it in and hold the power button for three seconds until the light blinks.",
        [
            "how do I get the new {p} running",
            "first time using the {p}, how do I start it",
            "steps to switch on a brand new {p}",
        ],
    ),
    "cleaning": (
        "Wipe the {p} with a damp cloth after unplugging it; never submerge the base, and descale the parts that touch water once a month with white vinegar.",
        [
            "how should I wash the {p}",
            "there is limescale in my {p}, how do I get rid of it",
            "is the {p} dishwasher safe",
        ],
    ),
    "noise": (
        "A humming or rattling {p} usually means a loose panel or debris near the motor; tighten the housing screws and clear the vents before contacting support.",
        ["my {p} makes a strange sound", "why is the {p} so loud", "the {p} started buzzing yesterday"],
    ),
    "power": (
        "If the {p} does not turn on, check the outlet with another appliance, reseat the cable and reset the thermal fuse by leaving it unplugged for ten minutes.",
        [
            "the {p} is dead and will not start",
            "nothing happens when I press the button on the {p}",
            "{p} won't power up",
        ],
    ),
    "parts": (
        "Replacement filters, lids and cables for the {p} are sold in the spare parts shop; enter the model number from the label underneath to find the right one.",
        [
            "where can I buy a new lid for the {p}",
            "I lost a piece of my {p}",
            "do you sell accessories for the {p}",
        ],
    ),
}


# topic -> a trap passage: the words of that topic's questions (and the product name, once), about another matter.
TRAPS = {
    "warranty": "A faulty {p} that breaks by itself is protected; the guarantee months are printed on the free leaflet inside the box.",
    "returns": "Money back offers on the {p}: give the voucher from an unwanted box to a friend if you changed your mind about buying another.",
    "delivery": "The {p} shows up in our post every month: where is the parcel of the week, and how fast do the winners receive theirs.",
    "setup": "Running the {p} for the first time? New owners start by reading the brand new switch guide in the steps section online.",
    "cleaning": "Wash your hands before handling the {p}; limescale and the dishwasher are topics we get rid of in our safe-use newsletter.",
    "noise": "A strange loud sound story: the {p} started buzzing with likes yesterday on our social page, and the fans loved it.",
    "power": "Press the button on the {p} box to hear why nothing is dead about it: a demo that will not start without batteries.",
    "parts": "Buy a new {p} where you lost the old one: a piece of advice on accessories we do not sell, and its lid.",
}


def _rows() -> list[dict[str, str]]:
    rng = random.Random(SEED)
    topics = list(TOPICS)
    docs = {}
    for i, p in enumerate(PRODUCTS):
        for j, t in enumerate(topics):
            docs[(p, t)] = (f"D{i:02d}{j}", TOPICS[t][0].format(p=p))
            docs[(p, t, "trap")] = (f"T{i:02d}{j}", TRAPS[t].format(p=p))
    pairs = [(p, t) for p in PRODUCTS for t in topics]
    rng.shuffle(pairs)
    rows: list[dict[str, str]] = []
    for q in range(QUERIES):
        p, t = pairs[q % len(pairs)]
        text = rng.choice(TOPICS[t][1]).format(p=p)
        text = text[0].upper() + text[1:] + "?"
        qid = f"Q{q:03d}"
        other_topic = rng.choice([x for x in topics if x != t])
        other_product = rng.choice([x for x in PRODUCTS if x != p])
        judged = [((p, other_topic), "0"), ((other_product, t), "0"), ((p, t, "trap"), "0")]
        if q % 40 != 39:  # every 40th query: its answering passage was never judged
            judged.insert(0, ((p, t), "1"))
        for key, rel in judged:
            doc_id, passage = docs[key]
            rows.append(
                {
                    "query_id": qid,
                    "query": text,
                    "doc_id": doc_id,
                    "passage": passage,
                    "relevance": rel,
                    "product": p,
                }
            )
    return rows


def main() -> None:
    rows = _rows()
    with OUT.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} rows ({QUERIES} queries) to {OUT}")


if __name__ == "__main__":
    main()
