# ruff: noqa: B023  (each lambda is timed within the iteration that made it)
"""Host µs per call of the ATen ops the suite's models run, GPU kept busy: the transformers' matmuls,
attention and allocations, then each convolution entry point on ResNet-50 shapes
(`aten.convolution` against the `aten.cudnn_convolution` it ends in, results compared).

    python bench/op_host.py      # needs CUDA
"""

import statistics
import time

import torch

aten = torch.ops.aten


def loop(fn, reps=100):
    """Median over 7 rounds of the host µs per call of `fn`, a long sleep queued on the GPU first."""
    ts = []
    for _ in range(7):
        torch.cuda._sleep(30_000_000)
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            fn()
        ts.append((time.perf_counter_ns() - t0) / reps / 1e3)
        torch.cuda.synchronize()
    return statistics.median(ts)


bf = dict(device="cuda", dtype=torch.bfloat16)
x = torch.randn(4096, 768, **bf)
w = torch.randn(768, 2304, **bf)
b = torch.randn(2304, **bf)
wt = torch.randn(2304, 768, **bf)
print("addmm._op", loop(lambda: aten.addmm.default._op(b, x, w)))
print("mm._op", loop(lambda: aten.mm.default._op(x, w)))
print("torch.addmm", loop(lambda: torch.addmm(b, x, w)))
print("linear (t weight)", loop(lambda: torch._C._nn.linear(x, wt, b)))
print("empty_strided", loop(lambda: torch.empty_strided((4096, 2304), (2304, 1), **bf)))
print(
    "_empty_strided_cuda",
    loop(lambda: torch._C._dynamo.guards._empty_strided_cuda((4096, 2304), (2304, 1), torch.bfloat16)),
)
q = torch.randn(8, 12, 512, 64, **bf)
print(
    "sdpa flash._op", loop(lambda: aten._scaled_dot_product_flash_attention.default._op(q, q, q, 0.0, True))
)
print(
    "sdpa efficient._op",
    loop(lambda: aten._scaled_dot_product_efficient_attention.default._op(q, q, q, None, False, 0.0, True)),
)
print("bmm._op", loop(lambda: aten.bmm.default._op(q.view(96, 512, 64), q.view(96, 512, 64).transpose(1, 2))))
print("stride()", loop(lambda: x.stride()))
print("stride()==", loop(lambda: x.stride() == (768, 1)))
print("data_ptr()&15", loop(lambda: x.data_ptr() & 15))
print("reinterpret", loop(lambda: torch._C._dynamo.guards._reinterpret_tensor(x, (768, 4096), (1, 768), 0)))
print("as_strided", loop(lambda: x.as_strided((768, 4096), (1, 768), 0)))
print("== conv entry points (channels_last bf16), host us per call, GPU busy", flush=True)
for n, c, h, k, ks, s, g in [
    (32, 256, 56, 64, 1, 1, 1),
    (32, 64, 56, 64, 3, 1, 1),
    (32, 512, 28, 512, 3, 2, 512),
    (32, 1024, 14, 256, 1, 1, 1),
]:
    x = torch.randn(n, c, h, h, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    w = torch.randn(k, c // g, ks, ks, device="cuda", dtype=torch.bfloat16).to(
        memory_format=torch.channels_last
    )
    pad = [ks // 2] * 2
    conv = aten.convolution.default._op
    cud = aten.cudnn_convolution.default._op
    be = torch._C._select_conv_backend(x, w, None, [s, s], pad, [1, 1], False, [0, 0], g, None)
    ref = conv(x, w, None, [s, s], pad, [1, 1], False, [0, 0], g)
    alt = cud(
        x,
        w,
        pad,
        [s, s],
        [1, 1],
        g,
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.allow_tf32,
    )
    same = torch.equal(ref, alt) and ref.stride() == alt.stride()

    a = loop(lambda: conv(x, w, None, [s, s], pad, [1, 1], False, [0, 0], g))
    b = loop(lambda: cud(x, w, pad, [s, s], [1, 1], g, False, False, True))
    e = loop(
        lambda: torch._C._dynamo.guards._empty_strided_cuda(
            (n, k, h, h), (k * h * h, 1, h * k, k), torch.bfloat16
        )
    )
    print(
        f"   {n}x{c}x{h} k{k} {ks}x{ks} s{s} g{g}: backend {be}; convolution {a:.2f} us, cudnn_convolution {b:.2f} us, equal {same}; empty {e:.2f} us",
        flush=True,
    )

# fuselint's own custom ops: through the dispatcher (torch.library's Python wrapper) against the
# Python body the generated call functions call (fuselint/backend/runtime.py DIRECT_IMPLS).
import fuselint.backend  # noqa: E402,F401  (registers the ops)
from fuselint.backend import runtime  # noqa: E402

ids = torch.randint(0, 50257, (8 * 512,), device="cuda")
rows = torch.randn(8 * 512, 768, **bf)
op = torch.ops.fuselint.masked_index_add.default
body = runtime.DIRECT_IMPLS["fuselint::masked_index_add"]
same = torch.equal(op(None, [50257, 768], None, ids, rows), body(None, [50257, 768], None, ids, rows))
print(
    f"masked_index_add (GPT-2 wte gradient): through the op {loop(lambda: op(None, [50257, 768], None, ids, rows), 30):.1f} us, "
    f"its body {loop(lambda: body(None, [50257, 768], None, ids, rows), 30):.1f} us (atomic adds: equal {same})",
    flush=True,
)
xp = torch.randn(32, 64, 112, 112, **bf).to(memory_format=torch.channels_last)
pool = torch.ops.fuselint.max_pool2d_with_indices.default
pool_body = runtime.DIRECT_IMPLS["fuselint::max_pool2d_with_indices"]
print(
    f"max_pool2d_with_indices (ResNet-50 stem): through the op {loop(lambda: pool(xp, [3, 3], [2, 2], [1, 1], False), 30):.1f} us, "
    f"its body {loop(lambda: pool_body(xp, [3, 3], [2, 2], [1, 1], False), 30):.1f} us",
    flush=True,
)
