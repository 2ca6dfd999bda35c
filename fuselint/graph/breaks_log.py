"""Read dynamo's graph-break log: turn one log record's text into a RawBreak.

Dynamo writes each break to its `graph_breaks` artifact loggers in one of a few shapes:
  "Graph break in user code at FILE:LINE\\nGraph Break Reason: ...\\nUser code traceback: ..."
  "Graph break (user stack suppressed due to duplicate graph break) in user code at FILE:LINE ..."
  "Graph break: torch.compile cannot properly resume ... the following user code:\\n  File ..."
The text (plus the exception, when the record carries one) is parsed into the location dynamo
named, the user's frames, dynamo's reason and its stable `gbNNNN` id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.MULTILINE)
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_GB_ID = re.compile(r"\b(gb\d{4})\b")
# dynamo's generic preamble before the specific reason ("... when attempting to trace CALL: ...").
_PREAMBLE = re.compile(
    r"^(Encountered graph break when attempting to trace .*|Failed to handle graph break gracefully\..*)$"
)


@dataclass(frozen=True)
class RawBreak:
    """One break as dynamo logged it, before it is mapped to the user's code."""

    file: str  # where dynamo says it broke (may be inside copy.py or torch)
    line: int
    frames: tuple[tuple[str, int, str], ...]  # (file, line, function), outermost first
    reason: str  # dynamo's one-line reason ("Unsupported Tensor.item() call ...")
    explanation: str
    hints: tuple[str, ...]
    gb_id: str  # "gb0124", or "" when dynamo gave none
    duplicate: bool  # dynamo suppressed the stack because it had logged this break before
    skipped_frame: bool  # dynamo could not resume and ran the whole frame in eager


def parse_break(text: str) -> RawBreak | None:
    """Parse one graph-break log message; None when the text is not a graph break."""
    if "Graph break" not in text:
        return None
    # Frames come from the user traceback: the reason block may quote other lines of code.
    _, marker, stack = text.rpartition("User code traceback:")
    if not marker:
        _, marker, stack = text.rpartition("following user code:")
    frames = tuple((f, int(n), fn) for f, n, fn in _FRAME.findall(stack if marker else text))
    header = _HEADER.search(text)
    if header:
        file, line = header["file"], int(header["line"])
    elif frames:
        file, line = frames[-1][0], frames[-1][1]
    else:
        file, line = "", 0
    reason, explanation, hints = _reason(text)
    gb = _GB_ID.search(text)
    return RawBreak(
        file=file,
        line=line,
        frames=frames,
        reason=reason,
        explanation=explanation,
        hints=hints,
        gb_id=gb.group(1) if gb else "",
        duplicate="user stack suppressed" in text,
        skipped_frame="cannot properly resume" in text or "Skipping the function" in text,
    )


def _reason(text: str) -> tuple[str, str, tuple[str, ...]]:
    """(reason, explanation, hints) from the 'Graph Break Reason:' block or the exception text."""
    _, found, block = text.partition("Graph Break Reason:")
    if not found:
        # The skip form carries the reason in the exception appended after the traceback.
        block = text.split("Traceback (most recent call last):")[-1]
        block = "\n".join(
            ln for ln in block.splitlines() if not ln.startswith(("  File ", "    ")) and ln.strip()
        )
        block = re.sub(r"^[\w.]+(Unsupported|Error): ", "", block.strip())
    block = block.split("User code traceback:")[0]
    reason, explanation, hints = "", "", []
    for raw in block.splitlines():
        line = raw.strip()
        if not line or _PREAMBLE.match(line) or line.startswith(("For more details", "Developer debug")):
            continue
        if line.startswith("Explanation:"):
            # The first explanation belongs to the reason; a later one to the fallback around it.
            explanation = explanation or line.removeprefix("Explanation:").strip()
        elif line.startswith("Hint:"):
            hints.append(line.removeprefix("Hint:").strip())
        elif not reason:
            reason = line
    return reason or "graph break", explanation, tuple(hints)
