# ruff: noqa: B023  (each lambda is timed within the iteration that made it)
"""Host µs per call of the ATen ops the suite's transformers run, GPU kept busy."""

import statistics
import time

import torch

aten = torch.ops.aten


def loop(fn, reps=100):
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
