"""`x[m] += v` on a package nobody tuned the fix on: kornia SAM's prompt encoder.

kornia's `PromptEncoder._embed_points` adds a learned embedding to the points of each label with
`point_embedding[labels == k] += weight`. The script copies the installed file, runs
`fuselint check --select FL106 --fix --unsafe-fixes` on the copy, and compiles `_embed_points` of the
original and of the fixed class (same weights) with a counting backend: graphs before and after, and
whether the fixed method's eager and compiled outputs equal the original's, bit for bit, on three inputs.

    PYTHONPATH=$PWD CORPUS_VENV/bin/python bench/augmented_write_probe.py
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _graphs(method, *args) -> tuple[int, object]:
    import torch

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    out = torch.compile(method, backend=backend)(*args)
    return len(graphs), out


def main() -> None:
    import kornia.models.sam.architecture.prompt_encoder as installed
    import torch

    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        original, fixed = Path(tmp) / "original.py", Path(tmp) / "fixed.py"
        shutil.copy(installed.__file__, original)
        shutil.copy(installed.__file__, fixed)
        command = [
            sys.executable,
            "-m",
            "fuselint",
            "check",
            "--select",
            "FL106",
            "--fix",
            "--unsafe-fixes",
            str(fixed),
        ]
        print(subprocess.run(command, capture_output=True, text=True).stdout.strip().splitlines()[-1])
        a, b = _load(original, "sam_prompt_original"), _load(fixed, "sam_prompt_fixed")
        settings = dict(embed_dim=16, image_embedding_size=(8, 8), input_image_size=(64, 64), mask_in_chans=4)
        torch.manual_seed(0)
        before = a.PromptEncoder(**settings).eval()
        after = b.PromptEncoder(**settings).eval()
        after.load_state_dict(before.state_dict())
        generator = torch.Generator().manual_seed(1)
        for trial in range(3):
            points = torch.rand(2, 5, 2, generator=generator) * 64
            labels = torch.randint(-1, 2, (2, 5), generator=generator)
            with torch.no_grad():
                want = before._embed_points(points, labels, True)
                graphs_before, _ = _graphs(before._embed_points, points, labels, True)
                graphs_after, compiled = _graphs(after._embed_points, points, labels, True)
                eager = after._embed_points(points, labels, True)
            print(
                f"input {trial}: graphs {graphs_before} -> {graphs_after}; fixed eager equal "
                f"{torch.equal(want, eager)}, fixed compiled equal {torch.equal(want, compiled)}"
            )


if __name__ == "__main__":
    main()
