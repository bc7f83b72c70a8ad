"""`eaglebug matrix` (one release's support matrix, or what changed between two trees) and
`eaglebug hook` (the pre-commit hook: the classes of the staged files, every algorithm).

The engine computes (`checks.support_matrix`, `checks.compare_matrices`); this module runs it
with the CLI's helper process and a progress bar on a terminal, and renders text, Markdown,
JSON, HTML (`matrix_html.py`) or SARIF (`sarif.py`).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eaglebug.checks import InputError, SglangTree, locate

if TYPE_CHECKING:
    from eaglebug.checks import Cell, Comparison, Matrix, Patch, Row, TreeIndex
    from eaglebug.cli.sarif import Result

EXIT_OK, EXIT_FINDINGS = 0, 1
_MARK = {"supported": "ok", "n/a": "n/a"}
_KIND_TEXT = {
    "regression": "lost support (regression)",
    "new_unsupported": "appeared without support",
    "changed": "still unsupported, lacking other things",
    "gained": "gained support",
    "new_supported": "appeared with support",
    "removed": "no longer registered",
}


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr when it is a terminal (None otherwise: pipes and CI get no
    escape codes). Redrawn by the callback itself: no refresh thread, so the engine may still
    split its work with a forked helper."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        f"[bold]{label}[/]",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        auto_refresh=False,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
            bar.refresh()

        yield update


def _index(tree: SglangTree, no_cache: bool) -> TreeIndex:
    from eaglebug.checks import TreeIndex
    from eaglebug.session.forkmap import forked_map

    return TreeIndex(tree, use_cache=not no_cache, mapper=forked_map)


def _matrix(
    tree: SglangTree, no_cache: bool, files: list[str] | None = None
) -> tuple[Matrix, TreeIndex]:
    """The tree's matrix, and the index it was read with (SARIF plans patches over it)."""
    from eaglebug.checks import support_matrix

    index = _index(tree, no_cache)
    with progress_bar(f"sglang {tree.version or '?'}: classes") as update:
        found = support_matrix(index, files=files, mapper=index.files.mapper, progress=update)
    return found, index


def _format(args: argparse.Namespace) -> str:
    return "json" if args.json else str(args.format)


def matrix_command(args: argparse.Namespace) -> int:
    fmt = _format(args)
    old_tree = locate(args.sglang)
    new_tree = locate(args.compare) if args.compare else None
    if new_tree is not None and fmt == "html":
        raise InputError(
            "--format html shows one release's matrix, not a comparison",
            "drop --compare, or use --format text, md, json or sarif",
        )
    old, old_index = _matrix(old_tree, args.no_cache)
    _warn(old.warnings)
    if new_tree is None:
        return _say_matrix(old, old_index, fmt)
    new, new_index = _matrix(new_tree, args.no_cache)
    _warn(new.warnings)
    from eaglebug.checks import compare_matrices

    comparison = compare_matrices(old, new)
    if fmt == "json":
        _write(json.dumps(comparison.to_json(), indent=2) + "\n")
    elif fmt == "sarif":
        changed = {"regression", "new_unsupported", "changed"}
        rows = [(c.row, c.after) for c in comparison.changes if c.kind in changed and c.after]
        _write_sarif(new_index, new, rows)
    else:
        _write(compare_text(comparison, markdown=fmt == "md"))
    return EXIT_FINDINGS if comparison.regressions else EXIT_OK


def _say_matrix(matrix: Matrix, index: TreeIndex, fmt: str) -> int:
    if fmt == "json":
        _write(json.dumps(matrix.to_json(), indent=2) + "\n")
    elif fmt == "html":
        from eaglebug.cli.matrix_html import matrix_html

        _write(matrix_html(matrix))
    elif fmt == "sarif":
        _write_sarif(index, matrix, list(matrix.cells()))
    else:
        _write(matrix_text(matrix, markdown=fmt == "md"))
    return EXIT_OK


def _warn(warnings: tuple[str, ...]) -> None:
    for warning in warnings:
        sys.stderr.write(f"warning: {warning}\n")


def _write(text: str) -> None:
    sys.stdout.write(text)


