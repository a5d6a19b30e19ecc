"""Durable orchestrators: thin generator adapters over pure drivers (no I/O, no clocks, no randomness here)."""
