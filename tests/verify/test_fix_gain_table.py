"""bench/fix_gain.py's table: ratios, geomeans and skipped rows, from made-up measurements (no model runs)."""

from __future__ import annotations

import json
import math

import pytest
from bench_loader import bench_module


@pytest.fixture(scope="module")
def gain():
    return bench_module("fix_gain")


def _side(graphs, breaks, first_s, median_s, calls=40):
    return {
        "graphs": graphs,
        "breaks": breaks,
        "graphs_end": graphs,
        "breaks_end": breaks,
        "first_s": first_s,
        "median_s": median_s,
        "calls": calls,
    }


def _measured() -> dict:
    return {
        "env": "made-up GPU, torch 0.0",
        "config": "device cuda, scale 8",
        "command": "python bench/fix_gain.py --device cuda",
        "commit": "abc1234",
        "models": {
            "hf_big_bird": {
                "package": "transformers",
                "sites_before": 2,
                "inputs": [[16, 64]],
                "backends": {
                    "eager": {
                        "original": _side(0, 0, 0.05, 0.010),
                        "fixed": _side(0, 0, 0.05, 0.009),
                        "diff": "0.00e+00",
                    },
                    "fuselint": {
                        "original": _side(11, 13, 20.0, 0.004),
                        "fixed": _side(1, 0, 5.0, 0.002),
                        "diff": "0.00e+00",
                    },
                    "inductor": {"skipped": "budget: 12 s left"},
                },
            },
            "esm2": {
                "package": "esm",
                "sites_before": 1,
                "inputs": [[16, 16]],
                "backends": {
                    "fuselint": {
                        "original": _side(2, 1, 4.0, 0.001),
                        "fixed": _side(1, 0, 8.0, 0.002),
                        "diff": "0.00e+00",
                    },
                    "inductor": {
                        "original": _side(2, 1, 9.0, None),
                        "error": "child exited: RuntimeError: boom",
                    },
                },
            },
            "hf_vits": {"package": "transformers", "skipped": "not traced: No module named 'transformers'"},
        },
    }


def test_ratios_are_fixed_over_original(gain):
    rows = {(r["model"], r["backend"]): r for r in gain.summarize(_measured())}
    bird = rows["hf_big_bird", "fuselint"]
    assert bird["graphs"] == (11, 1) and bird["breaks"] == (13, 0)
    assert bird["steady_ms"] == pytest.approx((4.0, 2.0))
    assert bird["steady_ratio"] == pytest.approx(0.5)
    assert bird["first_ratio"] == pytest.approx(0.25)
    assert rows["esm2", "fuselint"]["steady_ratio"] == pytest.approx(2.0)
    # dynamo counts mean nothing for eager, and a failed pair has no ratio, only its reason
    assert rows["hf_big_bird", "eager"]["graphs"] == (None, None)
    failed = rows["esm2", "inductor"]
    assert failed["steady_ratio"] is None and "RuntimeError: boom" in failed["note"]
    assert rows["hf_big_bird", "inductor"]["note"] == "budget: 12 s left"
    assert rows["hf_vits", "-"]["note"].startswith("not traced")


def test_geomean_skips_missing_values(gain):
    assert gain.geomean([0.5, 2.0, None]) == pytest.approx(1.0)
    assert gain.geomean([0.25, 1.0]) == pytest.approx(0.5)
    assert gain.geomean([]) is None
    assert gain.ratio(None, 1.0) is None and gain.ratio(1.0, 0.0) is None


def test_markdown_shows_each_row_and_the_geomeans(gain):
    text = gain.markdown(_measured())
    # fuselint: steady ratios 0.5 and 2.0 -> geomean 1.00; first-call ratios 0.25 and 2.0 -> sqrt(0.5)
    assert (
        "- fuselint: geomean fixed/original steady 1.00, "
        f"first call {math.sqrt(0.5):.2f} over 2 models" in text
    )
    assert "- inductor: geomean fixed/original steady -, first call - over 0 models" in text
    assert (
        "| hf_big_bird | [[16, 64]] | fuselint | 11 → 1 | 13 → 0 | 20.00 → 5.00 | 0.25 | 4.000 → 2.000 | 0.50 |"
        in text
    )
    assert "| hf_big_bird | [[16, 64]] | inductor | - → - | - → - |" in text and "budget: 12 s left" in text
    assert "| hf_vits |  | - |" in text and "No module named 'transformers'" in text
    assert "commit abc1234" in text and "device cuda, scale 8" in text
    assert gain.markdown(_measured()) == text  # same measurements, same report


