"""Wrap a line that a fix made too long, the way ruff-format and black would.

A replacement is written on one line; where that line passes the project's limit, it is
broken inside brackets: the right-hand side of an assignment or `return` is parenthesised
when it has several operators of the same kind, else the last bracket pair that leaves a
short enough first line is split (`f(` / args / `)`); a body still too long is split at its
commas (one per line, with a trailing comma) or before its operators, and so on down.
This is black's right-hand split and delimiter split, cut to what replacements produce: a
trailing comment follows the last line; a string that spans lines or an unbalanced bracket
leaves the line alone.
"""

from __future__ import annotations

import ast
import io
import keyword
import tokenize
from dataclasses import dataclass

INDENT = "    "
_OPEN, _CLOSE = "([{", ")]}"
# black's delimiter priorities: a split happens at the highest priority present.
_COMMA, _TERNARY, _LOGIC, _COMPARE, _DOT = 18, 16, 14, 10, 1
_MATH = {"|": 9, "^": 8, "&": 7, "<<": 6, ">>": 6, "+": 5, "-": 5, "*": 4, "/": 4, "//": 4, "%": 4, "@": 4}
_MATH["**"] = 1
_COMPARATORS = {"<", ">", "==", "!=", "<=", ">=", "in", "not", "is"}


@dataclass(frozen=True)
class _Leaf:
    text: str
    start: int  # character offsets in the line's content
    end: int
    depth: int  # brackets open before this leaf
    priority: int = 0  # as a delimiter at depth 0 (split before it; a comma splits after)


def _leaves(content: str) -> list[_Leaf] | None:
    """The tokens of one line, or None when it is not a self-contained bracketed line."""
    out: list[_Leaf] = []
    depth = 0
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(content).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    previous = None
    for tok in tokens:
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok.type == tokenize.COMMENT or tok.start[0] != 1 or tok.end[0] != 1:
            return None
        text = tok.string
        if text in _CLOSE:
            depth -= 1
            if depth < 0:
                return None
        priority = _priority(text, tok.type, previous) if depth == 0 else 0
        out.append(_Leaf(text, tok.start[1], tok.end[1], depth, priority))
        if text in _OPEN:
            depth += 1
        previous = tok
    return out if depth == 0 and out else None


def _priority(text: str, kind: int, previous) -> int:
    operand_before = previous is not None and (
        previous.type in (tokenize.NUMBER, tokenize.STRING)
        or (previous.type == tokenize.NAME and not keyword.iskeyword(previous.string))
        or previous.string in (")", "]", "}")
        or previous.string in ("None", "True", "False")
    )
    if text == ",":
        return _COMMA
    if kind == tokenize.NAME and text in ("if", "else") and operand_before:
        return _TERNARY
    if kind == tokenize.NAME and text in ("and", "or"):
        return _LOGIC
    if text in _COMPARATORS and operand_before:
        return _COMPARE
    if text in _MATH and operand_before:  # binary, not `-x` or `*args`
        return _MATH[text]
    if text == "." and previous is not None and previous.string in (")", "]"):
        return _DOT  # a method called on a call's result: `(...).to(dtype)`
    return 0


def wrap(line: str, limit: int, *, statement: bool) -> list[str] | None:
    """`line` (no newline) as lines within `limit`, or None when it cannot be wrapped safely.

    `statement` says that the line is a whole simple statement; otherwise it is one line of
    an expression already split inside an enclosing bracket (an operand, an argument).
    """
    if len(line) <= limit:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    content, comment = _trailing_comment(line.strip())
    if content is None or _leaves(content) is None:
        return None
    lines = _split(indent, content, limit, statement=statement, inside=not statement)
    if comment:  # it stays with the last leaf, the closing bracket, as ruff-format keeps it
        lines[-1] += "  " + comment
    if lines == [line] or not _same_code(line, lines, statement):
        return None
    return lines


