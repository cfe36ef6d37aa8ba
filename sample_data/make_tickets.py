"""Generate the synthetic support-ticket routing data set with planted, measured defects.

Run:  .venv/bin/python sample_data/make_tickets.py            (writes tickets.csv, defects.toml, DATASHEET.md)
      .venv/bin/python sample_data/make_tickets.py --no-check (skips the TF-IDF self-check; keeps the number
                                                              recorded by the previous run)

Everything is drawn from one numpy Generator with a fixed seed, so a rerun is byte-identical. The defect counts
are measured on the file as written (read back from disk), by code in this script only — nothing from engine/ —
so the audit engine can be tested against an independent implementation.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
import tomllib
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import tomlkit

SEED = 20240917
HERE = Path(__file__).resolve().parent
CSV_PATH = HERE / "tickets.csv"
TOML_PATH = HERE / "defects.toml"
SHEET_PATH = HERE / "DATASHEET.md"

N_BASE = 23_150
N_EXACT_SOURCES = 300
N_NORM_SOURCES = 200
N_REWRITES = 300
N_CUSTOMERS = 7_000
START = datetime(2024, 1, 1)
END = datetime(2025, 9, 1)  # exclusive
SHIFT_START = datetime(2025, 3, 1)  # the last six months: returns and security grow

QUEUES = ["billing", "technical", "account", "shipping", "returns", "security"]
COLUMNS = [
    "ticket_id",
    "ref_code",
    "subject",
    "body",
    "channel",
    "product",
    "customer_id",
    "thread_id",
    "case_id",
    "created_at",
    "queue",
    "resolution_code",
    "priority",
]
REF_BASE = {q: 100_000 * (i + 1) for i, q in enumerate(QUEUES)}  # billing 100000-199999, ...
NEAR_DUP_THRESHOLD = 0.8
SHINGLE = 5

# Class priors before and after the shift (the later ones ramp in linearly over the last six months).
PRIOR_EARLY = {
    "billing": 0.27,
    "technical": 0.28,
    "account": 0.18,
    "shipping": 0.145,
    "returns": 0.115,
    "security": 0.010,
}
PRIOR_LATE = {
    "billing": 0.235,
    "technical": 0.245,
    "account": 0.165,
    "shipping": 0.135,
    "returns": 0.19,
    "security": 0.030,
}

RESOLUTION = {
    "billing": ["REFUND_ISSUED", "INVOICE_CORRECTED", "CHARGE_REVERSED", "PLAN_CHANGED"],
    "technical": ["PATCH_DEPLOYED", "CONFIG_FIXED", "KNOWN_ISSUE_LINKED", "FIRMWARE_UPDATED"],
    "account": ["ACCESS_RESTORED", "PROFILE_UPDATED", "ACCOUNT_MERGED", "ACCOUNT_CLOSED"],
    "shipping": ["RESHIPPED", "CARRIER_CLAIM_FILED", "DELIVERY_CONFIRMED", "ADDRESS_CORRECTED"],
    "returns": ["RETURN_LABEL_SENT", "REPLACEMENT_SENT", "RETURN_RECEIVED", "EXCHANGE_COMPLETED"],
    "security": ["CREDENTIALS_RESET", "FRAUD_BLOCKED", "SESSION_REVOKED", "INCIDENT_ESCALATED"],
}

PRODUCTS = [
    "Kestrel Hub",
    "Kestrel Cam",
    "Kestrel Thermo",
    "Kestrel Lock",
    "Kestrel Doorbell",
    "Kestrel Plus",
    "Kestrel Sensor Kit",
]
CHANNELS = ["email", "chat", "phone", "web"]
PRIORITIES = ["low", "normal", "high", "urgent"]

# ----------------------------------------------------------------------------------------------------------
# Phrase pools. Vocabulary deliberately overlaps between queues; the PAIR pools are genuinely ambiguous.
# ----------------------------------------------------------------------------------------------------------

SLOTS = {
    "product": ["hub", "camera", "thermostat", "smart lock", "doorbell", "sensor kit", "Kestrel Plus plan"],
    "carrier": ["UPS", "FedEx", "DHL", "USPS", "the courier", "the delivery driver"],
    "device": ["iPhone", "Android phone", "iPad", "laptop", "Windows PC", "Mac", "Pixel", "Galaxy tablet"],
    "browser": ["Chrome", "Safari", "Firefox", "Edge"],
    "name": ["Sam", "Priya", "Jon", "Maria", "Wei", "Fatima", "Lukas", "Ana", "Tom", "Keiko", "Omar", "Eva"],
    "month": ["January", "February", "March", "April", "May", "June", "July", "August", "September"],
    "weekday": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
}

SUBJ = {
    "billing": [
        "Charged twice this month",
        "Question about my invoice",
        "Wrong amount on my bill",
        "Subscription price went up",
        "Need a copy of invoice {order}",
        "Payment failed but money taken",
        "Unexpected charge of {amount}",
        "Billing issue with {product}",
        "Discount code not applied",
        "Cancel my Kestrel Plus billing",
        "Tax on my invoice looks wrong",
        "Pro-rated charge question",
        "Still being billed",
        "Refund of {amount} for overcharge",
    ],
    "technical": [
        "{product} keeps going offline",
        "{product} not connecting to wifi",
        "App crashes on {device}",
        "Firmware update failed",
        "Error {code} on the {product}",
        "Camera feed is black",
        "Thermostat not holding temperature",
        "Setup stuck at pairing",
        "Notifications stopped working",
        "{product} battery drains fast",
        "Live view lagging",
        "Automation rules not running",
        "Device shows offline in app",
        "Hub keeps rebooting",
    ],
    "account": [
        "Change email on my account",
        "Can't log in",
        "Merge two accounts",
        "Update my name and address",
        "Delete my account",
        "Add a family member to my account",
        "Verification email never arrives",
        "Transfer devices to new owner",
        "Username question",
        "Locked out of account",
        "Two accounts with same email",
        "How do I change my phone number",
        "Account settings not saving",
    ],
    "shipping": [
        "Where is my order {order}",
        "Package not delivered",
        "Tracking not updating",
        "Order {order} shows delivered but nothing here",
        "Change delivery address",
        "Delivery delayed again",
        "Package stuck in transit",
        "Only part of my order arrived",
        "Shipping time to {month}",
        "{carrier} lost my package",
        "Expedite my shipment",
        "No tracking number yet",
    ],
    "returns": [
        "Return request for {product}",
        "How do I return my order {order}",
        "Need a return label",
        "Exchange for a different size",
        "Return window question",
        "Want to send back the {product}",
        "Return received but no update",
        "Replacement for faulty {product}",
        "Return my unopened {product}",
        "Exchange {product} for another model",
        "Return status for {order}",
    ],
    "security": [
        "Suspicious login on my account",
        "Someone accessed my cameras",
        "Unknown device added to my home",
        "Possible phishing email from Kestrel",
        "Password changed without me",
        "2FA codes I did not request",
        "Report a vulnerability",
        "Strange activity on my lock",
        "Account hacked?",
        "Login alert from {month}",
    ],
}

CORE = {
    "billing": [
        "I was charged twice for my {product} subscription this month.",
        "My card ending in {card} was billed {amount} but my plan is cheaper than that.",
        "The invoice for order {order} shows a different amount than the checkout page.",
        "Your price for Kestrel Plus went up and nobody told me about it.",
        "The payment failed in the app but {amount} was still taken from my bank.",
        "I applied a discount code at checkout and it was not applied to the invoice.",
        "Can you send me a corrected invoice with my company name for order {order}?",
        "I cancelled the Kestrel Plus plan in {month} and I am still being billed every month.",
        "There is a charge of {amount} on my statement that I do not understand.",
        "Please explain the pro-rated amount on my last bill.",
        "I was billed for the annual plan but I chose monthly billing.",
        "The tax on my invoice looks far too high for my state.",
        "My bank shows a pending charge of {amount} from Kestrel that never cleared.",
        "I need a refund for the overcharge on my last invoice.",
    ],
    "technical": [
        "My {product} keeps going offline every few hours and I have to unplug it.",
        "The {product} will not connect to my wifi even though other devices work fine.",
        "The app crashes as soon as I open the live view on my {device}.",
        "The firmware update got stuck at {pct} percent and now the {product} only blinks red.",
        "I get error {code} whenever I try to add the {product} in the app.",
        "The camera feed is just a black screen since {weekday}.",
        "The thermostat does not hold the temperature I set and the heating keeps running.",
        "Setup is stuck on the pairing screen and the light keeps flashing blue.",
        "I stopped getting motion notifications on my {device} after the last update.",
        "The battery on the {product} drains in two days instead of months.",
        "My automations have not run since the update, the schedule just does nothing.",
        "The hub reboots itself several times a day and loses all the settings.",
        "The live view lags about thirty seconds behind and the audio is choppy.",
        "The {product} shows offline in the app but the light on it is solid green.",
    ],
    "account": [
        "I need to change the email address on my account to a new one.",
        "I cannot log in, it says my email is not registered but I have used it for years.",
        "I have two accounts and I would like to merge them into one.",
        "Please update the name and address on my profile, I moved in {month}.",
        "I would like my account and all my data deleted.",
        "How can I add my partner to the account so they can use the app too?",
        "The verification email never arrives, I checked spam as well.",
        "I sold my house and need to transfer the devices to the new owner.",
        "My account settings do not save, every time I reload they are back to the old values.",
        "I want to change the phone number on my account but the field is greyed out.",
        "The app says my account is locked after too many attempts.",
        "I accidentally created a second account with the same email.",
    ],
    "shipping": [
        "My order {order} was supposed to arrive on {weekday} and it still has not shown up.",
        "The tracking for my package has not updated for {n} days.",
        "The tracking says delivered but there is nothing at my door or with my neighbours.",
        "I need to change the delivery address for order {order} before it ships.",
        "My delivery has been delayed three times now.",
        "The package seems stuck at the {carrier} depot.",
        "Only part of my order arrived, the {product} was missing from the box.",
        "{carrier} says the package was returned to sender but I never got a delivery attempt.",
        "Can you expedite the shipment, I need it before {weekday}?",
        "I ordered {n} days ago and still have no tracking number.",
        "The driver left the package in the rain and the box is soaked.",
        "How long does shipping take to my area?",
    ],
    "returns": [
        "I would like to return the {product} I bought last month.",
        "How do I return order {order}? I could not find the form on the website.",
        "Please send me a return label for the {product}.",
        "I want to exchange the {product} for the other model.",
        "Is it too late to return something I bought in {month}?",
        "I sent the {product} back {n} days ago and have not heard anything since.",
        "The {product} I got is faulty and I would like a replacement.",
        "The {product} is still sealed, I just want to send it back.",
        "The return portal says my order is not eligible for return.",
        "I dropped the return at the {carrier} store, can you confirm you received it?",
        "I would like to swap the {product} for a different colour.",
    ],
    "security": [
        "I got a login alert from a city I have never been to.",
        "Someone was watching my cameras, I saw the live view indicator on when I was not using it.",
        "There is a device on my home that I did not add.",
        "I received an email asking for my password that claims to be from Kestrel.",
        "My password was changed and I did not do it.",
        "I keep receiving two-factor codes that I did not request.",
        "I think I found a vulnerability in the {product} local API.",
        "The smart lock log shows it was unlocked at 3am while we were asleep.",
        "Someone added a new user to my home and removed me as owner.",
        "I think my account was hacked, there are sessions on devices I do not own.",
    ],
}

DETAIL = {
    "billing": [
        "The charge shows up as KESTREL PLUS on my statement.",
        "I have attached a screenshot of the bank statement.",
        "My billing address is the same as my shipping address.",
        "I paid with PayPal, not with a card.",
        "This is the third month in a row the amount is wrong.",
        "I would prefer the money back on the original card.",
        "The invoice number is on the email from {month}.",
    ],
    "technical": [
        "I already tried restarting the router and the {product}.",
        "I reinstalled the app on my {device} but it did not help.",
        "My internet speed is fine, around {n}00 Mbps.",
        "The LED on the front blinks orange twice and then stops.",
        "I am on the latest app version.",
        "It worked fine until the update on {weekday}.",
        "I also tried the web app in {browser} with the same result.",
    ],
    "account": [
        "The email on the account is an old work address I can no longer access.",
        "I tried the forgot password link but nothing happens.",
        "I am the only person who uses this account.",
        "My username is the same as my email.",
        "I signed up with Google originally, maybe that is the problem.",
        "I can still see the devices on my partner's phone.",
    ],
    "shipping": [
        "The tracking number starts with 1Z.",
        "I was home all day and nobody rang the bell.",
        "My building has a parcel room, maybe they left it there.",
        "The estimated delivery date keeps moving.",
        "I chose express shipping and paid extra for it.",
        "The {carrier} website just says exception.",
    ],
    "returns": [
        "The box is unopened and I still have the receipt.",
        "I bought it as a gift and it is not what they wanted.",
        "I still have all the original packaging.",
        "I bought it from your online store, not from a retailer.",
        "The website said thirty days for returns.",
        "I would prefer an exchange over store credit.",
    ],
    "security": [
        "I have changed my password already but I am worried.",
        "I use a unique password for this account.",
        "I turned on two-factor authentication after this happened.",
        "The alert said the login came from a {browser} browser.",
        "Please check whether anyone else has access to my home.",
        "I do not want anyone to see the camera footage.",
    ],
}

# Genuinely ambiguous situations: the same words lead to either queue, depending on agent judgement.
PAIRS = {
    ("billing", "returns"): (
        [
            "Charged twice after returning the item",
            "Refund for my return",
            "Still charged for returned {product}",
            "Where is my refund for {order}",
        ],
        [
            "I returned the {product} {n} weeks ago but I was charged again this month.",
            "I was charged twice after returning the item and the refund has not shown up.",
            "The refund for my returned order {order} is still not on my card.",
            "You received my return but I only got part of the money back.",
            "I was charged a restocking fee of {amount} that nobody mentioned.",
        ],
    ),
    ("account", "security"): (
        [
            "Password reset email I didn't ask for",
            "Email on my account changed",
            "Can't get into my account",
            "Unknown login",
        ],
        [
            "I got a password reset email that I did not request.",
            "The email address on my account was changed and now I cannot log in.",
            "I cannot log in after the password reset and I am worried someone else has access.",
            "My account shows a phone number that is not mine.",
            "I was logged out everywhere and my password no longer works.",
        ],
    ),
    ("account", "technical"): (
        [
            "Can't log in after password reset",
            "App keeps logging me out",
            "Login loop in the app",
            "Sign in not working",
        ],
        [
            "I can't log in after the password reset, the app just spins.",
            "The app keeps logging me out every few minutes on my {device}.",
            "When I sign in the app sends me back to the login screen.",
            "Since the update I cannot sign in on the {device} but the website works.",
            "The login button does nothing in {browser}.",
        ],
    ),
    ("technical", "security"): (
        [
            "Camera turned on by itself",
            "Lock opened on its own",
            "Strange behaviour of {product}",
            "Unknown device in app",
        ],
        [
            "The camera turned on by itself in the middle of the night.",
            "The lock opened on its own and there is nothing in the activity log.",
            "An unknown device called {product} appeared in my app.",
            "The {product} is behaving strangely, settings change without anyone touching them.",
        ],
    ),
    ("shipping", "returns"): (
        [
            "Package arrived damaged",
            "Wrong item delivered",
            "Box was crushed",
            "Received the wrong {product}",
        ],
        [
            "The package arrived damaged and the {product} has a cracked case.",
            "I received the wrong item, I ordered the {product} but got something else.",
            "The box was crushed by {carrier} and I do not want to keep it like this.",
            "The delivery was missing the mounting kit and the {product} looks used.",
        ],
    ),
    ("technical", "returns"): (
        [
            "{product} dead on arrival",
            "Faulty {product}",
            "{product} stopped working after a week",
            "Device won't turn on",
        ],
        [
            "The {product} arrived but it will not turn on at all.",
            "The {product} stopped working after a week, the light does not come on any more.",
            "The {product} makes a buzzing noise and gets very hot.",
            "I tried everything in the manual and the {product} still does not work.",
        ],
    ),
    ("billing", "account"): (
        [
            "Can't update my card",
            "Subscription on closed account",
            "Change billing email",
            "Plan shows wrong on account",
        ],
        [
            "I cannot update the card on my account, the page gives an error.",
            "My subscription renewed even though I closed my account in {month}.",
            "The invoices go to my old email, please change it.",
            "My account says free plan but I am paying for Kestrel Plus.",
        ],
    ),
    ("billing", "shipping"): (
        [
            "Charged for express shipping",
            "Delivery fee refund",
            "Shipping charge question",
        ],
        [
            "I paid {amount} for express shipping and the order came late anyway.",
            "I was charged a delivery fee even though shipping was supposed to be free.",
            "Can I get the shipping cost back since the package was delayed?",
        ],
    ),
    ("billing", "security"): (
        [
            "Charge I don't recognise",
            "Fraudulent purchase",
            "Someone used my card",
        ],
        [
            "There is a purchase of {amount} on my account that I did not make.",
            "Someone ordered a {product} with my saved card.",
            "I see an order {order} in my account history that is not mine.",
        ],
    ),
}
PAIR_WEIGHT = {
    ("billing", "returns"): 3.0,
    ("account", "security"): 2.0,
    ("account", "technical"): 3.0,
    ("technical", "security"): 1.0,
    ("shipping", "returns"): 3.0,
    ("technical", "returns"): 2.5,
    ("billing", "account"): 2.0,
    ("billing", "shipping"): 1.5,
    ("billing", "security"): 1.0,
}
# Share of each queue's tickets written in an ambiguous (pair) situation.
P_AMBIGUOUS = {
    "billing": 0.42,
    "technical": 0.36,
    "account": 0.48,
    "shipping": 0.42,
    "returns": 0.52,
    "security": 0.6,
}
NEIGHBOURS = {q: [p for pair in PAIRS for p in pair if q in pair and p != q] for q in QUEUES}

GENERIC_SUBJ = [
    "Help",
    "Need help",
    "Problem with my order",
    "Question",
    "Urgent",
    "Please help!!",
    "Issue with {product}",
    "Kestrel support request",
    "Follow up",
    "Re: your message",
    "Complaint",
    "Not happy",
]
GENERIC = [
    "Please help.",
    "Thanks in advance.",
    "I have been a customer for {n} years.",
    "This is really frustrating.",
    "Can someone call me back?",
    "My order number is {order}.",
    "I already contacted you last week about this.",
    "This is the second time this happens.",
    "Please advise asap.",
    "I bought the {product} in {month}.",
    "Sent from my {device}.",
    "Regards, {name}.",
    "Thank you for your help.",
    "I would appreciate a quick answer.",
    "Nobody answered in the chat.",
    "Following up on my previous message.",
    "I have the {product} and the {product2}.",
    "Hi, this is {name}.",
]
OPENERS = ["Hi,", "Hello,", "Hello team,", "Hi there,", "Dear support,", "Hey,", "Good morning,"]
NOISE = ["pls", "asap", "fyi", "ugh", "btw", "thx", "ok", "so", "really", "again"]

# Light rewrites for planted near-duplicates: (word, replacement) and insertable words.
SYNONYMS = {
    "charged": "billed",
    "package": "parcel",
    "order": "purchase",
    "cannot": "can't",
    "not": "never",
    "still": "yet",
    "please": "pls",
    "return": "send back",
    "received": "got",
    "worried": "concerned",
    "again": "once more",
    "app": "application",
    "weeks": "wks",
    "thanks": "thank you",
    "days": "whole days",
    "because": "since",
    "the": "my",
    "my": "the",
}
INSERTS = ["really", "still", "just", "honestly", "now", "also", "actually"]


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
# Independent measurement on the written file
# ----------------------------------------------------------------------------------------------------------


def norm_expr(col: str) -> pl.Expr:
    """lower_strip_ws: lowercase, strip, collapse whitespace runs to one space (null stays null)."""
    return pl.col(col).str.to_lowercase().str.strip_chars().str.replace_all(r"\s+", " ").alias(col)


def dup_stats(df: pl.DataFrame) -> dict:
    g = df.group_by(["subject", "body"]).agg(pl.len().alias("n"), pl.col("queue").n_unique().alias("k"))
    dup = g.filter(pl.col("n") > 1)
    conflict = g.filter(pl.col("k") > 1)
    top = df.group_by(["subject", "body", "queue"]).agg(pl.len().alias("n"))
    top = top.group_by(["subject", "body"]).agg(pl.col("n").max())
    ndf = df.select(norm_expr("subject"), norm_expr("body"))
    ng = ndf.group_by(["subject", "body"]).agg(pl.len().alias("n")).filter(pl.col("n") > 1)
    return {
        "exact_dup_groups": dup.height,
        "exact_dup_rows": int(dup["n"].sum()),
        "norm_dup_groups": ng.height,
        "norm_dup_rows": int(ng["n"].sum()),
        "conflict_groups": conflict.height,
        "conflict_rows": int(conflict["n"].sum()),
        "noise_ceiling_accuracy": round(int(top["n"].sum()) / df.height, 6),
    }


def shingles(text: str) -> set[str]:
    words = text.split(" ") if text else []
    if len(words) < SHINGLE:
        return {" ".join(words)}
    return {" ".join(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


def near_dup_pairs(df: pl.DataFrame, threshold: float) -> set[tuple[int, int]]:
    """Exact set of unordered row pairs with Jaccard >= threshold that are not normalised duplicates.

    Completeness: prefix filtering (Chaudhuri et al. 2006). Shingles are ordered rarest-first; if
    J(x, y) >= t then |x & y| >= ceil(t * max(|x|, |y|)), so the first |x| - ceil(t|x|) + 1 shingles of x
    and the first |y| - ceil(t|y|) + 1 of y must share one. Every pair meeting that condition is verified exactly.
    """
    n = df.select(norm_expr("subject"), norm_expr("body"))
    keys = list(zip(n["subject"].to_list(), n["body"].to_list(), strict=True))
    # Rows with the same normalised (subject, body) are one text; pairs between different texts expand later.
    text_rows: dict[tuple, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        text_rows[k].append(i)
    uniq = list(text_rows)
    sets = []
    for s, b in uniq:
        joined = " ".join(x for x in (s or "", b or "") if x)
        sets.append(shingles(" ".join(joined.split())))
    freq = Counter(sh for st in sets for sh in st)
    ordered = [sorted(st, key=lambda sh: (freq[sh], sh)) for st in sets]
    index: dict[str, list[int]] = defaultdict(list)
    found: set[tuple[int, int]] = set()
    for x, sx in enumerate(ordered):
        size = len(sx)
        prefix = size - int(np.ceil(threshold * size - 1e-9)) + 1
        cands: set[int] = set()
        for sh in sx[:prefix]:
            cands.update(index[sh])
        setx = sets[x]
        for y in cands:
            sy = sets[y]
            lo, hi = sorted((size, len(sy)))
            if lo < threshold * hi - 1e-9:
                continue
            inter = len(setx & sy)
            if inter / (len(setx) + len(sy) - inter) >= threshold - 1e-12:
                found.add((y, x))
        for sh in sx[:prefix]:
            index[sh].append(x)
    pairs = set()
    for a, b in found:
        for ra in text_rows[uniq[a]]:
            for rb in text_rows[uniq[b]]:
                pairs.add((min(ra, rb), max(ra, rb)))
    return pairs


def families(df: pl.DataFrame) -> dict:
    parent = list(range(df.height))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for col in ("customer_id", "thread_id", "case_id"):
        first: dict[str, int] = {}
        for i, v in enumerate(df[col].to_list()):
            if v is None:
                continue
            if v in first:
                a, b = find(first[v]), find(i)
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                first[v] = i
    sizes = Counter(find(i) for i in range(df.height))
    no_id = df.filter(
        pl.col("customer_id").is_null() & pl.col("thread_id").is_null() & pl.col("case_id").is_null()
    ).height
    return {
        "family_count": len(sizes),
        "largest_family_rows": max(sizes.values()),
        "multi_row_families": sum(1 for v in sizes.values() if v >= 2),
        "rows_without_entity_id": no_id,
    }


def measure(path: Path, planted_pairs: list[tuple[int, int]]) -> dict:
    raw = path.read_bytes()
    df = pl.read_csv(path, infer_schema=False)  # every column as stored text; empty field = null
    rec: dict = {"rows": df.height, "columns": df.columns, "sha256": hashlib.sha256(raw).hexdigest()}
    rec.update(dup_stats(df))
    pairs = near_dup_pairs(df, NEAR_DUP_THRESHOLD)
    rec["near_dup_pairs_at_0_8"] = len(pairs)
    rec["near_dup_planted_pairs"] = len(planted_pairs)
    rec["near_dup_planted_pairs_at_0_8"] = sum(1 for a, b in planted_pairs if (min(a, b), max(a, b)) in pairs)
    # Defect 4: majority mapping code -> queue.
    cq = df.group_by(["resolution_code", "queue"]).agg(pl.len().alias("n"))
    best = (
        cq.sort(["n", "queue"], descending=[True, False]).group_by("resolution_code").agg(pl.col("n").first())
    )
    rec["resolution_code_label_agreement"] = round(int(best["n"].sum()) / df.height, 6)
    # Defect 5: ref code range -> queue.
    rng_q = (pl.col("ref_code").str.slice(2).cast(pl.Int64) // 100_000 - 1).alias("k")
    ref = df.select(rng_q, pl.col("queue"))
    hits = sum(1 for k, q in zip(ref["k"].to_list(), ref["queue"].to_list(), strict=True) if QUEUES[k] == q)
    rec["ref_code_range_purity"] = round(hits / df.height, 6)
    rec.update(families(df))
    rec["nulls"] = {c: int(df[c].null_count()) for c in df.columns}
    rec["label_counts"] = {q: int((df["queue"] == q).sum()) for q in QUEUES}
    half = (pl.col("created_at").str.slice(0, 4) + "-H" + pl.when(pl.col("created_at").str.slice(5, 2) <= "06")
            .then(pl.lit("1")).otherwise(pl.lit("2"))).alias("half")  # fmt: skip
    hc = df.select(half, "queue").group_by(["half", "queue"]).agg(pl.len().alias("n"))
    shares: dict = {}
    counts: dict = {}
    for h in sorted(hc["half"].unique().to_list()):
        sub = hc.filter(pl.col("half") == h)
        total = int(sub["n"].sum())
        got = dict(zip(sub["queue"].to_list(), sub["n"].to_list(), strict=True))
        counts[h] = {q: int(got.get(q, 0)) for q in QUEUES}
        shares[h] = {q: round(got.get(q, 0) / total, 6) for q in QUEUES}
    rec["class_share_by_half"] = shares
    rec["class_count_by_half"] = counts
    rec["created_at_min"] = df["created_at"].min()
    rec["created_at_max"] = df["created_at"].max()
    return rec


def tfidf_check(path: Path) -> dict:
    """How separable is the text? A TF-IDF + logistic regression on subject + body, random 80/20 split."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score

    df = pl.read_csv(path, infer_schema=False)
    text = (df["subject"] + " " + df["body"].fill_null("")).to_list()
    y = np.array(df["queue"].to_list())
    idx = np.random.default_rng(SEED + 1).permutation(len(text))
    cut = int(0.8 * len(text))
    tr, te = idx[:cut], idx[cut:]
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    xtr = vec.fit_transform([text[i] for i in tr])
    xte = vec.transform([text[i] for i in te])
    clf = LogisticRegression(max_iter=2000, C=4.0)
    clf.fit(xtr, y[tr])
    pred = clf.predict(xte)
    return {
        "split": f"random 80/20 by row, seed {SEED + 1} (not group-aware; near-duplicates may inflate it)",
        "model": "TfidfVectorizer(ngram_range=(1,2), min_df=2, sublinear_tf=True) + LogisticRegression(C=4)",
        "test_rows": len(te),
        "accuracy": round(float(accuracy_score(y[te], pred)), 3),
        "macro_f1": round(float(f1_score(y[te], pred, average="macro")), 3),
    }


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


