"""Parameter types that a function's docstring states, for parameters with no annotation.

Many libraries type their parameters only in the docstring, in one of three common styles:

    numpydoc     name : int              (also `name: int`, and `int, optional`)
    Google       name (int): ...         (also `name (`int`, *optional*): ...`)
    Sphinx       :type name: int         (also `:param int name: ...`)

`documented_host_params` names the parameters whose stated type is a Python scalar: every word of
the type is one of `int`, `float`, `bool`, `str`, `None` (and their long names), so `int`,
`int or None`, `float, optional`, `bool (default: False)`. A container (`tuple`, `list`, `dict`:
FastSpeech2's `targets: tuple` holds tensors), a class (`PaddedBatch`), a tensor type, a union with
one (`Tensor or float`) or free prose decides nothing.
"""

from __future__ import annotations

import ast
import re

_SCALARS = frozenset({"int", "float", "bool", "str", "None", "integer", "boolean", "string", "complex"})
# What a type field may hold besides the type: ", optional", "*optional*", "default: 3", backticks.
_DECORATION = re.compile(r"[`*]|,?\s*\boptional\b|,?\s*\(?\bdefaults?\b.*$", re.IGNORECASE)
# Scalar type names joined by "or", "|" or ",".
_SCALAR_TEXT = re.compile(r"^\w+(?:\s*(?:\bor\b|[|,])\s*\w+)*$")


def _stated_types(doc: str, names: set[str]) -> dict[str, str]:
    """The type text each of `names` has in `doc`, where a line states one."""
    found: dict[str, str] = {}
    for raw in doc.splitlines():
        line = raw.strip()
        for pattern in (
            r"^\*{0,2}(?P<name>\w+)\s*:\s*(?P<type>[^:]+)$",  # numpydoc
            r"^\*{0,2}(?P<name>\w+)\s*\((?P<type>[^)]*)\)\s*:",  # Google
            r"^:type\s+(?P<name>\w+)\s*:\s*(?P<type>.+)$",  # Sphinx
            r"^:param\s+(?P<type>[\w.\[\], |]+)\s+(?P<name>\w+)\s*:",  # Sphinx, type inline
        ):
            match = re.match(pattern, line)
            if match and match["name"] in names and match["name"] not in found:
                found[match["name"]] = match["type"].strip()
                break
    return found


def _host_type(text: str) -> bool:
    plain = _DECORATION.sub("", text).strip().rstrip(",").strip()
    if not plain or _SCALAR_TEXT.match(plain) is None:
        return False
    return all(word in _SCALARS for word in re.findall(r"\w+", plain) if word != "or")


def documented_host_params(fn: ast.FunctionDef | ast.AsyncFunctionDef, names: list[str]) -> set[str]:
    """Those of `names` (parameters of `fn`) that `fn`'s docstring types as host values."""
    doc = ast.get_docstring(fn, clean=True)
    if not doc or not names:
        return set()
    stated = _stated_types(doc, set(names))
    return {name for name, text in stated.items() if _host_type(text)}
