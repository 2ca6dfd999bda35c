"""A run that fails is one line naming the user's exception and line, on every device; torch's
own log stays off the console and waits in the error's detail for --verbose."""

from __future__ import annotations

import logging

import pytest

from fuselint.graph.capture import capture
from fuselint.graph.entry import EntryError, load_entry


def _failure(entry: str, device: str | None = None) -> EntryError:
    with pytest.raises(EntryError) as info:
        capture(load_entry(entry), device=device)
    return info.value


@pytest.mark.parametrize("device", [None, "meta"])
def test_fake_tensor_failure_names_the_users_error_and_line(fixture_entry, line_of, device):
    message = str(_failure(fixture_entry("failing_forward.py"), device))
    line = line_of("failing_forward.py", "h @ torch.ones(3, 3)")
    assert f"failing_forward.py:{line} in forward" in message
    assert "RuntimeError: a and b must have same reduction dim" in message
    assert "fake tensor" not in message and "TorchRuntimeError" not in message
    assert "--verbose" in message and "\n" not in message


def test_a_plain_exception_is_located_where_it_was_raised(fixture_entry, line_of):
    message = str(_failure(fixture_entry("failing_forward.py", "raises")))
    line = line_of("failing_forward.py", "raise ValueError(")
    assert f"failing_forward.py:{line} in _check" in message
    assert "ValueError: expected 16 features, got 8" in message


def test_torch_log_stays_off_the_console_and_goes_to_the_detail(fixture_entry):
    seen: list[str] = []

    class Console(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    fake_log = logging.getLogger("torch._subclasses.fake_tensor")
    console = Console()
    fake_log.addHandler(console)
    try:
        error = _failure(fixture_entry("failing_forward.py"))
        assert console in fake_log.handlers  # the user's handlers are back as they were
    finally:
        fake_log.removeHandler(console)
    assert seen == []
    assert "failed while attempting to run meta for aten.mm" in error.detail
    assert "Traceback" in error.detail
