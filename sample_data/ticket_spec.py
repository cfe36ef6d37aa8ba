"""The design of the synthetic support-ticket data set that make_tickets.py generates: its size, time span,
queues and their class priors over time, columns, codes and products, and the phrase pools its text is
built from. Data only: the generator, the independent measurement and the datasheet all read it."""

from __future__ import annotations

from datetime import datetime

SEED = 20240917
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