def _write_sarif(index: TreeIndex, matrix: Matrix, cells: list[tuple[Row, Cell]]) -> None:
    from eaglebug.cli.sarif import sarif_log

    results = _sarif_results(cells)
    patches = _patches(index, results)
    log = sarif_log(results, index.tree.root, matrix.version, patches)
    _write(json.dumps(log, indent=2) + "\n")


def _sarif_results(cells: list[tuple[Row, Cell]]) -> list[Result]:
    from eaglebug.cli.sarif import Result

    return [
        Result(f, (row.file, row.line), cell.algorithm)
        for row, cell in cells
        for f in cell.findings
    ]


def _patches(index: TreeIndex, results: list[Result]) -> list[Patch]:
    """One delegation patch per class, for every attribute its findings can delegate: the
    patch `eaglebug fix` writes, planned by the engine (libcst, so only where there is one)."""
    from eaglebug.checks import ClassReport, PatchFix, find_class, plan_patches

    fixable: dict[str, dict[str, Any]] = {}
    for r in results:
        f = r.finding
        if isinstance(f.fix, PatchFix) and f.fix.method is not None and f.class_:
            fixable.setdefault(f.class_, {}).setdefault(f.attribute or "", f)
    if not fixable:
        return []
    reports = [
        ClassReport(find_class(index, name), "target", "", findings=list(by_attr.values()))
        for name, by_attr in fixable.items()
    ]
    return plan_patches(index, reports)


def _cell_text(cell: Cell | None, markdown: bool) -> str:
    if cell is None:
        return ""
    if cell.status != "missing":
        text = _MARK[cell.status]
        return ("✅" if text == "ok" else "–") if markdown else text
    names = ", ".join(m.attribute for m in cell.missing)
    return f"❌ {names}" if markdown else f"missing {len(cell.missing)}"


def _row_label(row: Row, role: str) -> str:
    return row.architecture if role == "target" else f"{row.architecture} (draft)"


def _lines(matrix: Matrix) -> list[tuple[Row, str]]:
    """(row, role) in the order the table lists them: each class, then its draft role."""
    out = []
    for row in matrix.rows:
        for role in ("target", "draft"):
            if any(c.role == role for c in row.cells):
                out.append((row, role))
    return out


def matrix_text(matrix: Matrix, markdown: bool = False) -> str:
    """The table (a row per class and role, a column per algorithm), then what each missing
    cell lacks, with the delegate a fix would use."""
    algos = list(matrix.algorithms)
    lines = _lines(matrix)
    counts = matrix.counts()
    head = (
        f"SGLang {matrix.version or 'unknown version'} at {matrix.package_dir}: "
        f"{len(matrix.rows)} classes x {len(algos)} algorithms; "
        f"{counts['supported']} supported, {counts['missing']} missing, {counts['n/a']} n/a"
    )
    out: list[str] = []
    if markdown:
        out += [f"**{head}**", "", "| class | " + " | ".join(algos) + " |"]
        out.append("|" + "---|" * (len(algos) + 1))
        for row, role in lines:
            cells = [_cell_text(row.cell(a, role), True) for a in algos]
            out.append(f"| `{_row_label(row, role)}` | " + " | ".join(cells) + " |")
    else:
        width = max([len(_row_label(r, role)) for r, role in lines] + [5])
        cols = [max(len(a), 9) for a in algos]
        out += [head, ""]
        out.append(
            "class".ljust(width)
            + "  "
            + "  ".join(a.ljust(w) for a, w in zip(algos, cols, strict=True))
        )
        for row, role in lines:
            cells = [
                _cell_text(row.cell(a, role), False).ljust(w)
                for a, w in zip(algos, cols, strict=True)
            ]
            out.append(_row_label(row, role).ljust(width) + "  " + "  ".join(cells).rstrip())
    details = [
        (row, cell) for row, role in lines for a in algos if (cell := row.cell(a, role)) is not None
    ]
    missing = [(r, c) for r, c in details if c.status == "missing"]
    if missing:
        out += ["", "## missing" if markdown else "missing:"]
        for row, cell in missing:
            what = "; ".join(
                m.attribute + (f" (delegate to self.{m.delegate})" if m.delegate else "")
                for m in cell.missing
            )
            bullet = "- " if markdown else "  "
            out.append(f"{bullet}{_row_label(row, cell.role)} · {cell.algorithm}: {what}")
    return "\n".join(out) + "\n"