def test_unknown_model_is_a_one_line_error(gain, capsys):
    assert gain.main(["--models", "no_such_model"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "fix_gain: unknown model or backend: no_such_model"


def test_a_recompile_after_the_first_call_is_noted(gain):
    measured = _measured()
    pair = measured["models"]["esm2"]["backends"]["fuselint"]
    pair["fixed"]["graphs_end"] = 3  # one graph at the first call, two more during the rounds
    pair["fixed"]["vs_eager"] = "1.50e-07"
    rows = {(r["model"], r["backend"]): r for r in gain.summarize(measured)}
    assert rows["esm2", "fuselint"]["graphs"] == (2, 3)
    assert rows["esm2", "fuselint"]["note"] == "fixed recompiled after the first call (+2 graphs)"
    assert rows["hf_big_bird", "fuselint"]["note"] == ""
    assert "| 0.00e+00 | 1.50e-07 | fixed recompiled after the first call (+2 graphs) |" in gain.markdown(
        measured
    )


def test_tables_are_written_whole_after_each_pair(gain, tmp_path):
    """A run stopped from outside (a device's time limit) keeps what it measured: _write replaces
    both files with the table so far, and a second write replaces, never appends."""
    md, js = tmp_path / "gain.md", tmp_path / "gain.json"
    args = type("A", (), {"md": str(md), "json": str(js)})()
    measured = _measured()
    measured["models"]["hf_reformer"] = {"package": "transformers", "sites_before": 3}  # its turn is to come
    text = gain._write(measured, args)
    assert "| hf_reformer |" in text and "not measured yet" in text
    assert md.read_text() == text and "hf_big_bird" in text
    assert json.loads(js.read_text())["models"].keys() == measured["models"].keys()
    measured["models"] = {"hf_big_bird": measured["models"]["hf_big_bird"]}
    gain._write(measured, args)
    assert "| esm2 |" not in md.read_text() and "| hf_big_bird |" in md.read_text()
    assert list(json.loads(js.read_text())["models"]) == ["hf_big_bird"]


def _two_runs() -> tuple[dict, dict]:
    """A run cut short by its budget, and a second run of what the first skipped."""
    first = _measured()
    first["models"]["hf_big_bird"]["backends"].pop("eager")
    first["models"]["esm2"]["backends"]["inductor"] = {"skipped": "budget: 3 s left"}
    second = {**_measured(), "command": "python bench/fix_gain.py --models esm2,hf_vits", "commit": "def5678"}
    second["models"] = {
        "esm2": {
            "package": "esm",
            "sites_before": 1,
            "inputs": [[16, 16]],
            "backends": {
                "fuselint": {"skipped": "budget: 0 s left"},
                "inductor": {
                    "original": _side(2, 1, 9.0, 0.004),
                    "fixed": _side(1, 0, 9.0, 0.001),
                    "diff": "0.00e+00",
                },
            },
        },
        "hf_vits": {
            "package": "transformers",
            "sites_before": 3,
            "inputs": [[1, 8]],
            "backends": {
                "fuselint": {"original": _side(10, 9, 11.0, 0.006), "fixed": _side(2, 1, 11.0, 0.003)}
            },
        },
    }
    return first, second


def test_merge_keeps_measured_pairs_over_skipped_ones(gain):
    merged = gain.merge_runs(list(_two_runs()))
    assert list(merged["models"]) == ["hf_big_bird", "esm2", "hf_vits"]
    esm = merged["models"]["esm2"]["backends"]
    # the first run's fuselint pair survives the second run's skip; the second run's inductor pair
    # replaces the first run's skip
    assert esm["fuselint"]["fixed"]["median_s"] == 0.002
    assert esm["inductor"]["fixed"]["median_s"] == 0.001
    # a model the first run could not trace takes the second run's measurements
    vits = merged["models"]["hf_vits"]
    assert "skipped" not in vits and vits["sites_before"] == 3
    assert merged["commit"] == "abc1234, def5678" and " ; " in merged["command"]


def test_merge_option_writes_one_table_with_geomeans(gain, tmp_path, capsys):
    names = []
    for i, run in enumerate(_two_runs()):
        names.append(tmp_path / f"run{i}.json")
        names[-1].write_text(json.dumps(run))
    md, out = tmp_path / "all.md", tmp_path / "all.json"
    assert gain.main(["--merge", ",".join(map(str, names)), "--md", str(md), "--json", str(out)]) == 0
    text = md.read_text()
    # fuselint steady ratios: big_bird 0.5, esm2 2.0, vits 0.5 -> geomean 0.5^(1/3); inductor: esm2 0.25
    assert f"- fuselint: geomean fixed/original steady {0.5 ** (1 / 3):.2f}, " in text
    assert "over 3 models" in text
    assert "- inductor: geomean fixed/original steady 0.25, first call 1.00 over 1 models" in text
    assert "| hf_vits | [[1, 8]] | fuselint | 10 → 2 |" in text
    assert json.loads(out.read_text())["models"]["esm2"]["backends"]["inductor"]["fixed"]["median_s"] == 0.001
    assert text in capsys.readouterr().out


def test_merge_of_a_missing_file_is_a_one_line_error(gain, tmp_path, capsys):
    assert gain.main(["--merge", str(tmp_path / "nope.json")]) == 2
    assert capsys.readouterr().err.strip() == f"fix_gain: --merge: no such file: {tmp_path / 'nope.json'}"


def test_listed_files_are_the_installed_ones_of_fix_rates_list(gain, tmp_path):
    # fix_gain fixes fix_rate's files too, so the copy it times is the one fix_rate counts
    installed = tmp_path / "site" / "diffusers"
    (installed / "schedulers").mkdir(parents=True)
    (installed / "schedulers" / "scheduling_ddpm.py").write_text("x = 1\n")
    listing = tmp_path / "fix_rate-files.txt"
    listing.write_text(
        "diffusers/schedulers/scheduling_ddpm.py\n"
        "diffusers/schedulers/gone.py\n"  # not in this install
        "kornia/feature/disk.py\n"  # a package not installed
        "\n"
    )
    found = gain.listed_files(str(listing), {"diffusers": str(installed)})
    assert found == [str(installed / "schedulers" / "scheduling_ddpm.py")]
    assert gain.listed_files("", {"diffusers": str(installed)}) == []
