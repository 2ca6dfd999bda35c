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

Only a line that documents parameters types one: a numpydoc or Google `Returns`, `Yields` or
`Attributes` section names values that are not the parameters (speechbrain's `Returns` entries
reuse a parameter's name, `x : torch.Tensor`, `lengths : int`), so a type stated there decides
nothing. Lines before the first section header, and in `Parameters` / `Arguments` / `Args` /
`Keyword Arguments` / `Other Parameters` sections, count; Sphinx `:type`/`:param` lines count
wherever they stand.
"""

from __future__ import annotations

import ast
import re

_SCALARS = frozenset({"int", "float", "bool", "str", "None", "integer", "boolean", "string", "complex"})
# What a type field may hold besides the type: ", optional", "*optional*", "default: 3", backticks.
_DECORATION = re.compile(r"[`*]|,?\s*\boptional\b|,?\s*\(?\bdefaults?\b.*$", re.IGNORECASE)
# Scalar type names joined by "or", "|" or ",".
_SCALAR_TEXT = re.compile(r"^\w+(?:\s*(?:\bor\b|[|,])\s*\w+)*$")


# Section headers (numpydoc `Returns` over a dashed line, Google `Returns:`), lower case: those
# whose entries are parameters, and the others a docstring commonly has.
_PARAM_SECTIONS = frozenset({
    "parameters", "params", "arguments", "args", "keyword arguments", "keyword args", "kwargs",
    "other parameters", "other arguments", "inputs", "input",
})  # fmt: skip
_OTHER_SECTIONS = frozenset({
    "returns", "return", "yields", "yield", "attributes", "raises", "raise", "warns", "warnings",
    "example", "examples", "note", "notes", "see also", "references", "methods", "outputs",
    "output", "todo", "receives",
})  # fmt: skip
_UNDERLINE = re.compile(r"^[-=~]{3,}$")


def _section_header(lines: list[str], i: int) -> str | None:
    """The section that line `i` opens (lower case), or None when it opens none we know."""
    line = lines[i].strip()
    following = lines[i + 1].strip() if i + 1 < len(lines) else ""
    if _UNDERLINE.match(following):
        title = line.lower()
    elif line.endswith(":") and ":" not in line[:-1]:
        title = line[:-1].strip().lower()
    else:
        return None
    return title if title in _PARAM_SECTIONS or title in _OTHER_SECTIONS else None


def _parameter_lines(doc: str) -> list[str]:
    """The stripped lines of `doc` that may document a parameter (see the module docstring)."""
    lines = doc.splitlines()
    kept: list[str] = []
    in_params = True  # before any header: a docstring with no sections
    for i, raw in enumerate(lines):
        line = raw.strip()
        header = _section_header(lines, i)
        if header is not None:
            in_params = header in _PARAM_SECTIONS
            continue
        if in_params or line.startswith((":type", ":param")):
            kept.append(line)
    return kept


def _stated_types(doc: str, names: set[str]) -> dict[str, str]:
    """The type text each of `names` has in `doc`, where a parameter line states one."""
    found: dict[str, str] = {}
    for line in _parameter_lines(doc):
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
