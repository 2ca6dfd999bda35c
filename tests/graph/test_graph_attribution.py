"""Whose frame a break lands on: the user's (torchvision and friends included), never fuselint's,
click's or the harness's, and the user's stack from the forward down to the break."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from fuselint.graph.breaks import break_details
from fuselint.graph.breaks_log import RawBreak
from fuselint.graph.capture import is_user_file, user_location, user_stack

TORCH = str(Path(torch.__file__).resolve().parent)
SITE = str(Path(TORCH).parent)
# A sibling package whose name starts with "torch": torchvision, torchaudio, torchao.
VISION = TORCH + "vision" + os.sep + "ops" + os.sep + "boxes.py"
CLICK = os.path.join(SITE, "click", "core.py")
FUSELINT = str(Path(__file__).resolve().parents[2] / "fuselint" / "graph" / "capture.py")
MODULE = os.path.join(TORCH, "nn", "modules", "module.py")
USER = "/home/me/project/detector.py"


def _raw(file: str, line: int, frames: list[tuple[str, int, str]]) -> RawBreak:
    return RawBreak(file, line, tuple(frames), "Dynamic shape operator", "", (), "gb0036", False, False)


# The Python stack dynamo logs: the command line and fuselint above the model call.
HARNESS = [
    ("/usr/lib/python3.11/runpy.py", 198, "_run_module_as_main"),
    (CLICK, 1443, "invoke"),
    (CLICK, 911, "invoke"),
    (FUSELINT, 420, "_run"),
    (MODULE, 1778, "_wrapped_call_impl"),
]


def test_packages_named_torch_something_are_user_code():
    assert is_user_file(VISION)
    assert not is_user_file(os.path.join(TORCH, "_dynamo", "utils.py"))
    assert not is_user_file(CLICK) and not is_user_file(FUSELINT)


def test_break_inside_torchvision_lands_in_torchvision():
    raw = _raw(
        VISION,
        151,
        [*HARNESS, (USER, 40, "forward"), (MODULE, 1789, "_call_impl"), (VISION, 151, "remove_small_boxes")],
    )
    assert user_location(raw) == (VISION, 151)
    assert user_stack(raw) == ((USER, 40, "forward"), (VISION, 151, "remove_small_boxes"))


def test_break_with_no_user_frame_is_never_placed_on_click():
    external = os.path.join(TORCH, "_dynamo", "external_utils.py")
    raw = _raw(external, 69, [*HARNESS, (external, 69, "inner")])
    assert user_location(raw) == (external, 69)
    assert user_stack(raw) == ()


def test_break_in_the_stdlib_called_by_the_model_lands_there_when_no_user_frame():
    copy_py = "/usr/lib/python3.11/copy.py"
    raw = _raw(copy_py, 153, [*HARNESS, (copy_py, 153, "deepcopy")])
    assert user_location(raw) == (copy_py, 153)


def test_builtin_model_break_is_said_plainly(captured):
    (brk,) = captured("builtin_model.py").breaks
    assert "click" not in brk.file and not brk.stack
    assert brk.file.startswith(TORCH + os.sep)
    assert "no frame of the model's own code" in dict(break_details(brk))["location"]


def test_stack_runs_from_the_forward_down_to_the_break(captured, trace_fixtures, line_of):
    (brk,) = captured("loop_break.py").breaks
    path = str(trace_fixtures / "loop_break.py")
    assert brk.stack == (
        (path, line_of("loop_break.py", "x = layer(x)"), "forward"),
        (path, line_of("loop_break.py", "if h.abs().max() > 1e4"), "forward"),
    )
    stack = dict(break_details(brk))["stack"].split("\n")
    assert [s.rsplit(":", 1)[1] for s in stack] == [f"{n} in forward" for _, n, _ in brk.stack]
    assert all(s.startswith(("fixtures/trace/loop_break.py:", path + ":")) for s in stack)
