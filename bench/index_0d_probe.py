"""Why DDPM's fixed step compiles one graph more under Inductor and the fuselint backend (issue 10 part 4).

`alphas_cumprod[t]` with `t` a 0-d int64 tensor input lowers through `aten._local_scalar_dense` (an
`.item()`), which AOT's fake tensors refuse (DataDependentOutputException) in some graphs: the backend
fails and dynamo splits the graph there (gb0219). The eager backend never lowers, so dynamo alone (and
bench/fix_rate.py's count) sees no break. Each case below is a function of `(x, t)`, compiled with the
eager backend and with Inductor; the graph count is what dynamo compiled.

    PYTHONPATH=. CORPUS_VENV/bin/python bench/index_0d_probe.py
"""

from __future__ import annotations

import warnings


def cases(torch):
    table = torch.linspace(0, 1, 100)
    one = torch.tensor(1.0)

    def wrapped(t):  # what FL102's where-fix writes for `table[t - 10]` (`_wrapped_index`)
        return table.index_select(0, ((t - 10) % table.shape[0]).flatten()).reshape((t - 10).shape)

    return {
        "table[t]": lambda x, t: table[t] * x,
        "table[t] + where(t > 0, x, -x)": lambda x, t: table[t] * x + torch.where(t > 0, x, -x),
        "table[t] + wrapped read": lambda x, t: table[t] * x + wrapped(t),
        "table[t] + where(c, wrapped read, one) (DDPM fixed)": lambda x, t: (
            table[t] * x + torch.where(t - 10 >= 0, wrapped(t), one)
        ),
        "table[t.unsqueeze(0)][0] + where(c, wrapped read, one)": lambda x, t: (
            table[t.unsqueeze(0)][0] * x + torch.where(t - 10 >= 0, wrapped(t), one)
        ),
        "table[t] + where(c, table[t - 10], one) (DDPM original's read)": lambda x, t: (
            table[t] * x + torch.where(t - 10 >= 0, table[t - 10], one)
        ),
    }


def main() -> None:
    import torch
    from torch._dynamo.backends.registry import lookup_backend

    warnings.filterwarnings("ignore")
    print(f"torch {torch.__version__}")
    for name, fn in cases(torch).items():
        counts = []
        for backend in ("eager", "inductor"):
            torch._dynamo.reset()
            graphs = []

            def counted(gm, example_inputs, backend=backend, graphs=graphs):
                graphs.append(gm)
                return lookup_backend(backend)(gm, example_inputs)

            x, t = torch.randn(4), torch.tensor(90)
            out = torch.compile(fn, backend=counted)(x, t)
            assert torch.equal(out, fn(x, t))
            counts.append(len(graphs))
        print(f"{name:64s} graphs: eager backend {counts[0]}, inductor {counts[1]}")


if __name__ == "__main__":
    main()
