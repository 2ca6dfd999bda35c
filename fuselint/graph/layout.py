"""Convolutions laid out the way a GPU compiler runs them: an ATen-to-ATen rewrite.

Inductor's GPU lowering of `aten.convolution` changes the graph in two ways that decide how many
kernels run around a convolution, so the plan has to see them (and the backend, which executes
the plan, runs them the same way):

- It peels the bias off (cuDNN is slower with one): the convolution runs without bias and
  `bias.view(C, 1, 1)` is added by a pointwise op, which fuses into the convolution's consumers.
- When its layout heuristic says channels-last pays off, every 2-d convolution reads its input and
  weight in channels_last. One that is not channels_last already is copied first: a kernel of its
  own when it comes from memory (a graph input, a weight, an extern op's output), free when a fused
  kernel produces it (the copy fuses into that kernel, which writes channels_last). The conv then
  returns channels_last, and the pointwise ops after it keep that layout.

Values leave the graph with the strides they had (a copy restores them), and a `view` that the
new strides do not allow reads a contiguous copy, as Inductor's lowering does. The rewritten graph
carries fresh `val` metadata; new nodes carry the source location of the convolution they serve.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

import torch
import torch.fx
from torch._prims_common import suggest_memory_format

from fuselint.graph.aliasing import storage_root, written_storages

aten = torch.ops.aten

# Inductor's measured channels-last time over default-layout time per class of convolution
# (torch/_inductor/graph.py, decide_layout_opt; < 1 is a speedup), weighted by FLOPs at inference.
_CHANNELS_LAST_TIME = {"grouped": 1.358, "small": 0.783, "in_out": 0.725, "default": 0.823}
# Inductor skips the layout change when convolutions are rare in a graph: >= this many nodes each.
_NODES_PER_CONV = 300
_INSERTED = "fuselint_layout_copy"  # meta key of the copies this pass adds (only those may go)
# meta key on each convolution: (memory format, has a bias, arguments copied) as the user's code
# runs it in eager (eager_layouts)
EAGER_LAYOUT = "fuselint_eager_layout"
# meta key on each node of a rewritten graph: its value (a fake tensor) as the user's code makes it
# in eager, with the strides eager gives it where the rewrite gave the graph's value others
EAGER_VAL = "fuselint_eager_val"
_VIEWS = frozenset({aten.view.default, aten._unsafe_view.default, aten.reshape.default})
# meta key on a value an inference graph makes once and keeps between calls (a weight's layout
# copy, `kept_layout_copies`): no kernel runs for it per call, so planning reads it as an input
KEPT = "fuselint_kept"
# The most memory a compiled graph holds in the layout copies it keeps (fuselint.backend.kept_layouts).
MAX_KEPT_BYTES = 64 << 20


def kept_layout_copies(
    gm: torch.fx.GraphModule, static: frozenset[int]
) -> list[tuple[torch.fx.Node, int, torch.memory_format]]:
    """The layout copies ``clone(w, memory_format=fmt)`` of an inference graph's parameters and
    buffers that a compiled graph makes once and keeps (fuselint.backend.kept_layouts), as
    (copy node, graph-input position of w, fmt) in graph order. `static`: the positions of the
    graph inputs that are parameters or buffers (AOTAutograd's static inputs). Left per call: a
    copy of a buffer the graph writes (it is copied as it is then), one the graph returns (the
    caller would get the kept tensor itself), and beyond ``MAX_KEPT_BYTES`` the largest copies."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    written = written_storages(gm.graph.nodes)
    weights = {
        p: i
        for i, p in enumerate(placeholders)
        if i in static and isinstance(p.meta.get("val"), torch.Tensor) and p not in written
    }
    out = next(n for n in gm.graph.nodes if n.op == "output")
    returned = {storage_root(n) for n in out.all_input_nodes}
    found = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is not aten.clone.default or len(n.args) != 1:
            continue
        fmt = n.kwargs.get("memory_format")
        if fmt is None or set(n.kwargs) != {"memory_format"} or n.args[0] not in weights:
            continue
        if n not in returned and isinstance(n.meta.get("val"), torch.Tensor):
            found.append((n.meta["val"].numel() * n.meta["val"].element_size(), n, fmt))
    budget, chosen = MAX_KEPT_BYTES, set()
    for nbytes, n, _fmt in sorted(found, key=lambda f: f[0]):  # the smallest first; stable: graph order
        if nbytes > budget:
            break
        budget -= nbytes
        chosen.add(n)
    return [(n, weights[n.args[0]], fmt) for _, n, fmt in found if n in chosen]


def _val(node) -> object:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _conv_class(weight: torch.Tensor, groups: int) -> str:
    out_ch, in_ch = weight.shape[0], weight.shape[1]
    if groups > 1 and in_ch > 1:
        return "grouped"
    if out_ch <= 64 and in_ch <= 64:
        return "small"
    if out_ch * 2 <= in_ch and weight.shape[2] > 1:
        return "in_out"
    return "default"


def channels_last_pays(gm: torch.fx.GraphModule, *, inference: bool) -> bool:
    """Inductor's decision (GPU) to run the graph's convolutions in channels_last."""
    convs = [n for n in gm.graph.nodes if n.target is aten.convolution.default]
    if not convs or len(gm.graph.nodes) >= _NODES_PER_CONV * len(convs):
        return False
    weights = [_val(n.args[1]) for n in convs]
    inputs = [_val(n.args[0]) for n in convs]
    if not all(isinstance(t, torch.Tensor) for t in weights + inputs):
        return False
    if any(not isinstance(s, int) for t in weights + inputs for s in t.shape):
        return False  # dynamic shapes: Inductor keeps the layout
    classes = [_conv_class(w, n.args[-1]) for n, w in zip(convs, weights, strict=True)]
    if inference:
        flops = [2 * _val(n).numel() * math.prod(w.shape[1:]) for n, w in zip(convs, weights, strict=True)]
        weighted = sum(f * _CHANNELS_LAST_TIME[c] for f, c in zip(flops, classes, strict=True))
        return weighted <= sum(flops)
    if any(c in ("grouped", "in_out") for c in classes):
        return False
    return not all(c == "small" for c in classes)


def gpu_conv_layout(
    gm: torch.fx.GraphModule, *, inference: bool, user_outputs: range | None = None, eager: bool = True
) -> torch.fx.GraphModule:
    """gm with its convolutions lowered as Inductor lowers them for a GPU (see the module
    docstring); gm itself when it has none, or when its shapes or strides cannot be followed.
    `user_outputs`: the positions of the outputs the user's code sees (a training forward's others
    are activations saved for the backward, which keep the layout they are made in, as Inductor
    keeps them; None: all). A backward convolution whose saved input is channels_last takes its
    gradient in channels_last too. `eager`: also record how eager lays out each value (for
    pricing the eager side; the backend, which prices nothing, skips it)."""
    convs = [n for n in gm.graph.nodes if n.target is aten.convolution.default]
    grads = [n for n in gm.graph.nodes if n.target is aten.convolution_backward.default]
    if not convs and not grads:
        return gm
    if not all(isinstance(_val(n), torch.Tensor) for n in gm.graph.nodes if n.op == "placeholder"):
        return gm
    lay_out = bool(convs) and channels_last_pays(gm, inference=inference)
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    graph.output(graph.graph_copy(gm.graph, env))  # graph_copy leaves the output node out
    new = torch.fx.GraphModule(gm, graph)
    out = next(n for n in graph.nodes if n.op == "output")
    before = [_val(v) for v in out.args[0]]
    changed = False
    values: dict[str, torch.Tensor] = {}
    as_eager = eager_layouts(gm, values) if eager else {}
    for old, node in env.items():
        if old.name in values:
            node.meta[EAGER_VAL] = values[old.name]
    for old in convs:
        conv = env[old]
        if old.name in as_eager:
            conv.meta[EAGER_LAYOUT] = as_eager[old.name]
        changed |= _peel_bias(graph, conv)
        if lay_out and len(conv.args[1].meta["val"].shape) == 4:
            for i in (0, 1):
                _copy_before(graph, conv, i, torch.channels_last, conv)
            changed = True
    for old in grads:
        # cuDNN would otherwise convert the gradient to NHWC and its results back on every call
        if channels_last(_val(old.args[1])) and not channels_last(_val(old.args[0])):
            _copy_before(graph, env[old], 0, torch.channels_last, env[old])
            changed = True
    if not changed and not grads:
        return gm
    try:
        _propagate(new)
        # A gradient made channels_last (by a kernel after a channels_last forward) beside an
        # input that is not, as the image at ResNet's stem: ATen would copy the gradient back
        # to NCHW and cuDNN convert both to NHWC (320 µs per step at 32 x 224 x 224 on an H100);
        # a copy of the input to channels_last is cheaper and keeps the layout (the weight then
        # goes as every other convolution's: ATen makes it channels_last inside, a small copy).
        if _match_gradient_layout(graph):
            _propagate(new)
            changed = True
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        return gm
    if not changed:
        return gm
    if not _restore_output_strides(graph, out, before, user_outputs):
        return gm
    graph.lint()
    new.recompile()
    return new


def take_input_strides(gm: torch.fx.GraphModule, example_inputs: list) -> bool:
    """Give gm's placeholders the strides of the inputs it will be called with where they differ
    from the traced ones, and follow them through the graph: a backward's saved activations come
    in the layout the compiled forward returns them in (AOTAutograd restrides the example inputs
    from what the forward reported), not the one it was traced with. False when nothing changed
    or the new strides cannot be followed (gm is then left as it was)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    old = {n: n.meta.get("val") for n in gm.graph.nodes}
    changed = False
    for node, example in zip(placeholders, example_inputs, strict=False):
        val = node.meta.get("val")
        if (
            isinstance(example, torch.Tensor)
            and isinstance(val, torch.Tensor)
            and example.shape == val.shape
            and example.stride() != val.stride()
        ):
            node.meta["val"] = example
            changed = True
    if not changed:
        return False
    try:
        _propagate(gm)
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        for node, val in old.items():
            node.meta["val"] = val
        return False
    return True


def eager_layouts(
    gm: torch.fx.GraphModule, values: dict[str, torch.Tensor] | None = None
) -> dict[str, tuple[str, bool, tuple[int, ...]]]:
    """conv node name -> (memory format, has a bias, the arguments (0: input, 1: weight) copied
    into a channels_last conv's layout first) as the user's code runs it on a GPU; `values`, when
    given, receives node name -> every tensor value as eager makes it (a fake tensor).

    cuDNN returns channels_last when the conv's input or weight is channels_last, NCHW
    otherwise, and pointwise ops carry their inputs' layout on; the traced strides cannot say
    which (a CPU trace shows the CPU kernels' choices, a meta trace the meta kernels'), so the
    graph's values are followed again under that rule, from the user's inputs and weights."""
    from torch._guards import detect_fake_mode

    mode = detect_fake_mode([_val(n) for n in gm.graph.nodes if n.op == "placeholder"])
    if mode is None:
        return {}
    vals: dict[torch.fx.Node, object] = {}
    out: dict[str, tuple[str, bool]] = {}
    with mode:
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                vals[node] = _val(node)
            elif node.op == "call_function":
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: vals.get(n))
                try:
                    val = (
                        args[0][args[1]] if node.target is operator.getitem else node.target(*args, **kwargs)
                    )
                except Exception:  # an op fake tensors cannot follow here: keep the traced value
                    val = _val(node)
                if node.target is aten.convolution.default and isinstance(val, torch.Tensor):
                    fmt = _cudnn_format(val, args[0], args[1])
                    val = val.contiguous(memory_format=fmt)
                    name = "contiguous" if fmt == torch.contiguous_format else "channels_last"
                    # operands PyTorch copies into a channels_last conv's layout first
                    copied = tuple(
                        i
                        for i in (0, 1)
                        if fmt != torch.contiguous_format
                        and isinstance(args[i], torch.Tensor)
                        and not args[i].is_contiguous(memory_format=fmt)
                    )
                    out[node.name] = (name, node.args[2] is not None, copied)
                vals[node] = val
                if values is not None and isinstance(val, torch.Tensor):
                    values[node.name] = val
    return out


def conv_eager_layout(conv: torch.fx.Node) -> tuple[str, bool, tuple[int, ...]]:
    """eager_layouts' entry for a convolution: what it recorded on the node (EAGER_LAYOUT),
    else cuDNN's choice for the traced input and weight."""
    if EAGER_LAYOUT in conv.meta:
        return conv.meta[EAGER_LAYOUT]
    out, args = _val(conv), (_val(conv.args[0]), _val(conv.args[1]))
    if not isinstance(out, torch.Tensor):
        return "contiguous", conv.args[2] is not None, ()
    fmt = _cudnn_format(out, *args)
    if fmt == torch.contiguous_format:
        return "contiguous", conv.args[2] is not None, ()
    copied = tuple(
        i
        for i in (0, 1)
        if isinstance(args[i], torch.Tensor) and not args[i].is_contiguous(memory_format=fmt)
    )
    return "channels_last", conv.args[2] is not None, copied


def _cudnn_format(out: torch.Tensor, x: object, weight: object) -> torch.memory_format:
    """The layout cuDNN gives a convolution's output: channels_last when its input or weight is
    (`cudnn_conv_suggest_memory_format`), else contiguous."""
    fmt = torch.channels_last if out.dim() == 4 else torch.channels_last_3d if out.dim() == 5 else None
    if fmt is not None and any(
        isinstance(t, torch.Tensor) and t.dim() == out.dim() and suggest_memory_format(t) == fmt
        for t in (x, weight)
    ):
        return fmt
    return torch.contiguous_format


def _like(node: torch.fx.Node, anchor: torch.fx.Node) -> None:
    """A new node carries the source location of the op it was made for, and the provenance
    of the eager op whose work it does (the conv for its copies and bias add, the producer
    for a copy of a value): the cost model counts it inside that op's eager kernel."""
    for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
        if key in anchor.meta:
            node.meta[key] = anchor.meta[key]
    eager = anchor
    while "original_aten" not in eager.meta and eager.op == "call_function" and eager.args:
        is_view = getattr(eager.target, "is_view", False) or eager.target is operator.getitem
        if not (is_view and isinstance(eager.args[0], torch.fx.Node)):
            break
        eager = eager.args[0]
    for key in ("from_node", "original_aten"):
        if key in eager.meta:
            node.meta[key] = eager.meta[key]


def _peel_bias(graph: torch.fx.Graph, conv: torch.fx.Node) -> bool:
    bias = conv.args[2]
    out_channels = _val(conv).shape[1] if isinstance(_val(conv), torch.Tensor) else 0
    if bias is None or out_channels == 0:
        return False
    spatial = len(_val(conv).shape) - 2
    conv.args = (*conv.args[:2], None, *conv.args[3:])
    tokens = _tokens_of(conv)
    if tokens is not None:
        # the bias joins the tokens, channels last: (C,) broadcasts without a view, and the
        # add fuses into the kernel that reads the tokens (a ViT's class-token cat)
        with graph.inserting_after(tokens):
            add = graph.call_function(aten.add.Tensor, (tokens, bias))
        tokens.replace_all_uses_with(add, delete_user_cb=lambda user: user is not add)
        _like(add, conv)
        return True
    with graph.inserting_after(conv):
        view = graph.call_function(aten.view.default, (bias, [out_channels] + [1] * spatial))
        with graph.inserting_after(view):
            add = graph.call_function(aten.add.Tensor, (conv, view))
    conv.replace_all_uses_with(add, delete_user_cb=lambda user: user is not add)
    _like(view, conv)
    _like(add, conv)
    return True


def _tokens_of(conv: torch.fx.Node) -> torch.fx.Node | None:
    """The patch-embedding view of a convolution, `out.flatten(2).transpose(1, 2)` (N, pixels, C),
    when it is the convolution's only reader: a bias added there has the channels last."""
    out = _val(conv)
    if len(conv.users) != 1 or not isinstance(out, torch.Tensor) or out.dim() < 3:
        return None
    (flat,) = conv.users
    n, c = out.shape[:2]
    pixels = math.prod(out.shape[2:])
    if (
        flat.target not in (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
        or list(flat.args[1]) not in ([n, c, pixels], [n, c, -1])
        or len(flat.users) != 1
    ):
        return None
    (turn,) = flat.users
    swaps = (turn.target is aten.permute.default and list(turn.args[1]) == [0, 2, 1]) or (
        turn.target is aten.transpose.int and sorted(d % 3 for d in turn.args[1:3]) == [1, 2]
    )
    return turn if swaps and isinstance(_val(turn), torch.Tensor) else None


def _match_gradient_layout(graph: torch.fx.Graph) -> bool:
    """Read the input and weight of each convolution_backward whose gradient is channels_last
    through channels_last copies where they are not; whether any was. ATen would make the same
    copies inside the op (cuDNN takes all three in one layout), as strided copies: a 3x3 weight
    of ResNet-50's last stage took 10 µs there (H100), and the input's a 200 µs copy of the
    gradient to NCHW plus two conversions (docs/NOTES.md)."""
    copied = False
    for node in list(graph.nodes):
        if node.target is not aten.convolution_backward.default:
            continue
        grad = node.args[0].meta.get("val")
        if not channels_last(grad):
            continue
        outs = node.meta.get("val")
        weight_grad = outs[1] if isinstance(outs, (tuple, list)) and len(outs) == 3 else None
        # The weight's gradient takes the weight's layout when the input's is NCHW (the stem):
        # copy the weight only where its gradient is channels_last already, or not computed.
        weight_too = weight_grad is None or (
            isinstance(weight_grad, torch.Tensor)
            and weight_grad.is_contiguous(memory_format=torch.channels_last)
        )
        for index in (1, 2) if weight_too else (1,):
            val = node.args[index].meta.get("val")
            if (
                isinstance(val, torch.Tensor)
                and val.dim() == 4
                and not val.is_contiguous(memory_format=torch.channels_last)
            ):
                _copy_before(graph, node, index, torch.channels_last, node)
                copied = True
    return copied


def _copy_before(
    graph: torch.fx.Graph, user: torch.fx.Node, index: int, fmt: torch.memory_format, part_of: torch.fx.Node
) -> None:
    """user's argument `index` read through a copy in memory format fmt (dropped later when the
    argument already has that layout); `part_of` is the op it is made for."""
    arg = user.args[index]
    with graph.inserting_before(user):
        copy = graph.call_function(aten.clone.default, (arg,), {"memory_format": fmt})
    user.update_arg(index, copy)
    copy.meta[_INSERTED] = True
    _like(copy, part_of)


def _propagate(gm: torch.fx.GraphModule) -> None:
    """Recompute every node's `val` (shapes, strides) from the placeholders', dropping layout
    copies that copy nothing and reading a contiguous copy where a view's strides fail."""
    from torch._guards import detect_fake_mode

    graph = gm.graph
    mode = detect_fake_mode([n.meta["val"] for n in graph.nodes if n.op == "placeholder"])
    if mode is None:
        raise RuntimeError("no fake tensors to follow")
    with mode:
        for node in list(graph.nodes):
            if node.op != "call_function":
                continue
            if _copies_nothing(node):
                node.replace_all_uses_with(node.args[0])
                graph.erase_node(node)
                continue
            try:
                node.meta["val"] = fake_value(node)
            except (RuntimeError, ValueError):  # fake tensors raise ValueError for a bad view
                if node.target not in _VIEWS:
                    raise
                _copy_before(graph, node, 0, torch.contiguous_format, node.args[0])
                copy = node.args[0]
                copy.meta["val"] = fake_value(copy)
                node.meta["val"] = fake_value(node)


def _copies_nothing(node: torch.fx.Node) -> bool:
    if not node.meta.get(_INSERTED):
        return False
    src = _val(node.args[0])
    return isinstance(src, torch.Tensor) and src.is_contiguous(memory_format=node.kwargs["memory_format"])


def graph_fake_mode(graph: torch.fx.Graph) -> object | None:
    """The fake mode the graph's placeholders' values were made in (None when there is none):
    where passes that add nodes compute those nodes' values."""
    from torch._guards import detect_fake_mode

    return detect_fake_mode([n.meta.get("val") for n in graph.nodes if n.op == "placeholder"])


def rewrite_each(
    gm: torch.fx.GraphModule, found: list, rewrite: Callable[[torch.fx.Graph, object], int]
) -> int:
    """`rewrite(graph, item)` for each of `found`, inside the fake mode of gm's placeholders (where
    the nodes a rewrite adds get their values), then gm recompiled if any changed; how many did.
    Nothing is rewritten where the graph has no fake mode."""
    mode = graph_fake_mode(gm.graph) if found else None
    if mode is None:
        return 0
    done = 0
    with mode:
        for item in found:
            done += rewrite(gm.graph, item)
    if done:
        gm.recompile()
    return done


class NewNodes:
    """Nodes a rewrite adds (at the graph's insertion point), each with the metadata of the node
    it replaces and its own fake value; `undo` erases them all where the rewrite gives up."""

    def __init__(self, graph: torch.fx.Graph, like: torch.fx.Node) -> None:
        self.graph, self.like = graph, like
        self.made: list[torch.fx.Node] = []

    def __call__(self, target: object, *args: object, **kwargs: object) -> torch.fx.Node:
        return self.add(target, args, kwargs)

    def add(
        self, target: object, args: tuple, kwargs: dict | None = None, val: object = None
    ) -> torch.fx.Node:
        """A node of `target`; its value computed from its inputs' unless `val` is given."""
        node = self.graph.call_function(target, args, kwargs or {})
        node.meta = dict(self.like.meta)
        self.made.append(node)
        node.meta["val"] = fake_value(node) if val is None else val
        return node

    def undo(self) -> None:
        for node in reversed(self.made):
            self.graph.erase_node(node)


def value_with(node: torch.fx.Node, values: dict) -> object:
    """node's value computed on its inputs' fake values, with `values` standing in for the values
    of the inputs it names (what a reader gives if a rewrite hands it another tensor)."""
    args, kwargs = torch.fx.node.map_arg(
        (node.args, node.kwargs), lambda a: values[a] if a in values else a.meta.get("val")
    )
    return node.target(*args, **kwargs)


def same_layout(got: object, want: object) -> bool:
    """Both are tensors of one shape, dtype and strides, or tuples of such (an op of several
    results, attention's output and log-sum-exp; None where both have none)."""
    if isinstance(got, (tuple, list)) and isinstance(want, (tuple, list)):
        return len(got) == len(want) and all(
            (g is None and w is None) or same_layout(g, w) for g, w in zip(got, want, strict=True)
        )
    return (
        isinstance(got, torch.Tensor)
        and isinstance(want, torch.Tensor)
        and (got.shape, got.dtype, got.stride()) == (want.shape, want.dtype, want.stride())
    )


def fake_value(node: torch.fx.Node) -> object:
    """node's value computed on its inputs' fake values (a convolution's laid out as cuDNN lays it out)."""
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta["val"])
    if node.target is operator.getitem:
        return args[0][args[1]]
    out = node.target(*args, **kwargs)
    if node.target is aten.convolution.default:
        return _as_on_gpu(out, args[0], args[1])
    if node.target is aten.convolution_backward.default:  # cuDNN lays its gradients out likewise
        return tuple(g if g is None or g.dim() != 4 else _as_on_gpu(g, args[1], args[2]) for g in out)
    return out


def channels_last(t: object) -> bool:
    """A 4-d tensor laid out channels_last (not also contiguous, as a 1x1 image is)."""
    return (
        isinstance(t, torch.Tensor)
        and t.dim() == 4
        and not t.is_contiguous()
        and t.is_contiguous(memory_format=torch.channels_last)
    )


def layout_name(t: object) -> str:
    """ "channels_last" or "contiguous": how the cost model's device sweeps name a tensor's layout."""
    return "channels_last" if channels_last(t) else "contiguous"


def eager_val(node: torch.fx.Node) -> object:
    """A node's value as eager code makes it: what gpu_conv_layout recorded (EAGER_VAL; the rewrite
    may have made the graph's value channels_last where eager's stays NCHW), else the traced one."""
    return node.meta.get(EAGER_VAL, _val(node))


def eager_layout_name(node: torch.fx.Node) -> str:
    """layout_name of a node's value as eager code makes it (eager_val)."""
    return layout_name(eager_val(node))


def _as_on_gpu(out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """A convolution's output with the strides cuDNN gives it (_cudnn_format) where that is
    channels_last. The CPU kernel agrees for a channels_last input; the meta kernel returns
    contiguous, so a meta trace would see copies a GPU (and a CPU trace) never makes."""
    fmt = _cudnn_format(out, x, weight)
    if fmt == torch.contiguous_format or out.is_contiguous(memory_format=fmt):
        return out
    return out.contiguous(memory_format=fmt)


def _same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same strides wherever they matter (a size-1 dim's stride never does)."""
    return a.shape == b.shape and all(
        n == 1 or x == y for n, x, y in zip(a.shape, a.stride(), b.stride(), strict=True)
    )


def _restore_output_strides(
    graph: torch.fx.Graph, out: torch.fx.Node, before: list, only: range | None = None
) -> bool:
    """Copy each output whose strides changed back to its old layout (`before`, by position; only
    the positions in `only` when given); False when that old layout is neither contiguous nor
    channels_last (no copy promises it)."""
    for i, (old, value) in enumerate(zip(before, list(out.args[0]), strict=True)):
        if only is not None and i not in only:
            continue
        now = _val(value)
        if not isinstance(old, torch.Tensor) or not isinstance(now, torch.Tensor):
            continue
        if _same_layout(old, now):
            continue
        fmt = next(
            (f for f in (torch.contiguous_format, torch.channels_last) if old.is_contiguous(memory_format=f)),
            None,
        )
        if fmt is None or (fmt is torch.channels_last and old.dim() != 4):
            return False
        with graph.inserting_before(out):
            copy = graph.call_function(aten.clone.default, (value,), {"memory_format": fmt})
        copy.meta["val"] = fake_value(copy)
        _like(copy, value)
        outputs = list(out.args[0])
        outputs[i] = copy
        out.args = (type(out.args[0])(outputs), *out.args[1:])
    return True