# ----------------------------------------------------------------------------------------------------------
# Datasheet (generated so the numbers can never drift from defects.toml)
# ----------------------------------------------------------------------------------------------------------


def write_datasheet(path: Path, d: dict) -> None:
    path.write_text(render_datasheet(d), encoding="utf-8")


COLUMN_DOCS = [
    ("ticket_id", "Unique integer id, increasing with creation time.", "yes (carries no label information)"),
    (
        "ref_code",
        "Reference code 'R-' + 6 digits, allocated from a per-queue numeric range at routing time.",
        "yes-but-leaks: issued when the ticket is logged, from the queue's range, so it encodes the label",
    ),
    ("subject", "Customer-written subject line (free text).", "yes"),
    ("body", "Customer-written message, 1-6 sentences (free text); a few nulls.", "yes"),
    ("channel", "email / chat / phone / web; some nulls.", "yes"),
    ("product", "Product the customer picked in the form; many nulls (optional field).", "yes"),
    ("customer_id", "Customer account id 'C-nnnnn'; null for guests.", "yes, but an entity id: group by it"),
    ("thread_id", "Conversation thread id 'T-nnnnnn'; null for some phone calls.", "yes, entity id"),
    ("case_id", "Escalation / incident case 'K-nnnnn'; mostly null; can span customers.", "unresolved"),
    ("created_at", "ISO-8601 local timestamp 'YYYY-MM-DDTHH:MM:SS'.", "yes (time column)"),
    ("queue", "LABEL: billing, technical, account, shipping, returns, security.", "label"),
    ("resolution_code", "Outcome code set when the ticket is closed.", "no - known only after resolution"),
    ("priority", "low / normal / high / urgent; some nulls.", "unresolved - set by the agent at triage?"),
]


