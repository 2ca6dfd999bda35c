"""The fixed variant of a model: a copy of its source folder with fuselint's fixes applied.

verify compares the source as the user wrote it with the source `fuselint check --fix`
would leave, so the copy is made with the same catalog, settings and fix engine.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from fuselint.catalog import Catalog
from fuselint.config import Config
from fuselint.source.fixer import fix_text, line_length_for
from fuselint.source.lint import discover, lint_text, read_source


@dataclass(frozen=True)
class FixedFile:
    path: str  # relative to the copied folder
    fixes: int
    codes: tuple[str, ...]


def copy_with_fixes(
    src: Path, dst: Path, catalog: Catalog, config: Config, *, unsafe: bool, keep=None
) -> list[FixedFile]:
    """Copy every Python file under `src` to `dst`, fixing what fuselint can fix (only the
    fixes `keep` accepts, when given: those a proof kept)."""
    from fuselint.verify.prove import only_kept

    fixed = []
    dst.mkdir(parents=True, exist_ok=True)
    for path in discover([str(src)], config):
        rel = path.relative_to(src)
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        text, encoding, error = read_source(path)
        if error is not None:
            shutil.copy2(path, target)
            continue
        result = fix_text(
            text,
            lambda t, p=str(path): only_kept(lint_text(p, t, catalog, config), keep),
            unsafe=unsafe,
            line_length=line_length_for(path),
        )
        target.write_text(result.text, encoding=encoding, newline="")
        if result.applied:
            # As `check --fix` counts: the findings a user was shown that the fixes removed.
            codes = tuple(sorted({f.code for f in result.applied}))
            fixed.append(FixedFile(str(rel), result.fixed, codes))
    return fixed
