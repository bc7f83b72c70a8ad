"""Delegation patches: the methods a wrapper class lacks, generated with libcst.

For each `interface.missing` finding that names a delegate, the wrapper gets a method with the
inner method's signature that returns the inner call's result, appended at the end of its class
body in the file's own indentation and quote style; nothing else in the file changes.
Annotations are kept only where the patched module can resolve every name in them (typing
names are imported when missing; others are dropped), so the file gains no undefined name.

A delegation that compiles but cannot work is refused with the reason: if the wrapper's
`forward` computes logits itself instead of returning the inner model's result, EAGLE-3's aux
hidden states would never reach the logits processor, so `set_eagle3_layers_to_capture` is not
delegated (the others still are).
"""

from __future__ import annotations

import ast
import builtins
import difflib
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from eaglebug.checks.audit import ClassReport
from eaglebug.checks.consumers import find_function
from eaglebug.checks.findings import Finding
from eaglebug.checks.index import ClassRef, Provider, TreeIndex

TRAILER = "Eaglebug-Fix"
_TYPING = frozenset(
    "Any Callable Dict Iterable Iterator List Mapping Optional Sequence Set Tuple Type Union".split()
)
_AUX_CAPTURE = "set_eagle3_layers_to_capture"


@dataclass(frozen=True)
class Patch:
    """One class's delegations: the file before and after, and what was left out and why."""

    path: Path
    file: str  # relative to the tree root, as in call sites
    class_name: str  # qualified
    delegate: str
    methods: tuple[str, ...]
    fixes: tuple[Finding, ...]
    original: bytes
    patched: bytes
    refused: dict[str, str] = field(default_factory=dict)  # method -> reason
    notes: tuple[str, ...] = ()

    @property
    def original_sha(self) -> str:
        return hashlib.sha256(self.original).hexdigest()

    @property
    def short_class(self) -> str:
        return self.class_name.rsplit(".", 1)[-1]

    def diff(self) -> str:
        before = self.original.decode("utf-8", errors="replace").splitlines(keepends=True)
        after = self.patched.decode("utf-8", errors="replace").splitlines(keepends=True)
        return "".join(difflib.unified_diff(before, after, f"a/{self.file}", f"b/{self.file}"))

    def commit_message(self) -> str:
        methods = ", ".join(self.methods)
        lines = [
            f"{self.short_class}: delegate {methods} to self.{self.delegate}",
            "",
            f"SGLang's speculative workers call these on the model object; {self.short_class}",
            f"holds its language model in self.{self.delegate}, which provides them.",
        ]
        for finding in self.fixes:
            for site in finding.call_sites[:3]:
                lines.append(f"  {finding.attribute}: {site.file}:{site.line}")
        for method, reason in self.refused.items():
            lines += ["", f"Not delegated: {method}: {reason}"]
        lines += ["", f"{TRAILER}: {self.class_name}"]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "path": str(self.path),
            "class": self.class_name,
            "delegate": self.delegate,
            "methods": list(self.methods),
            "refused": self.refused,
            "notes": list(self.notes),
            "diff": self.diff(),
        }


def _param_text(arg: ast.arg, default: ast.expr | None, keep: bool) -> str:
    text = arg.arg
    if arg.annotation is not None and keep:
        text += f": {ast.unparse(arg.annotation)}"
        if default is not None:
            text += f" = {ast.unparse(default)}"
    elif default is not None:
        text += f"={ast.unparse(default)}"
    return text


def _names_in(node: ast.AST | None, annotation: bool = True) -> set[str]:
    """Top-level names an expression needs; in annotations, string forward references too."""
    if node is None:
        return set()
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif annotation and isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                found |= _names_in(ast.parse(sub.value, mode="eval"))
            except SyntaxError:
                continue
    return found


@dataclass
class _Generated:
    source: str
    imports: set[str]  # typing names to import
    dropped: list[str]  # annotations dropped because their names are not available


def _signature_and_call(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, available: set[str]
) -> tuple[list[str], list[str], set[str], list[str]]:
    """(parameter texts, call argument texts, typing imports needed, dropped annotations)."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(
        args.defaults
    )
    imports: set[str] = set()
    dropped: list[str] = []

    def keep(annotation: ast.expr | None, label: str) -> bool:
        if annotation is None:
            return False
        missing = _names_in(annotation) - available
        if not missing:
            return True
        if missing <= _TYPING:
            imports.update(missing)
            return True
        dropped.append(f"{label} ({', '.join(sorted(missing))} not imported here)")
        return False

    params: list[str] = []
    call: list[str] = []
    for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        if i == 0:
            params.append(arg.arg)  # self
            continue
        if default is not None and _names_in(default, annotation=False) - available:
            raise _Unsupported(f"default of {arg.arg} uses a name this module lacks")
        params.append(_param_text(arg, default, keep(arg.annotation, arg.arg)))
        call.append(arg.arg)
        if args.posonlyargs and arg is args.posonlyargs[-1]:
            params.append("/")
    if args.vararg is not None:
        params.append(
            "*" + _param_text(args.vararg, None, keep(args.vararg.annotation, args.vararg.arg))
        )
        call.append("*" + args.vararg.arg)
    elif args.kwonlyargs:
        params.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if default is not None and _names_in(default, annotation=False) - available:
            raise _Unsupported(f"default of {arg.arg} uses a name this module lacks")
        params.append(_param_text(arg, default, keep(arg.annotation, arg.arg)))
        call.append(f"{arg.arg}={arg.arg}")
    if args.kwarg is not None:
        params.append(
            "**" + _param_text(args.kwarg, None, keep(args.kwarg.annotation, args.kwarg.arg))
        )
        call.append("**" + args.kwarg.arg)
    return params, call, imports, dropped


class _Unsupported(Exception):
    """The inner method's signature cannot be mirrored safely in this module."""


