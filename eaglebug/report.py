"""Human-readable and JSON renderings of an audit, for the headless CLI."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

from eaglebug.checks.audit import AuditResult, ClassReport
from eaglebug.checks.findings import SEVERITY_ORDER, Finding

_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


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
        "findings": [f.to_json() for f in result.findings],
        "warnings": result.warnings,
    }


def _short(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


def _finding(console: Console, f: Finding) -> None:
    style = _STYLE[f.severity]
    console.print(
        f"  [{style}]{f.severity:<7}[/] [bold]{escape(f.attribute or '')}[/]  {escape(f.message)}"
    )
    if f.severity == "info":
        return
    sites = f.details.get("sites", [])
    guards_by_site = {(s["file"], s["line"]): s for s in sites} if isinstance(sites, list) else {}
    for site in f.call_sites:
        console.print(f"          [cyan]{escape(site.file)}:{site.line}[/]  {escape(site.code)}")
        extra = guards_by_site.get((site.file, site.line))
        if extra:
            if extra.get("via"):
                console.print(f"            [dim]reached via {escape(', '.join(extra['via']))}[/]")
            if extra.get("guards"):
                console.print(f"            [dim]when {escape(' and '.join(extra['guards']))}[/]")
    if f.delegate:
        inner = ", ".join(_short(c) for c in f.details.get("delegate_class", []))
        owner = f.details.get("delegate_provider")
        where = (
            f" (defined in {_short(owner)})" if owner and inner and _short(owner) != inner else ""
        )
        console.print(
            f"          delegate: [green]self.{escape(f.delegate)}[/] {escape(inner)}{escape(where)}"
        )
    for assumption in f.details.get("assumed", []):
        console.print(f"          [dim]assumed: {escape(assumption)}[/]")
    if f.fix:
        console.print("          fix:")
        for line in f.fix.splitlines():
            console.print(f"            [green]{escape(line)}[/]")


def _class_header(console: Console, report: ClassReport) -> None:
    facts = report.ref.facts
    bases = ", ".join(facts.bases) or "object"
    console.print(
        f"[bold]{escape(facts.name)}[/] [dim]({report.role}) {escape(report.ref.file)}:{facts.line}"
        f"  bases: {escape(bases)}[/]"
    )


def print_audit(result: AuditResult, console: Console | None = None) -> None:
    """Print the audit for a person; Rich is imported here only, so `--json` starts faster."""
    if console is None:
        from rich.console import Console

        console = Console(highlight=False, soft_wrap=True)
    version = result.version or "unknown version"
    console.print(
        f"[dim]eaglebug audit · SGLang {escape(version)} at {escape(result.package_dir)} · {result.algorithm}[/]"
    )
    for report in result.reports:
        console.print()
        _class_header(console, report)
        findings = sorted(
            report.findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.attribute or "")
        )
        if not any(f.severity != "info" for f in findings):
            console.print(
                f"  [green]ok[/]  provides everything {result.algorithm} needs from the {report.role} model"
            )
        for f in findings:
            _finding(console, f)
        if report.provided:
            provided = ", ".join(
                f"{a} ({'own' if p.owner == report.ref.qualname else _short(p.owner)})"
                for a, p in report.provided
                if p.kind != "nn.Module"
            )
            if provided:
                console.print(f"  [dim]provides: {escape(provided)}[/]")
    counts = {
        s: sum(1 for f in result.findings if f.severity == s) for s in ("error", "warning", "info")
    }
    console.print()
    plural = {"error": "errors", "warning": "warnings", "info": "info"}
    summary = ", ".join(f"{n} {s if n == 1 else plural[s]}" for s, n in counts.items())
    console.print(f"[bold]{summary}[/]" if counts["error"] else summary)
    if counts["error"]:
        console.print("[dim]hint: `eaglebug fix` previews each delegation; `--apply` commits it[/]")
