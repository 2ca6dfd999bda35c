"""Write a KernelIR as the source of one readable Triton kernel.

The kernel reads top to bottom like Triton's tutorials: program offsets and masks, loads
converted to fp32, the math, reductions, stores converted back. Three shapes of kernel:

* pointwise: a 1-D block of XBLOCK elements of the space per program;
* persistent reduction: XBLOCK rows x RBLOCK reduced elements per program, the whole
  reduced extent in registers, so chained reductions (softmax, var_mean) reuse the loads;
* looped reduction: one loop over the reduced extent per reduction stage, each recomputing
  its pointwise prologue from memory (two-pass mean/var, three-pass softmax), then one
  last loop that recomputes and stores the full-size outputs that need a reduction's result
  (those that do not are stored by the first loop);
* transposing pointwise: the 2-D tile of a reduction without one, when two big tensors are
  laid out differently (KernelIR.tile_dim);
* split reduction (LaunchConfig.combine): two or three kernels. The first is the looped
  reduction restricted to one chunk of the reduced extent (program_id(1)); it stores the
  full-size values that need no reduction's result and writes each reduction's partial result
  to an fp32 workspace ``ws[reduction, chunk, row]``. The second (``_combine``) holds all
  chunks of XBLOCK rows, combines them (sum, max, min; a variance's sum of squares by Chan's
  formula from the chunks' sums and sizes) and computes and stores the per-row values. Where
  full-size values need a reduction's result (normalisation), it also writes the totals to the
  workspace, and a third kernel (``_store``) recomputes and stores those values chunk by chunk.

Index expressions merge dims that are contiguous in a tensor, so a contiguous input is
read at `xoffs` itself (which Triton vectorizes), a broadcast bias at `xoffs % N`, a
transposed input through `//` and `%` with its strides.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

import torch

from fuselint.backend.heuristics import LaunchConfig
from fuselint.backend.lowering import KernelIR, Store, Value
from fuselint.backend.ops import HALF, TL_DTYPES

_NEUTRAL = {"sum": "0.0", "max": 'float("-inf")', "min": 'float("inf")'}
# max and min keep a NaN, as torch's reductions do (tl.max, tl.maximum and tl.minimum drop it:
# PropagateNan.NONE); rows reduce through the helpers every kernel module defines (_HELPERS)
_NAN = "propagate_nan=tl.PropagateNan.ALL"
_COMBINE = {
    "sum": "{acc} + {x}",
    "max": f"tl.maximum({{acc}}, {{x}}, {_NAN})",
    "min": f"tl.minimum({{acc}}, {{x}}, {_NAN})",
}
_HELPERS = [
    "@triton.jit",
    "def _max_nan(a, b):",
    "    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)",
    "",
    "",
    "@triton.jit",
    "def _min_nan(a, b):",
    "    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)",
]


def _reduce_rows(op: str, tile: str) -> str:
    """`tile` (XBLOCK x RBLOCK) reduced along its rows by `op`, kept 2-d."""
    if op == "sum":
        return f"tl.sum({tile}, axis=1)[:, None]"
    return f"tl.reduce({tile}, 1, _{op}_nan)[:, None]"


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


@dataclass(frozen=True)
class _Tap:
    suffix: str
    lead: list[str]  # index expressions of the leading (batch, channel) dims
    h: str  # input row of this tap
    w: str  # input column of this tap
    mask: str


class _KernelWriter:
    def __init__(self, ir: KernelIR, cfg: LaunchConfig) -> None:
        self.ir = ir
        self.cfg = cfg
        self.reduction = bool(ir.rdims)
        # the first kernel of a split reduction: its loops cover one chunk of the reduced extent
        self.chunked = cfg.combine is not None
        self.looped = self.reduction and (not cfg.persistent or self.chunked)
        # Reductions and transposing pointwise kernels are tiled 2-D: rows x ydims.
        self.two_d = bool(ir.ydims)
        self.rset = frozenset(ir.ydims)
        self.outer = _Scope(4)
        self.shape = "[XBLOCK, RBLOCK]" if self.two_d else "[XBLOCK]"

    # -- index and mask pieces --------------------------------------------------------
    def _offsets(self, strides: tuple[int, ...]) -> tuple[str, str]:
        x = index_expr(self.ir.space, self.ir.xdims, strides, "xoffs")
        r = index_expr(self.ir.space, self.ir.ydims, strides, "roffs") if self.two_d else ""
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
            expr = _reduce_rows(v.reduce_op, f"tl.where(mask, {arg}, {_NEUTRAL[v.reduce_op]})")
        elif v.kind == "load":
            expr = self._load_expr(v)
        elif v.kind == "gather":
            expr = self._gather_expr(v, target)
        elif v.kind == "index":
            expr = self._dim_index(v.dim)
        elif v.kind == "window":
            expr = self._window(v, target)
        else:
            expr = v.expr.format(*[self.ref(a, target) for a in v.args])
        name = v.name + target.suffix
        target.add(f"{name} = {expr}")
        target.cache[id(v)] = name
        return name

    def _dim_index(self, d: int) -> str:
        """The index along dim d of the space, from the program or reduction offsets."""
        onehot = tuple(1 if i == d else 0 for i in range(len(self.ir.space)))
        if d in self.rset:
            return index_expr(self.ir.space, self.ir.ydims, onehot, "roffs") or "0"
        return index_expr(self.ir.space, self.ir.xdims, onehot, "xoffs") or "0"

    def _window(self, v: Value, scope: _Scope) -> str:
        """Unrolled taps of a max-pool window; returns the expression of the window's max."""
        w = v.window
        lead = len(w.in_shape) - 2
        h_dim, w_dim = lead, lead + 1
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = w.kernel, w.stride, w.padding, w.dilation
        H, W = w.in_shape[-2:]
        out_h, out_w = self.ir.space[h_dim], self.ir.space[w_dim]
        base = v.name
        scope.add(
            f"# max over {kh}x{kw} windows, stride ({sh}, {sw}), padding ({ph}, {pw}), dilation ({dh}, {dw})"
        )
        lead_idx = [self._dim_index(d) if self.ir.space[d] > 1 else "0" for d in range(lead)]
        oh = self._dim_index(h_dim) if out_h > 1 else "0"
        ow = self._dim_index(w_dim) if out_w > 1 else "0"
        scope.add(f"{base}_h0 = {oh} * {sh} - {ph}" if ph else f"{base}_h0 = {oh} * {sh}")
        scope.add(f"{base}_w0 = {ow} * {sw} - {pw}" if pw else f"{base}_w0 = {ow} * {sw}")
        acc = f"{base}_max"
        scope.add(f'{acc} = tl.full({self.shape}, float("-inf"), tl.float32)')
        # Bounds checks only where a tap can fall outside the input.
        need_h = ph > 0 or (out_h - 1) * sh + (kh - 1) * dh >= H
        need_w = pw > 0 or (out_w - 1) * sw + (kw - 1) * dw >= W
        for i in range(kh):
            for j in range(kw):
                tap = f"_t{i}_{j}"
                hi = f"({base}_h0 + {i * dh})" if i * dh else f"{base}_h0"
                wi = f"({base}_w0 + {j * dw})" if j * dw else f"{base}_w0"
                conds = []
                if need_h:
                    conds.append(f"({hi} >= 0) & ({hi} < {H})")
                if need_w:
                    conds.append(f"({wi} >= 0) & ({wi} < {W})")
                inside = f"{base}_in{tap}"
                if conds:
                    scope.add(f"{inside} = " + " & ".join(conds))
                mask = ("mask" if self.two_d else "xmask") + (f" & {inside}" if conds else "")
                x = self._tap(w.source, {}, _Tap(tap, lead_idx, hi, wi, mask), scope)
                if u_is_int(w.source):
                    x = f"{x}.to(tl.float32)"
                if conds:
                    x = f'tl.where({inside}, {x}, float("-inf"))'
                scope.add(f"{acc} = tl.maximum({acc}, {x}, propagate_nan=tl.PropagateNan.ALL)")
        return acc

    def _tap(self, u: Value, names: dict[int, str], tap: _Tap, scope: _Scope) -> str:
        """The window source's program at one tap: loads at the tap's input position."""
        if u.kind == "const":
            return u.expr
        if id(u) in names:
            return names[id(u)]
        if u.kind == "load":
            *lead, st_h, st_w = u.strides
            terms = [f"{idx} * {st}" for idx, st in zip(tap.lead, lead, strict=True) if st]
            terms += [f"{tap.h} * {st_h}" if st_h else "", f"{tap.w} * {st_w}" if st_w else ""]
            offs = " + ".join(t for t in terms if t) or "0"
            other = ", other=0.0" if u.ctype == "f" else ", other=0"
            expr = f"tl.load(in{u.input_index} + ({offs}), mask={tap.mask}{other})"
            if u.dtype in HALF:
                expr += ".to(tl.float32)"
        else:
            expr = u.expr.format(*[self._tap(a, names, tap, scope) for a in u.args])
        name = u.name + tap.suffix
        scope.add(f"{name} = {expr}")
        names[id(u)] = name
        return name

    def _gather_expr(self, v: Value, scope: _Scope) -> str:
        """A row of a table picked by an index value (embedding): rows outside the table
        read 0 rather than memory that is not the table's."""
        row_stride, rows = v.rows
        idx = self.ref(v.args[0], scope)
        x, r = self._offsets(v.strides)
        inner = " + ".join(p for p in (x, r) if p)
        has_x = bool(x) or bool(v.args[0].dims - self.rset)
        has_r = bool(r) or bool(v.args[0].dims & self.rset)
        inside = f"({idx} >= 0) & ({idx} < {rows})"
        mask = self._mask(has_x, has_r)
        mask = f"{mask} & {inside}" if mask else inside
        offs = f"{idx}.to(tl.int64) * {row_stride}" + (f" + ({inner})" if inner else "")
        other = ", other=0.0" if v.ctype == "f" else ", other=0"
        expr = f"tl.load(in{v.input_index} + ({offs}), mask={mask}{other})"
        return expr + ".to(tl.float32)" if v.dtype in HALF else expr

    def _load_expr(self, v: Value) -> str:
        strides = list(v.strides)
        shifted, bounds = {"x": [], "r": []}, []
        for d, start, end in v.shifts:
            # A placed input (cat, pad) is read at index - start, masked outside [start, end).
            idx = self._dim_index(d)
            part = "r" if d in self.rset else "x"
            if strides[d]:
                term = f"({idx} - {start})" if start else idx
                shifted[part].append(term if strides[d] == 1 else f"{term} * {strides[d]}")
            strides[d] = 0
            bounds.append(f"({idx} >= {start})" if start else "")
            bounds.append(f"({idx} < {end})")
        x, r = self._offsets(tuple(strides))
        x = " + ".join(p for p in [x, *shifted["x"]] if p)
        r = " + ".join(p for p in [r, *shifted["r"]] if p)
        has_x = bool(x) or any(d not in self.rset for d, _, _ in v.shifts)
        has_r = bool(r) or any(d in self.rset for d, _, _ in v.shifts)
        offs = " + ".join(p for p in (x, r) if p)
        ptr = f"in{v.input_index}" + (f" + ({offs})" if offs else "")
        mask = self._mask(has_x, has_r) if (offs or v.shifts) else ""
        if bounds:
            mask = (
                " & ".join([mask] + [b for b in bounds if b]) if mask else " & ".join(b for b in bounds if b)
            )
        other = ", other=0.0" if v.ctype == "f" else (", other=0" if v.ctype == "i" else "")
        expr = f"tl.load({ptr}, mask={mask}{other})" if mask else f"tl.load({ptr})"
        # fp32 math throughout: half types convert right after the load.
        return expr + ".to(tl.float32)" if v.dtype in HALF else expr

    def store(self, s: Store, scope: _Scope) -> None:
        x, r = self._offsets(s.strides)
        full = bool(r) or (self.two_d and any(s.strides[d] != 0 for d in self.ir.ydims))
        if not x:
            x = "xoffs * 0"
        if self.two_d and full and not r:
            r = "roffs * 0"
        offs = x + (f" + {r}" if full and r else "")
        mask = "mask" if (self.two_d and full) else "xmask"
        tl_dtype = TL_DTYPES[s.dtype]
        if s.value.kind == "const":
            shape = "[XBLOCK]" if not self.two_d else ("[XBLOCK, RBLOCK]" if full else "[XBLOCK, 1]")
            val = f"tl.full({shape}, {s.value.expr}, {tl_dtype})"
        else:
            val = self.ref(s.value, scope)
            if s.dtype in HALF or (s.dtype != torch.float32 and s.dtype != torch.bool):
                val = f"{val}.to({tl_dtype})"
        scope.add(f"tl.store({s.pointer} + ({offs}), {val}, mask={mask})")

    # -- kernel shapes ----------------------------------------------------------------------
    def _prologue(self) -> None:
        ir, o = self.ir, self.outer
        wide = self._needs_int64()
        o.add("pid = tl.program_id(0)" + (".to(tl.int64)" if wide else ""))
        if not self.two_d:
            o.add("xoffs = pid * XBLOCK + tl.arange(0, XBLOCK)")
            o.add(f"xmask = xoffs < {ir.xnumel}")
            return
        o.add("xoffs = pid * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        o.add(f"xmask = xoffs < {ir.xnumel}")
        if not self.looped:
            o.add("roffs = tl.arange(0, RBLOCK)[None, :]")
            o.add(f"rmask = roffs < {ir.ynumel}")
            o.add("mask = xmask & rmask")

    def _needs_int64(self) -> bool:
        metas = self.ir.input_meta + self.ir.output_meta
        span = max(sum((n - 1) * s for n, s in zip(m.shape, m.stride, strict=True)) for m in metas)
        # Program offsets reach xnumel + XBLOCK; tensor offsets reach each tensor's span.
        return max(span, self.ir.xnumel + self.cfg.xblock) >= 2**31 - 1

    def _loop(self, suffix: str) -> _Scope:
        scope = _Scope(8, suffix, self.outer)
        start = "rstart + r0" if self.chunked else "r0"
        scope.add(f"roffs = {start} + tl.arange(0, RBLOCK)[None, :]")
        scope.add(f"rmask = roffs < {self.ir.rnumel}")
        scope.add("mask = xmask & rmask")
        return scope

    def _close_loop(self, scope: _Scope, inits: list[str], comment: str) -> None:
        o = self.outer
        o.add(f"# {comment}")
        for line in inits:
            o.add(line)
        o.add(f"for r0 in range(0, {self.cfg.chunk if self.chunked else self.ir.rnumel}, RBLOCK):")
        o.lines.extend(scope.lines)

    def body(self) -> list[str]:
        ir = self.ir
        self._prologue()
        if self.chunked:
            self.outer.add("chunk = tl.program_id(1)")
            self.outer.add(f"rstart = chunk * {self.cfg.chunk}")
        if not self.looped:
            for v in ir.values:
                self.ref(v, self.outer)
            for s in ir.stores:
                self.store(s, self.outer)
            return self.outer.lines
        full = [s for s in ir.stores if any(s.strides[d] != 0 for d in ir.rdims)]
        rows = [s for s in ir.stores if s not in full]
        # Full-size values that need no reduction's result are stored by the first pass, which
        # loads their inputs anyway; only the rest need a last pass that recomputes them.
        early = [s for s in full if s.value.stage == 0]
        late = [s for s in full if s not in early]
        welford = _welford_pairs(ir)
        stages = 1 if welford else ir.stages
        passes = stages + (1 if late and not self.chunked else 0)  # a split stores them apart
        for stage in range(1, stages + 1):
            reds = [v for v in ir.values if v.kind == "reduce" and v.stage == stage]
            loop = self._loop(f"_{stage}")
            inits, finals = [], []
            if stage == 1:
                for s in early:
                    self.store(s, loop)
            for v in reds:
                if id(v) in welford:
                    self._welford(v, welford[id(v)], loop, inits, finals)
                    continue
                acc = f"acc_{v.name}"
                arg = self.ref(v.args[0], loop)
                inits.append(f"{acc} = tl.full([XBLOCK, RBLOCK], {_NEUTRAL[v.reduce_op]}, tl.float32)")
                masked = f"tl.where(mask, {arg}, {_NEUTRAL[v.reduce_op]})"
                loop.add(f"{acc} = " + _COMBINE[v.reduce_op].format(acc=acc, x=masked))
                finals.append((v, _reduce_rows(v.reduce_op, acc)))
            names = ", ".join(v.name for v in reds + [welford[id(s)] for s in reds if id(s) in welford])
            self._close_loop(loop, inits, f"pass {stage} of {passes}: {names}")
            if welford:
                self._lane_weights()
            for v, expr in finals:
                if v is None:  # a step of a one-pass variance's combination
                    self.outer.add(expr)
                    continue
                self.outer.add(f"{v.name} = {expr}")
                self.outer.cache[id(v)] = v.name
            if self.chunked and stage == 1:
                self._chunk_means()
        if self.chunked:
            self._write_partials()
            return self.outer.lines
        if late:
            loop = self._loop("_out")
            for s in late:
                self.store(s, loop)
            self._close_loop(loop, [], f"pass {passes} of {passes}: recompute and store")
        for s in rows:
            self.store(s, self.outer)
        return self.outer.lines

    # -- one-pass variance ----------------------------------------------------------------
    def _welford(self, total: Value, m2: Value, loop: _Scope, inits: list[str], finals: list) -> None:
        """A looped variance in one pass over memory: each lane of the [XBLOCK, RBLOCK] tile keeps
        Welford's running mean and sum of squared deviations of the elements it sees (one per
        iteration, so the lane's count is the iteration's, a scalar), shifted by the first element
        it saw; after the loop the lanes combine by Chan's formula, relative to lane 0's shift (a
        difference of two nearby floats is exact). Two passes (the mean, then the squares) read the
        input twice."""
        shift, mean, acc = f"acc_{total.name}_shift", f"acc_{total.name}_mean", f"acc_{m2.name}"
        for name in (shift, mean, acc):
            inits.append(f"{name} = tl.zeros([XBLOCK, RBLOCK], tl.float32)")
        if not any(line.lstrip().startswith("winv =") for line in loop.lines):
            loop.add("winv = 1.0 / (r0 // RBLOCK + 1)")
        x = self.ref(total.args[0], loop)
        y, d, nxt = f"{total.name}_y", f"{total.name}_d", f"{total.name}_next"
        loop.add(f"{shift} = tl.where(r0 == 0, {x}, {shift})")
        loop.add(f"{y} = {x} - {shift}")
        loop.add(f"{d} = {y} - {mean}")
        loop.add(f"{nxt} = {mean} + {d} * winv")
        loop.add(f"{acc} = tl.where(mask, {acc} + {d} * ({y} - {nxt}), {acc})")
        loop.add(f"{mean} = tl.where(mask, {nxt}, {mean})")
        base, rel, lanes = f"{total.name}_base", f"{total.name}_rel", f"{total.name}_lanes"
        zero = "tl.arange(0, RBLOCK)[None, :] == 0"
        finals.append((None, f"{base} = tl.sum(tl.where({zero}, {shift}, 0.0), axis=1)[:, None]"))
        # a lane that saw no element (a last chunk shorter than RBLOCK) may hold 1/0's inf
        finals.append((None, f"{lanes} = tl.where(wlane > 0, ({shift} - {base}) + {mean}, 0.0)"))
        finals.append((None, f"{rel} = tl.sum({lanes} * wlane, axis=1)[:, None]"))
        finals.append((total, f"{rel} + {base} * nlane"))
        gap = f"({lanes} - {rel} / nlane)"
        finals.append((m2, f"tl.sum({acc} + wlane * {gap} * {gap}, axis=1)[:, None]"))

    def _lane_weights(self) -> None:
        """`wlane`: how many elements each lane of the loop saw (the lanes past the reduced
        extent's end see one fewer); `nlane`: their total."""
        extent = (
            f"tl.minimum({self.cfg.chunk}, {self.ir.rnumel} - rstart)"
            if self.chunked
            else str(self.ir.rnumel)
        )
        lanes = "tl.arange(0, RBLOCK)[None, :]"
        self.outer.add(f"wlane = tl.maximum(({extent} - {lanes} + RBLOCK - 1) // RBLOCK, 0).to(tl.float32)")
        self.outer.add("nlane = tl.sum(wlane, axis=1)[:, None]")

    # -- split reductions ----------------------------------------------------------------
    def _chunk_means(self) -> None:
        """In a chunk, a variance's squares deviate from the chunk's own mean (Chan's formula
        combines them), not the whole row's, which needs every chunk."""
        o = self.outer
        for v in self.ir.reductions:
            if v.mean is not None:
                self._chunk_sizes("rstart")
                name = f"{v.mean.name}_chunk"
                o.add(f"{name} = {self.ref(v.mean.args[0], o)} / n_chunk")
                o.cache[id(v.mean)] = name

    def _chunk_sizes(self, start: str) -> None:
        """`n_chunk`: how many reduced elements the chunk(s) starting at `start` hold (the last
        chunk may be short)."""
        if not any(line.lstrip().startswith("n_chunk =") for line in self.outer.lines):
            # at least 1: lanes past the last chunk are masked, but would divide by their size
            size = f"tl.minimum({self.cfg.chunk}, {self.ir.rnumel} - {start})"
            self.outer.add(f"n_chunk = tl.maximum({size}, 1).to(tl.float32)")

    def _ws_offsets(self, k: int, chunk: str) -> str:
        return f"ws + (({k} * {self.cfg.split} + {chunk}) * {self.ir.xnumel} + xoffs)"

    def _totals(self, k: int) -> str:
        n = len(self.ir.reductions)
        return f"ws + ({n * self.cfg.split * self.ir.xnumel + k * self.ir.xnumel} + xoffs)"

    def _write_partials(self) -> None:
        self.outer.add("# each reduction's result over this chunk, for the combine kernel")
        for k, v in enumerate(self.ir.reductions):
            self.outer.add(f"tl.store({self._ws_offsets(k, 'chunk')}, {v.name}, mask=xmask)")

    def combine_body(self) -> list[str]:
        """The second kernel of a split reduction: combine the chunks, then the per-row values."""
        ir, o, cfg = self.ir, self.outer, self.cfg
        self._prologue_combine()
        reds = ir.reductions
        parts = {}
        for k, v in enumerate(reds):
            parts[id(v)] = f"part_{v.name}"
            o.add(
                f"{parts[id(v)]} = tl.load({self._ws_offsets(k, 'coffs')}, mask=mask, other={_NEUTRAL[v.reduce_op]})"
            )
        for v in reds:
            if v.mean is None:
                expr = _reduce_rows(v.reduce_op, parts[id(v)])
            else:
                self._chunk_sizes(f"coffs * {cfg.chunk}")
                mean = self.ref(v.mean, o)
                gap = f"{v.name}_gap"
                o.add(f"{gap} = {parts[id(v.mean.args[0])]} / n_chunk - {mean}")
                chan = f"{parts[id(v)]} + n_chunk * {gap} * {gap}"
                expr = f"tl.sum(tl.where(mask, {chan}, 0.0), axis=1)[:, None]"
            o.add(f"{v.name} = {expr}")
            o.cache[id(v)] = v.name
        for s in ir.stores:
            if not any(s.strides[d] for d in ir.rdims):
                self.store(s, o)
        if ir.late_stores:
            o.add("# the totals, for the kernel that stores the full-size values that need them")
            for k, v in enumerate(reds):
                o.add(f"tl.store({self._totals(k)}, {v.name}, mask=xmask)")
        return o.lines

    def store_body(self) -> list[str]:
        """The third kernel of a split reduction: per chunk, the full-size values that need the
        reductions' totals, recomputed from memory and stored."""
        o = self.outer
        self._prologue()
        o.add("chunk = tl.program_id(1)")
        o.add(f"rstart = chunk * {self.cfg.chunk}")
        for k, v in enumerate(self.ir.reductions):
            o.add(
                f"{v.name} = tl.load({self._totals(k)}, mask=xmask, other=1.0)"
            )  # 1: no 0 / 0 past the rows
            o.cache[id(v)] = v.name
        loop = self._loop("_out")
        for s in self.ir.late_stores:
            self.store(s, loop)
        self._close_loop(loop, [], "recompute and store this chunk")
        return o.lines

    def _prologue_combine(self) -> None:
        o = self.outer
        o.add("pid = tl.program_id(0)")
        o.add("xoffs = pid * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        o.add(f"xmask = xoffs < {self.ir.xnumel}")
        o.add("coffs = tl.arange(0, RBLOCK)[None, :]")
        o.add(f"mask = xmask & (coffs < {self.cfg.split})")


def u_is_int(v: Value) -> bool:
    return v.ctype != "f"


def kernel_name(ir: KernelIR) -> str:
    ops = [op.lstrip("_") for op in ir.op_names]
    seen: list[str] = []
    for op in ops:
        if op not in seen:
            seen.append(op)
    return "fuselint_" + "_".join(seen[:5] or ["copy"])


def generate(ir: KernelIR, cfg: LaunchConfig) -> tuple[str, str]:
    """(module source, kernel function name). A split reduction's module also holds the
    combine kernel, named ``<name>_combine``; both take the workspace ``ws`` last."""
    name = kernel_name(ir)
    writer = _KernelWriter(ir, cfg)
    body = writer.body()
    params = [f"in{i}" for i in range(len(ir.inputs))] + [f"out{i}" for i in range(len(ir.outputs))]
    if cfg.combine is not None:
        params.append("ws")
    params.append("XBLOCK: tl.constexpr")
    if ir.ydims:
        params.append("RBLOCK: tl.constexpr")
    rows = f"rows {ir.xnumel} (dims {list(ir.xdims)})"
    reduced = f", reduced {ir.rnumel} (dims {list(ir.rdims)})" if ir.rdims else ""
    if ir.tile_dim is not None:
        reduced = f", tiled across dim {ir.tile_dim} ({ir.ynumel}) so that both layouts coalesce"
    args = [f"in{i}" for i in range(len(ir.inputs))] + [f"out{i} = {n}" for i, n in enumerate(ir.outputs)]
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
        *_HELPERS,
        "",
        "",
        "@triton.jit",
        f"def {name}({', '.join(params)}):",
    ]
    if cfg.combine is not None:
        combine = _KernelWriter(ir, cfg).combine_body()
        body += ["", "", "@triton.jit", f"def {name}_combine({', '.join(params)}):", *combine]
        if ir.late_stores:
            stores = _KernelWriter(ir, cfg).store_body()
            body += ["", "", "@triton.jit", f"def {name}_store({', '.join(params)}):", *stores]
    return canonical_names("\n".join(header + body) + "\n", ir), name


def canonical_names(source: str, ir: KernelIR) -> str:
    """`source` with the graph's node names replaced by names of their own: the locals each
    function assigns become `t0, t1, ...` in the order it first assigns them, and the docstring's
    node names `in<i>` (the kernel's inputs) and `v0, v1, ...`. A repeated layer's kernel then
    has the same text as its first layer's, so the cache holds one module and Triton compiles it
    once: GPT-2's training step (bench/models.py's small config, CPU) has 31 forward kernels in 11
    distinct texts and 71 backward ones in 20, where every text was distinct before."""
    head, sep, code = source.partition('"""\n\nimport triton')
    if not sep:
        return source
    names: dict[str, str] = {name: f"in{i}" for i, name in enumerate(ir.inputs)}
    for line in ir.fused:
        defined = line.split(" = ", 1)[0].strip()
        if defined.isidentifier() and defined not in names:
            names[defined] = f"v{len(names) - len(ir.inputs)}"
    head = _rename(head, names)
    return head + sep + _rename_locals(code)


_IDENTIFIER = re.compile(r"(?<![\w.])([A-Za-z_]\w*)(?!\w)")


def _rename(text: str, names: dict[str, str]) -> str:
    return _IDENTIFIER.sub(lambda m: names.get(m.group(1), m.group(1)), text)


def _rename_locals(code: str) -> str:
    """Each `@triton.jit` function's assigned locals as t0, t1, ... (attribute names, keyword
    arguments, parameters, globals and the structural names every kernel shares keep theirs)."""
    tree = ast.parse(code)
    tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    edits: list[tuple[int, int, int, str]] = []  # (row, col, end col, new text)
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        params = {a.arg for a in fn.args.args}
        stored: list[str] = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                if node.id not in params and node.id not in _STRUCTURAL and node.id not in stored:
                    stored.append(node.id)
        # ast.walk is breadth-first: order by where each is first assigned in the text
        first = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id in stored:
                key = (node.lineno, node.col_offset)
                first[node.id] = min(first.get(node.id, key), key)
        order = sorted(stored, key=lambda n: first[n])
        names = {old: f"t{i}" for i, old in enumerate(order)}
        depth = 0
        for i, tok in enumerate(tokens):
            if not (fn.lineno <= tok.start[0] <= fn.end_lineno):
                continue
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
            if tok.type != tokenize.NAME or tok.string not in names:
                continue
            before = tokens[i - 1] if i else None
            after = tokens[i + 1] if i + 1 < len(tokens) else None
            if before is not None and before.string == ".":
                continue  # an attribute
            if depth > 0 and after is not None and after.string == "=":
                continue  # a keyword argument
            edits.append((tok.start[0], tok.start[1], tok.end[1], names[tok.string]))
    lines = code.split("\n")
    for row, col, end, text in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + text + line[end:]
    return "\n".join(lines)


# Locals every kernel names the same way: renaming them would change no text between layers.
_STRUCTURAL = frozenset({"pid", "xoffs", "xmask", "roffs", "rmask", "yoffs", "ymask", "coffs", "mask", "r0"})


def _welford_pairs(ir: KernelIR) -> dict[int, Value]:
    """id(sum of x) -> the variance's sum of squares (x - sum / n)**2 that reads it, when every
    second-stage reduction of `ir` is such a variance and nothing else needs a second pass;
    empty otherwise."""
    pairs: dict[int, Value] = {}
    if ir.stages != 2:
        return pairs
    for v in ir.reductions:
        if v.stage == 1:
            continue
        sq = v.args[0]
        if v.reduce_op != "sum" or v.mean is None or sq.kind != "math" or sq.expr != "({0} * {0})":
            return {}
        dev = sq.args[0]
        if dev.kind != "math" or dev.expr != "({} - {})" or dev.args[1] is not v.mean:
            return {}
        total = v.mean.args[0]
        if total.kind != "reduce" or total.reduce_op != "sum" or total.args[0] is not dev.args[0]:
            return {}
        if id(total) in pairs:
            return {}
        pairs[id(total)] = v
    return pairs
