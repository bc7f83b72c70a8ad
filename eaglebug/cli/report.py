"""Human-readable and JSON renderings of an audit, for the headless CLI."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypeVar

from eaglebug.checks import SEVERITY_ORDER, one_line, sort_findings, unwrapped

if TYPE_CHECKING:  # names for annotations: an audit's report loads no preflight machinery
    from collections.abc import Callable

    from rich.console import Console

    from eaglebug.checks import (
        AuditResult,
        ClassReport,
        ExternalPackage,
        Finding,
        Patch,
        PreflightResult,
    )
    from eaglebug.git.fixing import Applied

R = TypeVar("R")
_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def escape(text: str) -> str:
    """Text for Rich markup: its brackets escaped, and terminal-safe (`one_line`: a class or
    architecture name from a config, a path, a line of the file may hold escape sequences)."""
    from rich.markup import escape as rich_escape

    return rich_escape(one_line(text))


def audit_json(result: AuditResult) -> dict[str, Any]:
    return {
        "sglang": {"version": result.version, "package_dir": result.package_dir},
        "algorithm": result.algorithm,
        "classes": [
            {
                "class": r.ref.qualname,
                "role": r.role,
                "file": r.ref.file,
                "line": r.ref.facts.line,
                "external_bases": r.external_bases,
                "provides": [
                    {
                        "attribute": a,
                        "owner": p.owner,
                        "kind": p.kind,
                        "file": p.file,
                        "line": p.line,
                    }
                    for a, p in r.provided
                ],
            }
            for r in result.reports
        ],
        "external": result.external.to_json() if result.external else None,
        "findings": [f.to_json() for f in result.findings],
        "warnings": result.warnings,
    }


def _short(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


def _finding(console: Console, f: Finding, label: str | None = None) -> None:
    style = _STYLE[f.severity]
    name = label or f.attribute or ""
    console.print(f"  [{style}]{f.severity:<7}[/] [bold]{escape(name)}[/]  {escape(f.message)}")
    if f.severity == "info":
        return
    from eaglebug.cli.view import finding_lines, markup  # the text report only

    for text in markup(finding_lines(f)):
        console.print(text)


def _findings_of_class(console: Console, findings: list[Finding]) -> None:
    """Errors and warnings in full; info (used only outside speculative decoding) on one line."""
    ordered = sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.attribute or ""))
    for f in ordered:
        if f.severity != "info":
            _finding(console, f)
    info = [f.attribute or "" for f in ordered if f.severity == "info"]
    if info:
        console.print(
            f"  [dim]info    not provided, but used only outside speculative decoding: "
            f"{escape(', '.join(info))} (--json has the details)[/]"
        )


def _class_header(
    console: Console, report: ClassReport, external: ExternalPackage | None = None
) -> None:
    facts = report.ref.facts
    bases = ", ".join(facts.bases) or "object"
    where = f"{report.ref.file}:{facts.line}"
    if external is not None and external.owns(report.ref.file):  # out of the tree: say where
        where = f"{external.root / report.ref.file}:{facts.line} (external package {external.name})"
    console.print(
        f"[bold]{escape(facts.name)}[/] [dim]({report.role}) {escape(where)}"
        f"  bases: {escape(bases)}[/]"
    )


def _console() -> Console:
    """Rich is imported here only, so `--json` starts faster."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def rendered(print_report: Callable[[R, Console], None], result: R) -> str:
    """A report as the console prints it on this terminal (its width, its colours), as one
    string: kept as the command's reply (`replies.py`), a warm run prints it without Rich."""
    console = _console()
    with console.capture() as capture:
        print_report(result, console)
    return capture.get()


def _summary(console: Console, findings: list[Finding]) -> None:
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")}
    console.print()
    plural = {"error": "errors", "warning": "warnings", "info": "info"}
    summary = ", ".join(f"{n} {s if n == 1 else plural[s]}" for s, n in counts.items())
    console.print(f"[bold]{summary}[/]" if counts["error"] else summary)


def _startup_order(console: Console, findings: list[Finding]) -> None:
    """The errors and warnings as SGLang would meet them, each with what it costs by then."""
    ordered = [f for f in sort_findings(findings) if f.step is not None and f.severity != "info"]
    if not ordered:
        return
    from eaglebug.checks import step_text  # preflight's: the start-up order's engine

    console.print()
    console.print(
        "[bold]in start-up order[/] [dim](what the launch would hit first comes first)[/]"
    )
    for n, f in enumerate(ordered, 1):
        style = _STYLE[f.severity]
        name = f.attribute if f.attribute and f.class_ else f.id
        console.print(
            f"  {n:>2}. [{style}]{f.severity:<7}[/] [bold]{escape(name or '')}[/]  "
            f"[dim]{escape(step_text(f.step))}[/]"  # type: ignore[arg-type]
        )


