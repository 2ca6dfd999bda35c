"""First training step of a bench/models.py model under fuselint: cProfile of where the compile time goes.

python bench/compile_profile.py gpt2      # needs CUDA
"""

import cProfile
import io
import pstats
import sys
import time

sys.path.insert(0, "bench")
from bench_env import caches_off

caches_off("tc-")
import models as M  # noqa: E402
import torch  # noqa: E402

name = sys.argv[1]
model, args = M.build(name)
model, args = M._to(model, args, "cuda", torch.bfloat16)
model.train()
f = M.compile_with("fuselint", model)
pr = cProfile.Profile()
t0 = time.perf_counter()
pr.enable()
out = M._first_tensor(f(*args))
t1 = time.perf_counter()
out.float().mean().backward()
torch.cuda.synchronize()
pr.disable()
t2 = time.perf_counter()
print(f"forward first call {t1 - t0:.2f} s, backward first call {t2 - t1:.2f} s")
s = io.StringIO()
st = pstats.Stats(pr, stream=s).sort_stats("cumulative")
st.print_stats(45)
print("\n".join(line[:200] for line in s.getvalue().splitlines()[:80]))
s = io.StringIO()
st = pstats.Stats(pr, stream=s).sort_stats("tottime")
st.print_stats(25)
print("\n".join(line[:200] for line in s.getvalue().splitlines()[:45]))
