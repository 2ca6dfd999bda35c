"""Dynamo verdicts for findings of the blind lints that the fixed probes (precision_untuned22_probes.py)
do not run: each call below drives one finding's line (named in its label) with arguments that reach
it, torch 2.13.0 CPU, eager backend, dynamo's `graph_breaks` log. A line that the call runs and that
dynamo does not log is a false finding; one it logs is real (bench/results/precision_untuned22.md).

    cd bench && PYTHONPATH=$PWD/..:$PWD V/bin/python reach22_judge.py
"""

from __future__ import annotations

import torch
from break_probe import compile_run, listen, package_site, probe_header, probe_rows
from precision_untuned22_probes import SYMBOLS, ani_inputs

PACKAGES = ("snntorch", "torchani")


def snntorch_calls() -> list:
    from snntorch import spikegen
    from snntorch.functional import loss

    gen = torch.Generator().manual_seed(0)
    data = torch.rand(4, 3, generator=gen)
    targets = torch.tensor([0, 1, 2, 1])
    spikes6 = (torch.rand(5, 4, 6, generator=gen) > 0.5).float()
    return [
        ("rate num_steps=4 (138)", lambda: lambda d: spikegen.rate(d, num_steps=4), (data,)),
        ("latency num_steps=4 (244, 287)", lambda: lambda d: spikegen.latency(d, num_steps=4), (data,)),
        ("latency bypass (276)", lambda: lambda d: spikegen.latency(d, bypass=True), (data,)),
        ("latency first_spike_time=1 (694)", lambda: lambda d: spikegen.latency(d, num_steps=6, first_spike_time=1), (data,)),
        ("latency linear normalize (590)", lambda: lambda d: spikegen.latency(d, num_steps=4, linear=True, normalize=True), (data,)),
        ("targets_rate first_spike_time=1 (1041)", lambda: lambda t: spikegen.targets_rate(t, 3, num_steps=4, first_spike_time=1), (targets,)),
        ("targets_rate correct_rate=0.5 (1056, 1062)", lambda: lambda t: spikegen.targets_rate(t, 3, num_steps=4, correct_rate=0.5), (targets,)),
        ("target_rate_code first_spike_time=1 (1233)", lambda: lambda n: spikegen.target_rate_code(4, first_spike_time=1), (1,)),
        ("rate_interpolate (1283, 1302, 1303)", lambda: lambda s: spikegen.rate_interpolate(s, num_steps=6), (torch.tensor([0.0, 2.0]),)),
        ("ce_rate_loss population_code (112, 116)", lambda: loss.ce_rate_loss(population_code=True, num_classes=3), (spikes6, targets)),
        ("ce_count_loss population_code (39, 53)", lambda: loss.ce_count_loss(population_code=True, num_classes=3), (spikes6, targets)),
        ("mse_count_loss (311, 312)", lambda: loss.mse_count_loss(), (spikes6[..., :3], targets)),
        ("mse_count_loss population_code (323, 328)", lambda: loss.mse_count_loss(population_code=True, num_classes=3), (spikes6, targets)),
    ]  # fmt: skip


def torchani_calls() -> list:
    from break_probe import CallWith
    from torchani import neighbors, utils
    from torchani.arch import ANI, simple_ani

    elem = torch.tensor([[1, 0, 0, 0, 0], [3, 0, 0, -1, -1]])
    coords = ani_inputs()[1]
    cell, pbc = torch.eye(3) * 12.0, torch.tensor([True, True, True])

    def verlet_twice(nl, *args):
        nl(*args)
        return nl(*args)

    return [
        ("AllPairs pbc (262-264)", neighbors.AllPairs, (5.2, elem, coords, cell, pbc)),
        ("CellList pbc (458)", neighbors.CellList, (5.2, elem, coords, cell, pbc)),
        ("VerletCellList pbc twice (887, 954)", lambda: CallWith(neighbors.VerletCellList(), verlet_twice), (5.2, elem, coords, cell, pbc)),
        ("simple_ani periodic_table_index=False (788)", lambda: simple_ani(SYMBOLS, "wb97x-631gd", periodic_table_index=False), ((elem, coords),)),
        ("map_to_central (297, 298)", lambda: utils.map_to_central, (coords, cell, pbc)),
        ("_NumbersConvert (315, 318, 319)", lambda: utils._NumbersConvert({1: "H", 6: "C", 8: "O"}), (torch.tensor([6, 1, 1, -1]),)),
        ("AtomicNumbersToMasses (484)", utils.AtomicNumbersToMasses, (torch.tensor([[6, 1, 1, -1]]),)),
        ("members_forces, coords without grad (532)", lambda: CallWith(simple_ani(SYMBOLS, "wb97x-631gd", ensemble_size=2), ANI.members_forces), (ani_inputs(),)),
        ("discard_inter_molecule_pairs (38)", lambda: lambda n, m: neighbors.discard_inter_molecule_pairs(n, m), (neighbors.all_pairs(5.2, elem, coords), torch.tensor([0, 0, 0, 0, 0, 1, 1, 1, 1, 1]))),
    ]  # fmt: skip


def main() -> None:
    def run(label, fn, args, breaks, kwargs=None):
        train = "forces" in label
        return compile_run(
            ("train " if train else "") + label, fn, args, breaks, lambda p: package_site(p, PACKAGES), kwargs
        )

    breaks = listen()
    probe_header()
    probe_rows(snntorch_calls() + torchani_calls(), run, PACKAGES, breaks, build=True)


if __name__ == "__main__":
    main()
