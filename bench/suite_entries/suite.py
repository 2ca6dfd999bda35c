"""The suite's models (bench/models.py) as `fuselint verify --entry` factories (issue 12 part 5).

    fuselint verify --entry bench/suite_entries/suite.py:llama --unsafe-fixes     # on a GPU: the suite's size, bf16
    fuselint verify --entry bench/suite_entries/suite.py:t5enc --device cpu --unsafe-fixes --prove-backends inductor

Each factory builds one model of the suite with its inputs: on a machine with CUDA at the suite's
size in bf16, as bench/models.py times it; without, the small configuration in float32. The
models come from transformers and timm, so the fixed variant's source is theirs: verify fixes the
package files that define the model's classes (transformers' `modeling_llama.py`), proves the
fixes, and runs them in place of the installed files. This file has a folder of its own: verify
fixes and proves every file of the entry's folder, and bench/ holds a hundred scripts.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/models.py builds the models. verify also imports a copy of this file from a temporary folder,
# whose parent is no bench/: there `models` is the module this file's original already imported.
_BENCH = Path(__file__).resolve().parents[1]
if (_BENCH / "models.py").is_file() and str(_BENCH) not in sys.path:
    sys.path.insert(0, str(_BENCH))
import models as M  # noqa: E402
import torch  # noqa: E402


def _suite(name: str):
    if torch.cuda.is_available():
        return M._to(*M.build(name), "cuda", torch.bfloat16)
    return M.build(name, small=True)


def gpt2():
    return _suite("gpt2")


def llama():
    return _suite("llama")


def bert():
    return _suite("bert")


def t5enc():
    return _suite("t5enc")


def vit():
    return _suite("vit")


def resnet50():
    return _suite("resnet50")


def convnext():
    return _suite("convnext")


def efficientnet():
    return _suite("efficientnet")


def mobilenetv3():
    return _suite("mobilenetv3")
