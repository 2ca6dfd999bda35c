"""The pattern engine: every `kind = "pattern"` rule, run by one matcher over canonical terms.

A rule's `[pattern]` table is data (see `compile_rule` for its schema):

    [pattern]
    match = ["$x * torch.sigmoid($x)"]         # one or more alternatives
    replace = "torch.nn.functional.silu($x)"
    requires = "torch>=2.4"                    # optional: no fix on older torch
    [pattern.vars]
    x = "tensor"                               # or {kind = "dim", last = true}, ...

`match` is one template or a list of alternatives; `replace` is one template or one per
alternative. Templates are Python expressions; `$name` is a metavariable, and functions may
be spelled `torch.*`, `F.*` or `math.*` (they are resolved like the user's code). Kinds:
`tensor` (any non-constant expression; the default), `any`, `const` (a number, with
`value` and relative `tol` to require one), `int`, `dim` (an int constant or a name;
`last = true` requires -1), `scalar` (a number, name, attribute, or a power/product of
them: `eps`, `self.eps`, `d ** -0.5`), `dtype`, and `list` (a list/tuple of >= 2 elements
each matching the `each` template, written back with the `render` template). `shape`,
`domain`, `values` and `dtype` describe the inputs the equivalence test draws
(tests/source/test_pattern_equivalence.py); the engine ignores them.

The file is lowered block by block to canonical terms (`patterns_lower`), every
candidate sub-expression whose root op is the root op of some pattern, and which holds
all the ops that pattern needs, is matched (`patterns_match`), and a match becomes a
Finding whose fix is a text edit on the original source: the matched expression is
replaced by the rendered replacement (metavariables keep their original text) and the
statements of temporaries the match consumed are deleted. Nothing here knows any rule.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cache

from fuselint.catalog import Rule
from fuselint.findings import Edit, Finding, Fix, Gain
from fuselint.source.edits import applicability, preferred_quote, requote
from fuselint.source.module import SourceFile
from fuselint.source.nodes import child_nodes, walk
from fuselint.source.patterns_canon import Builder, Interner, Term, source_words, strip
from fuselint.source.patterns_lower import Block, Lowerer, module_constants
from fuselint.source.patterns_match import (
    KINDS,
    METAVAR,
    PATTERN_IMPORTS,
    PREFIX,
    Match,
    Pattern,
    PatternError,
    VarSpec,
    compile_pattern,
    count_launches,
    lower_template,
    match_root,
    position,
    template_ast,
)

PATTERN_KEYS = {"match", "replace", "vars", "tol", "requires"}
# Keys a metavariable may carry; shape/domain/values describe the inputs the equivalence test draws.
VAR_KEYS = {"kind", "value", "tol", "last", "each", "render", "shape", "domain", "values", "dtype"}


@dataclass
class CompiledRule:
    rule: Rule
    patterns: list[Pattern]
    fixable: bool  # the rule has a fix and the installed torch has what it needs


# ---------------------------------------------------------------------- compiling rules


def var_specs(table: dict, builder: Builder, tol: float) -> dict[str, VarSpec]:
    specs: dict[str, VarSpec] = {}
    for name, raw in table.items():
        spec = {"kind": raw} if isinstance(raw, str) else dict(raw)
        unknown = set(spec) - VAR_KEYS
        if unknown:
            raise PatternError(f"metavariable ${name}: unknown keys {sorted(unknown)}")
        kind = spec.get("kind", "tensor")
        if kind not in KINDS:
            raise PatternError(f"metavariable ${name}: kind must be one of {', '.join(KINDS)}")
        each = None
        if kind == "list":
            if "each" not in spec or "render" not in spec:
                raise PatternError(f"metavariable ${name}: a list needs `each` and `render` templates")
            each = compile_pattern(spec["each"], {}, builder, tol)
        specs[name] = VarSpec(
            name,
            kind,
            value=spec.get("value"),
            tol=float(spec.get("tol", 1e-5)),
            last=bool(spec.get("last", False)),
            each=each,
            render=spec.get("render", ""),
        )
    return specs


def compile_rule(rule: Rule) -> CompiledRule:
    """Lower a rule's pattern alternatives and replacement once; PatternError names the problem."""
    table = rule.pattern
    unknown = set(table) - PATTERN_KEYS
    if unknown:
        raise PatternError(f"{rule.code}: unknown [pattern] keys {sorted(unknown)}")
    if "match" not in table or "replace" not in table:
        raise PatternError(f"{rule.code}: [pattern] needs `match` and `replace`")
    alternatives = [table["match"]] if isinstance(table["match"], str) else list(table["match"])
    replaces = (
        [table["replace"]] * len(alternatives) if isinstance(table["replace"], str) else table["replace"]
    )
    if len(replaces) != len(alternatives):
        raise PatternError(f"{rule.code}: `replace` is one template or one per `match` alternative")
    tol = float(table.get("tol", 1e-5))
    builder = Builder(Interner())
    patterns = []
    for text in alternatives:
        specs = var_specs(table.get("vars", {}), builder, tol)
        pattern = compile_pattern(text, specs, builder, tol)
        opaque = _opaque_part(pattern.term)
        if opaque is not None:
            raise PatternError(
                f"{rule.code}: pattern {text!r} can never match: the engine does not model {opaque!r}"
            )
        if pattern.term.op in ("var", "c"):
            raise PatternError(f"{rule.code}: pattern {text!r} must have an operation at its root")
        missing = set(METAVAR.findall(replaces[len(patterns)])) - set(METAVAR.findall(text))
        if missing:
            raise PatternError(
                f"{rule.code}: replacement uses metavariables {sorted(missing)} its pattern lacks"
            )
        pattern.replace = replaces[len(patterns)]
        pattern.replace_launches = count_launches(lower_template(pattern.replace, builder))
        patterns.append(pattern)
    fixable = rule.fix != "none" and _requirement_met(table.get("requires", ""))
    return CompiledRule(rule, patterns, fixable)


