"""What a Ctrl-C leaves of a print: rich writes a print's text, then clears it from its buffer; a KeyboardInterrupt
between the two leaves the written text there, and the next print writes it again (the prompt shown twice, the `^C`
line not ended). The handlers drop it before they print."""

from __future__ import annotations

from rich.console import Console


def forget_interrupted_print(console: Console) -> None:
    """Drop what an interrupted print left in the console's buffer: written already, or cut short by the Ctrl-C."""
    del console._buffer[:]  # rich's (thread-local) buffer: it has no public way to drop it
