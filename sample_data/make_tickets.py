"""Generate the synthetic support-ticket routing data set with planted, measured defects.

Run:  .venv/bin/python sample_data/make_tickets.py            (writes tickets.csv, defects.toml, DATASHEET.md)
      .venv/bin/python sample_data/make_tickets.py --no-check (skips the TF-IDF self-check; keeps the number
                                                              recorded by the previous run)

Everything is drawn from one numpy Generator with a fixed seed, so a rerun is byte-identical. The defect counts
are measured on the file as written (read back from disk), by code in this folder only — nothing from engine/ —
so the audit engine can be tested against an independent implementation.

This script generates the rows and writes the three files; beside it, ticket_spec.py holds the data set's design
(sizes, priors, codes, phrase pools), ticket_measure.py the independent measurement, ticket_datasheet.py the
datasheet rendered from defects.toml.
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import tomlkit
from ticket_datasheet import write_datasheet
from ticket_measure import measure, tfidf_check
from ticket_spec import (
    CHANNELS,
    COLUMNS,
    CORE,
    DETAIL,
    END,
    GENERIC,
    GENERIC_SUBJ,
    INSERTS,
    N_BASE,
    N_CUSTOMERS,
    N_EXACT_SOURCES,
    N_NORM_SOURCES,
    N_REWRITES,
    NEIGHBOURS,
    NOISE,
    OPENERS,
    P_AMBIGUOUS,
    PAIR_WEIGHT,
    PAIRS,
    PRIOR_EARLY,
    PRIOR_LATE,
    PRIORITIES,
    PRODUCTS,
    QUEUES,
    REF_BASE,
    RESOLUTION,
    SEED,
    SHIFT_START,
    SLOTS,
    START,
    SUBJ,
    SYNONYMS,
)

HERE = Path(__file__).resolve().parent
CSV_PATH = HERE / "tickets.csv"
TOML_PATH = HERE / "defects.toml"
SHEET_PATH = HERE / "DATASHEET.md"


# ----------------------------------------------------------------------------------------------------------
# Text generation
# ----------------------------------------------------------------------------------------------------------


def pick(rng: np.random.Generator, items: list) -> object:
    return items[int(rng.integers(len(items)))]


def fill(rng: np.random.Generator, template: str) -> str:
    """Fill {slots} with random values; numeric slots give the text realistic variety."""
    out = template
    while "{" in out:
        start = out.index("{")
        end = out.index("}", start)
        key = out[start + 1 : end]
        if key in SLOTS:
            val = pick(rng, SLOTS[key])
        elif key == "product2":
            val = pick(rng, SLOTS["product"])
        elif key == "order":
            val = f"#{int(rng.integers(1_000_000, 9_999_999))}"
        elif key == "amount":
            val = f"${int(rng.integers(5, 400))}.{int(rng.integers(0, 100)):02d}"
        elif key == "card":
            val = f"{int(rng.integers(0, 10_000)):04d}"
        elif key == "code":
            val = f"E{int(rng.integers(100, 999))}"
        elif key == "pct":
            val = str(int(rng.integers(5, 99)))
        elif key == "n":
            val = str(int(rng.integers(2, 15)))
        else:
            raise KeyError(key)
        out = out[:start] + val + out[end + 1 :]
    return out


def typo(rng: np.random.Generator, word: str) -> str:
    if len(word) < 4 or not word.isalpha():
        return word
    i = int(rng.integers(1, len(word) - 1))
    kind = int(rng.integers(3))
    if kind == 0:  # swap neighbours
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == 1:  # drop a letter
        return word[:i] + word[i + 1 :]
    return word[:i] + word[i] + word[i:]  # double a letter


def roughen(rng: np.random.Generator, text: str, typo_rate: float, noise_rate: float) -> str:
    words = text.split(" ")
    out = []
    for w in words:
        out.append(typo(rng, w) if rng.random() < typo_rate else w)
        if rng.random() < noise_rate:
            out.append(pick(rng, NOISE))
    return " ".join(out)


def sentence_pool(rng: np.random.Generator, queue: str, pair: tuple[str, str] | None) -> str:
    """One follow-on sentence: the ticket's own details, generic filler, or a neighbour queue's words."""
    r = rng.random()
    if pair is not None:
        if r < 0.35:
            return fill(rng, pick(rng, PAIRS[pair][1]))
        if r < 0.7:
            return fill(rng, pick(rng, GENERIC))
        return fill(rng, pick(rng, DETAIL[pick(rng, list(pair))]))
    if r < 0.3:
        return fill(rng, pick(rng, DETAIL[queue] + CORE[queue]))
    if r < 0.68:
        return fill(rng, pick(rng, GENERIC))
    other = pick(rng, NEIGHBOURS[queue])
    return fill(rng, pick(rng, DETAIL[other] + CORE[other]))


def make_text(rng: np.random.Generator, queue: str, n_sent: int) -> tuple[str, str]:
    """Return (subject, body) for a ticket routed to `queue`."""
    ambiguous = rng.random() < P_AMBIGUOUS[queue]
    pair = None
    if ambiguous:
        pairs = [p for p in PAIRS if queue in p]
        w = np.array([PAIR_WEIGHT[p] for p in pairs])
        pair = pairs[int(rng.choice(len(pairs), p=w / w.sum()))]
    vague = rng.random() < 0.12
    if vague:
        subject = fill(rng, pick(rng, GENERIC_SUBJ))
    elif pair is not None:
        subject = fill(rng, pick(rng, PAIRS[pair][0]))
    elif rng.random() < 0.1:  # the customer's subject points at a neighbouring problem
        subject = fill(rng, pick(rng, SUBJ[pick(rng, NEIGHBOURS[queue])]))
    else:
        subject = fill(rng, pick(rng, SUBJ[queue]))
    first = fill(rng, pick(rng, PAIRS[pair][1] if pair is not None else CORE[queue]))
    sentences = [first]
    for _ in range(20 * n_sent):  # distinct sentences: people rarely repeat a sentence verbatim
        if len(sentences) == n_sent:
            break
        cand = sentence_pool(rng, queue, pair)
        if cand not in sentences:
            sentences.append(cand)
    n_sent = len(sentences)
    if n_sent > 1:
        order = rng.permutation(n_sent)
        order = [0] + [int(i) for i in order if i != 0] if rng.random() < 0.7 else [int(i) for i in order]
        sentences = [sentences[i] for i in order]
    if rng.random() < 0.35:
        sentences.insert(0, pick(rng, OPENERS))
    body = " ".join(sentences)
    typo_rate = 0.05 if rng.random() < 0.2 else 0.01
    body = roughen(rng, body, typo_rate, 0.015)
    subject = roughen(rng, subject, typo_rate, 0.0)
    style = rng.random()
    if style < 0.1:
        body, subject = body.lower(), subject.lower()
    elif style < 0.13:
        subject = subject.upper()
    return subject, body


# ----------------------------------------------------------------------------------------------------------
# Rows: time, customers, threads, cases
# ----------------------------------------------------------------------------------------------------------


def prior_at(t: datetime) -> np.ndarray:
    if t < SHIFT_START:
        w = 0.0
    else:
        w = min(1.0, (t - SHIFT_START) / (END - SHIFT_START) * 1.6)
    p = np.array([(1 - w) * PRIOR_EARLY[q] + w * PRIOR_LATE[q] for q in QUEUES])
    return p / p.sum()


def timestamps(rng: np.random.Generator, n: int) -> list[datetime]:
    days = (END - START).days
    growth = np.linspace(1.0, 1.45, days)
    weekday = np.array([1.0 if (START + timedelta(days=d)).weekday() < 5 else 0.6 for d in range(days)])
    w = growth * weekday
    day = rng.choice(days, size=n, p=w / w.sum())
    hour_w = np.array([1, 1, 1, 1, 1, 2, 4, 7, 10, 12, 12, 11, 10, 11, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2], float)
    hour = rng.choice(24, size=n, p=hour_w / hour_w.sum())
    sec = rng.integers(0, 3600, size=n)
    out = [
        START + timedelta(days=int(d), hours=int(h), seconds=int(s))
        for d, h, s in zip(day, hour, sec, strict=True)
    ]
    out.sort()
    return out


def pick_channel(rng: np.random.Generator) -> str:
    return CHANNELS[int(rng.choice(4, p=[0.45, 0.25, 0.12, 0.18]))]


def body_length(rng: np.random.Generator) -> int:
    return int(rng.choice([1, 2, 3, 4, 5, 6], p=[0.14, 0.2, 0.22, 0.2, 0.14, 0.1]))


def base_rows(rng: np.random.Generator) -> list[dict]:
    times = timestamps(rng, N_BASE)
    activity = np.minimum(rng.pareto(1.6, N_CUSTOMERS), 25.0) + 1.0  # a few busy accounts, none enormous
    activity /= activity.sum()
    cust_of = rng.choice(N_CUSTOMERS, size=N_BASE, p=activity)
    last_thread: dict[int, tuple[int, datetime, str]] = {}
    rows: list[dict] = []
    n_threads = 0
    for i, t in enumerate(times):
        guest = rng.random() < 0.03
        cust = None if guest else int(cust_of[i])
        prev = last_thread.get(cust) if cust is not None else None
        if prev is not None and t - prev[1] < timedelta(days=21) and rng.random() < 0.45:
            thread = prev[0]
            queue = prev[2] if rng.random() < 0.9 else QUEUES[int(rng.choice(6, p=prior_at(t)))]
        else:
            n_threads += 1
            thread = n_threads
            queue = QUEUES[int(rng.choice(6, p=prior_at(t)))]
        channel = pick_channel(rng)
        if guest and rng.random() < 0.45:
            thread_val = None  # a phone call from a guest: nothing links it to anyone
        elif channel == "phone" and rng.random() < 0.2:
            thread_val = None
        else:
            thread_val = thread
        if cust is not None:
            last_thread[cust] = (thread, t, queue)
        subject, body = make_text(rng, queue, body_length(rng))
        rows.append(
            {
                "subject": subject,
                "body": body,
                "channel": channel,
                "product": pick(rng, PRODUCTS),
                "customer": cust,
                "thread": thread_val,
                "case": None,
                "created_at": t,
                "queue": queue,
                "origin": "base",
            }
        )
    assign_cases(rng, rows)
    return rows


def assign_cases(rng: np.random.Generator, rows: list[dict]) -> None:
    """Escalation cases inside threads, plus incident cases that link threads of different customers."""
    by_thread: dict[int, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r["thread"] is not None:
            by_thread[r["thread"]].append(i)
    n_case = 0
    for thread in sorted(by_thread):
        idx = by_thread[thread]
        if rng.random() < 0.1:
            n_case += 1
            start = int(rng.integers(len(idx)))
            for i in idx[start:]:
                rows[i]["case"] = n_case
    # Incident cases: one case id on tickets from several customers about the same problem.
    by_queue: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r["case"] is None:
            by_queue[r["queue"]].append(i)
    for _ in range(70):
        q = pick(rng, ["technical", "shipping", "security", "billing", "technical", "shipping"])
        pool = by_queue[q]
        anchor = int(rng.integers(len(pool)))
        k = int(rng.integers(2, 6))
        n_case += 1
        for j in range(anchor, min(anchor + 3 * k, len(pool)), 3):
            rows[pool[j]]["case"] = n_case


def plant_copies(rng: np.random.Generator, rows: list[dict]) -> tuple[list[dict], list[tuple[int, int]]]:
    """Planted defects 1-3: exact copies, case/whitespace variants, and light rewrites on other threads."""
    n = len(rows)
    new: list[dict] = []
    max_thread = max(r["thread"] or 0 for r in rows)
    customers = sorted({r["customer"] for r in rows if r["customer"] is not None})

    def derived(src: dict, subject: str, body: str, queue: str, other_customer: bool) -> dict:
        nonlocal max_thread
        max_thread += 1
        gap = timedelta(minutes=int(rng.integers(5, 60 * 24 * 30)))
        return {
            "subject": subject,
            "body": body,
            "channel": pick_channel(rng),
            "product": src["product"],
            "customer": int(pick(rng, customers)) if other_customer else src["customer"],
            "thread": max_thread,
            "case": None,
            "created_at": min(src["created_at"] + gap, END - timedelta(seconds=1)),
            "queue": queue,
            "origin": "planted",
        }

    sources = rng.choice(n, size=N_EXACT_SOURCES + N_NORM_SOURCES, replace=False)
    for k, s in enumerate(sources):
        src = rows[int(s)]
        if k < N_EXACT_SOURCES:
            copies = 2 if rng.random() < 0.15 else 1
            for _ in range(copies):
                queue = src["queue"]
                if rng.random() < 0.3:  # a second agent routed the identical text elsewhere
                    queue = pick(rng, NEIGHBOURS[queue])
                new.append(derived(src, src["subject"], src["body"], queue, rng.random() < 0.4))
        else:
            subject, body = case_ws_variant(rng, src["subject"], src["body"])
            queue = src["queue"] if rng.random() < 0.85 else pick(rng, NEIGHBOURS[src["queue"]])
            new.append(derived(src, subject, body, queue, rng.random() < 0.4))
    # Near-duplicate rewrites: need long texts so that a light edit keeps Jaccard high.
    long_rows = [i for i, r in enumerate(rows) if len((r["subject"] + " " + r["body"]).split()) >= 65]
    picks = rng.choice(len(long_rows), size=N_REWRITES, replace=False)
    pairs = []
    for p in picks:
        src_i = long_rows[int(p)]
        src = rows[src_i]
        body = rewrite(rng, src["body"], 2 if rng.random() < 0.25 else 1)
        queue = src["queue"] if rng.random() < 0.95 else pick(rng, NEIGHBOURS[src["queue"]])
        new.append(derived(src, src["subject"], body, queue, rng.random() < 0.5))
        pairs.append((src_i, n + len(new) - 1))
    return rows + new, pairs


def case_ws_variant(rng: np.random.Generator, subject: str, body: str) -> tuple[str, str]:
    kind = int(rng.integers(4))
    if kind == 0:
        return subject.lower(), body
    if kind == 1:
        return subject.upper(), "  " + body.replace(". ", ".  ", 1)
    if kind == 2:
        return subject + " ", body.replace(" ", "\n", 1)
    return subject.title(), body.lower() + " "


def rewrite(rng: np.random.Generator, body: str, edits: int) -> str:
    words = body.split(" ")
    for _ in range(edits):
        swappable = [i for i, w in enumerate(words) if w.lower() in SYNONYMS]
        if swappable and rng.random() < 0.6:
            i = int(pick(rng, swappable))
            words[i] = SYNONYMS[words[i].lower()]
        else:
            words.insert(int(rng.integers(len(words) + 1)), pick(rng, INSERTS))
    return " ".join(words)


def finalise(rng: np.random.Generator, rows: list[dict]) -> tuple[pl.DataFrame, list[int]]:
    """Sort by time, allocate ids/ref codes, add outcome columns and missing values."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["created_at"], i))
    rows = [rows[i] for i in order]
    next_ref = {q: REF_BASE[q] + int(rng.integers(0, 500)) for q in QUEUES}
    majority_code = {q: RESOLUTION[q] for q in QUEUES}
    out: dict[str, list] = {c: [] for c in COLUMNS}
    ticket = 500_000
    for r in rows:
        q = r["queue"]
        ticket += int(rng.integers(1, 4))
        # Defect 5: ref codes come from the queue's range; ~1.5% were rerouted and keep the first queue's range.
        ref_q = q if rng.random() > 0.015 else pick(rng, NEIGHBOURS[q])
        next_ref[ref_q] += int(rng.integers(1, 4))
        # Defect 4: resolution code agrees with the queue ~97% of the time.
        code_q = q if rng.random() > 0.03 else pick(rng, [x for x in QUEUES if x != q])
        pr_w = {
            "security": [0.02, 0.3, 0.43, 0.25],
            "technical": [0.15, 0.5, 0.28, 0.07],
            "billing": [0.2, 0.55, 0.2, 0.05],
        }.get(q, [0.25, 0.55, 0.16, 0.04])
        priority = PRIORITIES[int(rng.choice(4, p=pr_w))]
        if "urgent" in r["subject"].lower() or "asap" in r["body"].lower():
            priority = "urgent" if rng.random() < 0.5 else priority
        out["ticket_id"].append(ticket)
        out["ref_code"].append(f"R-{next_ref[ref_q]:06d}")
        out["subject"].append(r["subject"])
        out["body"].append(r["body"])
        out["channel"].append(r["channel"])
        out["product"].append(r["product"])
        out["customer_id"].append(None if r["customer"] is None else f"C-{r['customer'] + 1:05d}")
        out["thread_id"].append(None if r["thread"] is None else f"T-{r['thread']:06d}")
        out["case_id"].append(None if r["case"] is None else f"K-{r['case']:05d}")
        out["created_at"].append(r["created_at"].strftime("%Y-%m-%dT%H:%M:%S"))
        out["queue"].append(q)
        out["resolution_code"].append(pick(rng, majority_code[code_q]))
        out["priority"].append(priority)
    n = len(rows)
    # Defect 7: missing values.
    for col, k in [("channel", 180), ("product", 950), ("body", 45), ("priority", 120)]:
        for i in rng.choice(n, size=k, replace=False):
            out[col][int(i)] = None
    df = pl.DataFrame(out, schema={c: (pl.Int64 if c == "ticket_id" else pl.String) for c in COLUMNS})
    return df, order


