"""A Union-annotated parameter (written out, or through a type alias of this file or another file of
the tree) narrowed by `isinstance` in `if`/`elif`/`else` arms and after an early `return`: the lint
takes it for a tensor only where the tests leave nothing but tensor types (torch_geometric's
`edge_index: Adj` with `Adj = Union[Tensor, SparseTensor]`, ClusterGCNConv)."""

from __future__ import annotations

from pathlib import Path

import pytest
from source_rules_helpers import lines, tree_findings

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "union_edges.py"

# `+=` on a mask of two rows of the parameter: FL106 where the parameter is a tensor
LAYER = """
from typing import Optional, Union

import torch
from torch import Tensor, nn


class Coo:
    def coo(self):
        return 1, 2


class Other:
    pass


Adj = Union[Tensor, Coo]


class Layer(nn.Module):
    def forward(self, x: Tensor, edge_index: Adj, other: Adj) -> Tensor:
        w = x[0]
{body}
        return w
"""

ADD = "w[edge_index[0] == edge_index[1]] += 1.0"


def _flagged(body: str, annotation: str | None = None) -> list[int]:
    """The FL106 lines of LAYER's forward with `body` (indented by 8), relative to the body's start."""
    text = LAYER.format(body="\n".join("        " + line for line in body.strip("\n").splitlines()))
    if annotation is not None:
        text = text.replace("edge_index: Adj", f"edge_index: {annotation}")
    first = text.splitlines().index("        w = x[0]") + 2
    return [line - first for line in lines(text, "FL106")]


def test_the_fixture_is_flagged_in_its_tensor_arm_only():
    """Its `CooEdges` arm has the same `+=`: not flagged, the union is narrowed away there."""
    text = FIXTURE.read_text()
    tensor_arm = text.splitlines().index("            row, col = edge_index[0], edge_index[1]") + 1
    assert lines(text, "FL106") == [tensor_arm + 4]


@pytest.mark.parametrize(
    "body",
    [
        f"if isinstance(edge_index, Coo):\n    {ADD}",
        f"if not isinstance(edge_index, Coo):\n    pass\nelse:\n    {ADD}",
        f"if not isinstance(edge_index, Coo):\n    return x\n{ADD}",
        f"if isinstance(edge_index, (Coo, Other)):\n    {ADD}",
        f"if isinstance(edge_index, Coo) and x.dim() == 2:\n    {ADD}",
    ],
    ids=["body", "not", "early-return", "tuple-of-types", "and-body"],
)
def test_where_the_tests_leave_no_tensor_type_it_is_no_tensor(body):
    assert _flagged(body) == []


@pytest.mark.parametrize(
    "body",
    [
        ADD,  # not narrowed: the union holds a tensor type, as `Union[Tensor, Coo]` written out does
        f"if isinstance(edge_index, Coo):\n    pass\nelse:\n    {ADD}",  # the other arm
        f"if isinstance(other, Coo):\n    {ADD}",  # another name tested
        f"if isinstance(edge_index, Coo) or x.dim() == 2:\n    {ADD}",  # `or`: not decided
        f"if isinstance(edge_index, Coo) and x.dim() == 2:\n    pass\nelse:\n    {ADD}",  # `and`: else undecided
        f"if isinstance(edge_index, Other):\n    {ADD}",  # a type the union does not hold
        f"if isinstance(edge_index, object):\n    pass\nelse:\n    {ADD}",
        f"edge_index = edge_index\nif isinstance(edge_index, Coo):\n    {ADD}",  # stored above the test
        f"for _ in range(2):\n    if isinstance(edge_index, Coo):\n        {ADD}\n"
        "    edge_index = torch.cat([x, x])",  # stored in a loop around the test
        f"def inner(edge_index):\n    if isinstance(edge_index, Coo):\n        {ADD}\n"
        "inner(x)",  # a nested def's own parameter
        f"if (edge_index := edge_index) is not None and isinstance(edge_index, Coo):\n    {ADD}",  # walrus
        f"try:\n    pass\nexcept ValueError as edge_index:\n    pass\nif isinstance(edge_index, Coo):\n    {ADD}",
    ],
    ids=["unnarrowed", "else", "other-name", "or", "and-else", "not-a-member", "object", "stored-above",
         "loop", "nested-def", "walrus", "except-as"],
)  # fmt: skip
def test_the_annotation_holds_where_the_tests_do_not_narrow_it(body):
    assert len(_flagged(body)) == 1


def test_elif_arms_narrow_what_the_earlier_tests_left():
    three = "Union[Tensor, Coo, Other]"
    body = f"if isinstance(edge_index, Coo):\n    {ADD}\nelif isinstance(edge_index, Other):\n    {ADD}\nelse:\n    {ADD}"
    assert _flagged(body, three) == [5]
    # a union with a host type is no tensor until a test leaves only the tensor
    body = f"if isinstance(edge_index, (int, float)):\n    {ADD}\nelse:\n    {ADD}"
    assert _flagged(body, "Union[Tensor, float]") == [3]
    assert _flagged(ADD, "Union[Tensor, float]") == []
    # an int passes where `float` is annotated: a test of `float` alone leaves it
    assert _flagged(body.replace("(int, float)", "float"), "Union[Tensor, float]") == []


