"""A progress bar for tracing several entries: drawn on a terminal, silent on a pipe."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from typing import TextIO, TypeVar

T = TypeVar("T")


def progress(
    items: Sequence[T], *, label: str = "tracing", stream: TextIO | None = None, width: int = 24
) -> Iterator[T]:
    """Yield the items, redrawing one bar line on `stream` (stderr) only when it is a terminal."""
    stream = stream if stream is not None else sys.stderr
    shown = _isatty(stream) and len(items) > 1
    start = time.monotonic()
    for i, item in enumerate(items):
        if shown:
            _draw(stream, i, len(items), f"{label} {item}", start, width)
        yield item
    if shown:
        _draw(stream, len(items), len(items), f"{label} done", start, width)
        stream.write("\n")
        stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _draw(stream: TextIO, done: int, total: int, what: str, start: float, width: int) -> None:
    filled = width * done // total
    bar = "#" * filled + "-" * (width - filled)
    line = f"[{bar}] {done}/{total} {time.monotonic() - start:5.1f}s {what}"
    # \r rewrites the line in place; the escape clears what a longer previous line left.
    stream.write(f"\r{line[:120]}\x1b[K")
    stream.flush()
