"""Apply fixes: splice the findings' edits, add the imports they need with libcst, re-parse.

Edits are computed by the finders on `ast` positions and spliced into the original
text, so everything outside an edit (comments, spacing, quotes) stays byte for byte.
libcst parses only files that have a fix: to add missing imports without disturbing
the rest of the module and to prove the result is still Python. Fixing repeats until
no fixable finding is left or nothing changes (a fix may expose another).
"""

from __future__ import annotations

import ast
import builtins
import errno
import io
import os
import sys
import tempfile
import tokenize
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

import libcst as cst

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from fuselint.findings import Applicability, Edit, Finding
from fuselint.source.imports import ImportTable
from fuselint.source.module import newline_of
from fuselint.source.nodes import child_nodes, type_checking_only, walk
from fuselint.source.wrap import wrap

MAX_ROUNDS = 8
# black's and ruff-format's default, for a file whose pyproject.toml names none.
DEFAULT_LINE_LENGTH = 88


class FixError(Exception):
    """A fix that would leave the file invalid; the file is left untouched."""


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def apply_edits(text: str, edits: list[Edit]) -> str:
    """Splice non-overlapping edits (1-based line/column, end exclusive) into text."""
    starts = _offsets(text)
    newline = newline_of(text)

    def offset(line: int, column: int) -> int:
        if line - 1 >= len(starts) - 1:
            return len(text)
        return starts[line - 1] + column - 1

    out: list[str] = []
    cursor = 0
    for edit in sorted(edits):
        begin, end = offset(edit.line, edit.column), offset(edit.end_line, edit.end_column)
        if begin < cursor:
            raise FixError(f"overlapping edits at line {edit.line}")
        out.append(text[cursor:begin])
        out.append(edit.content.replace("\n", newline) if newline != "\n" else edit.content)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def _has_import(table: ImportTable, statement: str) -> bool:
    node = ast.parse(statement).body[0]
    if isinstance(node, ast.Import):
        return all(
            table.aliases.get(a.asname or a.name.split(".")[0])
            == (a.name if a.asname else a.name.split(".")[0])
            for a in node.names
        )
    if isinstance(node, ast.ImportFrom):
        return all(table.aliases.get(a.asname or a.name) == f"{node.module}.{a.name}" for a in node.names)
    return False


def add_imports(text: str, statements: list[str]) -> str:
    """Insert each missing import into the module's import block, where isort would put it
    (libcst, lossless): in torch's section, else the third-party one, straight imports before
    `from` imports, by name; never after the relative imports of the local section."""
    table = ImportTable.of(ast.parse(text))
    missing = [s for s in dict.fromkeys(statements) if not _has_import(table, s)]
    if not missing:
        return text
    module = cst.parse_module(text)
    body = list(module.body)
    for statement in sorted(missing, key=_sort_key, reverse=True):
        body = _insert_import(body, cst.parse_statement(statement))
    return module.with_changes(body=body).code


def _import_of(stmt: cst.CSTNode) -> cst.Import | cst.ImportFrom | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        node = stmt.body[0]
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            return node
    return None


def _module_name(node: cst.Import | cst.ImportFrom) -> str:
    if isinstance(node, cst.Import):
        return cst.Module([]).code_for_node(node.names[0].name)
    dots = "." * len(node.relative)
    return dots + (cst.Module([]).code_for_node(node.module) if node.module else "")


def _sort_key(statement: str | cst.CSTNode) -> tuple[bool, str]:
    """isort's order inside a section (ruff's default): `import x` before `from x import y`, by name."""
    node = _import_of(cst.parse_statement(statement) if isinstance(statement, str) else statement)
    return (isinstance(node, cst.ImportFrom), _module_name(node).lower())


def _section(node: cst.Import | cst.ImportFrom) -> str:
    name = _module_name(node)
    if name.startswith("."):
        return "local"
    root = name.split(".")[0]
    return "stdlib" if root in sys.stdlib_module_names or root == "__future__" else "third-party"


def _starts_group(stmt: cst.SimpleStatementLine) -> bool:
    return any(line.comment is None for line in stmt.leading_lines)