def print_preflight(result: PreflightResult, console: Console | None = None) -> None:
    console = console or _console()
    version = result.version or "unknown version"
    algorithm = result.algorithm or "no speculative decoding"
    console.print(
        f"[dim]eaglebug preflight · SGLang {escape(version)} at {escape(result.package_dir)} · {algorithm}[/]"
    )
    for role, source in (("target", result.target), ("draft", result.draft)):
        if source is not None:
            where = f"{source.path} ({source.how})" if source.found else source.how
            console.print(f"[dim]{role}: {escape(source.given)} -> {escape(str(where))}[/]")
            if source.class_defaults:
                n = len(source.class_defaults)
                console.print(
                    f"[dim]  {n} key{'s' if n > 1 else ''} config.json leaves out, read from its "
                    f"transformers config class: {escape(', '.join(source.class_defaults_from))} "
                    "(--json lists them)[/]"
                )
    if result.launch.env_additions:
        env = " ".join(f"{k}={v}" for k, v in result.launch.env_additions.items())
        console.print(f"[dim]env: {escape(env)}[/]")
    _wrappers(console, result)
    if result.gpus_seen is not None:
        seen = result.gpus_seen
        which = ",".join(str(i) for i in seen["nvml_indices"]) if seen["nvml_indices"] else "none"
        said = which if seen["exact"] else f"at most {seen['count']}"
        console.print(f"[dim]GPUs it sees: {escape(said)} ({escape(seen['by'])})[/]")
    _startup_order(console, result.findings)
    shown: set[int] = set()
    for report in result.reports:
        console.print()
        _class_header(console, report, result.external)
        mine = [
            f for f in result.findings if f.class_ == report.ref.qualname and f.role == report.role
        ]
        shown.update(id(f) for f in mine)
        if not any(f.severity != "info" for f in mine):
            console.print(
                f"  [green]ok[/]  provides everything {result.algorithm} needs from the {report.role} model"
            )
        _findings_of_class(console, mine)
    rest = [f for f in result.findings if id(f) not in shown]
    console.print()
    console.print("[bold]launch and configs[/]")
    if not any(f.severity != "info" for f in rest):
        console.print("  [green]ok[/]  no config problem found")
    for f in rest:
        _finding(console, f, label=f.id)
    _summary(console, result.findings)


def _wrappers(console: Console, result: PreflightResult) -> None:
    """What the server runs through, said where it changes what is read: a container's
    variables, paths and Python are its own."""
    wrapped = unwrapped(result.launch.program)[0]
    if not wrapped:
        return
    names = ", ".join(w.name for w in wrapped)
    if result.compose is not None:  # as the user wrote it: a compose service
        service, files = result.compose
        names = f"compose service {service} ({os.path.basename(files[0])}), as {names}"
    if result.kubernetes is not None:  # a pod's container, on a node of the cluster
        workload, container, manifest, _ = result.kubernetes
        names = f"{workload} container {container} ({os.path.basename(manifest)}), as {names}"
    line = f"runs through: {names}"
    image = next((w.words[-1] for w in wrapped if w.container), None)
    if image is not None:
        line += f" · in {image}: its variables, its paths through its binds, its own Python"
    console.print(f"[dim]{escape(line)}[/]")


def print_audit(result: AuditResult, console: Console | None = None) -> None:
    console = console or _console()
    version = result.version or "unknown version"
    console.print(
        f"[dim]eaglebug audit · SGLang {escape(version)} at {escape(result.package_dir)} · {result.algorithm}[/]"
    )
    for report in result.reports:
        console.print()
        _class_header(console, report, result.external)
        if not any(f.severity != "info" for f in report.findings):
            console.print(
                f"  [green]ok[/]  provides everything {result.algorithm} needs from the {report.role} model"
            )
        _findings_of_class(console, report.findings)
        if report.provided:
            provided = ", ".join(
                f"{a} ({'own' if p.owner == report.ref.qualname else _short(p.owner)})"
                for a, p in report.provided
                if p.kind not in {"nn.Module", "object"}
            )
            if provided:
                console.print(f"  [dim]provides: {escape(provided)}[/]")
    _summary(console, result.findings)


def print_patches(
    patches: list[Patch], applied: list[Applied], apply: bool, console: Console | None = None
) -> None:
    console = console or _console()
    if not patches:
        console.print("[green]nothing to fix[/]: no missing attribute with a delegate")
        return
    commits = {a.patch.class_name: a.commit for a in applied}
    through = {a.patch.class_name: a.written for a in applied if a.written is not None}
    for patch in patches:
        console.print(f"[bold]{escape(patch.short_class)}[/] [dim]{escape(patch.file)}[/]")
        if patch.methods and not apply:
            for line in patch.diff().splitlines():
                style = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")
                if line.startswith(("+++", "---")):
                    style = "bold"
                console.print(f"[{style}]{escape(line)}[/]" if style else escape(line))
        for note in patch.notes:
            console.print(f"  [dim]note: {escape(note)}[/]")
        for method, reason in patch.refused.items():
            console.print(f"  [yellow]not delegated[/] [bold]{escape(method)}[/]: {escape(reason)}")
        if patch.class_name in commits:
            sha = commits[patch.class_name]
            where = f"committed {sha[:10]}" if sha else "written (no commit)"
            methods = ", ".join(patch.methods)
            console.print(
                f"  [green]{where}[/]: delegate {escape(methods)} to self.{escape(patch.delegate)}"
            )
            if patch.class_name in through:
                console.print(
                    f"  [dim]{escape(patch.file)} is a symlink: wrote {escape(str(through[patch.class_name]))}[/]"
                )
    if not apply and any(p.methods for p in patches):
        console.print("[dim]hint: rerun with --apply to write and commit each class's patch[/]")