def _opaque_part(term: Term) -> str | None:
    """The source of a sub-term the engine lowers to an opaque value, equal only to itself."""
    todo = [term]
    while todo:
        t = todo.pop()
        if t.op == "opaque":
            return ast.unparse(t.node).replace(PREFIX, "$") if t.node is not None else "?"
        todo.extend(t.args)
    return None


@cache
def _requirement_met(requirement: str) -> bool:
    """`torch>=2.4`: read the installed version from package metadata, without importing torch."""
    if not requirement:
        return True
    found = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)\s*", requirement)
    if not found:
        raise PatternError(f"requires must look like 'torch>=2.4', not {requirement!r}")
    from importlib import metadata

    try:
        installed = metadata.version(found.group(1))
    except metadata.PackageNotFoundError:
        return False

    def parts(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", v.split("+")[0])[:3])

    return parts(installed) >= parts(found.group(2))


_COMPILED: dict[tuple[str, str], CompiledRule] = {}


def compiled(rule: Rule) -> CompiledRule:
    key = (rule.code, rule.path)
    if key not in _COMPILED:
        _COMPILED[key] = compile_rule(rule)
    return _COMPILED[key]


# ---------------------------------------------------------------------- finding


def pattern_findings(sf: SourceFile, rules: list[Rule]) -> list[Finding]:
    """Findings (with fixes) of every pattern rule in `rules` on one parsed file."""
    index: dict[str, list[tuple[CompiledRule, Pattern]]] = {}
    for rule in rules:
        cr = compiled(rule)
        for pattern in cr.patterns:
            index.setdefault(pattern.term.op, []).append((cr, pattern))
    triggers = _Triggers.of(tuple(compiled(r) for r in rules))
    lines = triggers.line_words(sf)
    if lines is not None and not triggers.may_match(set().union(*lines)):
        return []
    builder = Builder(Interner())
    lowerer = Lowerer(sf.imports, builder, module_constants(sf.tree, sf.imports, builder))
    names = _FileNames(sf)
    findings: list[Finding] = []
    for stmts, escapes in _blocks(sf.tree, lambda fn: triggers.worth_lowering(lines, fn)):
        block = lowerer.block(stmts, escapes)
        found: list[_Found] = []
        for i, statement in enumerate(block.statements):
            if statement.root is not None:
                _search(statement.root, i, index, block, sf, names, found)
        consumed = {s for f in found for s in f.deleted}
        findings.extend(f.finding for f in found if f.stmt not in consumed)
    return findings


_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|@|[<>!=]=|[<>]")


@dataclass(frozen=True)
class _Triggers:
    """A text pre-filter: a pattern can match only where a word producing each of its ops appears.

    Lowering is the engine's main cost; most functions of a model file contain none of the
    words (`sigmoid`, `erf`, `rsqrt`, ...) a rule needs. The file's words are read once
    per line (one C-level regex), so a function is skipped after a few set unions.
    """

    vocabulary: frozenset | None  # None: some pattern needs no word, every function is lowered
    needs: tuple[tuple[frozenset, ...], ...]  # per pattern: for each op, the words that make it

    @staticmethod
    def of(rules: tuple[CompiledRule, ...]) -> _Triggers:
        key = tuple(id(r) for r in rules)
        if key not in _TRIGGERS:
            _TRIGGERS[key] = _Triggers._build(rules)
        return _TRIGGERS[key]

    @staticmethod
    def _build(rules: tuple[CompiledRule, ...]) -> _Triggers:
        needs = []
        for cr in rules:
            for pattern in cr.patterns:
                words = [w for w in (source_words(op) for op in pattern.required) if w is not None]
                if not words:
                    return _Triggers(None, ())
                needs.append(tuple(words))
        return _Triggers(frozenset().union(*(w for n in needs for w in n)), tuple(needs))

    def line_words(self, sf: SourceFile) -> list[frozenset] | None:
        if self.vocabulary is None:
            return None
        vocabulary = self.vocabulary
        # A model zoo repeats its lines (transformers/models: 19% of its modeling and modular
        # files' lines are distinct), so each line's words are read once per process.
        known = _LINE_WORDS.setdefault(vocabulary, {})
        sets = _WORD_SETS.setdefault(vocabulary, {})
        if len(known) > _LINE_WORDS_ROOM:
            known.clear()
            sets.clear()
        out = []
        for line in sf.lines:
            words = known.get(line)
            if words is None:
                words = vocabulary.intersection(_TOKEN.findall(line))
                words = known[line] = sets.setdefault(words, words)  # one object per set of words
            out.append(words)
        return out

    def may_match(self, present: set) -> bool:
        return any(all(words & present for words in need) for need in self.needs)

    def may_match_text(self, text: str) -> bool:
        if self.vocabulary is None:
            return True
        return self.may_match(self.vocabulary.intersection(_TOKEN.findall(text)))

    def worth_lowering(self, lines: list[frozenset] | None, fn: ast.AST) -> bool:
        if lines is None:
            return True
        present = set().union(*lines[fn.lineno - 1 : fn.end_lineno or fn.lineno])
        return self.may_match(present)


_TRIGGERS: dict[tuple[int, ...], _Triggers] = {}
# Per vocabulary, each line's words (`_Triggers.line_words`), up to `_LINE_WORDS_ROOM` lines
# (~30 MB), and the sets of words met, each kept once.
_LINE_WORDS: dict[frozenset, dict[str, frozenset]] = {}
_WORD_SETS: dict[frozenset, dict[frozenset, frozenset]] = {}
_LINE_WORDS_ROOM = 300_000


def _blocks(tree: ast.Module, worth_lowering=lambda fn: True):
    """(statements, escapes_at_end) for every block; function bodies' locals die at the end."""
    todo: list[tuple[list[ast.stmt], bool]] = [(tree.body, True)]
    while todo:
        stmts, escapes = todo.pop()
        yield stmts, escapes
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if worth_lowering(stmt):
                    todo.append((stmt.body, False))
                continue
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    todo.append((inner, True))
            for handler in getattr(stmt, "handlers", ()):
                todo.append((handler.body, True))
            for case in getattr(stmt, "cases", ()):
                todo.append((case.body, True))


@dataclass
class _Found:
    finding: Finding
    stmt: int
    deleted: set[int] = field(default_factory=set)


def _search(term: Term, i: int, index, block: Block, sf: SourceFile, names, found: list[_Found]) -> None:
    """Top-down: the largest match wins, and what it covers is not searched again.

    A term the canonicaliser made up (the `-1 * b` of `a - b`) has no node to rewrite,
    but its operands do: the search goes through it, or `a - 2 * (exp(h) - 1)` is missed.
    """
    if term.op == "inl" or (term.node is not None and term.stmt != i):
        return
    if term.node is None:
        for arg in term.args:
            _search(arg, i, index, block, sf, names, found)
        return
    candidates = list(index.get(term.op, ()))
    if term.op in ("add", "mul"):  # then patterns that may match one operand of a sum or product
        for op in dict.fromkeys(strip(a).op for a in term.args if strip(a).op != term.op):
            candidates += sorted(index.get(op, ()), key=lambda c: c[0].rule.code)
    for cr, pattern in candidates:
        if not pattern.required <= term.ops:
            continue
        for m in match_root(pattern, term):
            if needed_elsewhere(m, block):
                continue  # rewriting would compute the pattern twice
            found.append(_finding(cr, pattern, m, term, i, block, sf, names))
            return
    for arg in term.args:
        _search(arg, i, index, block, sf, names, found)


def _finding(
    cr: CompiledRule, pattern: Pattern, m: Match, root: Term, i: int, block: Block, sf: SourceFile, names
) -> _Found:
    rule = cr.rule
    deleted, deletable = _consumed_statements(m, i, block)
    fix = None
    if cr.fixable and deletable:
        renderer = _Renderer(sf, block, i, deleted, names, pattern.vars)
        text = renderer.replacement(pattern.replace, m, root)
        if text is not None:
            edits = [renderer.edit(root.node, text)]
            edits += _deletions(sf, block, deleted)
            short = text if len(text) <= 80 else text[:77] + "..."
            assumes = f" ({rule.fix_assumption})" if rule.fix == "unsafe" and rule.fix_assumption else ""
            fix = Fix(
                applicability(sf.text, edits, rule.fix),
                f"replace with `{short}`{assumes}",
                tuple(sorted(edits)),
                tuple(sorted(renderer.imports)),
            )
    node = root.node
    finding = Finding(
        code=rule.code,
        message=rule.message,
        span=sf.span(node),
        gain=Gain(launches=max(pattern.launches - pattern.replace_launches, 0)),
        fix=fix,
        source_line=sf.line_text(node.lineno).strip(),
    )
    return _Found(finding, i, deleted if fix else set())


def _deletions(sf: SourceFile, block: Block, deleted: set[int]) -> list[Edit]:
    """Edits removing the consumed statements, and the blank lines that would be left doubled.

    A statement between two blank lines, or first in its block before a blank line, takes
    the blank lines after it along: otherwise two blank runs meet, or the block starts with
    one, and a formatter would have to tidy what the fix left behind.
    """
    runs: list[list[int]] = []
    for j in sorted(deleted):
        node = block.statements[j].node
        if runs and block.statements[runs[-1][-1]].node.end_lineno + 1 == node.lineno:
            runs[-1].append(j)
        else:
            runs.append([j])
    edits = []
    for run in runs:
        first = block.statements[run[0]].node.lineno
        last = block.statements[run[-1]].node.end_lineno or first
        blank_before = run[0] == 0 or not sf.line_text(first - 1).strip()
        after = last + 1
        while blank_before and after <= len(sf.lines) and not sf.line_text(after).strip():
            after += 1
        edits.append(Edit(first, 1, after, 1, ""))
    return edits


def crossed_bindings(m: Match, block: Block) -> list:
    crossed = {id(n) for n in m.crossed}
    return [b for b in block.bindings if any(id(u) in crossed for u, _ in b.uses)]


def needed_elsewhere(m: Match, block: Block) -> bool:
    """A temporary inside the match is also read outside it: the hand-written value is needed anyway."""
    crossed = {id(n) for n in m.crossed}
    return any(b.escapes or not all(id(u) in crossed for u, _ in b.uses) for b in crossed_bindings(m, block))


def _consumed_statements(m: Match, i: int, block: Block) -> tuple[set[int], bool]:
    """(statements of the temporaries the match consumes, whether they can all be deleted)."""
    candidates = {b.stmt: b for b in crossed_bindings(m, block)}
    if any(s > i for s in candidates):
        return set(), False
    for s, b in candidates.items():
        if any(j != i and j not in candidates for _, j in b.uses) or not _alone_on_lines(block, s):
            return set(), False
    if candidates and not _pure_between(block, min(candidates), i, set(candidates)):
        return set(), False
    return set(candidates), True


def _alone_on_lines(block: Block, s: int) -> bool:
    node = block.statements[s].node
    for j in (s - 1, s + 1):
        if 0 <= j < len(block.statements):
            other = block.statements[j].node
            if (
                other.lineno <= (node.end_lineno or node.lineno)
                and (other.end_lineno or other.lineno) >= node.lineno
            ):
                return False
    return True


def _pure_between(block: Block, first: int, last: int, deleted: set[int]) -> bool:
    """Moving computation past a statement is safe when it mutates nothing in place."""
    for j in range(first, last):
        if j in deleted:
            continue
        for node in walk(block.statements[j].node):
            if isinstance(node, ast.AugAssign):
                return False
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(not isinstance(t, (ast.Name, ast.Tuple)) for t in targets):
                    return False
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr = node.func.attr
                if attr.endswith("_") and not attr.endswith("__"):
                    return False
    return True


# ---------------------------------------------------------------------- rendering


class _FileNames:
    """The names a file binds or reads, to know whether `F` or `torch` is free to import."""

    def __init__(self, sf: SourceFile) -> None:
        self.sf = sf
        self._names: set[str] | None = None

    def free(self, name: str) -> bool:
        if self._names is None:
            self._names = {n.id for n in walk(self.sf.tree) if isinstance(n, ast.Name)}
            self._names |= {a.arg for a in walk(self.sf.tree) if isinstance(a, ast.arg)}
            self._names |= set(self.sf.imports.aliases)
        return name not in self._names


_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.List, ast.Dict, ast.Set, ast.ListComp)
_TIGHT_PARENTS = (ast.BinOp, ast.UnaryOp, ast.Attribute, ast.Subscript, ast.Await, ast.Compare, ast.BoolOp)