def _generate(
    name: str,
    provider: Provider,
    inner_fn: ast.FunctionDef | ast.AsyncFunctionDef | None,
    delegate: str,
    available: set[str],
    indent: str,
    quote: str,
) -> _Generated:
    doc = f"{quote * 3}Delegate to self.{delegate} (speculative decoding); added by eaglebug.{quote * 3}"
    if provider.kind in {"property", "class attribute", "__init__ attribute"} or inner_fn is None:
        body = f"return self.{delegate}.{name}"
        lines = ["@property", f"def {name}(self):", f"{indent}{doc}", f"{indent}{body}"]
        return _Generated("\n".join(lines) + "\n", set(), [])
    params, call, imports, dropped = _signature_and_call(inner_fn, available)
    returns = ""
    if inner_fn.returns is not None:
        missing = _names_in(inner_fn.returns) - available
        if not missing or missing <= _TYPING:
            imports |= missing
            returns = f" -> {ast.unparse(inner_fn.returns)}"
        else:
            dropped.append(f"return annotation ({', '.join(sorted(missing))} not imported here)")
    prefix = "async def" if isinstance(inner_fn, ast.AsyncFunctionDef) else "def"
    call_text = f"self.{delegate}.{name}({', '.join(call)})"
    if isinstance(inner_fn, ast.AsyncFunctionDef):
        call_text = f"await {call_text}"
    lines = [
        f"{prefix} {name}({', '.join(params)}){returns}:",
        f"{indent}{doc}",
        f"{indent}return {call_text}",
    ]
    return _Generated("\n".join(lines) + "\n", imports, dropped)


def _module_names(tree: ast.Module) -> set[str]:
    """Names bound at module level when the module runs, plus builtins.

    Imports inside functions do not count. Imports under `if TYPE_CHECKING:` count only when
    annotations are postponed (`from __future__ import annotations`); otherwise an annotation
    naming them would raise NameError when the class is created.
    """
    postponed = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    names = set(dir(builtins))

    def bind(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    names.add((alias.asname or alias.name).split(".")[0])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.If):
                type_checking = "TYPE_CHECKING" in ast.unparse(node.test)
                if not type_checking or postponed:
                    bind(node.body)
                bind(node.orelse)
            elif isinstance(node, ast.Try):
                bind(node.body)
                for handler in node.handlers:
                    bind(handler.body)
                bind(node.orelse)
                bind(node.finalbody)

    bind(tree.body)
    return names


def _quote_style(module: cst.Module) -> str:
    counts = {'"': 0, "'": 0}

    class Count(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            quote = node.quote[0]
            if quote in counts:
                counts[quote] += 1

    module.visit(Count())
    return "'" if counts["'"] > counts['"'] else '"'


def _requote(node: cst.BaseStatement, quote: str) -> cst.BaseStatement:
    """Rewrite simple string literals to the file's quote style where that is safe."""

    class Requote(cst.CSTTransformer):
        def leave_SimpleString(
            self, original_node: cst.SimpleString, updated_node: cst.SimpleString
        ) -> cst.SimpleString:
            if len(updated_node.quote) != 1 or updated_node.quote == quote:
                return updated_node
            body = updated_node.value[len(updated_node.prefix) + 1 : -1]
            if quote in body or "\\" in body:
                return updated_node
            return updated_node.with_changes(value=f"{updated_node.prefix}{quote}{body}{quote}")

    visited = node.visit(Requote())
    assert isinstance(visited, cst.BaseStatement)
    return visited


class _AppendToClass(cst.CSTTransformer):
    def __init__(self, class_name: str, statements: list[cst.BaseStatement]) -> None:
        self.class_name = class_name
        self.statements = statements
        self.depth = 0
        self.done = False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.depth += 1
        return True

    def leave_ClassDef(
        self, original_node: cst.ClassDef, updated_node: cst.ClassDef
    ) -> cst.ClassDef:
        self.depth -= 1
        if self.depth != 0 or updated_node.name.value != self.class_name or self.done:
            return updated_node
        self.done = True
        body = updated_node.body
        if not isinstance(body, cst.IndentedBlock):
            raise _Unsupported("the class body is on one line")
        return updated_node.with_changes(
            body=body.with_changes(body=[*body.body, *self.statements])
        )


def _forward_problem(index: TreeIndex, ref: ClassRef, delegate: str) -> str | None:
    """Why delegating aux-hidden-state capture would not work, if the wrapper's forward says so."""
    provider = index.lookup(ref, "forward")
    if provider is None or provider.method is None or provider.file is None:
        return None
    parsed = index.parse_file(provider.file)
    if parsed is None:
        return None
    found = find_function(parsed[0], f"{provider.owner.rsplit('.', 1)[-1]}.forward")
    if found is None:
        return None
    fn = found[1]
    logits_calls = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "logits_processor"
    ]
    if not logits_calls:
        return None
    source = ast.unparse(fn)
    if "aux_hidden_states" in source or "capture_aux_hidden_states" in source:
        return None
    line = logits_calls[0].lineno
    return (
        f"{provider.owner.rsplit('.', 1)[-1]}.forward computes logits itself "
        f"({provider.file}:{line} calls self.logits_processor) instead of returning "
        f"self.{delegate}(...)'s result, so EAGLE-3's aux hidden states would never reach the "
        "logits processor; capture them in forward (the capture_aux_hidden_states pattern of "
        "SGLang's own wrappers) before delegating this"
    )


