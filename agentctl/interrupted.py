"""What a Ctrl-C leaves of a print: rich writes a print's text, then clears it from its buffer; a KeyboardInterrupt
between the two leaves the written text there, and the next print writes it again (the prompt shown twice, the `^C`
line not ended). The handlers drop it before they print."""

from __future__ import annotations

from rich.console import Console


def forget_interrupted_print(console: Console) -> None:
    """Drop what an interrupted print left in the console's buffer: written already, or cut short by the Ctrl-C.
    rich has no public way to drop it; a rich without this (thread-local) buffer list leaves the text as it was,
    rather than turning a Ctrl-C into a traceback (tests/e2e/test_e2e_cli.py fails on such a rich)."""
    buffer = getattr(console, "_buffer", None)
    if isinstance(buffer, list):
        del buffer[:]
