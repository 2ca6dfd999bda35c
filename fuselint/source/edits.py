"""What a fix's edits do to the text around them, judged per fix (as ruff does).

A rule says how far its rewrite can be trusted; an edit can still lose what the rule never
meant to touch. A fix that deletes a comment (a temporary's trailing note, a remark inside a
multi-line expression) takes away what a person wrote, so it is not safe whatever the rule
says. Plain text and `tokenize` only: `check` imports neither libcst nor torch.
"""

from __future__ import annotations

import io
import tokenize
from functools import lru_cache

from fuselint.findings import Applicability, Edit


@lru_cache(maxsize=8)
def comment_positions(text: str) -> tuple[tuple[int, int, str], ...]:
    """(line, 1-based column, text) of every comment in `text`."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                found.append((token.start[0], token.start[1] + 1, token.string))
    except (tokenize.TokenError, SyntaxError):
        return ()
    return tuple(found)


def drops_comment(text: str, edits: tuple[Edit, ...] | list[Edit]) -> bool:
    """Whether an edit replaces a comment that its new content does not carry over."""
    spans = [e for e in edits if e.end_line > e.line]  # an expression on one line holds no comment
    if not spans:
        return False
    for line, column, comment in comment_positions(text):
        for e in spans:
            inside = (e.line, e.column) <= (line, column) < (e.end_line, e.end_column)
            if inside and comment not in e.content:
                return True
    return False


def applicability(text: str, edits: tuple[Edit, ...] | list[Edit], rule_fix: str) -> Applicability:
    """The rule's fix safety, lowered to unsafe when the edits would delete a comment."""
    if rule_fix == "safe" and not drops_comment(text, edits):
        return Applicability.SAFE
    return Applicability.UNSAFE
