"""The `fuselint` torch.compile backend: fusion groups lowered to generated Triton kernels.

    torch.compile(model, backend="fuselint")        # after `import fuselint.backend`
    torch.compile(model, backend=fuselint_backend)  # or pass the function itself
    torch.compile(model, backend="fuselint", options={"cudagraphs": True})  # replay CUDA graphs
    torch.compile(model, backend="fuselint", options={"keep_weights": False})  # see OPTIONS

Dynamo's graph goes through AOTAutograd with Inductor's decomposition table, so each
forward and backward graph arrives as ATen ops; the planner's groups become one kernel
each, and matmul, convolution, attention and whatever the codegen does not know run
through ATen. On a CPU device kernels run only under ``TRITON_INTERPRET=1`` (tests);
otherwise everything there runs as ATen.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from fuselint.backend.callgen import GraphRunner
from fuselint.backend.compiler import (
    CompileReport,
    _static,
    compile_graph,
    history,
    history_mark,
    reports_since,
)
from fuselint.backend.cudagraphs import GraphReplay, why_not_recordable
from fuselint.backend.kept_layouts import kept_values
from fuselint.backend.precompile import start_workers_for
from fuselint.backend.squeeze_excite import cudnn_rounds_to_tf32, follows_tf32
from fuselint.graph.capture import fw_metadata, static_input_indices

__all__ = [
    "OPTIONS",
    "CompileReport",
    "decompositions",
    "fuselint_backend",
    "history",
    "history_mark",
    "register",
    "reports_since",
]


# What `options=` may hold, with its default. `keep_weights`: an inference graph keeps the values it
# makes from its parameters between calls (joined GEMM weights, weights' channels_last copies) and
# remakes them when a weight's `_version` or storage changes, which every in-place change, `copy_`
# and `load_state_dict` make; a write through `weight.data` has a version counter of its own and
# goes unseen, so code that writes weights that way sets it False (every such value made per call).
OPTIONS = {"cudagraphs": False, "keep_weights": True}


def _compiler(name: str, options: dict, model_outputs: int | None = None) -> Callable:
    from functorch.compile import make_boxed_func

    cudagraphs, keep_weights = bool(options["cudagraphs"]), bool(options["keep_weights"])

    def compile_one(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        visible = _user_outputs(model_outputs) if name == "forward" else None
        static = static_input_indices() if name != "backward" else frozenset()
        inference = name == "inference"
        pristine = _copy(gm) if inference and follows_tf32(gm) else None

        def build(graph: torch.fx.GraphModule) -> Callable:
            compiled = compile_graph(
                graph,
                example_inputs,
                name=name,
                inference=inference,
                user_outputs=visible,
                static=static,
                keep_weights=keep_weights,
            )
            if name == "forward":
                _report_output_strides(compiled)
            runner = GraphRunner(compiled, name, static)
            history[-1].runner = runner
            if not cudagraphs:
                return runner
            why_not = why_not_recordable(compiled, example_inputs)
            replay = GraphReplay(runner, name, why_not, _static(example_inputs), kept_values(compiled))
            history[-1].replay = replay
            return replay

        first = build(gm)
        tf32 = history[-1].conv_tf32
        if pristine is None or tf32 is None:
            return make_boxed_func(first)
        return make_boxed_func(TF32Switch(tf32, first, lambda: build(_copy(pristine))))

    return compile_one


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A graph module of its own (compiling rewrites a graph in place) on the same attributes."""
    return torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))


class TF32Switch:
    """A graph whose squeeze-excite reductions round as cuDNN's TF32 setting said at compile time
    (:mod:`fuselint.backend.squeeze_excite`): each call reads the setting, as ATen's convolutions
    do, and one that differs runs the graph compiled again for it (once; then either runs)."""

    def __init__(self, tf32: bool, compiled: Callable, build: Callable[[], Callable]) -> None:
        self.by_setting: dict[bool, Callable] = {tf32: compiled}
        self._build = build

    def __call__(self, *args: object) -> object:
        setting = cudnn_rounds_to_tf32()
        run = self.by_setting.get(setting)
        if run is None:
            run = self.by_setting[setting] = self._build()
        return run(*args)


def _user_outputs(model_outputs: int | None) -> range | None:
    """Positions of a training forward's outputs that the user's code sees: AOTAutograd puts
    mutated inputs first, then the model's outputs, then the activations saved for the backward."""
    meta = fw_metadata()
    if model_outputs is None or meta is None:
        return None
    start = meta.num_mutated_inp_runtime_indices
    return range(start, start + model_outputs)


def _report_output_strides(gm: torch.fx.GraphModule) -> None:
    """Tell AOTAutograd the strides the compiled forward returns (as Inductor does), so that the
    backward is compiled for the layout its saved activations really have."""
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    if context is None or context.output_strides is None:
        return
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    values = out.args[0] if isinstance(out.args[0], (list, tuple)) else (out.args[0],)
    for value in values:
        val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        context.output_strides.append(tuple(val.stride()) if isinstance(val, torch.Tensor) else None)


def _options(options: object) -> dict:
    if options is None:
        return dict(OPTIONS)
    if not isinstance(options, dict) or set(options) - set(OPTIONS):
        raise ValueError(f"fuselint backend options are {sorted(OPTIONS)}; got {options!r}")
    return {**OPTIONS, **options}


def decompositions(table: dict) -> dict:
    """Inductor's table without its pooling decompositions: those become window prims that
    only Inductor generates code for (ATen runs them as max_pool plus index arithmetic).
    ``max_pool2d_with_indices`` stays whole: when only its values are used the codegen makes
    it a window kernel with its pointwise prologue (ReLU) inside, else ATen's kernel runs."""
    return {op: fn for op, fn in table.items() if "pool" not in str(op)}


def fuselint_backend(
    gm: torch.fx.GraphModule, example_inputs: list, options: dict | None = None, **kwargs: object
) -> Callable:
    """torch.compile backend: AOTAutograd to ATen, then fused Triton kernels per group.

    ``options={"cudagraphs": True}`` replays each compiled graph as a CUDA graph
    (:mod:`fuselint.backend.cudagraphs`); ``options={"keep_weights": False}`` makes every value
    derived from a weight on each call (:data:`OPTIONS`)."""
    chosen = _options(options)
    start_workers_for(example_inputs)  # they load while AOTAutograd traces and the graph is planned
    # Some of Inductor's decompositions (max_pool2d's) call into its lowering module.
    import torch._inductor.lowering  # noqa: F401
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.decomposition import select_decomp_table

    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    model_outputs = len(torch.utils._pytree.arg_tree_leaves(*out.args))
    backend = aot_autograd(
        fw_compiler=_compiler("forward", chosen, model_outputs),
        bw_compiler=_compiler("backward", chosen),
        inference_compiler=_compiler("inference", chosen),
        decompositions=decompositions(select_decomp_table()),
        partition_fn=min_cut_rematerialization_partition,
        keep_inference_input_mutations=True,
    )
    return backend(gm, example_inputs)


def register() -> None:
    """Make `backend="fuselint"` work without the package's entry point."""
    from torch._dynamo import list_backends, register_backend

    if "fuselint" not in list_backends(exclude_tags=()):
        register_backend(name="fuselint")(fuselint_backend)


register()
