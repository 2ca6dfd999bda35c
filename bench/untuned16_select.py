"""Which kornia modules enter the fix-rate corpus as UNTUNED16: the rule, applied mechanically.

The rule, written before any of them was traced (fixes16):
- kornia 0.9.0 is new to the corpus; no fuselint fix was written while reading it.
- Candidates: every `torch.nn.Module` class that `kornia.feature` or `kornia.contrib` exports by
  name, in alphabetical order of `module.Class`.
- Built offline with its defaults, `pretrained=False` where the constructor takes that argument;
  a class whose constructor needs another argument, or fetches weights anyway, is out.
- Its entry is the first of these inputs (seeded, CPU) with which the eager forward runs in eval
  under `no_grad`: one gray image 1x1x64x64, one RGB image 1x3x64x64, eight gray 32x32 patches,
  a pair of gray images `{"image0", "image1"}` (64x64), a pair of 16x128 descriptor sets. A class
  none of them runs is out.
- It enters if dynamo logs at least one break site inside kornia on that entry
  (`bench/real_corpus.py`'s ground truth), whether or not a fix looks likely; the first 12 that do.

Part 2, written after part 1 gave fewer than 8 entries and before any of these was traced:
- torch_geometric 2.8.1's layers: every name of `torch_geometric.nn.conv.__all__`, alphabetical, but
  GCNConv, GATConv and SAGEConv (already traced inside the corpus's GCN, GAT and GraphSAGE).
- Built as `Cls(8, 16)` (in and out channels, the rest default); a class that needs more is out.
- Its entry is forward(x, edge_index) on the corpus's GCN inputs (20 nodes of 8 features, 60 random
  edges, seeded); a class whose eager forward fails on them is out.
- It enters if dynamo logs at least one break site inside torch_geometric; the first 8 that do.

    PYTHONPATH=. python bench/untuned16_select.py [--part 2] [--json out.json]

prints each candidate with its input kind and break sites (or why it is out).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_corpus import listen_breaks, logged_sites  # noqa: E402

MODULES = ("kornia.contrib", "kornia.feature")
LIMIT = 12
PYG_TRACED = ("GCNConv", "GATConv", "SAGEConv")  # inside the corpus's GCN, GAT and GraphSAGE
PYG_LIMIT = 8


def candidates(part: int = 1) -> list[tuple[str, type]]:
    """(`module.Class`, class) of every candidate of the rule's part, alphabetical."""
    import importlib

    import torch

    if part == 2:
        import torch_geometric.nn.conv as conv

        names = sorted(set(conv.__all__) - set(PYG_TRACED))
        return [(f"torch_geometric.nn.conv.{n}", getattr(conv, n)) for n in names]
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in dir(module):
            value = getattr(module, attr)
            if inspect.isclass(value) and issubclass(value, torch.nn.Module):
                found.append((f"{name}.{attr}", value))
    return sorted(found, key=lambda item: item[0])


def inputs(kind: str):
    """The seeded input of an entry kind, as positional arguments."""
    import torch

    torch.manual_seed(1)
    if kind == "gray":
        return (torch.rand(1, 1, 64, 64),)
    if kind == "rgb":
        return (torch.rand(1, 3, 64, 64),)
    if kind == "patches":
        return (torch.rand(8, 1, 32, 32),)
    if kind == "pair":
        return ({"image0": torch.rand(1, 1, 64, 64), "image1": torch.rand(1, 1, 64, 64)},)
    if kind == "graph":  # real_corpus.pyg_gcn's inputs
        torch.manual_seed(0)
        return (torch.randn(20, 8), torch.randint(0, 20, (2, 60)))
    return (torch.randn(16, 128), torch.randn(16, 128))


KINDS = {1: ("gray", "rgb", "patches", "pair", "descriptors"), 2: ("graph",)}
PACKAGE = {1: "kornia", 2: "torch_geometric"}


def build(cls: type, part: int = 1):
    """The module built offline with its defaults (pretrained=False where it is an argument), or
    as `Cls(8, 16)` for part 2."""
    import torch

    torch.manual_seed(0)
    if part == 2:
        return cls(8, 16).eval()
    kwargs = {"pretrained": False} if "pretrained" in inspect.signature(cls.__init__).parameters else {}
    return cls(**kwargs).eval()


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def first_kind(module, part: int = 1) -> str | None:
    import torch

    for kind in KINDS[part]:
        try:
            signal.alarm(120)
            with torch.no_grad():
                module(*inputs(kind))
            return kind
        except _Timeout:
            return None
        except Exception:  # noqa: BLE001 - an input the module does not take: try the next
            continue
        finally:
            signal.alarm(0)
    return None


def sites_of(module, kind: str, package: str) -> list[str]:
    """Dynamo's break sites inside `package` (real_corpus's rule: the innermost frame there)."""
    import importlib

    import torch

    root = str(Path(importlib.import_module(package).__file__).resolve().parent) + os.sep
    handler = listen_breaks()
    handler.texts.clear()
    torch._dynamo.reset()
    compiled = torch.compile(module, backend=lambda gm, _: gm.forward, dynamic=False)
    signal.alarm(240)
    try:
        with torch.no_grad():
            compiled(*inputs(kind))
    finally:
        signal.alarm(0)
    return logged_sites(handler.texts, root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", type=int, choices=(1, 2), default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    limit = PYG_LIMIT if args.part == 2 else LIMIT
    signal.signal(signal.SIGALRM, _alarm)
    rows = []
    chosen = 0
    for name, cls in candidates(args.part):
        row = {"name": name}
        try:
            signal.alarm(120)
            module = build(cls, args.part)
        except (Exception, _Timeout) as exc:  # noqa: BLE001 - out: needs arguments or weights
            row["out"] = (
                f"not built: {type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"
            )
        else:
            signal.alarm(0)
            kind = first_kind(module, args.part)
            if kind is None:
                row["out"] = "no standard input runs"
            else:
                row["kind"] = kind
                try:
                    row["sites"] = sites_of(module, kind, PACKAGE[args.part])
                except (Exception, _Timeout) as exc:  # noqa: BLE001 - a trace that fails is a row
                    row["sites"] = []
                    row["error"] = (
                        f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"
                    )
                if row["sites"] and chosen < limit:
                    chosen += 1
                    row["enters"] = True
        finally:
            signal.alarm(0)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
