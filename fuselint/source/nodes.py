"""Walking `ast` trees: `ast.walk` and `ast.iter_child_nodes`, the same nodes in the same order.

The checks walk functions and classes many times over, and the standard library's walk runs
two generators and a `getattr` per field for every node: on transformers/models it was about a
third of a cold lint. These read `_fields` in one loop and queue children in a list.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

_AST = ast.AST


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """The direct children of `node`, as `ast.iter_child_nodes` yields them."""
    children: list[ast.AST] = []
    push = children.append
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, _AST):
            push(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, _AST):
                    push(item)
    return children


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under `node` (itself first), breadth first, as `ast.walk` yields them.

    As in `ast.walk`, a node's children are queued before the node is yielded.
    """
    queue = [node]
    push = queue.append
    for current in queue:  # the loop reads what it appends: breadth first
        for name in current._fields:
            value = getattr(current, name, None)
            if isinstance(value, _AST):
                push(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, _AST):
                        push(item)
        yield current
