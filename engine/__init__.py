"""claimcheck's engine: computation and evidence, importable without any UI library."""

__version__ = "0.1.0"
