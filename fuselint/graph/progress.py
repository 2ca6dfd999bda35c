"""A progress bar for tracing several entries: click's, drawn on a terminal, silent on a pipe."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import TextIO, TypeVar

import click

T = TypeVar("T")


def progress(items: Sequence[T], *, label: str = "tracing", stream: TextIO | None = None) -> Iterator[T]:
    """Yield the items; on a terminal (and for more than one item) click draws a bar naming each."""
    stream = stream if stream is not None else sys.stderr
    if len(items) < 2 or not _isatty(stream):
        # click would still print its label once on a pipe; a log or CI output wants nothing.
        yield from items
        return
    with click.progressbar(
        items,
        label=label,
        file=stream,
        show_pos=True,
        item_show_func=lambda item: str(item) if item is not None else None,
    ) as bar:
        yield from bar


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
