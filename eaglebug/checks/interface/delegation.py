"""Delegation methods: the one generator of the code a fix adds, without libcst or a parse
of anything but the two classes' own files.

For an `interface.missing` finding whose attribute an inner object provides, the wrapper gets
a method with the inner method's signature that returns the inner call's result. The text is
planned here in the file's own indentation and quote style, exactly as `patching.py` inserts
it, so what `audit`, `preflight`, the evidence screen and the diff show is what `--apply`
writes. Annotations are kept only where the patched module can resolve every name in them
(typing names are imported when missing; others are dropped), so the file gains no undefined
name.

A delegation that compiles but cannot work is refused with the reason: if the wrapper's
`forward` computes logits itself instead of returning the inner model's result, EAGLE-3's aux
hidden states would never reach the logits processor, so `set_eagle3_layers_to_capture` is not
delegated (the others still are).
"""

from __future__ import annotations

import ast
import builtins
import io
import tokenize
from dataclasses import dataclass

from eaglebug.checks.contract.fixes import PatchFix, PlannedMethod
from eaglebug.checks.reach.consumers import find_function
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classes import ClassRef, Provider
from eaglebug.checks.source.facts import MISSING, Fact, Parsed
from eaglebug.checks.source.index import TreeIndex

_TYPING = frozenset(
    "Any Callable Dict Iterable Iterator List Mapping Optional Sequence Set Tuple Type Union".split()
)
AUX_CAPTURE = "set_eagle3_layers_to_capture"


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
    for sub in syntax.walk(node):
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


def _forward_problem(index: TreeIndex, ref: ClassRef, delegate: str) -> str | None:
    """Why delegating aux-hidden-state capture would not work, if the wrapper's forward says so."""
    provider = index.classes.lookup(ref, "forward")
    if provider is None or provider.method is None or provider.file is None:
        return None
    parsed = index.parse_file(provider.file)
    if parsed is None:
        return None
    found = find_function(parsed.tree, f"{provider.owner.rsplit('.', 1)[-1]}.forward")
    if found is None:
        return None
    fn = found[1]
    logits_calls = [
        n
        for n in syntax.walk(fn)
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


_STYLE: Fact[tuple[str, str]] = Fact("style", tuple[str, str])


@dataclass(frozen=True)
class FileStyle:
    """How the wrapper's file is written: its indent unit, the class body's indent, quotes."""

    unit: str
    body: str
    quote: str


def file_style(text: str, cls: ast.ClassDef, kept: tuple[str, str] | None = None) -> FileStyle:
    """`kept`: the file's indent unit and quote, if already known (`text_style`)."""
    unit, quote = kept or text_style(text)
    first = cls.body[0]
    line = text.splitlines()[first.lineno - 1] if first.lineno <= text.count("\n") + 1 else ""
    body = line[: len(line) - len(line.lstrip())] or unit
    return FileStyle(unit, body, quote)


def text_style(text: str) -> tuple[str, str]:
    """The file's indent unit and its quote, by the majority of its string literals."""
    unit, counts = "    ", {'"': 0, "'": 0}
    seen_indent = False
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.INDENT and not seen_indent:
                unit, seen_indent = tok.string, True
            elif tok.type == tokenize.STRING:
                quote = tok.string.lstrip("rRbBuUfF")[:1]
                if quote in counts:
                    counts[quote] += 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return unit, "'" if counts["'"] > counts['"'] else '"'


def requote(text: str, quote: str) -> str:
    """Simple string literals in `text` rewritten to the file's quote style where that is safe."""
    other = "'" if quote == '"' else '"'
    lines = text.split("\n")
    edits: list[tuple[int, int, int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.STRING or tok.start[0] != tok.end[0]:
                continue
            value = tok.string
            prefix = value[: len(value) - len(value.lstrip("rRbBuU"))]
            body = value[len(prefix) :]
            if len(body) < 2 or body[0] != other or body[:3] == other * 3:
                continue
            inner = body[1:-1]
            if quote in inner or "\\" in inner:
                continue
            edits.append(
                (tok.start[0] - 1, tok.start[1], tok.end[1], f"{prefix}{quote}{inner}{quote}")
            )
    except (tokenize.TokenError, SyntaxError):
        return text
    for row, start, end, new in reversed(edits):
        lines[row] = lines[row][:start] + new + lines[row][end:]
    return "\n".join(lines)


def _class_node(tree: ast.Module, name: str) -> ast.ClassDef | None:
    """The top-level class `name` (a wrapper is one; nested classes are not audited)."""
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    return found[-1] if found else None  # the last definition wins, as at run time


class DelegationPlanner:
    """Plans the delegation methods of one wrapper class (its file is read once)."""

    def __init__(self, index: TreeIndex, ref: ClassRef) -> None:
        self.index = index
        self.ref = ref
        self._read = False
        self._parsed: Parsed | None = None
        self._forward: dict[str, str | None] = {}
        self._style: FileStyle | None = None  # the file's, tokenized once per class

    def _wrapper(self) -> Parsed | None:
        if not self._read:
            self._read = True
            self._parsed = self.index.parse_file(self.ref.file)
        return self._parsed

    def _kept_style(self, text: str) -> tuple[str, str]:
        """Tokenizing a whole file costs more than planning its class's methods: the style is
        kept with the file's facts (by its bytes), for every class of the file and every run."""
        external = self.index.classes.external
        if external is not None and external.owns(self.ref.file):
            return text_style(text)
        kept = self.index.recall(self.ref.file, _STYLE)
        if kept is MISSING:
            kept = text_style(text)
            self.index.remember(self.ref.file, _STYLE, kept)
        return kept

    def plan(self, attribute: str, delegate: str, inner_class: str, provider: Provider) -> PatchFix:
        def fix(method: PlannedMethod | None, refused: str | None = None) -> PatchFix:
            """The fix for this attribute: the planned method, or why there is none."""
            return PatchFix(
                self.ref.qualname,
                attribute,
                delegate,
                inner_class,
                provider.owner,
                self.ref.file,
                method,
                refused,
            )

        def refuse(reason: str) -> PatchFix:
            return fix(None, reason)

        parsed = self._wrapper()
        cls = _class_node(parsed.tree, self.ref.facts.name) if parsed else None
        if parsed is None or cls is None:
            return refuse(f"{self.ref.file} cannot be read back")
        tree, text = parsed.tree, parsed.text
        if attribute == AUX_CAPTURE:
            if delegate not in self._forward:
                self._forward[delegate] = _forward_problem(self.index, self.ref, delegate)
            problem = self._forward[delegate]
            if problem:
                return refuse(problem)
        inner_fn = None
        if provider.method is not None and provider.file is not None:
            inner = self.index.parse_file(provider.file)
            hit = (
                find_function(inner.tree, f"{provider.owner.rsplit('.', 1)[-1]}.{attribute}")
                if inner
                else None
            )
            inner_fn = hit[1] if hit else None
        if self._style is None:
            self._style = file_style(text, cls, self._kept_style(text))
        style = self._style
        try:
            generated = _generate(
                attribute,
                provider,
                inner_fn,
                delegate,
                _module_names(tree),
                style.unit,
                style.quote,
            )
        except _Unsupported as exc:
            return refuse(str(exc))
        source = requote(generated.source, style.quote)
        indented = "".join(
            (style.body + line if line.strip() else line)
            for line in source.splitlines(keepends=True)
        )
        method = PlannedMethod(
            attribute,
            indented,
            tuple(sorted(generated.imports)),
            tuple(f"{attribute}: annotation dropped for {d}" for d in generated.dropped),
        )
        return fix(method)
