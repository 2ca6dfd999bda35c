"""Facts about ATen ops that no torch tag states, read from `op_facts.toml`: one table for all.

The FusionGraph classifies nodes with it (`KIND_OF`), the planner reads the roles of ops inside
a kernel (flat views, windows, elementwise copies) and the backend which windows it generates.
Deciding an op's kind in one place keeps the plan that `check` prices and the kernels the
backend runs in agreement.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

_TABLE = tomllib.loads((Path(__file__).parent / "op_facts.toml").read_text(encoding="utf-8"))

# overload packet name -> the kind the FusionGraph gives it when torch's tags say nothing
KIND_OF: dict[str, str] = {op: kind for kind, ops in _TABLE["kinds"].items() for op in ops}
FLAT_VIEWS = frozenset(_TABLE["roles"]["flat_view"])
WINDOW_OPS = frozenset(_TABLE["roles"]["window"])
ELEMENTWISE_COPIES = frozenset(_TABLE["roles"]["elementwise_copy"])
LOOKUPS = frozenset(_TABLE["roles"]["lookup"])
SILENT_ALIASES = frozenset(_TABLE["roles"]["silent_alias"])
GENERATED_WINDOWS = frozenset(_TABLE["backend"]["window"])
