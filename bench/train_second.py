"""A training step's GPU time and kernel count, fuselint against Inductor, on models no backend change was
tuned on: transformers' ResNetModel (ResNet-50 config) and timm's ResNet-18 (bf16, batch 32, 224x224;
torch.profiler, the best of three steps after three warm-up steps). Needs CUDA:

    python bench/train_second.py hf-resnet50 resnet18
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_env import caches_off  # noqa: E402

caches_off("train-second-")

import timm  # noqa: E402
import torch  # noqa: E402
import transformers as tf  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import fuselint.backend  # noqa: E402, F401  (registers the backend)


def build(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    if name == "hf-resnet50":
        return tf.ResNetModel(tf.ResNetConfig()), torch.randn(32, 3, 224, 224)
    return timm.create_model(name, pretrained=False), torch.randn(32, 3, 224, 224)


def step_gpu_us(name: str, backend: str) -> tuple[float, int]:
    torch._dynamo.reset()
    model, x = build(name)
    model = model.cuda().to(torch.bfloat16).train()
    x = x.cuda().to(torch.bfloat16)
    f = torch.compile(model, backend=backend)

    def step() -> None:
        out = f(x)
        out = out.last_hidden_state if hasattr(out, "last_hidden_state") else out
        out.float().mean().backward()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    best: tuple[float, int] | None = None
    for _ in range(3):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        us = sum(e.time_range.end - e.time_range.start for e in events)
        if best is None or us < best[0]:
            best = (us, len(events))
    assert best is not None
    return best


if __name__ == "__main__":
    for name in sys.argv[1:]:
        cells = [
            f"{be} {us:.0f} us {n} kernels"
            for be in ("fuselint", "inductor")
            for us, n in [step_gpu_us(name, be)]
        ]
        print(name, " | ".join(cells), flush=True)
