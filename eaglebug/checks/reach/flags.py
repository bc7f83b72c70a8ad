"""Where the runtime sets a flag to something truthy, and under what conditions.

A use guarded by `if server_args.enable_x:` runs only if `enable_x` can be truthy for the
launch at hand. Flags are often set far from where they guard a use (a config object built in
one module, read as a parameter in another), so the search is tree-wide: a byte-level pass
finds the runtime files that assign any wanted name (`.name = ...`), and only those are parsed
and walked, statement by statement (expressions cannot assign).
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Callable

from eaglebug.checks.reach.conditions import Cond, Flag, Origin, negated
from eaglebug.checks.reach.consumers import assignments
from eaglebug.checks.reach.flagvalues import Lookup, MakeReader, value_paths
from eaglebug.checks.reach.scanner import FunctionScanner, Stack
from eaglebug.checks.reach.shapes import exits_early
from eaglebug.checks.reach.uses import ConsumerFacts
from eaglebug.checks.source import syntax
from eaglebug.checks.source.answers import MISSING
from eaglebug.checks.source.classfacts import FunctionNode, dotted, function_nodes, module_imports
from eaglebug.checks.source.facts import Parsed, module_name
from eaglebug.checks.source.files import SourceFiles, read_file
from eaglebug.checks.source.index import TreeIndex

Assignments = dict[str, list[tuple[Cond, ...]]]  # flag -> the conditions of each assignment


def flags(index: TreeIndex, names: set[str]) -> Assignments:
    """Attribute name -> the conditions under which the runtime sets it to something truthy
    (each name a tree answer of its own: a warm audit searches only for names not seen)."""
    kind = list[tuple[Cond, ...]]
    table: Assignments = {}
    for name in names:
        known = index.answers.get(f"flags:{name}", index.warnings, kind)
        if known is not MISSING:
            table[name] = known  # type: ignore[assignment]
    wanted = frozenset(n for n in names if n not in table and n.isidentifier())
    if wanted:
        mark = len(index.warnings)
        found = search_flags(index.files, wanted)
        for name in wanted:
            index.answers.put(f"flags:{name}", found[name], index.warnings[mark:], kind)
        table.update(found)
    return table


def search_flags(files: SourceFiles, names: frozenset[str]) -> Assignments:
    """Every truthy assignment of these attribute names in the runtime, in walk order."""
    found: Assignments = {n: [] for n in names}
    alternatives = b"|".join(sorted(n.encode() for n in names))
    assigned = re.compile(rb"\.(" + alternatives + rb")\s*=[^=]")
    # `Config(..., name=...)`: a keyword of a constructor call, found with byte searches (a
    # pattern over every file would cost more than the rest of the flag search)
    needles = [n.encode() for n in names]
    root = str(files.tree.root)
    rels = files.runtime_files()

    def job(rel: str) -> Assignments | str | None:
        """The file's assignments; or why it does not parse; or None (no wanted name)."""
        data = files.held(rel)
        if data is None:
            try:
                data = read_file(os.path.join(root, rel), files.entries[rel].size)
            except OSError:
                return None
        present = frozenset(m.decode() for m in assigned.findall(data))
        keywords = frozenset(n.decode() for n in needles if _keyword_in(data, n))
        if not present and not keywords:
            return None
        parsed = files.parse_bytes(rel, data)
        if isinstance(parsed, str):
            return parsed
        return scan_flags(parsed, *module_name(rel), present | keywords, keywords)

    results = files.mapper(job, rels, [files.entries[r].size for r in rels])
    for rel, result in zip(rels, results, strict=True):
        if isinstance(result, str):
            files.skip(rel, result)
        elif result is not None:
            for name, conds in result.items():
                found[name].extend(conds)
    return found


_SPACE = frozenset(b" \t\r\n")


def _keyword_in(data: bytes, name: bytes) -> bool:
    """Is `name=` passed as a keyword (after `(` or `,`) with a value of its own, not passed
    through (`name=name`, `name=self.cfg.name`)?"""
    needle = name + b"="
    at = data.find(needle)
    while at >= 0:
        end = at + len(needle)
        i = at - 1
        while i >= 0 and data[i] in _SPACE:
            i -= 1
        if i >= 0 and data[i] in b"(," and data[end : end + 1] != b"=":
            value = re.split(rb"[,)\n]", data[end : end + 200], maxsplit=1)[0].strip()
            if value != name and not value.endswith(b"." + name):
                return True
        at = data.find(needle, end)
    return False


