"""Environment for honest compile-time measurements, shared by the GPU benchmarks.

Imports neither torch nor triton: `caches_off()` must run before they load.
"""

from __future__ import annotations

import os
import tempfile


def caches_off(prefix: str = "fuselint-bench-") -> None:
    """Compile caches off (Inductor's FX-graph and autograd caches, Triton's, fuselint's), so
    each compile time is a cold one."""
    root = tempfile.mkdtemp(prefix=prefix)
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(root, "inductor"))
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(root, "triton"))
    os.environ.setdefault("FUSELINT_CACHE", "0")