def _insert_import(body: list, new: cst.SimpleStatementLine) -> list:
    first = 1 if body and _is_docstring(body[0]) else 0
    block: list[int] = []
    for index in range(first, len(body)):
        if _import_of(body[index]) is None:
            break
        block.append(index)
    if not block:
        return body[:first] + [new] + body[first:]
    groups: list[list[int]] = []
    for index in block:
        if not groups or _starts_group(body[index]):
            groups.append([])
        groups[-1].append(index)

    def roots(group: list[int]) -> set[str]:
        return {_module_name(_import_of(body[i])).split(".")[0] for i in group}

    sections = [{_section(_import_of(body[i])) for i in g} for g in groups]
    target = next((g for g in groups if "torch" in roots(g)), None)
    if target is None:
        target = next((g for g, s in zip(groups, sections, strict=True) if s == {"third-party"}), None)
    if target is not None:
        key = _sort_key(new)
        after = [i for i in target if _sort_key(body[i]) <= key]
        if after:
            return body[: after[-1] + 1] + [new] + body[after[-1] + 1 :]
        head = body[target[0]]  # the new import opens the group: it takes the group's blank lines
        new = new.with_changes(leading_lines=head.leading_lines)
        return body[: target[0]] + [new, head.with_changes(leading_lines=())] + body[target[0] + 1 :]
    # No third-party section yet: a new one after the standard library's, before the local one.
    stdlib = [i for g, s in zip(groups, sections, strict=True) if s <= {"stdlib"} for i in g]
    blank = (cst.EmptyLine(),)
    if stdlib:
        at = stdlib[-1] + 1
        new = new.with_changes(leading_lines=blank)
        if at < len(body) and at in block and not _starts_group(body[at]):
            body = body[:at] + [body[at].with_changes(leading_lines=blank)] + body[at + 1 :]
        return body[:at] + [new] + body[at:]
    head = body[block[0]]
    new = new.with_changes(leading_lines=head.leading_lines)
    return body[: block[0]] + [new, head.with_changes(leading_lines=blank)] + body[block[0] + 1 :]


def _defined_name(definition: str) -> str:
    return next(n.name for n in ast.parse(definition).body if isinstance(n, (ast.FunctionDef, ast.ClassDef)))


def add_definitions(text: str, definitions: list[str]) -> str:
    """Insert each definition whose first `def` the module does not bind yet, once, after the
    module's imports (the last import before its first `def` or `class`), in the order given,
    two blank lines around each (PEP 8). A definition already there is left alone: idempotent."""
    if not definitions:
        return text
    tree = ast.parse(text)
    bound = _bound_in(tree.body)
    missing = [d for d in dict.fromkeys(definitions) if _defined_name(d) not in bound]
    if not missing:
        return text
    last = 0  # the line the definitions go after
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or (
            isinstance(stmt, (ast.Try, ast.If))
            and any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in walk(stmt))
        ):
            last = stmt.end_lineno or stmt.lineno
        elif last == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            last = stmt.end_lineno or stmt.lineno  # the docstring
    newline = newline_of(text)
    lines = text.splitlines(keepends=True)
    if last and not lines[last - 1].endswith(("\n", "\r")):
        lines[last - 1] += newline
    block = "".join(f"\n\n{d.rstrip()}\n" for d in missing).replace("\n", newline)
    return "".join(lines[:last]) + block + "".join(lines[last:])


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def remove_unused_imports(before: str, after: str) -> str:
    """Drop the module-level imports whose name `before` read and `after` no longer reads:
    those the fix made unused (ruff's F401), and no other."""
    old, new = ast.parse(before), ast.parse(after)
    unused = _read_names(old) - _read_names(new) - _string_constants(new)
    if not unused:
        return after
    module = cst.parse_module(after)
    body = []
    # The blank lines above a run of removed imports go to the statement after the run: the
    # group it opened stays apart, and the file's first statement keeps no blank line on top.
    orphaned: tuple | None = None
    for stmt in module.body:
        node = _import_of(stmt)
        kept = None
        if node is not None and not isinstance(node.names, cst.ImportStar) and not _has_comment(stmt):
            kept = [a for a in node.names if _bound_name(a) not in unused]  # a comment is not ours
        if kept == []:
            orphaned = stmt.leading_lines if orphaned is None else orphaned
            continue
        if orphaned is not None and (not body or not stmt.leading_lines):
            stmt = stmt.with_changes(leading_lines=orphaned)
        orphaned = None
        if kept is not None and len(kept) < len(node.names):
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            stmt = stmt.with_changes(body=[node.with_changes(names=kept)])
        body.append(stmt)
    return module.with_changes(body=body).code


def _has_comment(stmt: cst.SimpleStatementLine) -> bool:
    return stmt.trailing_whitespace.comment is not None or any(line.comment for line in stmt.leading_lines)


def _bound_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None:
        return cst.Module([]).code_for_node(alias.asname.name)
    return cst.Module([]).code_for_node(alias.name).split(".")[0]


def _read_names(tree: ast.Module) -> set[str]:
    return {n.id for n in walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}


