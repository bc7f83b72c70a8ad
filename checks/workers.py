"""Which algorithms run a piece of worker code, down to the method.

`create_worker` names one worker class per algorithm. Code in a module that defines worker
classes runs for those workers' algorithms, and for a subclass's algorithms too, unless the
subclass overrides the method without calling `super()` (sglang 0.5.9's `StandaloneWorker`
replaces `EAGLEWorker.__init__`, so the EAGLE worker's `get_embed_and_head` call never runs for
STANDALONE). Code anywhere else (ModelRunner, TpModelWorker, helpers) is not algorithm-scoped.
"""

from __future__ import annotations

import ast

from eaglebug.checks.algorithms import AlgorithmFacts
from eaglebug.checks.classfacts import dotted
from eaglebug.checks.classindex import ClassRef
from eaglebug.checks.consumers import find_function
from eaglebug.checks.index import TreeIndex


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
        seen.add(qualname)
        result = self._class_algorithms(qualname)
        for sub in self.subclasses.get(qualname, []):
            if sub in seen:
                continue
            overrides = method in self.classes[sub].facts.methods
            if overrides and not self._calls_super(self.classes[sub], method):
                continue
            result |= self._method_algorithms(sub, method, seen)
        return result

    def _calls_super(self, ref: ClassRef, method: str) -> bool:
        """Does `ref.method` call `super().method(...)`?"""
        parsed = self.index.parse_file(ref.file)
        if parsed is None:
            return True  # unknown: assume the base still runs
        found = find_function(parsed.tree, f"{ref.facts.name}.{method}")
        if found is None:
            return True
        for node in ast.walk(found[1]):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == method
                and isinstance(node.func.value, ast.Call)
                and dotted(node.func.value.func) == "super"
            ):
                return True
        return False
