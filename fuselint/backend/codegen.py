"""Write a KernelIR as the source of one readable Triton kernel.

The kernel reads top to bottom like Triton's tutorials: program offsets and masks, loads
converted to fp32, the math, reductions, stores converted back. Three shapes of kernel:

* pointwise: a 1-D block of XBLOCK elements of the space per program;
* persistent reduction: XBLOCK rows x RBLOCK reduced elements per program, the whole
  reduced extent in registers, so chained reductions (softmax, var_mean) reuse the loads;
* looped reduction: one loop over the reduced extent per reduction stage, each recomputing
  its pointwise prologue from memory (two-pass mean/var, three-pass softmax), then one
  last loop that recomputes and stores the full-size outputs.

Index expressions merge dims that are contiguous in a tensor, so a contiguous input is
read at `xoffs` itself (which Triton vectorizes), a broadcast bias at `xoffs % N`, a
transposed input through `//` and `%` with its strides.
"""

from __future__ import annotations

import torch

from fuselint.backend.heuristics import LaunchConfig
from fuselint.backend.lowering import KernelIR, Store, Value
from fuselint.backend.ops import TL_DTYPES

_NEUTRAL = {"sum": "0.0", "max": 'float("-inf")', "min": 'float("inf")'}
_COMBINE = {"sum": "{acc} + {x}", "max": "tl.maximum({acc}, {x})", "min": "tl.minimum({acc}, {x})"}
_HALF = (torch.float16, torch.bfloat16)


def index_expr(space: tuple[int, ...], dims: tuple[int, ...], strides: tuple[int, ...], lin: str) -> str:
    """Element offset of a tensor (strides along each dim of `space`) at linear index `lin`
    over `dims` (row-major). Dims that are contiguous in the tensor merge into one term."""
    ds = [d for d in dims if space[d] > 1]
    terms: list[str] = []
    inner = 1
    i = len(ds) - 1
    while i >= 0:
        st = strides[ds[i]]
        run, j = space[ds[i]], i
        while j > 0:
            prev = strides[ds[j - 1]]
            if (st == 0 and prev == 0) or (st != 0 and prev == strides[ds[j]] * space[ds[j]]):
                j -= 1
                run *= space[ds[j]]
            else:
                break
        if st != 0:
            idx = lin if inner == 1 else f"({lin} // {inner})"
            if j > 0:
                idx = f"({idx} % {run})"
            terms.append(idx if st == 1 else f"{idx} * {st}")
        inner *= run
        i = j - 1
    return " + ".join(reversed(terms))


class _Scope:
    def __init__(self, indent: int, suffix: str = "", parent: _Scope | None = None) -> None:
        self.lines: list[str] = []
        self.cache: dict[int, str] = {}
        self.indent = " " * indent
        self.suffix = suffix
        self.parent = parent

    def add(self, line: str) -> None:
        self.lines.append(self.indent + line)