def _string_constants(tree: ast.Module) -> set[str]:
    # A name listed in `__all__` (or otherwise spelled in a string) is kept: it may be exported.
    return {n.value for n in walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


@dataclass(frozen=True)
class FixResult:
    text: str
    applied: tuple[Finding, ...]  # every fix applied, in every round
    rounds: int
    # The findings of the first lint (the ones a user was shown) that the fixes removed. It
    # differs from len(applied): a later round may fix what an earlier fix exposed or rewrote.
    fixed: int = 0


def allowed(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (unsafe or finding.fix.applicability is Applicability.SAFE)


def _choose(findings: list[Finding]) -> list[Finding]:
    """Fixes whose edits do not overlap, first come first served in source order."""
    taken: list[tuple[tuple[int, int], tuple[int, int]]] = []
    chosen = []
    for finding in sorted(findings, key=lambda f: f.sort_key):
        ranges = [((e.line, e.column), (e.end_line, e.end_column)) for e in finding.fix.edits]
        if any(a < d and c < b for a, b in ranges for c, d in taken):
            continue
        taken.extend(ranges)
        chosen.append(finding)
    return chosen


def fix_text(
    text: str,
    lint: Callable[[str], list[Finding]],
    *,
    unsafe: bool = False,
    line_length: int = DEFAULT_LINE_LENGTH,
) -> FixResult:
    """Apply allowed fixes until none is left; every intermediate result must parse. A line a
    fix makes longer than `line_length` is wrapped (see `wrap`)."""
    applied: list[Finding] = []
    reported: list[Finding] = []
    first_round: list[Finding] = []
    unbound: set[tuple[str, str]] | None = None  # of `text`: a round's check hands it to the next
    for round_ in range(1, MAX_ROUNDS + 1):
        found = lint(text)
        fixable = [f for f in found if allowed(f, unsafe)]
        if round_ == 1:
            reported = fixable
        if not fixable:
            return FixResult(text, tuple(applied), round_ - 1, _fixed(reported, first_round, found))
        new_text = None
        chosen = _choose(fixable)
        if unbound is None:
            unbound = unbound_names(ast.parse(text))
        # All chosen fixes at once; if the result is broken, fall back to one at a time.
        for batch in [chosen, *([f] for f in chosen)]:
            candidate = _apply(text, batch, unbound, line_length)
            if candidate is not None and candidate[0] != text:
                (new_text, unbound), done = candidate, batch
                break
        if new_text is None:
            return FixResult(text, tuple(applied), round_, _fixed(reported, first_round, found))
        applied.extend(done)
        if round_ == 1:
            first_round = done
        text = new_text
    return FixResult(text, tuple(applied), MAX_ROUNDS, _fixed(reported, first_round, lint(text)))


def _fixed(reported: list[Finding], first_round: list[Finding], remaining: list[Finding]) -> int:
    """How many reported findings are gone: those fixed in the first round, and those a later
    round fixed (a finding counts as left while one of its code stays on the same text)."""
    done = {id(f) for f in first_round}
    left = Counter((f.code, f.source_line) for f in remaining)
    count = len(first_round)
    for finding in reported:
        if id(finding) in done:
            continue
        key = (finding.code, finding.source_line)
        if left[key]:
            left[key] -= 1
        else:
            count += 1
    return count


def _apply(
    text: str, findings: list[Finding], unbound: set[tuple[str, str]], line_length: int
) -> tuple[str, set[tuple[str, str]]] | None:
    """The text with `findings`' fixes applied, and the names its functions read unbound; None
    where the result does not parse or reads a name that `text` bound. Python's own parser is the
    judge (libcst parses the texts it edits, in `add_imports` and the like; a second libcst parse
    of every result cost a third of a second per round on a large file, NOTES fix12)."""
    try:
        edited = apply_edits(text, [e for f in findings for e in f.fix.edits])
        edited = add_imports(edited, [i for f in findings for i in f.fix.imports])
        edited = add_definitions(edited, [d for f in findings for d in f.fix.definitions])
        edited = remove_unused_imports(text, edited)
        edited = wrap_long_lines(text, edited, line_length)
        tree = ast.parse(edited)
    except (FixError, SyntaxError, ValueError, cst.ParserSyntaxError):
        return None
    # Parsing is not enough: a rewrite that drops an assignment whose name is still read
    # (`del logits` after inlining `logits`) parses, and raises NameError when run.
    now = unbound_names(tree)
    if now - unbound:
        return None
    return edited, now


def wrap_long_lines(before: str, after: str, limit: int) -> str:
    """Wrap each line of `after` that the edits made and that passes `limit`, unless the lines
    it replaced were as long: a line the author left too long is left as the author had it."""
    new = after.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in new]
    long = [i for i, line in enumerate(bare) if len(line) > limit]
    if not long:
        return after
    old = before.splitlines()
    longest_before: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, bare, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            for j in range(j1, j2):
                longest_before[j] = max((len(line) for line in old[i1:i2]), default=0)
    candidates = [i for i in long if i in longest_before and len(bare[i]) > max(longest_before[i], limit)]
    if not candidates:
        return after
    whole, inside = _line_kinds(after)
    newline = newline_of(after)
    for i in candidates:
        if i + 1 not in whole and i + 1 not in inside:
            continue
        lines = wrap(bare[i], limit, statement=i + 1 in whole)
        if lines is not None:
            new[i] = newline.join(lines) + new[i][len(bare[i]) :]
    return "".join(new)


def _line_kinds(text: str) -> tuple[set[int], set[int]]:
    """(lines holding exactly one whole simple statement, lines that start inside brackets)."""
    tree = ast.parse(text)
    counts = Counter(
        node.lineno
        for node in walk(tree)
        if isinstance(node, ast.stmt) and not isinstance(node, _COMPOUND) and node.lineno == node.end_lineno
    )
    starts = Counter(node.lineno for node in walk(tree) if isinstance(node, ast.stmt))
    whole = {line for line, n in counts.items() if n == 1 and starts[line] == 1}
    inside: set[int] = set()
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth -= 1
            elif token.type == tokenize.NL and depth > 0:
                inside.add(token.start[0] + 1)
    except (tokenize.TokenError, SyntaxError):
        return whole, set()
    return whole, inside


_COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Match,
)


