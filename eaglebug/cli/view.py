"""One view of a finding's evidence and fix, which the CLI report, `diagnose` and the TUI's
evidence screen all render (each adds only its own header and indentation).

The view is a list of styled lines, built from the typed evidence and fix; nothing here knows
Rich or Textual, so the three front ends cannot drift apart in what they say.
"""

from __future__ import annotations

from dataclasses import dataclass

from eaglebug.checks import (
    Choice,
    ConfigEvidence,
    Finding,
    InterfaceEvidence,
    LogEvidence,
    PatchFix,
    RuntimeEvidence,
    rank_summary,
    step_text,
)
from eaglebug.checks import delegate_names as names


@dataclass(frozen=True)
class Line:
    text: str
    style: str = ""  # a Rich style name
    indent: int = 0  # nesting levels below the finding's own
    code: bool = False  # Python source (a front end may highlight it)
    label: str = ""  # a leading part in another style ("fix: ", a file:line)
    label_style: str = ""


def _short(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


def where(f: Finding) -> str:
    """Ranks, repeats, time and place in the log, on one line."""
    log = f.log
    if log is None:
        return ""
    parts = []
    ranks = list(log.ranks)
    if ranks:
        shown = rank_summary(ranks)
        if not ranks[0].lower().startswith("rank"):  # torch's own `[rank1]:` says it already
            shown = f"ranks {shown}" if len(ranks) > 1 else f"rank {shown}"
        parts.append(shown)
    if log.count > 1 and len(ranks) != log.count:
        parts.append(f"{log.count} times")
    if log.time:
        parts.append(log.time)
    if log.line is not None:
        parts.append(f"line {log.line}")
    elif log.offset is not None:
        parts.append(f"byte {log.offset:,}")
    return " · ".join(parts)


def evidence_lines(f: Finding) -> list[Line]:
    lines: list[Line] = []
    place = where(f)
    if place:
        lines.append(Line(place, "dim"))
    if f.step is not None:
        lines.append(Line(step_text(f.step), "dim", label="start-up: ", label_style="magenta"))
    interface = f.interface
    for site in f.call_sites:
        lines.append(Line(site.code, label=f"{site.file}:{site.line}  ", label_style="cyan"))
        extra = interface.site(site.file, site.line) if interface else None
        if extra is not None and extra.via:
            lines.append(Line(f"reached via {', '.join(extra.via)}", "dim", 1))
        if extra is not None and extra.guards:
            lines.append(Line(f"when {' and '.join(extra.guards)}", "dim", 1))
    if interface is not None:
        lines += _interface_lines(f, interface)
    if isinstance(f.evidence, LogEvidence):
        lines += _log_lines(f, f.evidence)
    if isinstance(f.evidence, RuntimeEvidence):
        lines += _runtime_lines(f.evidence)
    if isinstance(f.evidence, ConfigEvidence) and f.evidence.sglang_message:
        # one line: SGLang's own message may span several (a list of backends, one a line),
        # which the terminal-safe text would show as literal "\n"s
        said = " ".join(part.strip() for part in f.evidence.sglang_message.splitlines())
        lines.append(Line(f"SGLang says: {said.strip()}", "dim"))
    if isinstance(f.evidence, ConfigEvidence):  # what the verdict rests on, not known here
        lines += [Line(f"assumed: {assumption}", "dim") for assumption in f.evidence.assumed]
    return lines


def _interface_lines(f: Finding, e: InterfaceEvidence) -> list[Line]:
    lines: list[Line] = []
    if e.chain and e.provided_by:
        lines.append(Line("inherited from: " + " → ".join(map(_short, e.chain)), "dim"))
    if f.delegate and e.picked_by:  # registry candidates: a count, a few names each
        lines.append(
            Line(
                f"picked by {e.picked_by}; provided by {names(e.delegate_classes)}",
                label=f"delegate: self.{f.delegate} ",
                label_style="green",
            )
        )
        if e.delegate_lacking:
            lines.append(Line(f"not provided by {names(e.delegate_lacking)}", "yellow", 1))
    elif f.delegate:
        inner = ", ".join(_short(c) for c in e.delegate_classes)
        owner = e.delegate_provider
        defined = (
            f" (defined in {_short(owner)})" if owner and inner and _short(owner) != inner else ""
        )
        lines.append(
            Line(f"{inner}{defined}", label=f"delegate: self.{f.delegate} ", label_style="green")
        )
    for lacking, when in zip(
        () if e.picked_by else e.delegate_lacking,
        e.chosen_by or [None] * len(e.delegate_lacking),
        strict=False,
    ):
        picked = f" (picked when {when})" if when else ""
        lines.append(Line(f"{_short(lacking)} does not provide it{picked}", "yellow", 1))
    for assumption in e.assumed:
        lines.append(Line(f"assumed: {assumption}", "dim"))
    return lines


_MARK = {
    True: ("flagged", "bold red"),
    False: ("checked, fine", "green"),
    None: ("not checked", "dim"),
}


def _runtime_lines(e: RuntimeEvidence) -> list[Line]:
    shown = ", ".join(f"{length:.2f}" for _, length, _ in e.reports)
    lines = [Line(f"accept length, newest last: {shown} (threshold {e.threshold:g})", "dim")]
    if e.causes:
        lines.append(Line("likely causes:"))
    for cause in e.causes:
        word, style = _MARK[cause.flagged]
        lines.append(
            Line(f"{cause.text} ({cause.check})", "", 1, label=f"{word}: ", label_style=style)
        )
    return lines


def _log_lines(f: Finding, e: LogEvidence) -> list[Line]:
    lines: list[Line] = []
    if e.exception and e.exception[:60] not in f.message:
        shown = e.exception if len(e.exception) <= 240 else e.exception[:239] + "…"
        lines.append(Line(shown, "dim"))
    for item in e.lines[:4]:
        lines.append(Line(f"log: {item.text[:200]}", "dim"))
    if e.sglang_hint:
        lines.append(Line(f"SGLang says: {e.sglang_hint}", "dim"))
    for error in e.import_errors[:3]:
        lines.append(Line(f"import error: {error}", "dim"))
    if e.see:
        command = f" ({e.audit} lists them all)" if e.audit else ""
        lines.append(Line(f"{e.see}{command}", label="see: "))
    return lines


def fix_lines(f: Finding) -> list[Line]:
    """The fix as the finding carries it: for a patch, the exact text `--apply` writes."""
    fix = f.fix
    if fix is None:
        return []
    if isinstance(fix, Choice):
        lines = [Line("fix, either:")]
        for option in fix.options:
            lines.append(
                Line(option.tradeoff, "dim", 1, label=f"{option.text()}  ", label_style="green")
            )
        return lines
    if isinstance(fix, PatchFix):
        if fix.method is None:
            return [Line(f"no automatic fix: {fix.refused}", "yellow")]
        lines = [Line(f"fix: add to {_short(fix.class_)} ({fix.file}):")]
        lines += [Line(text, "green", code=True) for text in fix.method.text.splitlines()]
        lines += [Line(f"note: {note}", "dim", 1) for note in fix.method.notes]
        if fix.method.imports:
            lines.append(Line(f"imports from typing: {', '.join(fix.method.imports)}", "dim", 1))
        return lines
    return [Line(fix.text(), "green", label="fix: ")]


def finding_lines(f: Finding) -> list[Line]:
    """Everything below a finding's headline: evidence, then the fix."""
    return evidence_lines(f) + fix_lines(f)


def markup(lines: list[Line], base: int = 10) -> list[str]:
    """The view as Rich console markup (the CLI's rendering), one string per line."""
    from rich.markup import escape as rich_escape

    from eaglebug.checks import one_line

    def escape(text: str) -> str:  # brackets escaped, escape sequences shown, not obeyed
        return rich_escape(one_line(text))

    out = []
    for line in lines:
        pad = " " * (base + 2 * line.indent)
        label = escape(line.label)
        if line.label_style and line.label:
            label = f"[{line.label_style}]{label}[/]"
        text = escape(line.text)
        if line.style and line.text:
            text = f"[{line.style}]{text}[/]"
        out.append(f"{pad}{label}{text}")
    return out
