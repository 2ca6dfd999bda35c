"""float32 inference error with cuDNN's TF32 on (PyTorch's default for convolutions) and off.

Mean/max abs error of eager, fuselint and Inductor against the same model in IEEE float32
(`models._ieee_float32`), one batch, on an H100/H200:

    python bench/tf32_errors.py mobilenetv3 efficientnet

With TF32 on, a float32 convolution's error depends on which cuDNN algorithm runs it (tensor cores
round the inputs to a 10-bit mantissa), and so on the layout each backend gives it; with TF32 off
what is left is the backends' own arithmetic.
"""

import sys

sys.path.insert(0, "bench")
import models as M  # noqa: E402
import torch  # noqa: E402

import fuselint.backend  # noqa: E402, F401

for name in sys.argv[1:]:
    model, args = M.build(name)
    model, args = M._to(model, args, "cuda", torch.float32)
    with torch.no_grad(), M._ieee_float32():
        ref = M._first_tensor(model(*args)).float()
    for tf32 in (True, False):
        torch.backends.cudnn.allow_tf32 = tf32
        row = []
        for be in ("eager", "fuselint", "inductor"):
            torch._dynamo.reset()
            f = model if be == "eager" else torch.compile(model, backend=be)
            with torch.no_grad():
                out = M._first_tensor(f(*args)).float()
            d = (out - ref).abs()
            row.append(f"{be} {d.mean().item():.3e}/{d.max().item():.3e}")
        print(name, "cudnn.allow_tf32", tf32, "  ".join(row), flush=True)