def compare_text(comparison: Comparison, markdown: bool = False) -> str:
    old, new = comparison.old, comparison.new
    out = [
        f"{'**' if markdown else ''}SGLang {old.version or old.package_dir} -> "
        f"{new.version or new.package_dir}: {len(comparison.regressions)} regression(s)"
        f"{'**' if markdown else ''}"
    ]
    from eaglebug.checks import CHANGE_KINDS

    for kind in CHANGE_KINDS:
        changes = comparison.of_kind(kind)
        if not changes:
            continue
        out += [
            "",
            f"## {_KIND_TEXT[kind]}: {len(changes)}"
            if markdown
            else f"{_KIND_TEXT[kind]}: {len(changes)}",
        ]
        bullet = "- " if markdown else "  "
        for c in changes:
            if c.algorithm is None:
                out.append(f"{bullet}{c.architecture} ({c.row.file})")
                continue
            label = f"{c.architecture}{'' if c.role == 'target' else ' (draft)'} · {c.algorithm}"
            after = c.after
            lacks = ", ".join(m.attribute for m in after.missing) if after else ""
            before = ", ".join(m.attribute for m in c.before.missing) if c.before else ""
            detail = {
                "regression": f"now lacks {lacks}",
                "new_unsupported": f"lacks {lacks}",
                "changed": f"lacked {before}; now lacks {lacks}",
                "gained": f"no longer lacks {before}",
            }.get(c.kind, "")
            where = f"{c.row.file}:{c.row.line}"
            out.append(f"{bullet}{label}: {detail}  ({where})" if detail else f"{bullet}{label}")
    return "\n".join(out) + "\n"


def hook_command(args: argparse.Namespace) -> int:
    """The classes defined in the given files (the staged ones, from pre-commit), every
    algorithm and role. A combination fails where a missing method is one an inner object
    provides (a wrapper that forgot to delegate, the seed's bug): its one-line reasons and the
    fix command. One that no inner object can fix (a model that never implemented that
    algorithm) is a note, unless --strict."""
    tree = locate(args.sglang)
    files = _tree_files(tree, args.files)
    if not files:
        return EXIT_OK
    matrix, _ = _matrix(tree, args.no_cache, files)
    wanted = {a.upper() for a in args.algorithm} if args.algorithm else None
    failed = 0
    sglang = shlex.quote(args.sglang)
    for row, cell in matrix.cells():
        if cell.status != "missing" or (wanted is not None and cell.algorithm not in wanted):
            continue
        fixable = any(m.fixable for m in cell.missing)
        where = f"{row.file}:{row.line}: {cell.algorithm} {cell.role}"
        if not fixable and not args.strict:
            lacks = ", ".join(m.attribute for m in cell.missing)
            sys.stdout.write(
                f"note: {where}: {row.architecture} lacks {lacks} (no inner object provides it)\n"
            )
            continue
        failed += 1
        for f in cell.findings:
            if f.severity == "error":
                sys.stdout.write(f"{where}: {f.message}\n")
        if fixable:
            # A draft is fixed in the draft role, next to the target it drafts for.
            select = (
                f"--model-class {row.architecture}"
                if cell.role == "target"
                else f"--model-class TARGET --draft-class {row.architecture}"
            )
            sys.stdout.write(
                f"  fix: eaglebug fix --sglang {sglang} {select} --algorithm {cell.algorithm} "
                "--apply   (with your edit of the file stashed: it never writes over uncommitted "
                "work)\n"
            )
        else:
            sys.stdout.write("  no delegate found: the class must implement it\n")
    if failed:
        sys.stdout.write(
            f"eaglebug: {failed} class/algorithm/role combination(s) lack what SGLang calls\n"
        )
    return EXIT_FINDINGS if failed else EXIT_OK


def _tree_files(tree: SglangTree, given: list[str]) -> list[str]:
    """The given files that lie in the tree, relative to its root (as findings name them)."""
    out = []
    for name in given:
        path = Path(name).resolve()
        if path.suffix == ".py" and path.is_relative_to(tree.root):
            out.append(tree.relative(path))
    return out
