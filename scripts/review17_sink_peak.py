"""The peak of a simple liveness count (every call node allocates its value; values free after
their last reader; graph inputs not counted) before and after sink_matmuls, on a graph whose
matmul moves past a large temporary: `python scripts/review17_sink_peak.py`."""

import sys

import torch

sys.path.insert(0, "tests/backend")  # run from the repository root
from backend_helpers import aten_graph

from fuselint.backend.compiler import sink_matmuls


def peak(gm):
    nodes = list(gm.graph.nodes)
    last = {}
    for i, n in enumerate(nodes):
        for a in n.all_input_nodes:
            last[a] = i
    live, best = 0, 0
    alive = set()
    for i, n in enumerate(nodes):
        if n.op == "call_function":
            v = n.meta["val"]
            live += v.numel() * v.element_size()
            alive.add(n)
        best = max(best, live)
        for a in list(alive):
            if (
                last.get(a, -1) <= i
                and a.op == "call_function"
                and not (n.op == "output" and a in n.all_input_nodes)
            ):
                live -= a.meta["val"].numel() * a.meta["val"].element_size()
                alive.discard(a)
    return best


def f(a, w, b):
    x = a.sin()  # 4 x 1024, read only by the matmul
    r = x @ w  # 4 x 1024
    t = b.exp()  # 1024 x 256
    return r @ t  # 4 x 256


args = (torch.randn(4, 1024), torch.randn(1024, 1024), torch.randn(1024, 256))
gm = aten_graph(f, *args)
e = gm(*args)
p0 = peak(gm)
print("moved", sink_matmuls(gm), "peak before", p0, "after", peak(gm), "equal", torch.equal(gm(*args), e))
