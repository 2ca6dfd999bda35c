"""SourceFile: one file's text, its `ast`, its import aliases, and span arithmetic.

`ast` columns count UTF-8 bytes; findings and edits count characters. The helpers
here convert once, so rules never think about encodings.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from fuselint.findings import Edit, Span
from fuselint.source.imports import ImportTable


class Unreadable(Exception):
    """Bytes that are not text in the file's declared encoding."""


def decode(raw: bytes) -> tuple[str, str]:
    """(text, encoding) honouring a BOM or a PEP 263 coding cookie."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return raw.decode(encoding), encoding
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        raise Unreadable(str(exc)) from None


def newline_of(text: str) -> str:
    first = text.find("\n")
    if first > 0 and text[first - 1] == "\r":
        return "\r\n"
    if first < 0 and "\r" in text:
        return "\r"
    return "\n"


@lru_cache(maxsize=4)
def comment_tokens(text: str) -> tuple[dict[int, tuple[int, str]], frozenset[int]] | None:
    """The comment on each line, as (0-based column, text), and the lines a comment may end
    (those ending in a newline token or a comment); None when `text` does not tokenize.
    A `#` inside a string is no comment. Tokenized once for the noqa map and the fixes' comment
    check of the same text (`tokenize` is pure Python); callers never change the result."""
    comments: dict[int, tuple[int, str]] = {}
    ends: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = (token.start[1], token.string)
                ends.add(token.start[0])
            elif token.type in (tokenize.NEWLINE, tokenize.NL):
                ends.add(token.start[0])
    except (tokenize.TokenError, SyntaxError):
        return None
    return comments, frozenset(ends)


@dataclass
class SourceFile:
    path: str
    text: str
    tree: ast.Module
    imports: ImportTable = field(init=False)

    def __post_init__(self) -> None:
        self.imports = ImportTable.of(self.tree)

    @classmethod
    def parse(cls, path: str, text: str) -> SourceFile:
        """Raises SyntaxError (or ValueError for NUL bytes) when the text is not Python."""
        return cls(path=path, text=text, tree=ast.parse(text, filename=path))

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines(keepends=True)

    def line_text(self, lineno: int) -> str:
        if 1 <= lineno <= len(self.lines):
            return self.lines[lineno - 1].rstrip("\r\n")
        return ""

    def char_col(self, lineno: int, byte_col: int) -> int:
        """0-based character column of a 0-based UTF-8 byte column on a 1-based line."""
        line = self.line_text(lineno)
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST, end: ast.AST | None = None) -> Span:
        """The span from `node`'s start to `end`'s end (or node's own end), 1-based."""
        end = end or node
        line, col = node.lineno, self.char_col(node.lineno, node.col_offset)
        end_line = end.end_lineno or end.lineno
        end_col = self.char_col(end_line, end.end_col_offset or 0)
        return Span(self.path, line, col + 1, end_line, end_col + 1)

    def segment(self, node: ast.AST) -> str:
        """The exact source text of a node (comments and spacing inside it kept)."""
        # ast.get_source_segment splits the whole file on every call; slice the cached lines.
        end = getattr(node, "end_lineno", None)
        if end is None or not 1 <= node.lineno <= end <= len(self.lines):
            return ""
        chunk = [line.encode("utf-8") for line in self.lines[node.lineno - 1 : end]]
        if len(chunk) == 1:
            return chunk[0][node.col_offset : node.end_col_offset].decode("utf-8", errors="replace")
        chunk[0] = chunk[0][node.col_offset :]
        chunk[-1] = chunk[-1][: node.end_col_offset]
        return b"".join(chunk).decode("utf-8", errors="replace")

    def replace(self, node: ast.AST, content: str, end: ast.AST | None = None) -> Edit:
        span = self.span(node, end)
        return Edit(span.line, span.column, span.end_line, span.end_column, content)

    def delete_statement(self, stmt: ast.stmt) -> Edit:
        """Remove a whole-line statement, its line break included."""
        last = stmt.end_lineno or stmt.lineno
        return Edit(stmt.lineno, 1, last + 1, 1, "")
