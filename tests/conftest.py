"""Shared pytest configuration. Per-area fixtures live next to their tests."""