def plan_patches(index: TreeIndex, reports: Iterable[ClassReport]) -> list[Patch]:
    """One patch per class whose missing attributes have a delegate."""
    patches: list[Patch] = []
    for report in reports:
        fixable = [
            f
            for f in report.findings
            if f.id == "interface.missing" and f.delegate and f.severity in {"error", "warning"}
        ]
        if not fixable:
            continue
        patch = _plan_class(index, report.ref, fixable)
        if patch is not None:
            patches.append(patch)
    return patches


def _plan_class(index: TreeIndex, ref: ClassRef, fixable: list[Finding]) -> Patch | None:
    path = index.tree.root / ref.file
    original = path.read_bytes()
    text = original.decode("utf-8")
    module = cst.parse_module(text)
    tree = ast.parse(original)
    available = _module_names(tree)
    quote = _quote_style(module)
    indent = module.default_indent
    delegate = fixable[0].delegate or ""
    refused: dict[str, str] = {}
    notes: list[str] = []
    statements: list[cst.BaseStatement] = []
    imports: set[str] = set()
    methods: list[str] = []
    fixes: list[Finding] = []
    problem = _forward_problem(index, ref, delegate)
    seen: set[str] = set()
    for finding in sorted(fixable, key=lambda f: f.attribute or ""):
        name = finding.attribute or ""
        if name in seen:
            continue
        seen.add(name)
        if finding.delegate != delegate:
            refused[name] = f"its delegate is self.{finding.delegate}, not self.{delegate}"
            continue
        if name == _AUX_CAPTURE and problem:
            refused[name] = problem
            continue
        inner_names = finding.details.get("delegate_class") or []
        inner = index.cls(str(inner_names[0])) if inner_names else None
        provider = index.lookup(inner, name) if inner is not None else None
        if provider is None:
            refused[name] = f"self.{delegate}'s class does not provide it"
            continue
        inner_fn = None
        if provider.method is not None and provider.file is not None:
            parsed = index.parse_file(provider.file)
            found = (
                find_function(parsed[0], f"{provider.owner.rsplit('.', 1)[-1]}.{name}")
                if parsed
                else None
            )
            inner_fn = found[1] if found else None
        try:
            generated = _generate(name, provider, inner_fn, delegate, available, indent, quote)
        except _Unsupported as exc:
            refused[name] = str(exc)
            continue
        parsed_statement = cst.parse_statement(generated.source, config=module.config_for_parsing)
        statement = _requote(parsed_statement, quote)
        if isinstance(statement, cst.FunctionDef):
            statement = statement.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        statements.append(statement)
        imports |= generated.imports
        notes += [f"{name}: annotation dropped for {d}" for d in generated.dropped]
        methods.append(name)
        fixes.append(finding)
    if not statements:
        if refused:
            return Patch(
                path,
                ref.file,
                ref.qualname,
                delegate,
                (),
                (),
                original,
                original,
                refused,
                tuple(notes),
            )
        return None
    transformer = _AppendToClass(ref.facts.name, statements)
    patched_module = module.visit(transformer)
    if not transformer.done:
        return None
    if imports:
        context = CodemodContext()
        for name in sorted(imports):
            AddImportsVisitor.add_needed_import(context, "typing", name)
        patched_module = AddImportsVisitor(context).transform_module(patched_module)
        notes.append(f"imported from typing: {', '.join(sorted(imports))}")
    patched = patched_module.code.encode("utf-8")
    return Patch(
        path,
        ref.file,
        ref.qualname,
        delegate,
        tuple(methods),
        tuple(fixes),
        original,
        patched,
        refused,
        tuple(notes),
    )
