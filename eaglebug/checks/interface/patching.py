"""Delegation patches: the planned methods of a class written into its file with libcst.

The methods come from the findings' typed fixes (`audit/delegation.py` planned their exact text);
this module only places them at the end of the class body, adds the typing imports they need
(`AddImportsVisitor`), and checks that each method's text is in the patched file as planned,
so the diff shows what the findings said. Nothing else in the file changes.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import PatchFix
from eaglebug.checks.interface.audit import ClassReport
from eaglebug.checks.interface.patch import Patch
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.index import TreeIndex


class _Unsupported(Exception):
    """The class cannot take the methods as planned (its body is on one line, say)."""


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


def plan_patches(index: TreeIndex, reports: Iterable[ClassReport]) -> list[Patch]:
    """One patch per class whose missing attributes have a delegate."""
    patches: list[Patch] = []
    for report in reports:
        fixable = [
            f
            for f in report.findings
            if f.id == "interface.missing"
            and isinstance(f.fix, PatchFix)
            and f.severity in {"error", "warning"}
        ]
        if not fixable:
            continue
        patch = _plan_class(index, report.ref, fixable)
        if patch is not None:
            patches.append(patch)
    return patches


def _plan_class(index: TreeIndex, ref: ClassRef, fixable: list[Finding]) -> Patch | None:
    path = index.path_of(ref.file)
    original = path.read_bytes()
    fixes: list[tuple[Finding, PatchFix]] = []
    seen: set[str] = set()
    for finding in sorted(fixable, key=lambda f: f.attribute or ""):
        assert isinstance(finding.fix, PatchFix)
        if finding.fix.attribute not in seen:
            seen.add(finding.fix.attribute)
            fixes.append((finding, finding.fix))
    delegate = fixes[0][1].delegate
    refused: dict[str, str] = {}
    planned: list[tuple[Finding, PatchFix]] = []
    for finding, fix in fixes:
        if fix.delegate != delegate:
            refused[fix.attribute] = f"its delegate is self.{fix.delegate}, not self.{delegate}"
        elif fix.method is None:
            refused[fix.attribute] = fix.refused or "no method could be planned"
        else:
            planned.append((finding, fix))
    # The audit may have read an older copy (another eaglebug patched the file meanwhile):
    # what these bytes already define is done, not to be added twice.
    have = _defined_in_class(cst.parse_module(original.decode("utf-8")), ref.facts.name)
    planned = [(f, fix) for f, fix in planned if fix.attribute not in have]
    notes = [n for _, fix in planned if fix.method for n in fix.method.notes]

    def refusal() -> Patch:
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

    if not planned:
        return refusal() if refused else None
    try:
        patched = _write_methods(original, ref, [fix for _, fix in planned])
    except _Unsupported as exc:
        for _, fix in planned:
            refused[fix.attribute] = str(exc)
        return refusal()
    imports = sorted({i for _, fix in planned if fix.method for i in fix.method.imports})
    if imports:
        notes.append(f"imported from typing: {', '.join(imports)}")
    return Patch(
        path,
        ref.file,
        ref.qualname,
        delegate,
        tuple(fix.attribute for _, fix in planned),
        tuple(f for f, _ in planned),
        original,
        patched,
        refused,
        tuple(notes),
    )


def _defined_in_class(module: cst.Module, name: str) -> set[str]:
    """The methods a top-level class defines in these very bytes."""
    found: set[str] = set()
    for statement in module.body:
        if isinstance(statement, cst.ClassDef) and statement.name.value == name:
            body = statement.body
            if isinstance(body, cst.IndentedBlock):
                found = {s.name.value for s in body.body if isinstance(s, cst.FunctionDef)}
    return found


def _write_methods(original: bytes, ref: ClassRef, fixes: list[PatchFix]) -> bytes:
    module = cst.parse_module(original.decode("utf-8"))
    statements: list[cst.BaseStatement] = []
    for fix in fixes:
        assert fix.method is not None
        statement = cst.parse_statement(
            textwrap.dedent(fix.method.text), config=module.config_for_parsing
        )
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            statement = statement.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        statements.append(statement)
    transformer = _AppendToClass(ref.facts.name, statements)
    patched_module = module.visit(transformer)
    if not transformer.done:
        raise _Unsupported(f"class {ref.facts.name} was not found in {ref.file}")
    imports = sorted({i for fix in fixes if fix.method for i in fix.method.imports})
    if imports:
        context = CodemodContext()
        for name in imports:
            AddImportsVisitor.add_needed_import(context, "typing", name)
        patched_module = AddImportsVisitor(context).transform_module(patched_module)
    patched = patched_module.code
    # libcst writes the new methods with the file's own line ending (a CRLF file stays CRLF):
    # the planned text, written with `\n`, is looked for with that ending.
    newline = module.default_newline
    for fix in fixes:
        assert fix.method is not None
        if fix.method.text.replace("\n", newline) not in patched:
            raise _Unsupported(
                f"the file's layout would change the planned text of {fix.attribute}"
            )
    return patched.encode("utf-8")
