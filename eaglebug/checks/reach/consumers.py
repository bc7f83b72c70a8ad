"""Where one module of the SGLang runtime touches a runner's model object, read from its `ast`.

`scan_module` records every use of a model reference in a module (`uses.py`), walking each
function with `reach/scanner.py`; calls that pass a reference on are recorded as edges, and their
parameters are handled as summaries: `scan_parameter` gives the uses of one parameter of one
function, and `resolve.py` asks for it only when some caller passes a reference in.

The scan is one of the index's per-file extractors (`source/facts.py`), registered here: the
index selects the files worth scanning by their bytes (`is_candidate`), scans them when they
are parsed, and keeps what the scan found with the file's other facts (`CONSUMERS`, and one
`param_fact` per parameter summary), by the hash of its bytes.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Sequence

from eaglebug.checks.reach.conditions import Origin, Param, Seed
from eaglebug.checks.reach.scanner import FunctionScanner
from eaglebug.checks.reach.uses import CallEdge, ConsumerFacts
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classfacts import (
    FunctionNode,
    dotted,
    function_nodes,
    function_params,
)
from eaglebug.checks.source.facts import Extractor, Fact, FileEntry, Keep, ParsedFile, register

# A method that may store a model reference on self (checked before walking it in full).
_SELF_REF_ASSIGN = re.compile(r"self\.\w+\s*(?::[^=\n]*)?=\s*[^=\n]*\.model\b")
# Every seed is an attribute `.model` (`runner.model`, `self.model` in a ModelRunner), however
# it is spaced, continued or commented between the dot and the name: a function without one
# (and without an attribute of self that holds a seed) has no use to find.
_MODEL_ATTRIBUTE = re.compile(r"\.(?:[ \t\f\r\n\\]|#[^\n]*)*model\b")

# How many calls deep a model reference is followed into helper functions (see reach.py).
MAX_CALL_DEPTH = 4

# Files worth scanning: `<...>runner[...].model`, or a ModelRunner class. (Two patterns, each
# starting with a literal, so `re` can scan for it instead of trying an alternation at every
# byte; every repeat is bounded, so a hostile line costs linear time.)
_RUNNER_MODEL_RE = re.compile(rb"runner\w{0,64}(?:\[[^\]\n]{0,256}\]|\([^)\n]{0,256}\))?\.model\b")
_RUNNER_CLASS_RE = re.compile(
    rb"class \w{0,128}ModelRunner\b|class \w{1,128}\([^)]{0,1024}ModelRunner\b"
)
EXTRACTOR_NAME = "consumers"
CONSUMERS: Fact[ConsumerFacts] = Fact("consumers", ConsumerFacts)


def param_fact(qualname: str, param: str) -> Fact[ConsumerFacts | None]:
    """The summary of one parameter of one function of a file (None: nothing binds it)."""
    return Fact(f"param:{qualname}:{param}", ConsumerFacts | None)


def is_consumer_candidate(data: bytes) -> bool:
    if b"unner" not in data:  # one scan for both `runner` and `ModelRunner`: most files stop here
        return False
    return (
        b"runner" in data and b".model" in data and _RUNNER_MODEL_RE.search(data) is not None
    ) or (b"ModelRunner" in data and _RUNNER_CLASS_RE.search(data) is not None)


def is_candidate(entry: FileEntry) -> bool:
    """Did the consumer scan select this file by its bytes?"""
    return EXTRACTOR_NAME in entry.wanted


def assignments(fn: ast.AST) -> list[ast.Assign | ast.AnnAssign]:
    return [n for n in syntax.statements(fn) if isinstance(n, (ast.Assign, ast.AnnAssign))]


def bound_parameter(
    qualname: str, binding: int | str, classes: Iterable[str], params: dict[str, list[str]]
) -> tuple[str, str] | None:
    """(function, parameter) that a reference passed to `qualname` (a function or a class of
    one module, by position or keyword) arrives in; None when the call cannot bind it."""
    if "." not in qualname and qualname in classes:
        qualname = f"{qualname}.__init__"
    if isinstance(binding, str):
        return qualname, binding
    names = params.get(qualname)
    if names is None:
        return None
    index = binding + (1 if "." in qualname else 0)
    return (qualname, names[index]) if index < len(names) else None


def find_function(
    tree: ast.Module, qualname: str
) -> tuple[ast.ClassDef | None, FunctionNode] | None:
    """`Class.method` or `function` inside one module."""
    for cls_name, cls, fn in function_nodes(tree):
        name = f"{cls_name}.{fn.name}" if cls_name else fn.name
        if name == qualname:
            return cls, fn
    return None


def class_traits(cls: ast.ClassDef | None) -> tuple[bool, bool]:
    """(is a ModelRunner, builds its runner as a draft worker)."""
    if cls is None:
        return False, False
    bases = [dotted(b) or "" for b in cls.bases]
    is_runner = cls.name.endswith("ModelRunner") or any(b.endswith("ModelRunner") for b in bases)
    init = next(
        (s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None
    )
    draft = "draft" in cls.name.lower() or (
        init is not None
        and any(
            isinstance(n, ast.keyword)
            and n.arg == "is_draft_worker"
            and isinstance(n.value, ast.Constant)
            and n.value.value is True
            for n in syntax.walk(init)
        )
    )
    return is_runner, draft


def scan_module(
    tree: ast.Module, module: str, imports: dict[str, str], functions: set[str], source: str
) -> ConsumerFacts:
    """Every use of a model reference in one module, parameters left for summaries."""
    lines = source.splitlines()
    out = ConsumerFacts()
    by_class: dict[str | None, list[tuple[ast.ClassDef | None, FunctionNode]]] = {}
    for cls_name, cls, fn in function_nodes(tree):
        by_class.setdefault(cls_name, []).append((cls, fn))
    for cls_name, fns in by_class.items():
        is_runner, draft = class_traits(fns[0][0])
        scanner = functools.partial(
            _method_scanner, module, imports, functions, lines, cls_name, is_runner, draft
        )
        selfattrs: dict[str, Origin] = {}
        # Pass 1: attributes of self that hold a model reference, in any method of the class.
        for _, fn in fns:
            text = "\n".join(lines[fn.lineno - 1 : fn.end_lineno])
            if cls_name is None or not _SELF_REF_ASSIGN.search(text):
                continue
            probe = scanner(fn, {}, ConsumerFacts())
            probe.collect_aliases(assignments(fn))
            for attr, origin in probe.self_assigns:
                if isinstance(origin, Seed):
                    selfattrs.setdefault(attr, origin)
        # Pass 2: the uses, in functions whose text could hold a reference at all.
        for _, fn in fns:
            text = "\n".join(lines[fn.lineno - 1 : fn.end_lineno])
            if _MODEL_ATTRIBUTE.search(text) or any(a in text for a in selfattrs):
                scanner(fn, selfattrs, out).stmts(fn.body, ())
    return out


def _method_scanner(
    module: str,
    imports: dict[str, str],
    functions: set[str],
    lines: list[str],
    cls_name: str | None,
    is_runner: bool,
    draft: bool,
    fn: FunctionNode,
    selfattrs: dict[str, Origin],
    out: ConsumerFacts,
) -> FunctionScanner:
    """A scanner for one function of a module (a method when `cls_name` is given)."""
    scope = f"{module}.{cls_name}.{fn.name}" if cls_name else f"{module}.{fn.name}"
    return FunctionScanner(
        module, imports, functions, lines, scope, cls_name, is_runner, draft, selfattrs, {}, out
    )


def scan_parameter(
    tree: ast.Module,
    module: str,
    imports: dict[str, str],
    functions: set[str],
    source: str,
    qualname: str,
    param: str,
) -> ConsumerFacts | None:
    """The uses of one parameter of one function, as if a caller passed a model reference in."""
    found = find_function(tree, qualname)
    if found is None:
        return None
    cls, fn = found
    if param not in function_params(fn) and param not in [a.arg for a in fn.args.kwonlyargs]:
        return None
    is_runner, draft = class_traits(cls)
    origin = Param(f"{module}.{qualname}", param)
    out = ConsumerFacts()
    scanner = FunctionScanner(
        module,
        imports,
        functions,
        source.splitlines(),
        f"{module}.{qualname}",
        cls.name if cls else None,
        is_runner,
        draft,
        {},
        {param: origin},
        out,
        only=origin,
    )
    scanner.collect_aliases(assignments(fn))
    scanner.stmts(fn.body, ())
    return out


# A call into a module, as the reference walk will follow it: (function or class in the
# module, positional index or keyword, how many calls deep).
Entry = tuple[str, int | str, int]


def local_entries(module: str, calls: Iterable[CallEdge], depth: int = 1) -> list[Entry]:
    """The calls among `calls` that stay in `module` (`self.helper(model)`), for the walk."""
    prefix = f"{module}."
    return [
        (edge.callee[len(prefix) :], binding, depth)
        for edge in calls
        if edge.callee.startswith(prefix)
        for binding, origin in edge.bindings
        if depth > 1 or isinstance(origin, Seed)  # the walk starts from seeds only
    ]


def summaries(
    tree: ast.Module,
    module: str,
    imports: dict[str, str],
    functions: set[str],
    classes: Iterable[str],
    source: str,
    params: dict[str, list[str]],
    entries: list[Entry],
) -> dict[tuple[str, str], ConsumerFacts | None]:
    """The parameter summaries the reference walk (`reach.py`) will ask this module for, made
    while its tree is at hand instead of parsing it again: those of the calls into it that
    `entries` names, and of the calls they make within it, as many calls deep as the walk goes."""
    out: dict[tuple[str, str], ConsumerFacts | None] = {}
    defined = {*functions, *classes}
    todo = list(entries)
    while todo:
        qualname, binding, depth = todo.pop()
        if qualname.split(".", 1)[0] not in defined:
            continue
        bound = bound_parameter(qualname, binding, classes, params)
        if bound is None or bound in out:
            continue
        summary = scan_parameter(tree, module, imports, functions, source, *bound)
        out[bound] = summary
        if summary is not None and depth < MAX_CALL_DEPTH:
            todo.extend(local_entries(module, summary.calls, depth + 1))
    return out


def _learn(file: ParsedFile, fresh: bool, asked: Sequence[Entry], keep: Keep) -> None:
    """What the index keeps of one parsed file: for a candidate, every use of a model
    reference; and the parameter summaries that the calls within the module, and `asked`
    (calls into it), will ask for, made while its tree is at hand."""
    facts, tree, text = file.facts, file.parsed.tree, file.parsed.text
    entries = list(asked)
    if fresh:
        found = scan_module(tree, facts.module, facts.imports, facts.functions, text)
        keep(CONSUMERS, found)
        entries += local_entries(facts.module, found.calls)
    if entries:
        made = summaries(
            tree,
            facts.module,
            facts.imports,
            facts.functions,
            facts.classes,
            text,
            file.param_names,
            entries,
        )
        for (qualname, param), summary in made.items():
            keep(param_fact(qualname, param), summary)


register(Extractor(EXTRACTOR_NAME, is_consumer_candidate, _learn))
