"""Which path through a model function a finding sits on: the normal one, or a side road.

Model code warns about deprecated arguments (`if cross_attention_kwargs.get("scale") is not None:
logger.warning("... is deprecated ...")`), about misuse (`if len(unused_kwargs) > 0:
logger.warning("... are not expected ... and will be ignored")`) and raises on bad input. A
blocker inside such a branch is real, but it stops the graph only for callers who pass a
deprecated argument or misuse the model; on diffusers 0.42.1, 21 of 40 sampled findings were
of this kind. `branch_path` names the side road a branch is, from what the branch itself
shows; findings there carry `details["path"]` and say so in their message, and
`normal_path_only` drops them (`fuselint check --paths normal`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from fuselint.findings import Finding
from fuselint.source.nodes import self_attribute, walk

PATH_KEY = "path"
DEPRECATION, MISUSE, ERROR, RECORDING = "deprecation", "misuse", "error", "recording"
# A memo method's body, which the constructor runs eagerly to fill its cache (`warm_caches`).
WARMED = "warmed"
# A host read written for `torch.export`, bounded with `torch._check` (`export_reads`).
EXPORT = "export"
# A test of a count that ops FL106 flags size: dynamo breaks at those ops first, and at the test only once
# FL106's fix keeps them in the graph (`control_flow._count_tests`).
AFTER_FIX = "after-fix"
# What a package builds and compiles itself with `torch.compile(build(...), fullgraph=True)`: it compiles
# whole under the package's own settings (a break there would raise), so its findings name breaks only
# for someone who compiles it otherwise (`scope._close`).
COMPILED_WHOLE = "compiled-whole"
# A method that a class decorator swaps for another implementation unless the user picks an option
# (`dispatchers`): the road's value names the option, `option:experts_implementation="eager"`.
OPTION = "option"

# What a warning says when it is about the caller's arguments rather than the data. Phrases, not
# single words: "ignored" alone also appears in "padding tokens are ignored in the loss".
_DEPRECATION_TEXT = re.compile(r"deprecat|will be removed|no longer (supported|used)", re.IGNORECASE)
_MISUSE_TEXT = re.compile(
    r"will be ignored|(is|are) ignored|not (currently |yet )?supported|unsupported|does not support|"
    r"not expected|unexpected (keyword|argument)|incompatible|is not used|are not used|"
    r"should not be (passed|set|used)|must not be|will be an error|must be (of )?\w+ type|\binvalid\b|"
    r"not recognized|unrecognized|"
    r"(has|have) to be divisible by|"  # an argument's constraint, which the code then rounds to
    r"truncated because|can only handle (sequences|inputs) up to|"  # an input past the model's limit, cut to it
    r"\bonly (the )?first\s+(\S+\s+)?\w+\s+(will be|are) (processed|used|kept)\b|"  # the same, in GLIGEN's words
    r"\bmutually exclusive\b|"  # two arguments the caller must not pass together
    r"['`][^'`]+['`] is too (large|small|high|low)|"  # an argument named in quotes, out of its range
    r"`[^`]+` (is |are |was |will be )?ignored|"  # an argument named in quotes, then ignored
    r"\bbut (is |are |was |will be )?ignored\b|"  # "x is passed as ..., but ignored since ..."
    r"\b(is|are) ineffective\b|\b(has|have) no effect\b",  # an argument that does nothing here
    re.IGNORECASE,
)
# Advice about an argument's value, named in quotes (`ensemble_size` == 2 ... "consider increasing the
# value"; "... is not recommended"), and a warning that lists the supported values after mapping the
# argument to one ("Reshaped to ..., Supported shapes are ..."): the caller chose an allowed value
# outside the recommended or supported set.
_ADVICE_TEXT = re.compile(
    r"\bconsider (increasing|decreasing|raising|lowering|reducing)\b|\bis not recommended\b", re.IGNORECASE
)
_NAMED_ARGUMENT = re.compile(r"`[^`]+`|'[^']+'")
_SUPPORTED_SET = re.compile(
    r"\bsupported (shapes|sizes|resolutions|values|dimensions) (are|is)\b", re.IGNORECASE
)
# A warning that the value the caller passed for an argument is replaced ("The `use_cache` argument is
# changed to `False` since `labels` is provided"). A misuse path only where the branch runs for a
# caller who passed the argument (`warns_of_override`): where the function first fills it from its config,
# every call warns.
_OVERRIDE_TEXT = re.compile(
    r"\bargument (is|was|will be) (changed|set|reset|overridden|overwritten) to\b", re.IGNORECASE
)
_WARNING_METHODS = frozenset({"warn", "warning", "warning_once", "warn_once", "error", "critical"})
_WARNING_FUNCTIONS = frozenset({"warn", "deprecate", "warn_explicit"})
_NOTES = {
    DEPRECATION: "only on a deprecated-argument path",
    MISUSE: "only on a misuse path (the branch warns the caller)",
    ERROR: "only on an error path (the branch raises)",
    RECORDING: "only while the flag that guards it is on (the branch only records host numbers on `self`)",
    WARMED: "only after the memo cache that the constructor fills is emptied again",
    EXPORT: "only when compiled: the read is written for `torch.export`, which bounds it with `torch._check`",
    AFTER_FIX: "only once FL106's fix keeps the op that sizes it in the graph: until then dynamo breaks at that op",
    COMPILED_WHOLE: "only outside the package's own `torch.compile(..., fullgraph=True)` of it, which compiles it whole",
}
_HOST_READS = frozenset({"item", "tolist"})


def _text(node: ast.AST) -> str:
    """The literal text of a call's arguments: string constants and f-string pieces."""
    return " ".join(n.value for n in walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def _warning_text(stmt: ast.stmt) -> str | None:
    """The message of `logger.warning(...)`, `warnings.warn(...)` or `deprecate(...)` as a statement."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    func = stmt.value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if (isinstance(func, ast.Attribute) and name in _WARNING_METHODS) or name in _WARNING_FUNCTIONS:
        return _text(stmt.value)
    return None


def _fails(stmt: ast.stmt) -> bool:
    """`raise ...`, `assert False, ...` or `torch._assert(False, ...)` (TorchScript's raise)."""
    if isinstance(stmt, ast.Raise):
        return True
    if isinstance(stmt, ast.Assert):
        return isinstance(stmt.test, ast.Constant) and not stmt.test.value
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and stmt.value.args:
        func, first = stmt.value.func, stmt.value.args[0]
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name == "_assert" and isinstance(first, ast.Constant) and first.value is False
    return False


def _calls_deprecate(stmt: ast.stmt) -> bool:
    """`deprecate("scale", "1.0.0", message)` (diffusers' helper) as a statement: its message is
    often a variable, but the call itself says what the branch is for."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) == "deprecate"


def _mentions_deprecated(test: ast.expr) -> bool:
    return any(
        "deprecat" in (getattr(n, "id", "") or getattr(n, "attr", "") or "").lower()
        or (isinstance(n, ast.Constant) and isinstance(n.value, str) and "deprecat" in n.value.lower())
        for n in walk(test)
    )


_AVAILABILITY = re.compile(r"is_\w+_available")


def _package_missing(test: ast.expr | None) -> bool:
    """`not is_bs4_available()`, alone or in an `and`: the branch runs where an optional package
    is not installed (transformers' and diffusers' `is_<package>_available()` checks)."""
    terms = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    for term in terms:
        if (
            isinstance(term, ast.UnaryOp)
            and isinstance(term.op, ast.Not)
            and isinstance(term.operand, ast.Call)
        ):
            func = term.operand.func
            if _AVAILABILITY.fullmatch(
                func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            ):
                return True
    return False


def _flattened(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """The statements of `body`, with those inside `with` blocks and nested `if`s in place of them."""
    for stmt in body:
        if isinstance(stmt, ast.With):
            yield from _flattened(stmt.body)
        elif isinstance(stmt, ast.If):
            yield from _flattened([*stmt.body, *stmt.orelse])
        else:
            yield stmt


def _records_statistics(test: ast.expr | None, body: list[ast.stmt]) -> bool:
    """`if self.collect_stats:` whose body only stores values on `self` (and in local names), at
    least one of them read to the host (`self.avg = torch.mean(d).item()`): bookkeeping that forward
    never returns, behind an opt-in flag, which dynamo specializes on (a False flag: no branch, no
    break; pytorch-metric-learning's `set_stats`). `self.training` is the train mode, a normal path."""
    if self_attribute(test) in (None, "training"):
        return False
    recorded = False
    for stmt in _flattened(body):
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            return False
        if not all(self_attribute(t) or isinstance(t, ast.Name) for t in targets):
            return False
        recorded |= any(self_attribute(t) for t in targets) and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _HOST_READS
            for n in walk(value)
        )
    return recorded


def branch_path(test: ast.expr | None, body: list[ast.stmt], else_of: list[ast.stmt] = ()) -> str | None:
    """The side road that a branch (`test` true, then `body`; no test for an `else`) is, or None
    when it may be the normal path.

    A branch whose own statements raise is an error path; one whose test names a deprecated
    argument, or that warns in the words of a deprecation, is a deprecation path; one that warns
    that an argument is unexpected, ignored, unsupported, incompatible or out of its range, that the
    input was cut to the model's limit, that names an argument and advises another value ("consider
    increasing", "is not recommended"), that lists the supported values it mapped the argument to,
    or (its test) that an optional package is missing, is a misuse path. Only the
    branch's own statements count, not those of a test nested in it (which is classed on its own
    and inherits the outer road): a warning about the data (`"NSFW content was detected"`) leaves
    the branch normal. An `else` (`else_of`: the `if` body it is the other arm of) that only warns
    where the `if` raises is the same error, made a warning in one mode (MONAI's RetinaNet: raise
    on NaN boxes with grad enabled, warn without).
    """
    if any(_fails(stmt) for stmt in body):
        return ERROR
    texts = [t for t in map(_warning_text, body) if t is not None]
    if else_of and len(texts) == len(body) and any(_fails(stmt) for stmt in else_of):
        return ERROR
    if (
        (test is not None and _mentions_deprecated(test))
        or any(_DEPRECATION_TEXT.search(t) for t in texts)
        or any(_calls_deprecate(stmt) for stmt in body)
    ):
        return DEPRECATION
    if (
        any(_MISUSE_TEXT.search(t) or _SUPPORTED_SET.search(t) for t in texts)
        or any(_ADVICE_TEXT.search(t) and _NAMED_ARGUMENT.search(t) for t in texts)
        or (texts and _package_missing(test))
    ):
        return MISUSE  # a warning that an optional package is missing: the caller asked for what is not there
    if _records_statistics(test, body):
        return RECORDING
    return None


def warns_of_override(test: ast.expr, body: list[ast.stmt]) -> bool:
    """`if use_cache: logger.warning("The `use_cache` argument is changed to `False` ...")`: a branch
    on a bare name that warns that an argument's value is replaced. A misuse path where the name is a
    parameter defaulting to None or False that the function leaves as the caller passed it: the branch
    runs only for a caller who passed the argument the warning overrides (transformers' BART family
    with `labels`); the caller checks that."""
    if not isinstance(test, ast.Name):
        return False
    return any(_OVERRIDE_TEXT.search(t) for t in map(_warning_text, body) if t is not None)


# Exceptions that code catches to go another normal way (a missing key, the end of an
# iterator, an optional import): their handlers are no error path.
_LOOKUP_ERRORS = frozenset(
    {
        "KeyError",
        "IndexError",
        "AttributeError",
        "StopIteration",
        "ImportError",
        "ModuleNotFoundError",
        "LookupError",
    }
)


def handler_path(handler: ast.ExceptHandler) -> str | None:
    """An `except` block runs after something failed: an error path, unless every exception it
    catches is one that code raises to take another normal way (`except KeyError:` a default)."""
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    names = {c.id if isinstance(c, ast.Name) else getattr(c, "attr", "") for c in caught if c is not None}
    if handler.type is not None and names and names <= _LOOKUP_ERRORS:
        return None
    return ERROR


def option_road(option: str) -> str:
    """The road of a method whose own body runs only under `option` (`experts_implementation="eager"`)."""
    return f"{OPTION}:{option}"


def path_note(path: str) -> str:
    """What a finding's message adds when it sits on `path`."""
    kind, _, option = path.partition(":")
    if kind == OPTION:
        return f"only with {option}: by default a decorator of the class runs another implementation in its method's place"
    return _NOTES[path]


def off_path(finding: Finding) -> str | None:
    return dict(finding.details).get(PATH_KEY)


def normal_path_only(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that sit on the normal path: those on deprecation, misuse, error, recording,
    warmed-cache, export, after-fix, compiled-whole or option paths left out."""
    return [f for f in findings if off_path(f) is None]
