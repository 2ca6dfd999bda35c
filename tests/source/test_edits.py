"""`drops_comment`: a multi-line edit that swallows a comment makes a fix unsafe."""

from __future__ import annotations

from fuselint.findings import Edit
from fuselint.source.edits import comment_positions, drops_comment

TEXT = 'y = f(\n    a,  # the scale\n    b,\n)\ns = "#" + g(\n    c,\n)\nz = h(\r    d,  # lone CR\n)\n'


def _by_tokenizing(text: str, edits: list[Edit]) -> bool:
    spans = [e for e in edits if e.end_line > e.line]
    return any(
        (e.line, e.column) <= (line, column) < (e.end_line, e.end_column) and comment not in e.content
        for line, column, comment in comment_positions(text)
        for e in spans
    )


def test_a_span_over_a_comment_drops_it_unless_carried():
    assert drops_comment(TEXT, [Edit(1, 5, 4, 2, "g(a, b)")])
    assert not drops_comment(TEXT, [Edit(1, 5, 4, 2, "g(a, b)  # the scale")])


def test_a_hash_inside_a_string_is_no_comment():
    assert not drops_comment(TEXT, [Edit(5, 5, 7, 2, '"#" + g(c)')])


def test_every_span_agrees_with_tokenizing_the_whole_file():
    lines = TEXT.split("\n")
    for first in range(1, len(lines)):
        for last in range(first + 1, len(lines) + 1):
            for column in (1, 5):
                edits = [Edit(first, column, last, 1, "x")]
                assert drops_comment(TEXT, edits) == _by_tokenizing(TEXT, edits), (first, last, column)
