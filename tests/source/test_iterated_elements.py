"""An element a pipeline iterates from its scheduler's tensor state, handed to the scheduler's
`step` in another file (fixtures/breaks/pipeline_step): reach finds the scheduler's class through
an annotated parameter and a keyword setter, carries "an element of the receiver's `timesteps`" to
`step`, and `step`'s class decides that it is a 0-d tensor computed in the graph."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest
from cli_runner import run
from source_rules_helpers import dynamo_graphs

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.lint import discover, lint_tree

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "breaks" / "pipeline_step"
CATALOG = load_catalog()
TRACED = '[tool.fuselint]\ntraced-functions = ["*Pipeline.__call__"{more}]\n'


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "pipeline_step")
    return tmp_path / "pipeline_step"


def _sites(
    root: Path, traced: tuple[str, ...], text: dict[str, str] | None = None
) -> set[tuple[str, int, str]]:
    for name, body in (text or {}).items():
        (root / "steps" / FILES[name]).write_text(body)
    config = Config(root=root, traced_functions=traced, select=("FL101", "FL102"))
    findings = lint_tree(discover([str(root)], config), CATALOG, config, jobs=1).findings
    return {(Path(f.span.path).name, f.span.line, f.code) for f in findings}


FILES = {
    "scheduler.py": "schedulers/scheduling_step.py",
    "pipeline.py": "pipelines/pipeline_sampling.py",
    "pipeline_utils.py": "pipelines/pipeline_utils.py",
}
READS = {
    ("scheduling_step.py", 24, "FL101"),  # _variance: alphas_cumprod[timestep], handed on by step
    ("scheduling_step.py", 25, "FL102"),  # _variance: `if prev_timestep >= 0` on the handed tensor
    ("scheduling_step.py", 30, "FL101"),  # step: alphas_cumprod[timestep]
    ("scheduling_step.py", 31, "FL102"),  # step: `if prev_timestep >= 0`
}


def test_the_pipeline_loop_makes_the_step_read_a_computed_index(tree):
    assert _sites(tree, ("*Pipeline.__call__",)) == READS
    # also where `step` is an entry of its own (the corpus compiles steps alone too)
    assert _sites(tree, ("*Pipeline.__call__", "*Scheduler.step")) == READS


def test_a_run_naming_only_the_three_files_resolves_the_scheduler_through_its_package(tree):
    # `from ..schedulers import StepScheduler`: the package's `__init__` re-exports it; the run
    # names neither `__init__`, as bench/fix_rate.py names only site files and models' own files.
    config = Config(root=tree, traced_functions=("*Pipeline.__call__",), select=("FL101", "FL102"))
    files = [tree / "steps" / f for f in FILES.values()]
    findings = lint_tree(files, CATALOG, config, jobs=1).findings
    assert {(Path(f.span.path).name, f.span.line, f.code) for f in findings} == READS


def test_a_step_compiled_alone_reads_no_computed_index(tree):
    # Its `timestep` is a graph input: `alphas_cumprod[timestep]` traces (df_ddim_step, fixes10).
    assert {s for s in _sites(tree, ("*Scheduler.step",)) if s[2] == "FL101"} == set()


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        # the timesteps are a list of ints: their elements are Python ints
        (
            "scheduler.py",
            "self.timesteps = torch.from_numpy((np.arange(0, num_inference_steps) * ratio)[::-1].copy())",
            "self.timesteps = list(range(num_inference_steps))",
        ),
        # the loop walks something other than the receiver's attribute
        ("pipeline.py", "for t in self.scheduler.timesteps:", "for t in self.timesteps:"),
        # `t` is rebound in the loop: no longer the element
        (
            "pipeline.py",
            "model_output = self.denoiser(sample)",
            "model_output = self.denoiser(sample)\n            t = 3",
        ),
        # no annotation: which class `self.scheduler` holds is unknown
        ("pipeline.py", "scheduler: StepScheduler", "scheduler"),
        # the keyword setter stores something else than the keyword's value under its name
        ("pipeline_utils.py", "setattr(self, name, module)", "setattr(self, name, None)"),
    ],
)
def test_no_computed_index_without_each_link(tree, name, old, new):
    path = tree / "steps" / FILES[name]
    text = path.read_text()
    assert old in text
    text = text.replace(old, new)
    if name == "scheduler.py":  # a list of ints: `self.timesteps` in `__init__` too
        text = text.replace(
            "self.timesteps = torch.from_numpy(np.arange(0, num_train_timesteps)[::-1].copy())",
            "self.timesteps = list(range(num_train_timesteps))",
        )
    assert {s for s in _sites(tree, ("*Pipeline.__call__",), {name: text}) if s[2] == "FL101"} == set()


def test_the_iterated_element_is_named_in_the_message(tree):
    config = Config(root=tree, traced_functions=("*Pipeline.__call__",), select=("FL101",))
    findings = lint_tree(discover([str(tree)], config), CATALOG, config, jobs=1).findings
    message = next(f.message for f in findings if f.span.line == 30)
    assert "an element of `self.timesteps`" in message and "SamplingPipeline.__call__" in message


torch = pytest.importorskip("torch")


def _run(root: Path):
    """(graphs dynamo made, eager output, compiled output) of the pipeline's call over 4 steps."""
    sys.path.insert(0, str(root))
    try:
        for name in [m for m in sys.modules if m == "steps" or m.startswith("steps.")]:
            del sys.modules[name]
        pipeline = importlib.import_module("steps.pipelines.pipeline_sampling")
        scheduler = importlib.import_module("steps.schedulers")
    finally:
        sys.path.remove(str(root))
    torch.manual_seed(0)
    denoiser = torch.nn.Linear(4, 4)
    pipe = pipeline.SamplingPipeline(denoiser, scheduler.StepScheduler())
    pipe.scheduler.set_timesteps(4)
    x = torch.randn(2, 4)
    return dynamo_graphs(pipe.__call__, x)


