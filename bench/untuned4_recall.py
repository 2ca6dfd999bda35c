"""Static recall on the break sites of bench/results/precision_untuned4.md (segment-anything 1.0 and
torchdiffeq 0.2.5, 54 sites that dynamo logged), for three ways a user lints them:

- `default`: the two packages as they are;
- `traced`: with `traced-functions` naming the calls the judge's runs compiled (as the judge did);
- `user`: with a user's module beside them whose `forward` calls `odeint` (torchdiffeq's usual use).

The tree is copied to a temporary folder, so the packages' folder is never written to. The fuselint
that runs is the one `python -m fuselint` imports (set `PYTHONPATH` to compare two checkouts).

    PYTHONPATH=$PWD python bench/untuned4_recall.py --tree DIR [--config default|traced|user|all]

DIR holds `segment_anything/` and `torchdiffeq/` (e.g. unpacked from their wheels).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "precision_untuned4.md"
TRACED = (
    "odeint",
    "odeint_adjoint",
    "odeint_event",
    "SamPredictor.set_image",
    "SamPredictor.predict",
    "SamPredictor.predict_torch",
    "SamAutomaticMaskGenerator.generate",
)
USER = """import torch
from torch import nn
from torchdiffeq import odeint


class ODEFunc(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 4))

    def forward(self, t, y):
        return self.net(y) * torch.cos(t)


class ODEBlock(nn.Module):
    def __init__(self, method="dopri5"):
        super().__init__()
        self.func = ODEFunc()
        self.method = method

    def forward(self, y0, t):
        return odeint(self.func, y0, t, method=self.method)
"""


def break_sites() -> list[str]:
    """The unique package lines of the judge's dynamo table ("pkg/file.py:line")."""
    text = RESULTS.read_text()
    table = text[text.index("## Dynamo runs") :]
    return sorted(set(re.findall(r"(?:segment_anything|torchdiffeq)/[a-z_/]+\.py:\d+", table)))


def lint(tree: Path, config: str) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for package in ("segment_anything", "torchdiffeq"):
            shutil.copytree(tree / package, root / package)
        if config == "traced":
            names = ", ".join(f'"{n}"' for n in TRACED)
            (root / "pyproject.toml").write_text(f"[tool.fuselint]\ntraced-functions = [{names}]\n")
        elif config == "user":
            (root / "user_model.py").write_text(USER)
        cmd = [sys.executable, "-m", "fuselint", "check", "--no-cache", "--select", "FL1"]
        # The check runs in the copy: a relative PYTHONPATH (`PYTHONPATH=.`) must keep naming this checkout.
        paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(Path(p).resolve()) for p in paths if p)}
        out = subprocess.run(
            [*cmd, "--format", "json", "--exit-zero", "."],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--config", choices=("default", "traced", "user", "all"), default="all")
    args = parser.parse_args()
    sites = break_sites()
    for config in ("default", "traced", "user") if args.config == "all" else (args.config,):
        findings = lint(args.tree, config)
        flagged = {f"{f['filename']}:{f['location']['row']}" for f in findings}
        hits = [s for s in sites if s in flagged]
        print(f"{config}: {len(hits)}/{len(sites)} sites flagged; {len(findings)} FL1 findings")
        print("  hits: " + ", ".join(hits))


if __name__ == "__main__":
    main()
