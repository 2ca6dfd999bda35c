"""Write `fuselint/source/torch_signatures.json`: how torch's public functions are called.

The pattern engine puts every call in one canonical argument order (`torch.cumsum(x, 1)`,
`torch.cumsum(x, dim=1)` and `x.cumsum(1)` coincide). It needs each function's parameter
names, which are positional, and their defaults. `fuselint check` must not import torch,
so this script reads them once, offline, and the engine loads the JSON it writes:

- C++ functions (`torch.cumsum`, `torch.special.expit`, `torch.nn.functional.gelu`, ...) from
  their ATen schemas; a function is listed only when all of its Python-callable overloads
  (first argument a Tensor, no `out=` variant) agree on names, kinds and defaults, since
  the engine cannot know which overload a call picks;
- Python functions (`torch.nn.functional.softplus`, `torch.norm`, ...) from `inspect`;
- a default that is not a plain literal makes that parameter required: a call that omits
  it is then left unnormalised rather than guessed.

Tensor methods are listed when the method is the same C++ function with `self` first.

    python scripts/gen_signatures.py            # rewrite the file from the installed torch
    python scripts/gen_signatures.py --check    # exit 1 if the file is out of date
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parent.parent / "fuselint" / "source" / "torch_signatures.json"
# Python namespace -> prefix of its ATen operator names.
NAMESPACES = {
    "torch": "",
    "torch.special": "special_",
    "torch.linalg": "linalg_",
    "torch.fft": "fft_",
    "torch.nn.functional": "",
}
LITERALS = (type(None), bool, int, float, str)


def _literal(value: object) -> tuple[bool, object]:
    """(True, JSON value) for a plain literal default, (False, None) otherwise."""
    if isinstance(value, LITERALS) and not isinstance(value, torch.dtype):
        if isinstance(value, float) and value != value:  # nan
            return False, None
        return True, value
    if isinstance(value, (list, tuple)) and all(isinstance(v, LITERALS) for v in value):
        return True, list(value)
    return False, None


def _param(name: str, positional: bool, has_default: bool, default: object) -> dict:
    entry: dict = {"name": name}
    if not positional:
        entry["keyword_only"] = True
    if has_default:
        ok, value = _literal(default)
        if ok:
            entry["default"] = value
    return entry


def _from_schemas(aten_name: str) -> list[dict] | None:
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{aten_name}")
    except RuntimeError:
        return None
    shapes = set()
    for schema in schemas:
        args = schema.arguments
        if not args or str(args[0].type) != "Tensor" or any(a.name == "out" for a in args):
            continue
        if any(a.is_out for a in args):
            continue
        shapes.add(
            tuple(
                (
                    "input" if i == 0 and a.name == "self" else a.name,
                    not a.kwarg_only,
                    a.has_default_value(),
                    json.dumps(_literal(a.default_value)) if a.has_default_value() else "",
                )
                for i, a in enumerate(args)
            )
        )
    if len(shapes) != 1:
        return None
    (shape,) = shapes
    return [_param(n, pos, has, json.loads(d)[1] if has else None) for n, pos, has, d in shape]


def _from_python(fn: object) -> list[dict] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            return None
        has = p.default is not p.empty
        params.append(_param(p.name, p.kind == p.POSITIONAL_OR_KEYWORD, has, p.default if has else None))
    return params


def signatures() -> dict:
    functions: dict[str, list[dict]] = {}
    for namespace, prefix in NAMESPACES.items():
        module = eval(namespace, {"torch": torch})  # noqa: S307 - our own constant names
        for name in sorted(dir(module)):
            fn = getattr(module, name, None)
            if name.startswith("_") or not callable(fn) or isinstance(fn, type):
                continue
            if inspect.isfunction(fn):
                params = _from_python(fn)
            elif type(fn).__name__ == "builtin_function_or_method":
                params = _from_schemas(prefix + name)
            else:
                params = None
            if params:
                functions[f"{namespace}.{name}"] = params
    methods = sorted(
        name
        for qual in functions
        if qual.count(".") == 1
        and type(getattr(torch.Tensor, name := qual.split(".")[1], None)).__name__ == "method_descriptor"
        and type(getattr(torch, name)).__name__ == "builtin_function_or_method"
    )
    return {
        "generated_by": "scripts/gen_signatures.py",
        "torch": torch.__version__.split("+")[0],
        "functions": functions,
        "methods": methods,
    }


def render(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the shipped file is out of date")
    args = parser.parse_args()
    text = render(signatures())
    if args.check:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date: run python scripts/gen_signatures.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    table = json.loads(text)
    print(f"wrote {OUT}: {len(table['functions'])} functions, {len(table['methods'])} methods")
    return 0


if __name__ == "__main__":
    sys.exit(main())
