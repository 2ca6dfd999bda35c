# ruff: noqa: B023  (each lambda is timed within the iteration that made it)
"""Where a compiled call's host time goes, line by line of fuselint's generated call function,
and how much of each backend's call is its own code vs the dynamo/AOT wrappers. GPU kept busy."""

import ast
import collections
import gc
import statistics
import sys
import time

sys.path.insert(0, "bench")
import models as M
import torch
from train_host import time_graphs

from fuselint.backend.callgen import GraphRunner

names = (sys.argv[1] if len(sys.argv) > 1 else "resnet50").split(",")
N = 40


def busy_calls(fn, n=N):
    ts = []
    for _ in range(n):
        torch.cuda._sleep(4_000_000)
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
        torch.cuda.synchronize()
    return statistics.median(ts) / 1e3


def label(stmt, scope):
    text = ast.unparse(stmt)
    if isinstance(stmt, ast.Delete):
        return "del"
    if isinstance(stmt, ast.Return):
        return "return"
    calls = [c for c in ast.walk(stmt) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]
    kinds = []
    for c in calls:
        obj = scope.get(c.func.id)
        nm = getattr(obj, "__name__", None) or type(obj).__name__
        if c.func.id.startswith("run"):
            kinds.append("launch")
        elif c.func.id.startswith(("alloc", "empty")):
            kinds.append("alloc")
        elif c.func.id.startswith(("_op", "_cudnn")) and isinstance(stmt, ast.Assign):
            tgt = ast.unparse(stmt.targets[0]).rstrip("0123456789").rstrip("_")
            kinds.append(f"{c.func.id.rstrip('0123456789')}:{tgt}")
        else:
            kinds.append(f"{c.func.id.rstrip('0123456789')}:{nm}")
    if isinstance(stmt, ast.If):
        return "if[" + "+".join(sorted(set(kinds))) + "]"
    return "+".join(kinds) or text[:30]


for name in names:
    torch._dynamo.reset()
    model, args = M.build(name)
    model, args = M._to(model, args, "cuda", torch.bfloat16)
    res = {}
    for be in ("fuselint", "inductor"):
        torch._dynamo.reset()
        f = M.compile_with(be, model)
        with torch.no_grad():
            for _ in range(3):
                f(*args)
            torch.cuda.synchronize()
            total = busy_calls(lambda: f(*args))
            inner = [t for _, t in time_graphs(be)]
            runners = [o for o in gc.get_objects() if type(o) is GraphRunner and o.call is not None]
            total2 = busy_calls(lambda: f(*args))
            ins = sum(statistics.median(t.us[3:]) for t in inner if t.us)
            print(
                f"== {name} {be}: host us/call {total:.0f} (again with inner timers {total2:.0f}); inner calls {len(inner)} "
                f"sum of inner medians {ins:.0f} us -> wrappers+guards {total2 - ins:.0f} us",
                flush=True,
            )
            if be != "fuselint":
                continue
            # line by line
            by = collections.defaultdict(list)
            count = collections.Counter()
            for r in runners:
                call = r.call.fn
                tree = ast.parse(r.source)
                fn = tree.body[0]
                body = fn.body
                new = [ast.parse("_T = [_pc()]").body[0]]
                for st in body:
                    if isinstance(st, ast.Return):
                        new.append(ast.parse("_T.append(_pc())").body[0])
                        new.append(ast.parse("_LOG.append(_T)").body[0])
                        new.append(st)
                    else:
                        new.append(st)
                        new.append(ast.parse("_T.append(_pc())").body[0])
                fn.body = new
                ast.fix_missing_locations(tree)
                scope = dict(call.__globals__)
                log = []
                scope["_pc"] = time.perf_counter_ns
                scope["_LOG"] = log
                exec(compile(tree, "<inst>", "exec"), scope)
                r.call = scope["call"]
                stmts = [st for st in body if not isinstance(st, ast.Return)] + [
                    b for b in body if isinstance(b, ast.Return)
                ]
                r._inst = (stmts, log, scope)
            total3 = busy_calls(lambda: f(*args))
            print(f"   instrumented host us/call {total3:.0f}")
            for r in runners:
                stmts, log, scope = r._inst
                rows = log[3:]
                if not rows:
                    continue
                for i, st in enumerate(stmts):
                    d = statistics.median(row[i + 1] - row[i] for row in rows) / 1e3
                    lb = label(st, scope)
                    by[lb].append(d)
                    count[lb] += 1
            tot = sum(sum(v) for v in by.values())
            print(f"   per line (median us; sum {tot:.0f}):")
            for lb, v in sorted(by.items(), key=lambda kv: -sum(kv[1])):
                print(
                    f"   {lb:60s} n={len(v):4d} sum={sum(v):8.1f} mean={sum(v) / len(v):6.2f} med={statistics.median(v):6.2f}"
                )
