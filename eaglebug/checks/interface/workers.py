"""Which algorithms run a piece of worker code, down to the method.

`create_worker` names one worker class per algorithm. Code in a module that defines worker
classes runs for those workers' algorithms, and for a subclass's algorithms too, unless the
subclass overrides the method without calling `super()` (sglang 0.5.9's `StandaloneWorker`
replaces `EAGLEWorker.__init__`, so the EAGLE worker's `get_embed_and_head` call never runs for
STANDALONE). Code anywhere else (ModelRunner, TpModelWorker, helpers) is not algorithm-scoped.
"""

from __future__ import annotations

import ast
import re

from eaglebug.checks.reach.consumers import find_function
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.speculative.algorithms import AlgorithmFacts


class WorkerScopes:
    def __init__(self, index: TreeIndex, algo: AlgorithmFacts) -> None:
        self.index = index
        self.own: dict[str, set[str]] = {}  # module -> algorithms of the workers it defines
        self.workers: dict[str, frozenset[str]] = {}
        for worker, served in algo.workers.items():
            ref = index.classes.cls(worker)
            if ref is not None:
                self.workers[ref.qualname] = served
                self.own.setdefault(ref.module.module, set()).update(served)
        self.classes: dict[str, ClassRef] = {}
        for module in self.own:
            facts = index.module(module)
            if facts is None:
                continue
            for name in facts.classes:
                ref = index.classes.cls(f"{module}.{name}")
                if ref is not None:
                    self.classes[ref.qualname] = ref
        self.subclasses: dict[str, list[str]] = {}
        for qualname, ref in self.classes.items():
            inside, _, _ = index.classes.bases(ref)
            for base in inside:
                self.subclasses.setdefault(base.qualname, []).append(qualname)
        self._memo: dict[str, frozenset[str] | None] = {}
        self._runs: dict[tuple[str, str, str], bool] = {}
        self._elsewhere: dict[str, bool] = {}
        self._self_calls: dict[tuple[str, str], frozenset[str]] = {}

    def is_worker_module(self, module: str) -> bool:
        return module in self.own

    def algorithms(self, scope: str) -> frozenset[str] | None:
        """The algorithms that can run the function `scope`; None when not worker code."""
        if scope in self._memo:
            return self._memo[scope]
        result: frozenset[str] | None = None
        split = self.index.split_qualified(scope)
        if split is not None and split[0] in self.own:
            module, rest = split
            class_name, _, method = rest.partition(".")
            qualname = f"{module}.{class_name}"
            if method and qualname in self.classes:
                result = frozenset(self._method_algorithms(qualname, method, set()))
            else:
                result = frozenset(self.own[module])
        self._memo[scope] = result
        return result

    def _class_algorithms(self, qualname: str) -> set[str]:
        if qualname in self.workers:
            return set(self.workers[qualname])
        return set(self.own.get(self.classes[qualname].module.module, set()))

    def _method_algorithms(self, qualname: str, method: str, seen: set[str]) -> set[str]:
        """The algorithms of the class that defines `method` and of each subclass for which
        it still runs, resolved through the subclass's own lookup order (`_runs_for`)."""
        result = self._class_algorithms(qualname)
        for sub in self.subclasses_of(qualname):
            if self._runs_for(sub, qualname, method, 0):
                result |= self._class_algorithms(sub)
        return result

    def subclasses_of(self, qualname: str) -> list[str]:
        """Every class of the worker modules below `qualname`, however deep."""
        found: list[str] = []
        todo = list(self.subclasses.get(qualname, []))
        while todo:
            sub = todo.pop()
            if sub not in found and sub != qualname:
                found.append(sub)
                todo.extend(self.subclasses.get(sub, []))
        return found

    def _runs_for(self, sub: str, owner: str, method: str, depth: int) -> bool:
        """Does `owner.method` run on an instance of `sub`?

        Not if a class between them overrides it without calling `super().method(...)`
        (sglang 0.5.9's `StandaloneWorker.__init__`). A private helper (`_name`, called on
        self only) runs only if a method that calls it runs, as `sub` resolves that method:
        0.5.21+'s `StandaloneDraftWorker.init_lm_head` is `pass`, which cuts
        `EagleDraftWorker.init_lm_head -> self._resolve_shared_embed_and_head()`."""
        key = (sub, owner, method)
        if key in self._runs:
            return self._runs[key]
        self._runs[key] = True  # recursion guard: assume it runs
        order, _, _ = self.index.classes.mro(self.classes[sub])
        result = True
        for ref in order:
            if ref.qualname == owner:
                break
            if method in ref.facts.methods and not self._calls_super(ref, method):
                result = False
                break
        if result and depth < 4 and _private(method) and not self._called_elsewhere(method):
            callers = [
                (ref, name)
                for ref in order
                for name in ref.facts.methods
                if name != method and self._calls_self(ref, name, method)
            ]
            result = any(
                self._resolves_to(order, name) == ref.qualname
                and self._runs_for(sub, ref.qualname, name, depth + 1)
                for ref, name in callers
            )
        self._runs[key] = result
        return result

    @staticmethod
    def _resolves_to(order: list[ClassRef], method: str) -> str | None:
        return next((r.qualname for r in order if method in r.facts.methods), None)

    def _function(self, ref: ClassRef, method: str) -> ast.AST | None:
        parsed = self.index.parse_file(ref.file)
        if parsed is None:
            return None
        found = find_function(parsed.tree, f"{ref.facts.name}.{method}")
        return found[1] if found is not None else None

    def _calls_self(self, ref: ClassRef, method: str, callee: str) -> bool:
        """Does `ref.method` call `self.callee(...)`?"""
        key = (ref.qualname, method)
        if key not in self._self_calls:
            fn = self._function(ref, method)
            self._self_calls[key] = frozenset(
                node.func.attr
                for node in (syntax.walk(fn) if fn is not None else ())
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and dotted(node.func.value) == "self"
            )
        return callee in self._self_calls[key]

    def _called_elsewhere(self, method: str) -> bool:
        """Is `method` called on something other than self anywhere in the worker modules?"""
        if method not in self._elsewhere:
            pattern = re.compile(rf"(?<!\bself)\.{re.escape(method)}\s*\(")
            dotted_name = f".{method}"  # the pattern's one literal: most files stop here
            self._elsewhere[method] = any(
                (parsed := self.index.parse_file(rel)) is not None
                and dotted_name in parsed.text
                and pattern.search(parsed.text) is not None
                for rel in self._module_files()
            )
        return self._elsewhere[method]

    def _module_files(self) -> list[str]:
        return sorted({ref.file for ref in self.classes.values()})

    def _calls_super(self, ref: ClassRef, method: str) -> bool:
        """Does `ref.method` call `super().method(...)`?"""
        fn = self._function(ref, method)
        if fn is None:
            return True  # unknown: assume the base still runs
        for node in syntax.walk(fn):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == method
                and isinstance(node.func.value, ast.Call)
                and dotted(node.func.value.func) == "super"
            ):
                return True
        return False


def _private(method: str) -> bool:
    return method.startswith("_") and not (method.startswith("__") and method.endswith("__"))