_PRECEDENCE = {
    ast.Add: 10,
    ast.Sub: 10,
    ast.Mult: 11,
    ast.Div: 11,
    ast.FloorDiv: 11,
    ast.Mod: 11,
    ast.MatMult: 11,
    ast.Pow: 13,
}


def _precedence(text: str) -> int:
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return 0
    if isinstance(node, ast.BinOp):
        return _PRECEDENCE.get(type(node.op), 0)
    if isinstance(node, ast.UnaryOp):
        return 12
    return 0 if not isinstance(node, _ATOMS + (ast.Constant,)) else 99


def _is_atom(text: str) -> bool:
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return False
    if isinstance(node, ast.Constant):
        return not (isinstance(node.value, (int, float)) and text.strip().startswith("-"))
    if isinstance(node, ast.Tuple):
        return text.strip().startswith("(")
    return isinstance(node, _ATOMS)


def _paren(text: str) -> str:
    return text if _is_atom(text) else f"({text})"


class _Renderer:
    """Writes a replacement at statement `i`: metavariables in their original text, names in the file's spelling."""

    def __init__(
        self,
        sf: SourceFile,
        block: Block,
        i: int,
        deleted: set[int],
        names: _FileNames,
        specs: dict[str, VarSpec],
    ):
        self.sf, self.block, self.i, self.deleted, self.names = sf, block, i, deleted, names
        self.specs = specs
        self.imports: set[str] = set()

    # -- the replacement as a whole

    def replacement(self, template: str, m: Match, root: Term) -> str | None:
        text = self.template(template, m.bindings)
        if text is None:
            return None
        if m.rest:
            text = self._with_rest(root.op, text, m.rest, m.anchor)
            if text is None:
                return None
        if not _is_atom(text) and self._needs_parens(root.node, text):
            text = f"({text})"
        return text

    def _needs_parens(self, node: ast.AST, text: str) -> bool:
        """Whether `text` put where `node` was would bind differently to its parent operator."""
        if self._parenthesised(node):
            return False
        stmt = self.block.statements[self.i].node
        for parent in walk(stmt):
            for child in child_nodes(parent):
                if child is node:
                    if isinstance(parent, ast.Call):
                        return parent.func is node
                    if isinstance(parent, ast.BinOp):
                        mine, theirs = _precedence(text), _PRECEDENCE.get(type(parent.op), 99)
                        return mine < theirs or (mine == theirs and parent.right is node)
                    return isinstance(parent, _TIGHT_PARENTS)
        return False

    def _with_rest(self, op: str, text: str, rest: list[Term], anchor) -> str | None:
        """The replacement combined with the operands the pattern did not use, in source order."""
        pieces: list[tuple[tuple, str, str]] = [(anchor or (0, 0), "", _paren(text) if op == "mul" else text)]
        negate = op == "mul" and any(t.op == "c" and t.value == -1 for t in rest)
        if negate:  # `-log(sum(exp(x)))` stays a negation, not `* (-1)`
            rest = [t for t in rest if not (t.op == "c" and t.value == -1)]
        for t in rest:
            inner = t
            sign = " * " if op == "mul" else " + "
            if op == "mul" and t.op == "pow" and t.args[1].op == "c" and t.args[1].value == -1:
                sign, inner = " / ", t.args[0]
            elif (
                op == "add"
                and t.op == "mul"
                and len(t.args) == 2
                and t.args[0].op == "c"
                and t.args[0].value == -1
            ):
                sign, inner = " - ", t.args[1]
            piece = self.term(inner)
            if piece is None:
                return None
            at = position(t)
            pieces.append(
                (at or (1 << 30, 0), sign, _paren(piece) if op == "mul" or sign == " - " else piece)
            )
        plain = {" * ", " + "}
        if anchor is not None and all(sign in plain for _, sign, _ in pieces[1:]):
            pieces.sort(key=lambda p: p[0])
        first = pieces[0][2]
        default = " * " if op == "mul" else " + "
        text = first + "".join((sign or default) + piece for _, sign, piece in pieces[1:])
        return "-" + _paren(text) if negate and rest else "-" + text if negate else text

    # -- templates

    def template(self, template: str, bindings: dict) -> str | None:
        source = METAVAR.sub(lambda mm: PREFIX + mm.group(1), " ".join(template.split()))
        tree = template_ast(template)
        parents = {child: parent for parent in walk(tree) for child in child_nodes(parent)}
        pieces: list[tuple[int, int, str]] = []
        for node in walk(tree):
            if isinstance(node, ast.Name) and node.id.startswith(PREFIX):
                rendered = self.var(node.id[len(PREFIX) :], bindings)
                if rendered is None:
                    return None
                parent = parents.get(node)
                tight = isinstance(parent, _TIGHT_PARENTS) or (
                    isinstance(parent, ast.Call) and parent.func is node
                )
                pieces.append((node.col_offset, node.end_col_offset, _paren(rendered) if tight else rendered))
            elif isinstance(node, (ast.Attribute, ast.Name)):
                parent = parents.get(node)
                if isinstance(parent, ast.Attribute) and parent.value is node:
                    continue
                qual = PATTERN_IMPORTS.qualname(node)
                if qual is not None and not _inside(node, pieces):
                    pieces.append((node.col_offset, node.end_col_offset, self.spell(qual)))
        out, cursor = [], 0
        for start, end, text in sorted(pieces):
            if start < cursor:
                continue
            out.append(source[cursor:start])
            out.append(text)
            cursor = end
        out.append(source[cursor:])
        return self.styled("".join(out))

    def styled(self, code: str) -> str:
        """Template text with its string literals in the file's quotes (`approximate="tanh"`)."""
        if "'" not in code and '"' not in code:
            return code
        return requote(code, preferred_quote(self.sf.text))

    def var(self, name: str, bindings: dict) -> str | None:
        bound = bindings.get(name)
        if bound is None:
            return None
        if isinstance(bound, tuple):  # a list metavariable: (term, per-element bindings)
            _, elements = bound
            spec_render = self._list_render(name)
            parts = [self.template(spec_render, {**bindings, **e}) for e in elements]
            if any(p is None for p in parts):
                return None
            return "[" + ", ".join(parts) + "]"
        return self.term(bound)

    def _list_render(self, name: str) -> str:
        return self.specs[name].render

    # -- terms

    def term(self, t: Term) -> str | None:
        """Source text for a bound term, if it means the same thing at the replacement site."""
        if t.op == "inl":
            binding = t.use
            if binding.stmt in self.deleted or self.visible(binding.name) != binding.version:
                return None
            return _segment(self.sf, t.node)
        if t.node is not None and t.stmt >= 0:
            own = t.stmt == self.i or t.stmt in self.deleted
            if (own or _simple(t)) and self._names_visible(t):
                return _segment(self.sf, t.node)
            return None
        if t.op == "c":
            return self.styled(repr(t.value)) if isinstance(t.value, str) else repr(t.value)
        if t.op == "q":
            return self.spell(str(t.value))
        if t.op == "mul" and any(a.op == "c" and a.value == -1 for a in t.args):
            others = [a for a in t.args if not (a.op == "c" and a.value == -1)]
            inner = self.term(others[0]) if len(others) == 1 else self.term(self._product(others))
            return None if inner is None else "-" + _paren(inner)
        if t.op in ("add", "mul"):
            parts = [self.term(a) for a in t.args]
            if any(p is None for p in parts):
                return None
            return (" * " if t.op == "mul" else " + ").join(_paren(p) for p in parts)
        if t.op == "pow":
            base, exp = self.term(t.args[0]), self.term(t.args[1])
            if base is None or exp is None:
                return None
            return f"{_paren(base)} ** {_paren(exp)}"
        return None

    def edit(self, node: ast.AST, text: str) -> Edit:
        """Replace `node` by `text`; parentheses that only grouped the node go when `text` is
        an atom, so `s * (exp(h) - 1)` becomes `s * expm1(h)`, not `s * (expm1(h))`."""
        edit = self.sf.replace(node, text)
        if not _is_atom(text) or not self._parenthesised(node):
            return edit
        before = self.sf.line_text(edit.line)[: edit.column - 1].rstrip()
        after = self.sf.line_text(edit.end_line)[edit.end_column - 1 :]
        end = edit.end_column + len(after) - len(after.lstrip()) + 1
        if self._call_parens(node):  # `f((x - 1))`: only the inner pair groups
            outer_before, outer_after = before[:-1].rstrip(), after.lstrip()[1:].lstrip()
            if not (outer_before.endswith("(") and outer_after.startswith(")")):
                return edit
        return Edit(edit.line, len(before), edit.end_line, end, text)

    def _call_parens(self, node: ast.AST) -> bool:
        """The brackets around `node` may be its call's: `f(x - 1)`, `class A(x - 1)`."""
        stmt = self.block.statements[self.i].node
        for parent in walk(stmt):
            if isinstance(parent, ast.Call) and len(parent.args) + len(parent.keywords) == 1:
                if parent.args and parent.args[0] is node:
                    return True
            if isinstance(parent, ast.ClassDef) and node in parent.bases:
                return True
            if isinstance(parent, (ast.GeneratorExp, ast.Tuple)) and any(
                child is node for child in child_nodes(parent)
            ):
                return True
        return False

    def _parenthesised(self, node: ast.AST) -> bool:
        """The source already has `(` `)` right around the node (they are outside its span)."""
        start = self.sf.line_text(node.lineno)[: self.sf.char_col(node.lineno, node.col_offset)]
        end_line = node.end_lineno or node.lineno
        end = self.sf.line_text(end_line)[self.sf.char_col(end_line, node.end_col_offset or 0) :]
        return start.rstrip().endswith("(") and end.lstrip().startswith(")")

    @staticmethod
    def _product(terms: list[Term]) -> Term:
        return Term("mul", tuple(terms))

    def _names_visible(self, t: Term) -> bool:
        if t.op == "inl":
            return t.use.stmt not in self.deleted and self.visible(t.use.name) == t.use.version
        if t.op == "n":
            name = str(t.value).split("#", 1)[0]
            return self.visible(name) == t.value
        if t.op == "opaque" and t.stmt != self.i:
            return False
        return all(self._names_visible(a) for a in t.args)

    def visible(self, name: str) -> str:
        """The version of `name` that statement i sees once the deleted statements are gone."""
        version = f"{name}#{self.block.entry}"
        for j in range(self.i):
            if j not in self.deleted:
                version = self.block.statements[j].assigns.get(name, version)
        return version

    # -- names

    def spell(self, qual: str) -> str:
        """`torch.nn.functional.silu` in this file's spelling, noting any import it needs."""
        aliases = self.sf.imports.aliases
        functional = "torch.nn.functional"
        if qual.startswith(functional + "."):
            tail = qual[len(functional) + 1 :]
            local = sorted((k for k, v in aliases.items() if v == functional), key=lambda k: (k != "F", k))
            if local:
                return f"{local[0]}.{tail}"
            direct = [k for k, v in aliases.items() if v == qual]
            if direct:
                return direct[0]
            existing = self.sf.imports.local_name_for(
                qual
            )  # `nn.functional.gelu` after `from torch import nn`
            if existing and aliases.get(existing.split(".")[0]) not in (None, "torch"):
                return existing
            if self.names.free("F"):
                self.imports.add("import torch.nn.functional as F")
                return f"F.{tail}"
        torch_local = sorted((k for k, v in aliases.items() if v == "torch"), key=lambda k: (k != "torch", k))
        if torch_local:
            return torch_local[0] + qual[len("torch") :]
        self.imports.add("import torch")
        return qual


def _segment(sf: SourceFile, node: ast.AST) -> str:
    """The node's source text (ast.get_source_segment re-splits the whole file on every call)."""
    first, last = node.lineno, node.end_lineno or node.lineno
    lines = [sf.lines[i - 1].rstrip("\r\n") for i in range(first, last + 1)]
    if first == last:
        return lines[0].encode()[node.col_offset : node.end_col_offset].decode()
    lines[0] = lines[0].encode()[node.col_offset :].decode()
    lines[-1] = lines[-1].encode()[: node.end_col_offset].decode()
    return "\n".join(lines)


def _inside(node: ast.AST, pieces: list[tuple[int, int, str]]) -> bool:
    return any(s <= node.col_offset and node.end_col_offset <= e for s, e, _ in pieces)


def _simple(t: Term) -> bool:
    """Names, attribute chains and constants: cheap and pure to write again elsewhere."""
    if t.op in ("n", "c", "q"):
        return True
    if t.op in ("a", "inl"):
        return all(_simple(a) for a in t.args) if t.op == "a" else True
    return False
