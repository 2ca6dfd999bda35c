"""Dropout's uniforms drawn inside the kernels (fuselint/backend/random.py), interpreter on CPU."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from backend_helpers import needs_interpreter

from fuselint.backend import fuselint_backend, history_mark, reports_since
from fuselint.backend.random import philox_rand

pytestmark = needs_interpreter


def test_the_aten_fallback_draws_uniforms_repeatably_from_its_seed():
    seed = torch.tensor(12345)
    u = philox_rand(seed, [200, 500], torch.float32)
    assert u.shape == (200, 500) and u.dtype == torch.float32
    assert 0.0 <= u.min().item() and u.max().item() < 1.0
    assert abs(u.mean().item() - 0.5) < 0.01 and abs(u.var().item() - 1 / 12) < 0.005
    assert torch.equal(u, philox_rand(seed, [200, 500], torch.float32))
    assert not torch.equal(u, philox_rand(torch.tensor(12346), [200, 500], torch.float32))


def two_dropouts(x):
    return F.dropout(x * 2, 0.3, training=True), F.dropout(x + 1, 0.3, training=True)


def test_dropout_draws_inside_the_kernel_from_one_seed_per_call():
    torch.manual_seed(0)
    x = torch.randn(64, 96, requires_grad=True)
    torch._dynamo.reset()
    start = history_mark()
    f = torch.compile(two_dropouts, backend=fuselint_backend)
    a, b = f(x)
    (a.sum() + b.sum()).backward()
    forward = reports_since(start)[0]
    code = forward.graph_module.code
    assert "aten.rand." not in code and code.count("aten.randint.low") == 1, code
    assert not forward.fallbacks, forward.fallbacks
    kept_a, kept_b = a != 0, b != 0
    for kept in (kept_a, kept_b):  # about 70% kept, each scaled by 1 / 0.7
        assert abs(kept.float().mean().item() - 0.7) < 0.03
    torch.testing.assert_close(a[kept_a], (x * 2)[kept_a] / 0.7)
    torch.testing.assert_close(b[kept_b], (x + 1)[kept_b] / 0.7)
    assert not torch.equal(kept_a, kept_b)  # each dropout its own seed
    # the backward reads the same masks
    want = kept_a.float() * 2 / 0.7 + kept_b.float() / 0.7
    torch.testing.assert_close(x.grad, want)
    a2, _ = f(x)
    assert not torch.equal(a2 != 0, kept_a)  # fresh numbers on every call


def test_a_reader_left_in_aten_reads_the_uniforms_the_kernels_drew():
    # r * x is computed in three groups; fmod has no lowering, so its group's reads of r * x run
    # in ATen. They must read the kernel's r * x, not draw r again by the ATen fallback's hash
    # (other numbers than tl.rand's): e == 2 * s1 holds in eager for every draw
    def fn(x):
        r = torch.rand_like(x)
        d = torch.fmod(r * x, 1e9)
        return d.sum(0), d.sum(1), (r * x * 2).sum(1)

    torch._dynamo.reset()
    torch.manual_seed(0)
    _, s1, e = torch.compile(fn, backend=fuselint_backend)(torch.randn(64, 300))
    torch.testing.assert_close(e, 2 * s1, atol=1e-4, rtol=1e-5)
