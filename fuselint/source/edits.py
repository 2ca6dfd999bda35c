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
from fuselint.source.module import comment_tokens


@lru_cache(maxsize=8)
def comment_positions(text: str) -> tuple[tuple[int, int, str], ...]:
    """(line, 1-based column, text) of every comment in `text`."""
    found = comment_tokens(text)
    if found is None:
        return ()
    return tuple((line, column + 1, comment) for line, (column, comment) in sorted(found[0].items()))


def drops_comment(text: str, edits: tuple[Edit, ...] | list[Edit]) -> bool:
    """Whether an edit replaces a comment that its new content does not carry over."""
    spans = [e for e in edits if e.end_line > e.line]  # an expression on one line holds no comment
    if not spans:
        return False
    # A comment starts with "#" on its line: spans whose lines hold none need no tokenizing.
    # Lines split at "\n" only, as `tokenize` numbers them.
    lines = text.split("\n")
    if not any("#" in line for e in spans for line in lines[e.line - 1 : e.end_line]):
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


# ---------------------------------------------------------------- the file's own style


@lru_cache(maxsize=8)
def preferred_quote(text: str) -> str:
    """The quote most of the file's one-line strings use (`"` on a tie, as ruff-format does)."""
    counts = {"'": 0, '"': 0}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING:
                body = token.string.lstrip("rRbBuUfF")
                if body[:3] not in ("'''", '"""') and body[:1] in counts:
                    counts[body[0]] += 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return "'" if counts["'"] > counts['"'] else '"'


def requote(code: str, quote: str) -> str:
    """`code` (an expression) with its simple string literals, those holding no quote and no
    backslash, in `quote`; the others are left as written."""
    other = "'" if quote == '"' else '"'
    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    pieces, cursor = [], 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            body = token.string
            if token.type != tokenize.STRING or len(body) < 2 or body[0] != other or body[-1] != other:
                continue
            inner = body[1:-1]
            if not inner.startswith(other * 2) and not any(c in inner for c in "'\\\""):
                begin = starts[token.start[0] - 1] + token.start[1]
                pieces.append(code[cursor:begin] + quote + inner + quote)
                cursor = begin + len(body)
    except (tokenize.TokenError, SyntaxError, IndexError):
        return code
    return "".join(pieces) + code[cursor:]
