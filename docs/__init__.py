"""The answers-file examples (answers-*.toml), installed as claimcheck.examples package data."""
