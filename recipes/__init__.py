"""The recipes (TOML presets per task kind), installed as claimcheck.recipes package data."""
