"""A method that a class decorator swaps away unless the user picks an option sits on that option's road.

transformers 5.x's `@use_experts_implementation` replaces a mixture-of-experts class's `forward` with the
kernel `config._experts_implementation` names (`grouped_mm` by default); the class's own python loop runs
only with `experts_implementation="eager"` (bench/moe21_probes.py checks that with dynamo on tiny
transformers models). `fuselint/source/dispatchers.toml` names the decorator; it counts only where the
file's imports resolve it there, in a file that defines the model class and does not pick the
implementation itself (openai_privacy_filter defaults to "eager").
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from cli_runner import run
from source_rules_helpers import CATALOG

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.dispatchers import dispatchers
from fuselint.source.lint import _code_stamp, lint_text
from fuselint.source.paths import OPTION, normal_path_only, off_path

BREAKS = Path(__file__).resolve().parents[2] / "fixtures" / "breaks"
DISPATCHED = BREAKS / "dispatched_experts.py"
EAGER = BREAKS / "eager_experts.py"
EAGER_ROAD = 'option:experts_implementation="eager"'
LOOP_LINES = {39: "FL106", 40: "FL107", 42: "FL102", 44: "FL106"}

MODEL = """
    {imports}
    from ...modeling_utils import PreTrainedModel


    def hit_count(counts):
        return (counts > 0).sum().item()


    def shared(x):
        return x[x > 0]


    @{decorator}
    class TinyExperts(nn.Module):
        def forward(self, hidden_states, counts):
            out = torch.zeros_like(hidden_states)
            for expert_idx in (counts > 0).nonzero():
                out = out + hidden_states[expert_idx]
            return out * hit_count(counts) + shared(hidden_states).sum()


    class TinyMLP(nn.Module):
        def forward(self, hidden_states):
            return shared(hidden_states)


    class TinyPreTrainedModel(PreTrainedModel):
    {model_body}
