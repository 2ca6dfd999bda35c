"""Dynamo checks behind bench/results/precision_untuned22.md (reach22, issue 11): snntorch 1.0.0 (the
package tuned on) and torchani 2.9.0 (held out), with the entries docs/NOTES.md ("reach22") fixed
before either package was linted. torch 2.13.0 CPU, eager backend; break sites come from dynamo's
`graph_breaks` log (bench/break_probe.py); a call that raises (a build or compile ERROR row) gives none.

    V/bin/pip install torch==2.13.0 && V/bin/pip install --no-deps snntorch==1.0.0 torchani==2.9.0
    V/bin/pip install typing_extensions tqdm h5py huggingface_hub typer rich
    cd bench && PYTHONPATH=$PWD/..:$PWD V/bin/python precision_untuned22_probes.py [--json SITES.json]

`--groups snntorch,torchani` (the default: both) runs only the named packages.
"""

from __future__ import annotations

import inspect
import sys

import torch
from break_probe import CallWith, compile_run, listen, package_site, probe_header, probe_rows, write_sites

SCRIPT = "precision_untuned22_probes.py"
# S1's table: every parameter of a class's signature that it names is passed.
FILL = {
    "beta": 0.5, "alpha": 0.9, "R": 1.0, "C": 1.0, "input_size": 8, "hidden_size": 8,
    "linear_features": 8, "in_features": 8, "out_features": 8, "num_features": 8, "in_channels": 2,
    "out_channels": 2, "conv2d_channels": 2, "kernel_size": 3, "num_steps": 3, "time_steps": 3,
    "channels": 8, "in_dim": 8, "out_dim": 8,
}  # fmt: skip
SYMBOLS = ["H", "C", "N", "O"]
LOT = "wb97x-631gd"
ANI_METHODS = (
    "atomic_energies",
    "energies_qbcs",
    "atomic_stdev",
    "members_forces",
    "force_magnitudes",
    "force_qbc",
)


class Alternatives(tuple):
    """Argument tuples tried in order: the first call that does not raise is the row (S1's retry)."""


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def snntorch_runs() -> list:
    import snntorch
    import snntorch.functional as sf
    from snntorch import spikegen
    from snntorch.functional import loss as losses

    out = []
    for name in sorted(n for n in dir(snntorch) if not n.startswith("_")):
        cls = getattr(snntorch, name)
        if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)) or inspect.isabstract(cls):
            continue
        params = inspect.signature(cls).parameters
        kwargs = {k: FILL[k] for k in params if k in FILL}
        first = (
            torch.rand(4, 2, 6, 6, generator=_gen()) if "Conv" in name else torch.rand(4, 8, generator=_gen())
        )
        args = Alternatives([(first,), (torch.rand(3, 4, 8, generator=_gen()),)])
        for mode in ("eval", "train"):
            out.append((f"{mode} {name}", lambda cls=cls, kwargs=kwargs: cls(**kwargs), args))
    spikes = (torch.rand(5, 4, 3, generator=_gen()) > 0.5).float()
    membrane = torch.randn(5, 4, 3, generator=_gen())
    targets = torch.tensor([0, 1, 2, 1])
    for name in sorted(n for n in vars(losses) if not n.startswith("_")):
        cls = getattr(losses, name)
        if not inspect.isclass(cls) or cls.__module__ != losses.__name__:
            continue
        data = membrane if "membrane" in name else spikes
        out.append((f"loss {name}", cls, (data, targets)))
    for fn in (sf.accuracy_rate, sf.accuracy_temporal):
        out.append((fn.__name__, lambda fn=fn: fn, (spikes, targets)))
    table = {
        "data": torch.rand(4, 3, generator=_gen()), "targets": targets, "num_classes": 3, "num_steps": 4,
        "spike_time": torch.randint(0, 4, (4, 3), generator=_gen()).float(),
        "one_hot_targets": torch.nn.functional.one_hot(targets, 3),
        "one_hot_label": torch.nn.functional.one_hot(targets, 3),
    }  # fmt: skip
    for name in sorted(n for n in vars(spikegen) if not n.startswith("_")):
        fn = getattr(spikegen, name)
        if not inspect.isfunction(fn) or fn.__module__ != spikegen.__name__:
            continue
        need = [
            p.name for p in inspect.signature(fn).parameters.values()
            if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]  # fmt: skip
        if any(p not in table for p in need):
            out.append((f"spikegen {name}", _failing(KeyError(f"needs {need}")), ()))
            continue
        out.append((f"spikegen {name}", lambda fn=fn: fn, (), {p: table[p] for p in need}))
    return out


