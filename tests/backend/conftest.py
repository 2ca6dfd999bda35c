"""Backend tests run generated kernels on CPU tensors through Triton's interpreter.

TRITON_INTERPRET must be in the environment before a kernel is decorated; the backend
reads it per kernel, so setting it here (before any test imports the backend) is enough.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