def fmt(v: object) -> str:
    return f"{v:.6f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v)


def render_datasheet(d: dict) -> str:
    """The datasheet, with every number taken from defects.toml."""
    tf = d.get("tfidf_baseline", {})
    lines = [
        "# Datasheet: Kestrel Home support tickets (synthetic)",
        "",
        "<!-- Generated by sample_data/make_tickets.py from defects.toml; edit the script, not this file. -->",
        "",
        "## What it is",
        "",
        "A **synthetic** data set of customer-support tickets for *Kestrel Home*, a fictional company selling",
        "smart-home devices (hub, camera, thermostat, smart lock, doorbell, sensor kit) and a subscription",
        "(Kestrel Plus). The task it supports: route a new ticket to one of six queues from what the customer",
        "wrote. No real person, company or message is in it; names, order numbers and amounts are random.",
        "",
        f"- File: `sample_data/tickets.csv` (UTF-8, header, comma-separated, empty field = null), {d['rows']} rows,",
        f"  {len(d['columns'])} columns, sha256 `{d['sha256']}`.",
        f"- Time span: {d['created_at_min']} .. {d['created_at_max']}.",
        f"- Generated by `.venv/bin/python sample_data/make_tickets.py` (numpy Generator, seed {d['generator']['seed']},",
        "  written with Polars). A rerun is byte-identical; it also rewrites `defects.toml` and this file.",
        "- Licence: synthetic, made for the claimcheck project; use freely.",
        "",
        "## How the text was made",
        "",
        "Each ticket's label is drawn from a class mix that changes over time. Its subject and body are built",
        "from per-queue phrase templates (subjects, core sentences, details) mixed with generic filler and",
        "sentences borrowed from neighbouring queues, so vocabulary overlaps heavily. A large share of tickets",
        "is written from *pair* templates that are genuinely ambiguous between two queues (e.g. 'charged twice",
        "after returning the item' is billing or returns; 'can't log in after password reset' is account,",
        "technical or security): for those the label is effectively a draw from a mix of the two queues.",
        "Typos, noise words, lower-case or shouting subjects and 1-6 sentence bodies add realism.",
        "Follow-up tickets in a thread usually keep the thread's queue.",
        "",
        "How separable is it? A TF-IDF (1-2 grams) + logistic regression on subject + body, random 80/20",
        f"split by row ({tf.get('test_rows', '?')} test rows): accuracy **{tf.get('accuracy', '?')}**, macro-F1",
        f"**{tf.get('macro_f1', '?')}**. The split is not group-aware, so near-duplicates inflate it a little.",
        "",
        "## Columns",
        "",
        "| column | meaning | available at prediction time? |",
        "|---|---|---|",
    ]
    lines += [f"| `{c}` | {m} | {a} |" for c, m, a in COLUMN_DOCS]
    lines += [
        "",
        "## Label distribution and shift over time",
        "",
        "| queue | rows | " + " | ".join(d["class_share_by_half"]) + " |",
        "|---|---|" + "---|" * len(d["class_share_by_half"]),
    ]
    for q in QUEUES:
        shares = " | ".join(fmt(d["class_share_by_half"][h][q]) for h in d["class_share_by_half"])
        lines.append(f"| {q} | {d['label_counts'][q]} | {shares} |")
    lines += [
        "",
        "Keys: `label_counts.<queue>`, `class_share_by_half.<YYYY-Hn>.<queue>` (share of that half-year's",
        "rows; H1 = January-June by the `created_at` month), `class_count_by_half.<YYYY-Hn>.<queue>`.",
        "Returns and security grow from March 2025 (the last six months); security stays under 2% overall.",
        "",
        "## Planted defects: definitions and measured counts",
        "",
        "Each defect was injected on purpose, then **measured on the written file** (read back with",
        "`pl.read_csv(path, infer_schema=False)`, so chance collisions are included) by code in",
        "`make_tickets.py` that imports nothing from `engine/`. The numbers below are the keys of",
        "`defects.toml`; the audit engine is tested against them.",
        "",
        "Normalisation **lower_strip_ws**: lowercase, strip leading/trailing whitespace, collapse every run of",
        "whitespace (`\\s+`) to one space; applied to subject and body separately; null stays null.",
        "",
        "1. **Exact duplicate inputs.** Model input = (subject, body) exactly as stored; a null body is a value",
        "   like any other (null equals null for grouping).",
        f"   `exact_dup_groups` = distinct (subject, body) values in more than one row = **{d['exact_dup_groups']}**;",
        f"   `exact_dup_rows` = rows in those groups = **{d['exact_dup_rows']}**. After lower_strip_ws:",
        f"   `norm_dup_groups` = **{d['norm_dup_groups']}**, `norm_dup_rows` = **{d['norm_dup_rows']}**.",
        f"   Planted: {N_EXACT_SOURCES} source tickets copied exactly (15% twice), {N_NORM_SOURCES} copied with",
        "   case/whitespace changes only; the rest are chance collisions of short templated tickets.",
        "2. **Conflicting labels.** Among exact-input groups: `conflict_groups` = groups with more than one",
        f"   distinct queue = **{d['conflict_groups']}**, `conflict_rows` = rows in them = **{d['conflict_rows']}**.",
        "   `noise_ceiling_accuracy` = (sum over all exact-input groups, singletons included, of the count of",
        "   the group's most frequent queue) / total rows = "
        f"**{fmt(d['noise_ceiling_accuracy'])}** - the best accuracy any model could reach on the full data.",
        "3. **Near-duplicate rewrites across threads.** "
        f"`near_dup_planted_pairs` = **{d['near_dup_planted_pairs']}** light",
        "   rewrites (one or two words swapped for a synonym or inserted) of a long ticket's body, placed on a",
        "   new thread (half of them a different customer); their 0-based file row numbers are",
        "   `near_dup_planted_row_pairs` and ticket ids `near_dup_planted_ticket_pairs`.",
        "   Measured: text = lower_strip_ws(subject) + ' ' + lower_strip_ws(body) (a null body contributes",
        "   nothing; equivalently lower_strip_ws(subject + ' ' + coalesce(body, ''))), words = text split on",
        "   single spaces, shingles = the set of contiguous 5-word windows (a text with fewer than 5 words is",
        "   one shingle, the whole text). `near_dup_pairs_at_0_8` = unordered row pairs with Jaccard >= 0.8",
        "   whose normalised (subject, body) differ (pairs of exact-normalised duplicates are excluded) = "
        f"**{d['near_dup_pairs_at_0_8']}**,",
        "   computed exactly (prefix filter over rarest-first shingles, every candidate verified).",
        f"   Of the planted pairs, **{d['near_dup_planted_pairs_at_0_8']}** reach Jaccard >= 0.8",
        "   (`near_dup_planted_pairs_at_0_8`); the other measured pairs are chance near-collisions of templates.",
        "4. **Outcome column only known after resolution.** `resolution_code` comes from a per-queue code list",
        "   ~97% of the time. `resolution_code_label_agreement` = share of rows whose code maps to the row's",
        "   queue under the majority mapping (each code -> its most frequent queue) = "
        f"**{fmt(d['resolution_code_label_agreement'])}**.",
        "5. **Identifier that leaks the label.** `ref_code` = 'R-' + 6-digit number allocated sequentially in",
        "   a per-queue range: "
        + ", ".join(f"{q} {REF_BASE[q]}-{REF_BASE[q] + 99_999}" for q in QUEUES)
        + ".",
        "   About 1.5% were rerouted and keep the first queue's range. `ref_code_range_purity` = share of rows",
        f"   whose range matches their queue = **{fmt(d['ref_code_range_purity'])}**.",
        "6. **Case/thread links forming families.** Union-find over rows, where two rows are connected when",
        "   they share a non-null value in the same column, for each of customer_id, thread_id, case_id",
        "   (case ids sometimes link threads of different customers - incident cases).",
        f"   `family_count` = **{d['family_count']}** (rows with no id are singleton families),",
        f"   `largest_family_rows` = **{d['largest_family_rows']}**, `multi_row_families` (>= 2 rows) =",
        f"   **{d['multi_row_families']}**, `rows_without_entity_id` (all three null) = "
        f"**{d['rows_without_entity_id']}**.",
        "7. **Missing values.** Null counts per column (`nulls.<column>`): "
        + ", ".join(f"{c} {n}" for c, n in d["nulls"].items() if n)
        + "; all other columns 0.",
        "8. **Shift in class mix over time.** See the table above.",
        "",
        "## Known limitations",
        "",
        "- Synthetic text from a few hundred templates: far less varied than real tickets, and the 'ambiguity'",
        "  is by construction; results on it say nothing about real support data.",
        "- English only, ASCII only; no attachments, no agent replies, no multi-turn content within a row.",
        "- Timestamps have no time zone; business-hours and weekday patterns are crude.",
        "- A few bodies contain a line break inside a quoted CSV field (a whitespace-variant duplicate), so",
        "  the file has more physical lines than rows; read it with a CSV parser, not line by line.",
        "- Chance collisions of short templated tickets add exact and near duplicates beyond the planted ones",
        "  (they are included in the counts).",
        "- Bodies can contain a random first name ('Regards, Sam'): synthetic, but treat text as possibly",
        "  personal data in a real setting.",
        "- `priority` and `case_id` availability at prediction time is deliberately left unresolved.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