def line_length_for(path: Path) -> int:
    """`line-length` of `[tool.ruff]` (or `[tool.black]`) in the nearest pyproject.toml, else 88."""
    for folder in path.resolve().parents:
        config = folder / "pyproject.toml"
        if not config.is_file():
            continue
        try:
            tool = tomllib.loads(config.read_text(encoding="utf-8")).get("tool", {})
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return DEFAULT_LINE_LENGTH
        for section in ("ruff", "black"):
            value = tool.get(section, {}).get("line-length")
            if isinstance(value, int) and value > 0:
                return value
        return DEFAULT_LINE_LENGTH
    return DEFAULT_LINE_LENGTH


def unbound_names(tree: ast.Module) -> set[tuple[str, str]]:
    """(function, name) for every name a function reads (or `del`s) that neither it, an
    enclosing function, the module nor the builtins binds: what would raise NameError. A name the
    module binds only under `if TYPE_CHECKING:` is not bound when the code runs (transformers'
    `import_utils.py` imports torch there: a fix that calls `torch.` in a function body of it
    raises NameError at run time)."""
    module_bound = _bound_in(_run_time(tree.body)) | set(dir(builtins))
    found: set[tuple[str, str]] = set()

    def visit(node: ast.AST, path: str, outer: frozenset[str]) -> None:
        for child in child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                name = f"{path}.{getattr(child, 'name', '<lambda>')}"
                args = child.args
                params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
                params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
                body = child.body if isinstance(child.body, list) else [child.body]
                bound = outer | params | _bound_in(body)
                for sub in _own_nodes(body):
                    if isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Store):
                        if sub.id not in bound and sub.id not in module_bound:
                            found.add((name, sub.id))
                visit(child, name, frozenset(bound))
            else:
                visit(child, path, outer)

    visit(tree, "", frozenset())
    return found


def _run_time(body: list[ast.stmt]) -> list[ast.stmt]:
    """A module's statements without the bodies of `if TYPE_CHECKING:` (their `else` runs)."""
    kept: list[ast.stmt] = []
    for stmt in body:
        if type_checking_only(stmt):
            kept.extend(_run_time(stmt.orelse))
        else:
            kept.append(stmt)
    return kept


_SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _own_nodes(body: list) -> list[ast.AST]:
    """Every node of `body`, not descending into nested functions, lambdas or classes."""
    out: list[ast.AST] = []
    todo = list(body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, _SCOPE_NODES):
            # Its name is bound here; its decorators and defaults run here; its body is its own.
            if not isinstance(node, ast.Lambda):
                todo.extend(node.decorator_list)
            if not isinstance(node, ast.ClassDef):
                todo.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
            continue
        todo.extend(child_nodes(node))
    return out


def _bound_in(body: list) -> set[str]:
    """Names a block binds: assignments, imports, defs, for/with/except targets, globals."""
    bound: set[str] = set()
    for node in _own_nodes(body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return bound


def write_atomically(path: Path, text: str, encoding: str) -> None:
    """Replace `path` with `text` in one rename, keeping its encoding and permissions.

    A symlink is written through (the rename lands on its target, the link stays a link).
    A read-only file raises PermissionError and is left as it is: the rename would
    otherwise succeed, since only the folder's permissions govern it.
    """
    target = path.resolve()
    mode = target.stat().st_mode
    if not mode & 0o222 or not os.access(target, os.W_OK):
        raise PermissionError(errno.EACCES, "the file is read-only", str(path))
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".fuselint")
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline="") as fh:
            fh.write(text)
        os.chmod(tmp, mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
