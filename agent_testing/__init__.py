"""Helpers for testing agents: replay a saved run (`replay`) against the scripted model."""

from .replay import ReplayResult, TranscriptMismatch, load_transcript, replay

__all__ = ["ReplayResult", "TranscriptMismatch", "load_transcript", "replay"]
