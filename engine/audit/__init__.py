"""Check implementations for the source and split stages: pure functions on Polars frames.

Each returns plain measured values (TOML-able); the stage modules turn them into Check records.
"""