"""


def _model_file(root: Path, imports: str, decorator: str, model_body: str = "    pass") -> Path:
    """`transformers/models/tiny/modeling_tiny.py` under `root`, a package tree as installed, with the
    decorator spelled as given."""
    package = root / "transformers"
    for folder in (package, package / "integrations", package / "models", package / "models" / "tiny"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").touch()
    (package / "integrations" / "moe.py").write_text(
        "def use_experts_implementation(cls=None, **kw):\n    pass\n"
    )
    (package / "mylib.py").write_text("def use_experts_implementation(cls):\n    return cls\n")
    text = MODEL.format(
        imports=f"import torch\n    from torch import nn\n    {imports}",
        decorator=decorator,
        model_body=model_body,
    )
    path = package / "models" / "tiny" / "modeling_tiny.py"
    path.write_text(textwrap.dedent(text))
    return path


def _roads(path: Path) -> dict[tuple[int, str], str | None]:
    found = lint_text(str(path), path.read_text(), CATALOG, Config(select=("FL1",)))
    return {(f.span.line, f.code): off_path(f) for f in found}


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_the_dispatcher_data_names_the_transformers_decorator_and_its_option():
    (moe,) = dispatchers()
    assert "transformers.integrations.moe.use_experts_implementation" in moe.names
    assert "transformers.integrations.use_experts_implementation" in moe.names
    assert moe.swaps == {"forward"}
    assert moe.kept_by == 'experts_implementation="eager"'
    assert "get_correct_experts_implementation" in moe.overrides


def test_the_fixture_loop_sits_on_the_option_road_and_says_so():
    found = lint_text(str(DISPATCHED), DISPATCHED.read_text(), CATALOG, Config(select=("FL1",)))
    assert {f.span.line: f.code for f in found} == LOOP_LINES
    assert {off_path(f) for f in found} == {EAGER_ROAD}
    assert all('(only with experts_implementation="eager": ' in f.message for f in found)
    assert normal_path_only(found) == []


def test_a_look_alike_decorator_of_the_same_name_leaves_the_loop_normal():
    found = lint_text(str(EAGER), EAGER.read_text(), CATALOG, Config(select=("FL1",)))
    assert {f.span.line: f.code for f in found} == LOOP_LINES
    assert {off_path(f) for f in found} == {None}


def test_the_decorator_resolves_through_every_import_form(tmp_path: Path):
    forms = {
        "relative module": (
            "from ...integrations.moe import use_experts_implementation",
            "use_experts_implementation",
        ),
        "re-export": ("from ...integrations import use_experts_implementation", "use_experts_implementation"),
        "alias": ("from ...integrations import use_experts_implementation as dispatch", "dispatch"),
        "module attribute": (
            "from ...integrations import moe",
            "moe.use_experts_implementation(has_bias=True)",
        ),
        "absolute": (
            "import transformers.integrations.moe as moe_impl",
            "moe_impl.use_experts_implementation",
        ),
    }
    for form, (imports, decorator) in forms.items():
        path = _model_file(tmp_path / form.replace(" ", "_"), imports, decorator)
        roads = _roads(path)
        loop = _line(path, "for expert_idx in")
        assert roads[(loop, "FL107")] == EAGER_ROAD, form
        # a helper only the swapped forward calls is on its road; one a normal forward also calls is not
        assert roads[(_line(path, "(counts > 0).sum().item()"), "FL101")] == EAGER_ROAD, form
        assert roads[(_line(path, "return x[x > 0]"), "FL106")] is None, form


def test_a_name_that_resolves_elsewhere_is_no_dispatcher(tmp_path: Path):
    forms = {
        "other module": ("from ...mylib import use_experts_implementation", "use_experts_implementation"),
        "unresolved": ("from mylib import use_experts_implementation", "use_experts_implementation"),
        "other attribute": ("from ...integrations import moe", "moe.use_kernel_forward_from_hub"),
    }
    for form, (imports, decorator) in forms.items():
        path = _model_file(tmp_path / form.replace(" ", "_"), imports, decorator)
        assert _roads(path)[(_line(path, "for expert_idx in"), "FL107")] is None, form


def test_a_file_that_picks_the_implementation_itself_or_defines_no_model_stays_normal(tmp_path: Path):
    imports = "from ...integrations import use_experts_implementation"
    # openai_privacy_filter's override: an unset option means the swapped-away loop
    override = (
        "    def get_correct_experts_implementation(self, requested_experts):\n"
        '            requested_experts = "eager" if requested_experts is None else requested_experts\n'
        "            return super().get_correct_experts_implementation(requested_experts)"
    )
    path = _model_file(tmp_path / "override", imports, "use_experts_implementation", override)
    assert _roads(path)[(_line(path, "for expert_idx in"), "FL107")] is None
    path = _model_file(tmp_path / "no_model", imports, "use_experts_implementation")
    path.write_text(
        path.read_text().replace("class TinyPreTrainedModel(PreTrainedModel):", "class TinyConfig:")
    )
    assert _roads(path)[(_line(path, "for expert_idx in"), "FL107")] is None


def test_paths_normal_drops_the_option_road_and_paths_all_keeps_it(tmp_path: Path):
    for fixture in (DISPATCHED, EAGER):
        (tmp_path / fixture.name).write_text(fixture.read_text())
    args = ["check", "--no-cache", "--select", "FL1", "--format", "json", "--exit-zero"]
    every = json.loads(run([*args, "--paths", "all", "."], tmp_path).output)
    normal = json.loads(run([*args, "--paths", "normal", "."], tmp_path).output)
    dispatched = [f for f in every if f["filename"].endswith(DISPATCHED.name)]
    assert len(dispatched) == 4
    assert all(f["details"]["path"] == EAGER_ROAD for f in dispatched)
    assert all('only with experts_implementation="eager"' in f["message"] for f in dispatched)
    assert {Path(f["filename"]).name for f in normal} == {EAGER.name}
    assert len(normal) == 4


def test_the_rule_page_example_sits_on_the_option_road():
    rule = next(r for r in load_catalog() if r.code == "FL107")
    example = next(text for text in rule.bad if "use_experts_implementation" in text)
    found = [
        f for f in lint_text("example.py", example, CATALOG, Config(select=("FL107",))) if f.code == "FL107"
    ]
    assert [off_path(f) for f in found] == [EAGER_ROAD]
    assert off_path(found[0]).partition(":")[0] == OPTION


def test_an_edit_of_the_dispatcher_data_is_not_answered_from_the_cache():
    data = Path(__file__).resolve().parents[2] / "fuselint" / "source" / "dispatchers.toml"
    before = _code_stamp()
    stat = data.stat()
    try:
        os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        assert _code_stamp() != before
    finally:
        os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