def test_a_call_arm_keeps_the_tensor_kind():
    """`elif is_torch_sparse_tensor(edge_index):` tests no type: a torch sparse tensor is a tensor."""
    body = f"if isinstance(edge_index, Coo):\n    {ADD}\nelif x.is_sparse:\n    {ADD}\nelse:\n    pass"
    assert _flagged(body) == [3]


def test_a_written_out_union_is_narrowed_too():
    body = f"if isinstance(edge_index, Coo):\n    {ADD}\nelse:\n    {ADD}"
    assert _flagged(body, "Union[Tensor, Coo]") == [3]
    assert _flagged(body, "Tensor | Coo") == [3]
    assert _flagged(body, "Optional[Union[Tensor, Coo]]") == [3]


CONV = """
import torch
from torch import Tensor, nn

from {source} import Adj


class Conv(nn.Module):
    def forward(self, x: Tensor, edge_index: Adj) -> Tensor:
        w = x[0]
        if isinstance(edge_index, SparseTensor):
            return w
        w[edge_index[0] == edge_index[1]] += 1.0
        return w
"""

TYPING = """
from typing import Union

from torch import Tensor


class SparseTensor:
    pass


Adj = Union[Tensor, SparseTensor]
"""


@pytest.mark.parametrize("source", ["pkg.typing", ".typing", "pkg"])  # absolute, relative, re-exported
def test_an_alias_of_another_file_is_read_from_there(tmp_path, source):
    files = {
        "pkg/__init__.py": "from .typing import Adj, SparseTensor\n",
        "pkg/typing.py": TYPING,
        "pkg/conv.py": CONV.format(source=source).replace("import Adj", "import Adj, SparseTensor"),
    }
    found = [(Path(f.span.path).name, f.span.line, f.code) for f in tree_findings(tmp_path, files)]
    assert found == [("conv.py", 13, "FL106")]


def test_an_alias_the_tree_does_not_hold_says_nothing(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/conv.py": CONV.format(source="elsewhere")}
    assert [f for f in tree_findings(tmp_path, files) if f.code == "FL106"] == []


def test_an_alias_assigned_twice_is_no_alias(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/typing.py": TYPING + "Adj = Union[Tensor, int]\n",
        "pkg/conv.py": CONV.format(source="pkg.typing").replace("import Adj", "import Adj, SparseTensor"),
    }
    assert [f for f in tree_findings(tmp_path, files) if f.code == "FL106"] == []


@pytest.mark.parametrize(
    "body",
    [
        "for _ in range(x.shape[0]):\n    if isinstance(edge_index, (int, float)):\n        return w\n"
        f"if not isinstance(edge_index, Coo):\n    {ADD}",  # the loop may run no time
        "n = x.shape[0]\nwhile n > 0:\n    if isinstance(edge_index, (int, float)):\n        return w\n"
        f"    n -= 1\nif not isinstance(edge_index, Coo):\n    {ADD}",
        f"for _ in range(2):\n    if not isinstance(edge_index, Coo):\n        {ADD}\n"
        "    if isinstance(edge_index, (int, float)):\n        return w",  # the first pass's top
        "match x.dim():\n    case 1:\n        if isinstance(edge_index, (int, float)):\n            return w\n"
        f"    case _:\n        if not isinstance(edge_index, Coo):\n            {ADD}",  # another case
        "try:\n    if isinstance(edge_index, (int, float)):\n        raise ValueError\nexcept ValueError:\n"
        f"    if not isinstance(edge_index, Coo):\n        {ADD}",  # the handler runs after the raise
    ],
    ids=["for", "while", "loop-top", "match", "try"],
)
def test_an_early_return_narrows_only_to_the_end_of_its_block(body):
    """`edge_index` may still be a float at the `+=`: the return that ruled it out sits in a block
    that the path to the `+=` need not have run through to its end."""
    assert _flagged(body, "Union[Tensor, Coo, float]") == []
    # the same return in the function's own block narrows what follows it
    assert _flagged(
        f"if isinstance(edge_index, (int, float)):\n    return w\nif not isinstance(edge_index, Coo):\n    {ADD}",
        "Union[Tensor, Coo, float]",
    ) == [3]


def test_a_walrus_on_a_later_line_of_the_test_rebinds_before_the_body():
    """The test is spread over lines and its second line binds a float to the name: no tensor in the
    body, though the first line tested for one."""
    body = (
        f"if (\n    isinstance(edge_index, Tensor)\n    and (edge_index := float(x.sum())) > 0\n):\n    {ADD}"
    )
    assert _flagged(body, "Union[Tensor, float]") == []
