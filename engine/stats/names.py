"""The claim's target type, for the source and split audits: read from the metric registry
(engine/stats/registry.py), which holds every metric name and direction."""

from __future__ import annotations

from claimcheck.engine.stats.registry import TARGET_TYPES, target_type


def code_points(label: str) -> str:
    """A label spelled as code points ('U+0065 U+0301'): two labels that look alike show how they differ."""
    return " ".join(f"U+{ord(ch):04X}" for ch in label[:40]) + (" …" if len(label) > 40 else "")


def nfc_twins(labels: list[str], known: list[str]) -> dict[str, str]:
    """Labels not in `known` that equal a label of `known` under Unicode NFC normalisation (the same
    text in other code points, e.g. 'e' + U+0301 against U+00E9): label → the spelling `known` uses."""
    import unicodedata

    by_nfc = {unicodedata.normalize("NFC", k): k for k in known}
    return {
        lab: by_nfc[unicodedata.normalize("NFC", lab)]
        for lab in labels
        if lab not in known and unicodedata.normalize("NFC", lab) in by_nfc
    }


__all__ = ["TARGET_TYPES", "code_points", "nfc_twins", "target_type"]
