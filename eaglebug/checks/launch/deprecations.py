"""Launch flags the audited tree deprecates, with the replacement it names.

Read from where the tree declares its flags (`server_args.py`, `arg_groups/`), in the shapes
the releases use:
- `add_argument(..., action=DeprecatedStoreTrueAction, new_flag="--x", help=...)`: an action
  class of the tree named `Deprecated*`; its `__call__` gives SGLang's warning (with
  `{option_string}` and the `new_flag` sentence filled in) and whether it stops the launch
  (`parser.error(self.error_message)` when `error_message=` is given);
- a help text that says so (`"Deprecated. Use --x instead."`, `"[Deprecated] ..."`,
  `"Deprecated alias for --x."`, `"Note: --x is deprecated now."`), on an `add_argument` call or
  an annotated field (`name: A[bool, "Deprecated. Use ..."]`, 0.5.2x).
The replacement is the flag the tree's own words name after "use" / "alias for"; none is made up.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding, Severity
from eaglebug.checks.contract.fixes import AdviceFix, FlagFix
from eaglebug.checks.launch.command import LaunchSpec
from eaglebug.checks.launch.flags import annotated_parts, flag_files, server_flags
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.index import TreeIndex, parsed_with
from eaglebug.checks.source.initfacts import template_text

_SAYS_DEPRECATED = re.compile(r"^\W*(deprecated\b|note: --[\w-]+ is deprecated)", re.IGNORECASE)
_REPLACEMENT = re.compile(
    r"(?:\buse|\balias for|\breplaced by|in favou?r of)\s+'?(--[\w{},<>=.-]*[\w}>])", re.IGNORECASE
)


@dataclass(frozen=True)
class Deprecated:
    options: tuple[str, ...]
    replacement: str | None  # the flag (and value) the tree names instead
    message: str | None  # what SGLang prints (or the help text that says so)
    stops: bool  # the launch ends with a parser error
    read_from: str  # file:line of the declaration


def deprecated_flags(index: TreeIndex) -> list[Deprecated]:
    """Every flag this tree deprecates (a tree answer)."""
    return index.answer("deprecated_flags", list[Deprecated], lambda: _read(index))


def _text(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return left + right if left is not None and right is not None else None
    return None


@dataclass(frozen=True)
class _Action:
    template: str | None  # the warning's f-string, `{option_string}` and `{...}` kept
    parts: tuple[tuple[str, str], ...]  # local name -> its f-string (used when new_flag is set)
    stops: bool


def _actions(trees: list[tuple[str, ast.Module]]) -> dict[str, _Action]:
    out: dict[str, _Action] = {}
    for _rel, tree in trees:
        for cls in syntax.statements(tree):
            if not (isinstance(cls, ast.ClassDef) and cls.name.startswith("Deprecated")):
                continue
            call = next(
                (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__call__"),
                None,
            )
            if call is None:
                continue
            template = None
            parts: list[tuple[str, str]] = []
            stops = False
            for node in syntax.walk(call):
                if isinstance(node, ast.Call) and dotted(node.func) == "parser.error":
                    stops = True
                if isinstance(node, ast.Call) and node.args and template is None:
                    shown = template_text(node.args[0])
                    if shown is not None and "deprecated" in shown.lower():
                        template = shown
                if (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.IfExp)
                ):
                    shown = template_text(node.value.body)
                    if shown is not None:
                        parts.append((node.targets[0].id, shown))
            out[cls.name] = _Action(template, tuple(parts), stops)
    return out


def _read(index: TreeIndex) -> list[Deprecated]:
    trees: list[tuple[str, ast.Module]] = []
    for rel in sorted(flag_files(index)):
        parsed = parsed_with(index, rel, "eprecat")
        if parsed is not None:
            trees.append((rel, parsed.tree))
    actions = _actions(trees)
    found: list[Deprecated] = []
    for rel, tree in trees:
        for node in syntax.walk(tree):
            if isinstance(node, ast.Call) and dotted(node.func) is not None:
                if str(dotted(node.func)).endswith("add_argument"):
                    item = _from_add_argument(node, rel, actions)
                    if item is not None:
                        found.append(item)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                item = _from_field(node, node.target.id, rel)
                if item is not None:
                    found.append(item)
    return found


def _from_add_argument(node: ast.Call, rel: str, actions: dict[str, _Action]) -> Deprecated | None:
    options = tuple(
        a.value
        for a in node.args
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
    )
    if not options:
        return None
    keywords = {k.arg: k.value for k in node.keywords if k.arg}
    help_text = _text(keywords.get("help"))
    action_name = dotted(keywords["action"]) if "action" in keywords else None
    action = actions.get(action_name.rsplit(".", 1)[-1]) if action_name else None
    if action is None and not (help_text and _SAYS_DEPRECATED.search(help_text)):
        return None
    new_flag = _text(keywords.get("new_flag"))
    error_message = _text(keywords.get("error_message"))
    replacement = new_flag or _replacement(error_message) or _replacement(help_text)
    message = help_text
    stops = False
    if action is not None:
        stops = action.stops and error_message is not None
        if stops:
            message = error_message
        elif action.template is not None:
            message = _fill(action, options[0], new_flag)
    return Deprecated(options, replacement, message, stops, f"{rel}:{node.lineno}")


def _from_field(node: ast.AnnAssign, name: str, rel: str) -> Deprecated | None:
    annotated = annotated_parts(node.annotation)
    if annotated is None:
        return None
    _, meta = annotated
    help_text = _text(meta)
    option = "--" + name.replace("_", "-")
    if isinstance(meta, ast.Call):
        keywords = {k.arg: k.value for k in meta.keywords if k.arg}
        help_text = _text(keywords.get("help"))
        cli = _text(keywords.get("cli_name"))
        option = cli or option
    if not (help_text and _SAYS_DEPRECATED.search(help_text)):
        return None
    return Deprecated((option,), _replacement(help_text), help_text, False, f"{rel}:{node.lineno}")


def _replacement(text: str | None) -> str | None:
    if not text:
        return None
    match = _REPLACEMENT.search(text)
    return match.group(1) if match else None


def _fill(action: _Action, option: str, new_flag: str | None) -> str | None:
    assert action.template is not None
    text = action.template.replace("{option_string}", option)
    for name, part in action.parts:
        filled = part.replace("{self.new_flag}", new_flag) if new_flag else ""
        text = text.replace("{" + name + "}", filled)
    return text


def check_deprecated_flags(index: TreeIndex, launch: LaunchSpec) -> list[Finding]:
    """A `config.flag_deprecated` warning (error where it stops the launch) per flag used."""
    typed = {
        word.partition("=")[0]
        for word in launch.argv[len(launch.program) :]
        if word.startswith("--")
    }
    options = [o for spec in server_flags(index) for o in spec.options]
    for word in list(typed - set(options)):  # argparse's unique prefixes, as launch.py allows
        longer = {o for o in options if o.startswith(word)}
        if len(longer) == 1:
            typed.add(longer.pop())
    findings: list[Finding] = []
    for item in deprecated_flags(index):
        used = next((o for o in item.options if o in typed), None)
        if used is None:
            continue
        severity: Severity = "error" if item.stops else "warning"
        instead = f"; use {item.replacement} instead" if item.replacement else ""
        findings.append(
            Finding(
                id="config.flag_deprecated",
                severity=severity,
                message=(
                    f"{used} is deprecated in this SGLang"
                    + ("; the launch stops at argument parsing" if item.stops else "")
                    + instead
                ),
                attribute=used,
                fix=FlagFix(item.replacement, None, f"instead of {used}")
                if item.replacement
                else AdviceFix(f"drop {used}"),
                evidence=ConfigEvidence.of(
                    {"flag": used, "replacement": item.replacement},
                    read_from=item.read_from,
                    sglang=item.message,
                ),
            )
        )
    return findings
