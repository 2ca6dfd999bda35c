"""The tracing progress bar: drawn on a terminal, silent on a pipe."""

from __future__ import annotations

import io

from fuselint.graph.progress import progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_on_a_pipe():
    stream = io.StringIO()
    assert list(progress(["a.py:e", "b.py:e"], stream=stream)) == ["a.py:e", "b.py:e"]
    assert stream.getvalue() == ""


def test_bar_on_a_terminal():
    stream = _Terminal()
    assert list(progress(["a.py:e", "b.py:e", "c.py:e"], stream=stream)) == ["a.py:e", "b.py:e", "c.py:e"]
    text = stream.getvalue()
    assert "\r" in text and "1/3" in text and "3/3" in text and "b.py:e" in text
    assert text.endswith("\n")


def test_single_entry_needs_no_bar():
    stream = _Terminal()
    list(progress(["a.py:e"], stream=stream))
    assert stream.getvalue() == ""