def _trailing_comment(content: str) -> tuple[str | None, str]:
    """(code, comment) of a line that may end in a comment; (None, "") when it does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(content).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None, ""
    comments = [t for t in tokens if t.type == tokenize.COMMENT]
    if not comments:
        return content, ""
    first = comments[0]
    if len(comments) > 1 or first.start[0] != 1:
        return None, ""
    return content[: first.start[1]].rstrip(), first.string


def _same_code(line: str, lines: list[str], statement: bool) -> bool:
    """The wrapped text must be the very same code (a guard: wrapping never changes meaning)."""

    def tree(text: str) -> str | None:
        source = text.strip() if statement else "(\n" + text + "\n)"
        try:
            return ast.dump(ast.parse(source if statement else source.strip()))
        except SyntaxError:
            return None

    before = tree(line) if statement else tree(line.strip())
    after = tree("\n".join(lines)) if statement else tree("\n".join(lines))
    return before is not None and before == after


def _split(indent: str, content: str, limit: int, *, statement: bool, inside: bool, trailing_comma=False):
    if len(indent) + len(content) <= limit:
        return [indent + content]
    leaves = _leaves(content)
    if leaves is None:
        return [indent + content]
    if statement:
        start = _rhs_start(leaves)
        if start is not None:
            head, rhs = content[:start], content[start:]
            rhs_leaves = _leaves(rhs)
            if rhs_leaves is not None and not _can_omit_parens(indent + head, rhs, rhs_leaves, limit):
                body = _split(indent + INDENT, rhs, limit, statement=False, inside=True)
                return [indent + head + "(", *body, indent + ")"]
    if inside:
        lines = _delimiter_split(indent, content, leaves, limit, trailing_comma)
        if lines is not None:
            return lines
    return _right_hand_split(indent, content, leaves, limit) or [indent + content]


def _rhs_start(leaves: list[_Leaf]) -> int | None:
    """Where the right-hand side of `x = ...`, `x += ...` or `return ...` starts."""
    if leaves[0].text == "return" and len(leaves) > 1:
        return leaves[1].start
    for i, leaf in enumerate(leaves[:-1]):
        if leaf.depth == 0 and (leaf.text == "=" or (leaf.text.endswith("=") and leaf.text[:-1] in _MATH)):
            return leaves[i + 1].start
    return None


def _can_omit_parens(head: str, rhs: str, leaves: list[_Leaf], limit: int) -> bool:
    """black's `can_omit_invisible_parens`: split the right-hand side at its own last bracket
    rather than parenthesise it whole."""
    priorities = [leaf.priority for leaf in leaves if leaf.priority]
    if not priorities:
        return True
    top = max(priorities)
    if priorities.count(top) > 1:
        return False  # with several delimiters of a kind, the parentheses read better
    if top == _DOT:
        return True
    if leaves[-1].text not in _CLOSE or leaves[-2].text in _OPEN:
        return False
    opening = _opening(leaves, len(leaves) - 1)
    before = leaves[:opening]
    return any(leaf.text in _OPEN for leaf in before) or len(head) + leaves[opening].end <= limit


def _opening(leaves: list[_Leaf], close: int) -> int:
    depth = leaves[close].depth
    for i in range(close - 1, -1, -1):
        if leaves[i].text in _OPEN and leaves[i].depth == depth:
            return i
    raise ValueError("unbalanced")


def _right_hand_split(indent: str, content: str, leaves: list[_Leaf], limit: int) -> list[str] | None:
    """Split at the last bracket pair whose first line fits, trying pairs further left."""
    closes = [i for i, leaf in enumerate(leaves) if leaf.text in _CLOSE and leaf.depth == 0]
    tried = []
    for close in reversed(closes):
        opening = _opening(leaves, close)
        if opening + 1 == close:
            continue  # `()`: nothing to put on a line of its own
        head = content[: leaves[opening].end]
        body = content[leaves[opening].end : leaves[close].start].strip()
        tail = content[leaves[close].start :]
        if len(indent) + len(tail) > limit:
            break
        comma = leaves[opening].text != "[" or not _subscript(leaves, opening)
        lines = [
            indent + head,
            *_split(indent + INDENT, body, limit, statement=False, inside=True, trailing_comma=comma),
            indent + tail,
        ]
        tried.append(lines)
        if len(lines[0]) <= limit:
            return lines
    return tried[0] if tried else None


def _subscript(leaves: list[_Leaf], opening: int) -> bool:
    if opening == 0:
        return False
    before = leaves[opening - 1].text
    return before in (")", "]") or before.isidentifier() and not keyword.iskeyword(before)


def _delimiter_split(indent: str, content: str, leaves: list[_Leaf], limit: int, trailing_comma: bool):
    priorities = [leaf.priority for leaf in leaves if leaf.priority]
    if not priorities:
        return None
    top = max(priorities)
    if top == _DOT and priorities.count(_DOT) == 1:
        return None  # splitting one attribute from its parent looks wrong
    pieces, start = [], 0
    for leaf in leaves:
        if leaf.priority != top:
            continue
        if top == _COMMA:
            pieces.append(content[start : leaf.end].strip())
            start = leaf.end
        else:
            pieces.append(content[start : leaf.start].strip())
            start = leaf.start
    last = content[start:].strip()
    if last:
        pieces.append(last)
    pieces = [p for p in pieces if p]
    if len(pieces) < 2:
        return None  # one piece (`f(a, b),` split at its own trailing comma) is no split
    if top == _COMMA and trailing_comma and not pieces[-1].endswith(",") and not _star(pieces[-1]):
        pieces[-1] += ","
    lines = []
    for piece in pieces:
        lines += _split(indent, piece, limit, statement=False, inside=True)
    return lines


def _star(piece: str) -> bool:
    return piece.startswith("*") or piece.startswith("**")