class _KernelWriter:
    def __init__(self, ir: KernelIR, cfg: LaunchConfig) -> None:
        self.ir = ir
        self.cfg = cfg
        self.reduction = bool(ir.rdims)
        self.looped = self.reduction and not cfg.persistent
        self.rset = frozenset(ir.rdims)
        self.outer = _Scope(4)

    # -- index and mask pieces --------------------------------------------------------
    def _offsets(self, strides: tuple[int, ...]) -> tuple[str, str]:
        x = index_expr(self.ir.space, self.ir.xdims, strides, "xoffs")
        r = index_expr(self.ir.space, self.ir.rdims, strides, "roffs") if self.reduction else ""
        return x, r

    def _mask(self, has_x: bool, has_r: bool) -> str:
        if has_x and has_r:
            return "mask"
        return "xmask" if has_x else ("rmask" if has_r else "")

    # -- values ---------------------------------------------------------------------------
    def ref(self, v: Value, scope: _Scope) -> str:
        if v.kind == "const":
            return v.expr
        target = self.outer if (self.looped and not (v.dims & self.rset)) else scope
        if id(v) in target.cache:
            return target.cache[id(v)]
        if v.kind == "reduce":
            if self.looped:
                raise AssertionError(f"reduction {v.name} used before its pass")
            arg = self.ref(v.args[0], target)
            expr = f"tl.{v.reduce_op}(tl.where(mask, {arg}, {_NEUTRAL[v.reduce_op]}), axis=1)[:, None]"
        elif v.kind == "load":
            expr = self._load_expr(v)
        else:
            expr = v.expr.format(*[self.ref(a, target) for a in v.args])
        name = v.name + target.suffix
        target.add(f"{name} = {expr}")
        target.cache[id(v)] = name
        return name

    def _load_expr(self, v: Value) -> str:
        x, r = self._offsets(v.strides)
        offs = " + ".join(p for p in (x, r) if p)
        ptr = f"in{v.input_index}" + (f" + ({offs})" if offs else "")
        mask = self._mask(bool(x), bool(r)) if offs else ""
        other = ", other=0.0" if v.ctype == "f" else (", other=0" if v.ctype == "i" else "")
        expr = f"tl.load({ptr}, mask={mask}{other})" if mask else f"tl.load({ptr})"
        # fp32 math throughout: half types convert right after the load.
        return expr + ".to(tl.float32)" if v.dtype in _HALF else expr

    def store(self, s: Store, scope: _Scope) -> None:
        x, r = self._offsets(s.strides)
        full = bool(r) or (self.reduction and any(s.strides[d] != 0 for d in self.ir.rdims))
        if not x:
            x = "xoffs * 0"
        if self.reduction and full and not r:
            r = "roffs * 0"
        offs = x + (f" + {r}" if full and r else "")
        mask = "mask" if (self.reduction and full) else "xmask"
        tl_dtype = TL_DTYPES[s.dtype]
        if s.value.kind == "const":
            shape = "[XBLOCK]" if not self.reduction else ("[XBLOCK, RBLOCK]" if full else "[XBLOCK, 1]")
            val = f"tl.full({shape}, {s.value.expr}, {tl_dtype})"
        else:
            val = self.ref(s.value, scope)
            if s.dtype in _HALF or (s.dtype != torch.float32 and s.dtype != torch.bool):
                val = f"{val}.to({tl_dtype})"
        scope.add(f"tl.store(out{s.output_index} + ({offs}), {val}, mask={mask})")

    # -- kernel shapes ----------------------------------------------------------------------
    def _prologue(self) -> None:
        ir, o = self.ir, self.outer
        wide = self._needs_int64()
        o.add("pid = tl.program_id(0)" + (".to(tl.int64)" if wide else ""))
        if not self.reduction:
            o.add("xoffs = pid * XBLOCK + tl.arange(0, XBLOCK)")
            o.add(f"xmask = xoffs < {ir.xnumel}")
            return
        o.add("xoffs = pid * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        o.add(f"xmask = xoffs < {ir.xnumel}")
        if not self.looped:
            o.add("roffs = tl.arange(0, RBLOCK)[None, :]")
            o.add(f"rmask = roffs < {ir.rnumel}")
            o.add("mask = xmask & rmask")

    def _needs_int64(self) -> bool:
        metas = self.ir.input_meta + self.ir.output_meta
        span = max(sum((n - 1) * s for n, s in zip(m.shape, m.stride, strict=True)) for m in metas)
        return max(span, self.ir.xnumel * max(self.cfg.xblock, 1)) >= 2**31 - 1

    def _loop(self, suffix: str) -> _Scope:
        scope = _Scope(8, suffix, self.outer)
        scope.add("roffs = r0 + tl.arange(0, RBLOCK)[None, :]")
        scope.add(f"rmask = roffs < {self.ir.rnumel}")
        scope.add("mask = xmask & rmask")
        return scope

    def _close_loop(self, scope: _Scope, inits: list[str], comment: str) -> None:
        o = self.outer
        o.add(f"# {comment}")
        for line in inits:
            o.add(line)
        o.add(f"for r0 in range(0, {self.ir.rnumel}, RBLOCK):")
        o.lines.extend(scope.lines)

    def body(self) -> list[str]:
        ir = self.ir
        self._prologue()
        if not self.looped:
            for v in ir.values:
                self.ref(v, self.outer)
            for s in ir.stores:
                self.store(s, self.outer)
            return self.outer.lines
        passes = ir.stages + 1
        for stage in range(1, ir.stages + 1):
            reds = [v for v in ir.values if v.kind == "reduce" and v.stage == stage]
            loop = self._loop(f"_{stage}")
            inits, finals = [], []
            for v in reds:
                acc = f"acc_{v.name}"
                arg = self.ref(v.args[0], loop)
                inits.append(f"{acc} = tl.full([XBLOCK, RBLOCK], {_NEUTRAL[v.reduce_op]}, tl.float32)")
                masked = f"tl.where(mask, {arg}, {_NEUTRAL[v.reduce_op]})"
                loop.add(f"{acc} = " + _COMBINE[v.reduce_op].format(acc=acc, x=masked))
                finals.append((v, f"tl.{v.reduce_op}({acc}, axis=1)[:, None]"))
            names = ", ".join(v.name for v in reds)
            self._close_loop(loop, inits, f"pass {stage} of {passes}: {names}")
            for v, expr in finals:
                self.outer.add(f"{v.name} = {expr}")
                self.outer.cache[id(v)] = v.name
        full = [s for s in ir.stores if any(s.strides[d] != 0 for d in ir.rdims)]
        rows = [s for s in ir.stores if s not in full]
        if full:
            loop = self._loop("_out")
            for s in full:
                self.store(s, loop)
            self._close_loop(loop, [], f"pass {passes} of {passes}: recompute and store")
        for s in rows:
            self.store(s, self.outer)
        return self.outer.lines


def kernel_name(ir: KernelIR) -> str:
    ops = [op.lstrip("_") for op in ir.op_names]
    seen: list[str] = []
    for op in ops:
        if op not in seen:
            seen.append(op)
    return "fuselint_" + "_".join(seen[:5] or ["copy"])


def generate(ir: KernelIR, cfg: LaunchConfig) -> tuple[str, str]:
    """(module source, kernel function name)."""
    name = kernel_name(ir)
    writer = _KernelWriter(ir, cfg)
    body = writer.body()
    params = [f"in{i}" for i in range(len(ir.inputs))] + [f"out{i}" for i in range(len(ir.outputs))]
    params.append("XBLOCK: tl.constexpr")
    if ir.rdims:
        params.append("RBLOCK: tl.constexpr")
    rows = f"rows {ir.xnumel} (dims {list(ir.xdims)})"
    reduced = f", reduced {ir.rnumel} (dims {list(ir.rdims)})" if ir.rdims else ""
    args = [f"in{i} = {n}" for i, n in enumerate(ir.inputs)] + [
        f"out{i} = {n}" for i, n in enumerate(ir.outputs)
    ]
    header = [
        '"""Generated by fuselint: one fused kernel.',
        "",
        f"Space {list(ir.space)}: {rows}{reduced}.",
        f"Launch: {cfg.describe()}.",
        "Arguments: " + ", ".join(args) + ".",
        "Fused ATen nodes:",
        *[f"    {line}" for line in ir.fused],
        '"""',
        "",
        "import triton",
        "import triton.language as tl",
        "",
        "",
        "@triton.jit",
        f"def {name}({', '.join(params)}):",
    ]
    return "\n".join(header + body) + "\n", name
