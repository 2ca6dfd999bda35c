"""Every kind of fix fuselint writes, with the fixture that proves it (issue 10: "each fix kind has a
fixture whose break dynamo confirms before the fix and not after").

The inventory is read from the code: each `Fix(...)` built in `fuselint/source` belongs to the
function that builds it. A fix that removes a graph break is listed in BREAK_FIXES with its fixture
under `fixtures/breaks/`, the start of its message, and the test module that runs the fixture under
dynamo (break before, none after, equal outputs); any other fix (a cast, a composite op, a `noqa`)
is listed in OTHER_FIXES. A new fix kind fails here until it is listed, so none ships without a
fixture.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fuselint.catalog import load_catalog
from fuselint.config import Config
from fuselint.source.lint import lint_text

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "fuselint" / "source"
FIXTURES = ROOT / "fixtures" / "breaks"
TESTS = ROOT / "tests" / "source"

# builder ("module:function", the module relative to fuselint/source) -> (fixture, message start, test module)
BREAK_FIXES = {
    "break_fixes:guard_side_effect": ("log_in_forward.py", "skip it while compiling", "test_break_fixes.py"),
    "break_fixes:drop_none_shortcut": ("mask_shortcut.py", "drop the shortcut", "test_break_fixes.py"),
    "break_fixes:assert_instead_of_raise": (
        "raise_on_values.py",
        "check it inside the graph",
        "test_break_fixes.py",
    ),
    "break_fixes:first_nonzero": ("next_timestep.py", "take the first match", "test_break_fixes.py"),
    "break_fixes:_candidates_or_fallback": (
        "step_candidates.py",
        "read the second match if there is one, else the first, else the fallback",
        "test_break_fixes.py",
    ),
    "break_fixes:second_match": (
        "second_match.py",
        "read the second match if there is one, else the first, from",
        "test_break_fixes.py",
    ),
    "break_fixes:iterate_a_tuple": ("comprehension_frame.py", "iterate a tuple of it", "test_break_fixes.py"),
    "break_fixes:iterate_without_bar": (
        "progress_bar.py",
        "iterate the loop's iterable itself",
        "test_break_fixes.py",
    ),
    "break_fixes:enter_without_bar": (
        "progress_bar_context.py",
        "enter no bar while compiling",
        "test_break_fixes.py",
    ),
    "buffer_rebinds:_register_fix": ("buffer_rebind.py", "register the buffer", "test_buffer_rebinds.py"),
    "checks/control_flow:_draw_fix": (
        "noise_branch.py",
        "run the branch on every call",
        "test_break_fixes.py",
    ),
    "checks/control_flow:_equal_values_fix": (
        "equal_values.py",
        "test the values first",
        "test_break_fixes.py",
    ),
    "checks/control_flow:_fix": (
        "paired_branch.py",
        "select with `torch.where` (both branches",
        "test_break_fixes.py",
    ),
    "checks/host_sync:_item_fix": ("item_scale.py", "keep the 0-d tensor", "test_break_fixes.py"),
    "checks/host_sync:_index_fix": ("computed_index.py", "read it as a tensor index", "test_break_fixes.py"),
    "checks/stored_lambdas:lambda_fix": (
        "stored_lambda.py",
        "select with `torch.where` inside the lambda",
        "test_break_fixes.py",
    ),
    "checks/untraceable:compile_only_defaults": (
        "compile_only_default.py",
        "make the default in compiled runs too",
        "test_break_fixes.py",
    ),
    "count_branches:count_branch_fix": (
        "keypoint_limit.py",
        "decide it with `guard_or_",
        "test_count_branches.py",
    ),
    "count_pads:_rewrite": ("pad_to_count.py", "pad without the test, by `", "test_count_pads.py"),
    "hit_loops:every_index": (
        "hit_experts.py",
        "loop over every index of the hit test",
        "test_unbacked_ops.py",
    ),
    "int_buffers:int_twin_fix": ("int_buffers.py", "read int twins", "test_int_buffers.py"),
    "item_asserts:item_assert": ("item_assert.py", "assert on the tensor itself", "test_item_asserts.py"),
    "masked_writes:masked_write": ("masked_write.py", "write through every index", "test_masked_writes.py"),
    "masked_writes:guarded_masked_store": (
        "zero_durations.py",
        "fold the test into the mask",
        "test_masked_writes.py",
    ),
    "numpy_numbers:numpy_on_numbers": ("numpy_config.py", "use `math.lcm`", "test_break_fixes.py"),
    "numpy_numbers:numpy_sum_as_size": ("numpy_sum_shape.py", "use the builtin `sum`", "test_break_fixes.py"),
    "tensor_checks:tensor_check_fix": (
        "tensor_check.py",
        "check on the device with `_assert_async",
        "test_tensor_checks.py",
    ),
    "unbacked_ops:_fix": (
        "expert_tokens.py",
        "run `torch.nonzero(x, as_tuple=True)` as the custom op",
        "test_unbacked_ops.py",
    ),
    "wrapped_numbers:wrapped_numbers": ("wrapped_number.py", "pass `", "test_break_fixes.py"),
}
# Fixes that remove no graph break: what they change is proven by their own rule tests.
OTHER_FIXES = {
    "lint:_noqa_removal": "an unused `noqa` directive (tests/source/test_noqa.py)",
    "checks/copies:needless_copy": "FL402, a needless copy (tests/test_rule_examples.py)",
    "checks/layout:_fix": "FL401, repeated casts (tests/test_rule_examples.py)",
    "patterns:_finding": "a composite op for scattered ops (tests/source/test_patterns*.py)",
}


def _builders() -> set[str]:
    """ "module:function" of every function in fuselint/source that calls `Fix(...)`."""
    found = set()
    for path in sorted(SOURCE.rglob("*.py")):
        module = path.relative_to(SOURCE).with_suffix("").as_posix()

        def visit(node: ast.AST, function: str | None) -> None:
            for child in ast.iter_child_nodes(node):
                inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
                if (
                    isinstance(child, ast.Call)
                    and isinstance(child.func, ast.Name)
                    and child.func.id == "Fix"
                ):
                    found.add(f"{module}:{function}")
                visit(child, inner)

        visit(ast.parse(path.read_text(encoding="utf-8")), None)
    return found


def test_every_fix_kind_is_listed_with_a_fixture_or_as_another_kind():
    built = _builders()
    unlisted = built - set(BREAK_FIXES) - set(OTHER_FIXES)
    assert not unlisted, (
        f"new fix kinds: list each in BREAK_FIXES with its fixture, or in OTHER_FIXES: {unlisted}"
    )
    gone = (set(BREAK_FIXES) | set(OTHER_FIXES)) - built
    assert not gone, f"listed fix kinds the code no longer builds: {gone}"
    assert not set(BREAK_FIXES) & set(OTHER_FIXES)


def test_message_starts_name_one_kind_each():
    starts = [start for _, start, _ in BREAK_FIXES.values()]
    for i, a in enumerate(starts):
        assert not any(b.startswith(a) for j, b in enumerate(starts) if j != i), a


@pytest.mark.parametrize("builder", sorted(BREAK_FIXES))
def test_each_break_fix_has_a_fixture_that_the_fix_rewrites_and_a_dynamo_test(builder):
    fixture, start, module = BREAK_FIXES[builder]
    path = FIXTURES / fixture
    findings = lint_text(str(path), path.read_text(encoding="utf-8"), load_catalog(), Config(select=("FL",)))
    messages = [f.fix.message for f in findings if f.fix]
    assert any(m.startswith(start) for m in messages), (fixture, messages)
    assert fixture in (TESTS / module).read_text(encoding="utf-8"), f"{module} does not run {fixture}"
