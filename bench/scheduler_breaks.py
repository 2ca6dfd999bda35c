"""Where dynamo breaks in a diffusers scheduler's `step` compiled in a sampling loop.

Ground truth for judging static findings on schedulers (`traced-functions = ["*Scheduler.step"]`):
each scheduler is built small (100 training steps, 10 inference steps), and `step` runs once under
`torch._dynamo.explain` with the timestep a sampling loop hands it (an element of
`scheduler.timesteps`, a 0-d tensor), and once eagerly under a line tracer to tell which lines of
the scheduler's file the step ran. Prints JSON: per scheduler, its file, the (line, reason) of
every break (innermost scheduler frame), the lines that ran, or the error that stopped it.

    python bench/scheduler_breaks.py DDPMScheduler,EulerDiscreteScheduler [--step 3]

Token schedulers get token-shaped inputs (Amused, VQDiffusion); a scheduler whose `step` needs
inputs this script does not build reports the error instead of breaks.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import sys
import warnings


def _inputs(name: str, cls, torch):
    """(scheduler, model_output, sample, extra keyword arguments) for one `step` call."""
    if name == "AmusedScheduler":
        scheduler = cls(mask_token_id=7)
        return scheduler, torch.randn(1, 6, 8), torch.full((1, 6), 7), {}
    if name == "VQDiffusionScheduler":
        scheduler = cls(num_vec_classes=9, num_train_timesteps=100)
        return scheduler, torch.randn(1, 8, 6).log_softmax(1), torch.randint(0, 8, (1, 6)), {}
    scheduler = cls(num_train_timesteps=100)
    extra = {}
    if "original_image" in inspect.signature(scheduler.step).parameters:
        extra = {"original_image": torch.randn(1, 4, 8, 8), "mask": torch.ones(1, 4, 8, 8)}
    return scheduler, torch.randn(1, 4, 8, 8), torch.randn(1, 4, 8, 8), extra


def breaks(name: str, step: int) -> dict:
    import diffusers
    import torch

    cls = getattr(diffusers, name)
    path = inspect.getsourcefile(cls)
    record = {"file": path.split("site-packages/")[-1], "breaks": [], "ran": [], "error": ""}
    try:
        torch.manual_seed(0)
        scheduler, model_output, sample, extra = _inputs(name, cls, torch)
        scheduler.set_timesteps(10)
        timestep = scheduler.timesteps[step]
        lines: set[int] = set()

        def tracer(frame, event, arg):
            if frame.f_code.co_filename == path:
                lines.add(frame.f_lineno)
            return tracer

        if hasattr(scheduler, "_step_index"):
            scheduler._step_index = None
        sys.settrace(tracer)
        try:
            scheduler.step(model_output, timestep, sample, **extra)
        finally:
            sys.settrace(None)
        record["ran"] = sorted(lines)
        if hasattr(scheduler, "_step_index"):
            scheduler._step_index = None
        torch._dynamo.reset()
        explained = torch._dynamo.explain(scheduler.step)(model_output, timestep, sample, **extra)
        found = set()
        for reason in explained.break_reasons:
            frames = [f for f in reason.user_stack or () if f.filename == path]
            if frames:
                found.add((frames[-1].lineno, reason.reason.splitlines()[0][:80]))
        record["breaks"] = sorted(found)
    except Exception as exc:  # noqa: BLE001 - reported per scheduler, the others still run
        record["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("schedulers", help="comma-separated diffusers scheduler class names")
    parser.add_argument("--step", type=int, default=3, help="index into scheduler.timesteps")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    result = {name: breaks(name, args.step) for name in args.schedulers.split(",")}
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