# ----------------------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------------------


def write_toml(path: Path, rec: dict, planted_rows: list, planted_tickets: list, check: dict) -> None:
    doc = tomlkit.document()
    doc.add(tomlkit.comment("Generated by sample_data/make_tickets.py - do not edit; see DATASHEET.md"))
    doc["generator"] = {"script": "sample_data/make_tickets.py", "seed": SEED}
    for k, v in rec.items():
        doc[k] = v
    doc["tfidf_baseline"] = check
    doc["near_dup_planted_row_pairs"] = [list(p) for p in planted_rows]
    doc["near_dup_planted_ticket_pairs"] = [list(p) for p in planted_tickets]
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--no-check", action="store_true", help="skip the TF-IDF self-check")
    ap.add_argument("--out", default=str(HERE), help="output folder (default: next to this script)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, toml_path = out / CSV_PATH.name, out / TOML_PATH.name
    t0 = time.perf_counter()
    rng = np.random.default_rng(SEED)
    rows = base_rows(rng)
    rows, planted = plant_copies(rng, rows)
    df, order = finalise(rng, rows)
    df.write_csv(csv_path)
    t_write = time.perf_counter() - t0
    pos = {old: new for new, old in enumerate(order)}  # generation index -> file row (0-based)
    planted_rows = sorted(tuple(sorted((pos[a], pos[b]))) for a, b in planted)
    tickets = df["ticket_id"].to_list()
    planted_tickets = [[tickets[a], tickets[b]] for a, b in planted_rows]
    rec = measure(csv_path, planted_rows)
    t_measure = time.perf_counter() - t0 - t_write
    previous = toml_path if toml_path.exists() else TOML_PATH
    if args.no_check and previous.exists():
        check = tomllib.loads(previous.read_text(encoding="utf-8")).get("tfidf_baseline", {})
    else:
        check = tfidf_check(csv_path)
    write_toml(toml_path, rec, planted_rows, planted_tickets, check)
    write_datasheet(out / SHEET_PATH.name, tomllib.loads(toml_path.read_text(encoding="utf-8")))
    problems = self_check(rec, check)
    total = time.perf_counter() - t0
    print(
        f"rows={rec['rows']} generate+write={t_write:.1f}s measure={t_measure:.1f}s total={total:.1f}s "
        f"tfidf_acc={check.get('accuracy')} macro_f1={check.get('macro_f1')}"
    )
    for p in problems:
        print("SELF-CHECK FAILED:", p, file=sys.stderr)
    return 1 if problems else 0


def self_check(rec: dict, check: dict) -> list[str]:
    problems = []
    if rec["rows"] < 20_000:
        problems.append(f"only {rec['rows']} rows")
    if not rec["label_counts"]["security"] < 0.02 * rec["rows"]:
        problems.append("security is not under 2%")
    if rec["near_dup_planted_pairs_at_0_8"] < 0.6 * rec["near_dup_planted_pairs"]:
        problems.append("most planted rewrites fall below Jaccard 0.8")
    acc = check.get("accuracy")
    if acc is not None and not 0.70 <= acc <= 0.85:
        problems.append(f"TF-IDF accuracy {acc} outside 0.70-0.85")
    return problems


if __name__ == "__main__":
    raise SystemExit(main())
