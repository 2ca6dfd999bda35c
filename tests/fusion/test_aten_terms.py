"""ATen nodes lower to the source side's canonical terms: spellings that compute the same coincide."""

from __future__ import annotations

import torch
from fusion_capture import aten_graphs

from fuselint.fusion.aten_terms import AtenTerms


def _output_term(terms: AtenTerms, fn, *args):
    (fg,) = aten_graphs(fn, *args)
    (out,) = [fg.dag.nodes[n]["fx"] for n in fg.dag.nodes if fg.dag.out_degree(n) == 0 and n != "output"][-1:]
    return terms.term(out)


def test_division_by_sqrt_and_product_with_rsqrt_are_one_term():
    terms = AtenTerms()
    x = torch.randn(4, 8)
    a = _output_term(terms, lambda x: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), x)
    b = _output_term(terms, lambda x: x * torch.rsqrt((x * x).mean(dim=[1], keepdim=True) + 1e-6), x)
    assert a.key == b.key


def test_different_constants_stay_different_terms():
    terms = AtenTerms()
    x = torch.randn(4, 8)
    a = _output_term(terms, lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), x)
    b = _output_term(terms, lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5), x)
    assert a.key != b.key


def test_an_op_with_no_torch_function_is_a_leaf():
    terms = AtenTerms()
    t = _output_term(terms, lambda x: x.view(2, 16), torch.randn(4, 8))
    assert t.op == "n"


def test_a_graph_deeper_than_the_recursion_limit_has_terms():
    # timm's MobileNetV3 traced whole is hundreds of nodes deep: `verify`'s prediction of it ended in
    # a RecursionError while each node built its inputs' terms itself
    import sys

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    node = x
    for i in range(sys.getrecursionlimit() * 2):
        node = graph.call_function(torch.ops.aten.add.Tensor, (node, x) if i % 2 else (x, node))
    graph.output(node)
    terms = AtenTerms()
    top = terms.term(node)
    assert top.op == "add" and top.node is node
    # each node's term reads its inputs' terms: the first add's is x + x
    first = next(n for n in graph.nodes if n.op == "call_function")
    assert terms.term(first).key == AtenTerms().term(first).key