def ani_inputs(train: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    species = torch.tensor([[6, 1, 1, 1, 1], [8, 1, 1, -1, -1]])
    coords = torch.randn(2, 5, 3, generator=_gen()) * 0.8
    return species, coords.requires_grad_(train)


def torchani_runs() -> list:
    from torchani import neighbors
    from torchani.arch import ANI, simple_ani, simple_aniq

    variants = [{}]
    variants += [
        {"neighborlist": n}
        for n in neighbors.NeighborlistArg.__args__[0].__args__
        if n not in ("base", "all_pairs")
    ]
    variants += [{"container": "SingleNN"}, {"container": "ANISharedNetworks"}, {"dispersion": True}]
    variants += [{"repulsion": False}, {"cutoff_fn": "cosine"}]
    out = []
    for v in variants:
        label = ", ".join(f"{k}={val}" for k, val in v.items()) or "default"
        out.append((f"eval simple_ani {label}", lambda v=v: simple_ani(SYMBOLS, LOT, **v), (ani_inputs(),)))
    out.append(("train simple_ani default", lambda: simple_ani(SYMBOLS, LOT), (ani_inputs(True),)))
    out.append(("eval simple_aniq default", lambda: simple_aniq(SYMBOLS, LOT), (ani_inputs(),)))
    out.append(("train simple_aniq default", lambda: simple_aniq(SYMBOLS, LOT), (ani_inputs(True),)))
    for method in ANI_METHODS:
        grad = "forces" in method or "force_" in method
        out.append((
            f"{'train' if grad else 'eval'} ANI.{method}",
            lambda method=method: CallWith(simple_ani(SYMBOLS, LOT, ensemble_size=2), getattr(ANI, method)),
            (ani_inputs(grad),),
        ))  # fmt: skip
    elem = torch.tensor([[1, 0, 0, 0, 0], [3, 0, 0, -1, -1]])
    coords = ani_inputs()[1]
    for name in sorted(vars(neighbors)):
        cls = getattr(neighbors, name)
        if (
            inspect.isclass(cls)
            and issubclass(cls, neighbors.Neighborlist)
            and cls is not neighbors.Neighborlist
        ):
            out.append((f"eval neighbors.{name}", cls, (5.2, elem, coords)))
    return out


def _failing(exc: Exception):
    def build():
        raise exc

    return build


GROUPS = {"snntorch": snntorch_runs, "torchani": torchani_runs}


def main(argv: list[str]) -> None:
    groups = argv[argv.index("--groups") + 1].split(",") if "--groups" in argv else list(GROUPS)
    out = argv[argv.index("--json") + 1] if "--json" in argv else None
    packages = tuple(groups)

    def run(label, fn, args, breaks, kwargs=None):
        tries = args if isinstance(args, Alternatives) else [args]
        for i, one in enumerate(tries):
            if label.startswith("train"):
                one = tuple(a.detach().requires_grad_(True) if _float(a) else a for a in one)
            row, sites = compile_run(
                label, fn, one, breaks, lambda p: package_site(p, packages, SCRIPT), kwargs
            )
            if "compile ERROR" not in row or i == len(tries) - 1:
                break
        return row, [] if "compile ERROR" in row else sites

    breaks = listen()
    torch.manual_seed(0)
    probe_header()
    runs = [r for g in groups for r in GROUPS[g]()]
    write_sites(out, probe_rows(runs, run, packages, breaks, build=True))


def _float(a) -> bool:
    return isinstance(a, torch.Tensor) and a.is_floating_point()


if __name__ == "__main__":
    main(sys.argv)