def test_the_fix_keeps_the_loop_in_one_graph(tree):
    before = _run(tree)
    (tree / "pyproject.toml").write_text(TRACED.format(more=""))
    result = run(
        ["check", "--no-cache", "--fix", "--unsafe-fixes", "--format", "json", "--exit-zero", "steps"], tree
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == []  # every finding fixed
    fixed = (tree / "steps" / FILES["scheduler.py"]).read_text()
    want = "self.alphas_cumprod[torch.as_tensor(timestep,device=self.alphas_cumprod.device).unsqueeze(0)][0]"
    assert want in "".join(fixed.split())
    after = _run(tree)
    # Before: the read breaks in the loop, dynamo runs `__call__` in eager and compiles each
    # step as a frame of its own, breaking on `prev_timestep >= 0` there.
    assert before[0] > 1
    assert after[0] == 1
    assert torch.equal(before[1], after[1]) and torch.equal(after[1], after[2])


def test_an_annotation_names_the_stored_class_through_optional_and_union(tree):
    path = tree / "steps" / FILES["pipeline.py"]
    for spelled in ("StepScheduler | None", "Optional[StepScheduler]", '"StepScheduler"'):
        text = path.read_text().replace("scheduler: StepScheduler", f"scheduler: {spelled}")
        found = _sites(tree, ("*Pipeline.__call__",), {"pipeline.py": text})
        assert ("scheduling_step.py", 30, "FL101") in found, spelled
        path.write_text((FIXTURE / "steps" / FILES["pipeline.py"]).read_text())


def test_a_component_registered_by_keyword_is_not_followed_into_its_call(tree):
    # `self.scheduler(...)` of a registered component: a module's forward, an entry of its own.
    path = tree / "steps" / FILES["scheduler.py"]
    path.write_text(path.read_text() + "\n    def __call__(self, x):\n        return x[x.argmax()]\n")
    pipeline = tree / "steps" / FILES["pipeline.py"]
    text = pipeline.read_text().replace("        return sample\n", "        return self.scheduler(sample)\n")
    assert ("scheduling_step.py", 39, "FL101") not in _sites(
        tree, ("*Pipeline.__call__",), {"pipeline.py": text}
    )
    # stored directly from the annotated parameter, the call is followed
    direct = text.replace(
        "self.register_modules(denoiser=denoiser, scheduler=scheduler)",
        "self.denoiser = denoiser\n        self.scheduler = scheduler",
    )
    assert ("scheduling_step.py", 39, "FL101") in _sites(
        tree, ("*Pipeline.__call__",), {"pipeline.py": direct}
    )


@pytest.mark.parametrize(
    ("loop", "found"),
    [
        # a name every assignment binds to the receiver's attribute
        ("timesteps = self.scheduler.timesteps\n        for t in timesteps:", True),
        # also through enumerate and a progress bar
        (
            "timesteps = self.scheduler.timesteps\n        for i, t in enumerate(self.progress_bar(timesteps)):",
            True,
        ),
        # bound to something else too: unknown
        (
            "timesteps = self.scheduler.timesteps\n        timesteps = timesteps[1:]\n        for t in timesteps:",
            False,
        ),
    ],
)
def test_a_name_bound_to_the_receivers_attribute_is_iterated_from_it(tree, loop, found):
    path = tree / "steps" / FILES["pipeline.py"]
    text = path.read_text().replace("for t in self.scheduler.timesteps:", loop)
    sites = _sites(tree, ("*Pipeline.__call__",), {"pipeline.py": text})
    assert (("scheduling_step.py", 30, "FL101") in sites) is found
