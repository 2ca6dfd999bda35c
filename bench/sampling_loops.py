"""Whole sampling loops of diffusers schedulers, original against a fixed copy of the package.

`bench/fix_rate.py` compares one `step` (the corpus entry's first); a fix can still go wrong at a
later step (DDPM's last step indexed past the end under an early where fix, docs/NOTES.md fixes3).
This runs every step of a 10-step loop, in eager and under `torch.compile(backend="eager")`, with a
seeded generator where `step` takes one, and saves each step's `prev_sample`, and the generator's
next numbers after the loop (a fix that draws on every step, fixes8's `if t > 0:`, leaves every
step equal and the generator one draw further on):

    PYTHONPATH=. python bench/sampling_loops.py --save before.pt                          # installed
    PYTHONPATH=FIXED:. python bench/sampling_loops.py --save after.pt                     # fixed copy
    PYTHONPATH=. python bench/sampling_loops.py --compare before.pt after.pt
"""

from __future__ import annotations

import argparse
import inspect
import logging
import sys
import warnings

SCHEDULERS = (
    "DDIMScheduler",
    "DDIMParallelScheduler",
    "DDPMScheduler",
    "EDMEulerScheduler",
    "EulerAncestralDiscreteScheduler",
    "EulerDiscreteScheduler",
    "LCMScheduler",
    "PNDMScheduler",
    "RePaintScheduler",
    "TCDScheduler",
    "UnCLIPScheduler",
    "CMStochasticIterativeScheduler",
    "FlowMatchHeunDiscreteScheduler",
    "SASolverScheduler",
    # churn on: the noise draw after `s_tmin <= sigma <= s_tmax` runs (fixes8's equal-values fix
    # leaves the test in place there)
    "EulerDiscreteScheduler:s_churn=1.0",
    "EDMEulerScheduler:s_churn=1.0",
)


# Train steps where 100 would not do: SA-Solver's default `tau_func` is 1 for 200 <= t <= 800 and 0
# elsewhere, so its loop takes both values only over 1000 steps (fixes9's stored-lambda fix).
TRAIN_STEPS = {"SASolverScheduler": 1000}


def loop(name: str, compiled: bool, steps: int = 10) -> tuple[list, object]:
    """Each step's `prev_sample` over a whole sampling loop of scheduler `name` (`Name:key=value`
    passes a float option to every `step`), and the next numbers of the step's generator after
    the loop (torch's global one where `step` takes none): the state a later draw starts from."""
    import diffusers
    import torch

    name, _, option = name.partition(":")
    options = {k: float(v) for k, v in (option.split("="),)} if option else {}
    torch.manual_seed(0)
    scheduler = getattr(diffusers, name)(num_train_timesteps=TRAIN_STEPS.get(name, 100))
    scheduler.set_timesteps(steps)
    step = torch.compile(scheduler.step, backend="eager") if compiled else scheduler.step
    takes = inspect.signature(scheduler.step).parameters
    sample, outs = torch.randn(1, 4, 8, 8), []
    extra: dict = {"generator": torch.Generator().manual_seed(1)} if "generator" in takes else {}
    if "original_image" in takes:
        extra |= {"original_image": torch.randn(1, 4, 8, 8), "mask": (torch.rand(1, 4, 8, 8) > 0.5).float()}
    for t in scheduler.timesteps:
        model_output = torch.randn(1, 4, 8, 8)
        if hasattr(scheduler, "scale_model_input"):
            sample = scheduler.scale_model_input(sample, t)
        sample = step(model_output, t, sample, **extra, **options).prev_sample
        outs.append(sample)
    after = torch.randn(4, generator=extra.get("generator"))
    return outs, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", help="run every loop, eager and compiled, and save the outputs here")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS))
    args = parser.parse_args()
    import torch

    if args.save:
        warnings.filterwarnings("ignore")
        logging.disable(logging.CRITICAL)
        runs = {}
        for name in args.schedulers.split(","):
            for compiled in (False, True):
                key = f"{name} {'compiled' if compiled else 'eager'}"
                try:
                    runs[key], runs[f"{key}, generator after the loop"] = loop(name, compiled)
                except Exception as exc:  # noqa: BLE001 - a loop that fails is a row, not a crash
                    runs[key] = f"{type(exc).__name__}: {exc}"[:200]
        torch.save(runs, args.save)
        return
    before, after = (torch.load(p) for p in args.compare)
    for key in sorted(before):
        a, b = before[key], after.get(key)
        if isinstance(a, str) or isinstance(b, str) or b is None:
            print(
                f"{key}: before {a if isinstance(a, str) else 'ran'}; after {b if isinstance(b, str) else 'ran'}"
            )
            continue
        if isinstance(a, torch.Tensor):
            print(f"{key}: next draw equal {torch.equal(a, b)}")
            continue
        worst = max((x - y).abs().max().item() for x, y in zip(a, b, strict=True))
        equal = all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
        print(f"{key}: {len(a)} steps, max abs diff {worst:.2e}, bit-equal {equal}")


if __name__ == "__main__":
    sys.exit(main())