def scan_flags(
    parsed: Parsed,
    module: str,
    is_package: bool,
    names: frozenset[str],
    keywords: frozenset[str] = frozenset(),
) -> Assignments:
    """Where in one module the attributes `names` are set to something truthy, and under what
    (`keywords`: those also set as a constructor's keyword in this module)."""
    out: Assignments = {}
    lines = parsed.text.splitlines()
    imports = module_imports(parsed.tree, module, is_package)
    functions = {
        s.name for s in parsed.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    nodes = function_nodes(parsed.tree)
    table: dict[tuple[str | None, str], FunctionNode] = {}
    for cls_name, _cls, fn in nodes:
        table.setdefault((cls_name, fn.name), fn)

    def reader_for(
        cls_name: str | None, fn: FunctionNode, params: dict[str, Origin]
    ) -> FunctionScanner:
        """A scanner that only reads tests (`cond`) and references; it records no uses."""
        scope = f"{module}.{cls_name}.{fn.name}" if cls_name else f"{module}.{fn.name}"
        return FunctionScanner(
            module,
            imports,
            functions,
            lines,
            scope,
            cls_name,
            False,
            False,
            {},
            params,
            ConsumerFacts(),
        )

    def lookup(cls_name: str | None, name: str) -> FunctionNode | None:
        return table.get((cls_name, name))

    for cls_name, _cls, fn in nodes:
        reader = reader_for(cls_name, fn, {})
        assigns = assignments(fn)
        if any(
            isinstance(t, ast.Attribute) and t.attr in names
            for a in assigns
            for t in (a.targets if isinstance(a, ast.Assign) else [a.target])
        ):
            reader.collect_aliases(assigns)  # a presence test may name an alias of the model
        _assignments_under(
            reader,
            names,
            keywords,
            fn.body,
            (),
            out,
            functools.partial(_paths, reader, cls_name, lookup, reader_for),
        )
    return out


# The conditions under which an assigned value is truthy (`reach/flagvalues.py`); None: not known.
ValuePaths = Callable[[ast.expr], "list[tuple[Cond, ...]] | None"]


def _paths(
    reader: FunctionScanner,
    cls_name: str | None,
    lookup: Lookup,
    make_reader: MakeReader,
    value: ast.expr,
) -> list[tuple[Cond, ...]] | None:
    return value_paths(reader, value, cls_name, lookup, make_reader)


def _assignments_under(
    reader: FunctionScanner,
    names: frozenset[str],
    keywords: frozenset[str],
    body: list[ast.stmt],
    stack: Stack,
    out: Assignments,
    paths: ValuePaths,
) -> None:
    def under(block: list[ast.stmt], inner: Stack) -> None:
        _assignments_under(reader, names, keywords, block, inner, out, paths)

    for stmt in body:
        if keywords and isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return)):
            _keywords(reader, keywords, stmt, stack, out)
        if isinstance(stmt, ast.Assign):
            _assignment(reader, names, stmt, stack, out, paths)
        elif isinstance(stmt, (ast.If, ast.While)):
            under(stmt.body, (*stack, (stmt.test, False)))
            under(stmt.orelse, (*stack, (stmt.test, True)))
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, *[h.body for h in stmt.handlers], stmt.orelse, stmt.finalbody):
                under(block, stack)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            under(stmt.body, stack)
        if isinstance(stmt, ast.If) and not stmt.orelse and exits_early(stmt.body):
            stack = (*stack, (stmt.test, True))


def _keywords(
    reader: FunctionScanner, names: frozenset[str], stmt: ast.stmt, stack: Stack, out: Assignments
) -> None:
    """`SpecAuxHiddenStateConfig(is_dspark=spec_algorithm.is_dspark())` (sglang 0.5.23) sets
    the config's attribute as its constructor's keyword: truthy where the value is."""
    text = "\n".join(reader.lines[stmt.lineno - 1 : stmt.end_lineno])
    if not any(f"{k}=" in text for k in names):
        return  # the statement's text cannot hold one: do not walk it
    for node in syntax.walk(stmt):
        if not isinstance(node, ast.Call) or not node.keywords:
            continue
        callee = (dotted(node.func) or "").rsplit(".", 1)[-1]
        if not callee[:1].isupper():
            continue
        for kw in node.keywords:
            if kw.arg not in names or (isinstance(kw.value, ast.Constant) and not kw.value.value):
                continue
            value = reader.cond(kw.value)
            if isinstance(value, Flag) and value.name == kw.arg:
                continue  # passed through (`name=self.cfg.name`): not where it is decided
            conds = tuple(negated(reader.cond(n), negate) for n, negate in stack)
            out.setdefault(kw.arg, []).append((*conds, value))


def _assignment(
    reader: FunctionScanner,
    names: frozenset[str],
    stmt: ast.Assign,
    stack: Stack,
    out: Assignments,
    paths: ValuePaths,
) -> None:
    """Record the wanted attributes this assignment makes truthy, with the tests in force and,
    where the value is a presence test of the model (or a helper's), that test too."""
    if isinstance(stmt.value, ast.Constant) and not stmt.value.value:
        return
    attrs = [t.attr for t in stmt.targets if isinstance(t, ast.Attribute) and t.attr in names]
    if attrs:
        conds = tuple(negated(reader.cond(node), negate) for node, negate in stack)
        found = paths(stmt.value)
        for attr in attrs:
            if found is None:
                out.setdefault(attr, []).append(conds)
            else:  # one entry per way the value can be truthy; none: it never is
                out.setdefault(attr, []).extend(conds + path for path in found)
