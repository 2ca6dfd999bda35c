"""Backend tests run generated kernels on CPU tensors through Triton's interpreter.

The interpreter needs TRITON_INTERPRET=1 in the environment before triton is first
imported (triton decides then whether its own tl.sum/tl.max are interpreted), and GPU
kernels need it unset. So it is set here only on machines without CUDA; the project's
root conftest should do the same before anything imports triton (see the backend's
wiring notes). Tests of kernels on CPU tensors skip when the interpreter is not ready.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
