"""Expressions for `treeinterp.Interpreter`: names, attributes, calls, tests, f-strings.

Kept apart from the statements so each reads on its own. What a name or a call means is
decided here: the server args' fields, the platform's probes, the model's config, a function of
the tree (followed), or one of SGLang's resolution helpers, recognised by name (`resolved_view`,
`declare_resolution`, `run_post_process_pass`, `run_hook`) since what they do to the args is the
point of the run.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from eaglebug.checks.pyeval.treevalues import (
    _ARGS_GETTERS,
    _BAGS,
    _BUILTINS,
    _IDENTITY,
    _MACHINE_CALLS,
    _STR_METHODS,
    _TORCH_ATTRS,
    ARGS,
    PLATFORM,
    TRUTHY,
    UNKNOWN,
    FuncRef,
    Maybe,
    OneOf,
    Sentinel,
    _binop,
    _builtin,
    _compare,
    _dict_keys,
    _index,
    _merge_all,
    _merge_value,
    _product,
    _tri,
    _tri_name,
    _truth,
    _Unknown,
)
from eaglebug.checks.source.classfacts import dotted

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.treeinterp import _Frame
    from eaglebug.checks.pyeval.treevalues import World, _State
    from eaglebug.checks.source.index import TreeIndex
    from eaglebug.checks.speculative.algorithms import AlgorithmFacts


class Expressions:
    """The expression half of the interpreter (a mixin: the statements are `Interpreter`'s)."""

    index: TreeIndex
    world: World
    state: _State
    stack: list[_Frame]
    algorithms: AlgorithmFacts | None
    _reads: set[str]
    steps: int

    def call(
        self,
        ref: FuncRef,
        args: list[Any],
        kwargs: dict[str, Any],
        reads: dict[int | str, frozenset[str]] | None = None,
    ) -> Any:
        raise NotImplementedError

    def measured(self, node: ast.expr) -> tuple[Any, frozenset[str]]:
        raise NotImplementedError

    def lookup(self, module: str, name: str, depth: int = 0) -> Any:
        raise NotImplementedError

    def lookup_dotted(self, dotted_name: str, depth: int = 0) -> Any:
        raise NotImplementedError

    def method(self, name: str) -> FuncRef | None:
        raise NotImplementedError

    def write(self, name: str, value: Any, rel: str, line: int) -> None:
        raise NotImplementedError

    def expr(self, node: ast.expr) -> Any:
        self.steps += 1
        match node:
            case ast.Constant(value=value):
                return value
            case ast.Tuple(elts=elts) | ast.List(elts=elts) | ast.Set(elts=elts):
                return _product([self.expr(e) for e in elts])
            case ast.Dict(keys=keys, values=values):
                out: dict[Any, Any] = {}
                for k, v in zip(keys, values, strict=True):
                    if k is None:
                        return UNKNOWN
                    key = self.expr(k)
                    if key is UNKNOWN or isinstance(key, OneOf):
                        return UNKNOWN
                    out[key] = self.expr(v)
                return out
            case ast.Name(id=name):
                return self.name(name)
            case ast.Attribute(value=base, attr=attr):
                return self.attribute(self.expr(base), attr)
            case ast.Subscript(value=base, slice=index):
                container, key = self.expr(base), self.expr(index)
                if isinstance(container, OneOf) and not isinstance(key, (_Unknown, OneOf)):
                    picked = [_index(c, key) for c in container.values]
                    return UNKNOWN if UNKNOWN in picked else _merge_all(picked)
                if isinstance(container, (tuple, list, dict, str)) and not isinstance(
                    key, (_Unknown, OneOf)
                ):
                    try:
                        return container[key]
                    except (IndexError, KeyError, TypeError):
                        return UNKNOWN
                return UNKNOWN
            case ast.BoolOp(op=op, values=values):
                return self.boolop(isinstance(op, ast.And), values)
            case ast.UnaryOp(op=ast.Not(), operand=operand):
                truth = _truth(self.expr(operand))
                return UNKNOWN if truth is None else not truth
            case ast.UnaryOp(op=ast.USub(), operand=operand):
                value = self.expr(operand)
                return -value if isinstance(value, (int, float)) else UNKNOWN
            case ast.BinOp(left=left, op=op, right=right):
                return _binop(op, self.expr(left), self.expr(right))
            case ast.Compare(left=left, ops=ops, comparators=comparators):
                return self.compare(left, ops, comparators)
            case ast.IfExp(test=test, body=body, orelse=orelse):
                truth = _truth(self.expr(test))
                if truth is None:
                    return _merge_value(self.expr(body), self.expr(orelse))
                return self.expr(body if truth else orelse)
            case ast.JoinedStr(values=parts):
                return self.fstring(parts)
            case ast.Call():
                return self.call_expr(node)
            case _:
                return UNKNOWN

    def boolop(self, is_and: bool, values: list[ast.expr]) -> Any:
        """Python's short-circuit `and` / `or`, three-valued where a value is unknown."""
        unknown = False
        last: Any = None
        for value_node in values:
            value = self.expr(value_node)
            truth = _truth(value)
            if truth is None:
                unknown = True
                continue
            if truth is not is_and:  # `and` stops at a falsy value, `or` at a truthy one
                # after an unknown: `and` is falsy either way; `or` is truthy, its value unknown
                return value if not unknown or is_and else TRUTHY
            last = value
        return UNKNOWN if unknown else last

    def compare(self, left: ast.expr, ops: list[ast.cmpop], comparators: list[ast.expr]) -> Any:
        a = self.expr(left)
        for op, right in zip(ops, comparators, strict=True):
            b = self.expr(right)
            result = _compare(op, a, b)
            if result is UNKNOWN or result is False:
                return result
            a = b
        return True

    def fstring(self, parts: list[ast.expr]) -> Any:
        out: list[str] = []
        for part in parts:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                value = self.expr(part.value)
                if value is UNKNOWN or isinstance(value, OneOf):
                    out.append("{" + ast.unparse(part.value) + "}")
                elif part.conversion == ord("r"):
                    out.append(repr(value))
                else:
                    out.append(str(value))
        return "".join(out)

    def name(self, name: str) -> Any:
        frame = self.stack[-1]
        if name in frame.locals:
            self._reads |= frame.local_reads.get(name, frozenset())
            return frame.locals[name]
        if name in self.world.probes and name not in frame.imports:
            return Sentinel(f"probe:{name}")
        if name in frame.imports:
            target = frame.imports[name]
            if target.rsplit(".", 1)[-1] in self.world.probes:
                return Sentinel(f"probe:{target.rsplit('.', 1)[-1]}")
            return self.lookup_dotted(target)
        if name == "torch":  # the box's torch: its attributes exist, its answers are machine calls
            return Sentinel("torch:torch")
        if name in {"None", "True", "False"}:
            return {"None": None, "True": True, "False": False}[name]
        found = self.lookup(frame.module, name)
        if found is UNKNOWN and name in _BUILTINS:
            return Sentinel(f"builtin:{name}")
        return found

    def attribute(self, base: Any, attr: str) -> Any:
        if base is ARGS:
            if attr in _BAGS:
                return ARGS
            method = self.method(attr)
            if method is not None:
                return method
            self._reads.add(attr)
            return self.state.fields.get(attr, UNKNOWN)
        if base is PLATFORM:
            probe = self.world.platform_names.get(attr)
            return self.world.probes.get(probe, None) if probe else UNKNOWN
        if isinstance(base, Sentinel):
            if base.kind in {"model", "runner"}:
                if attr == "hf_config":
                    return Sentinel("hf_config")
                if attr == "model_config":
                    return Sentinel("model")
                if attr == "use_mla_backend" and base.kind == "runner":
                    return _tri(self.world.mla)
                if attr == "attention_arch":
                    # what `AttentionArch.MLA` evaluates to (`class_member`)
                    return _tri_name(
                        self.world.mla, "member:AttentionArch.MLA", "member:AttentionArch.MHA"
                    )
                if attr == "server_args":
                    return ARGS
                return UNKNOWN
            if base.kind == "hf_config:draft":
                return (
                    self.world.draft_architectures or UNKNOWN
                    if attr == "architectures"
                    else UNKNOWN
                )
            if base.kind == "hf_config":
                if attr == "architectures":
                    return self.world.architectures or UNKNOWN
                value = self.world.config.get(attr, UNKNOWN)
                return value if isinstance(value, (int, float, str, bool)) else UNKNOWN
            if base.kind.startswith("torch:"):
                path = f"{base.kind[6:]}.{attr}"
                return _TORCH_ATTRS[path] if path in _TORCH_ATTRS else Sentinel(f"torch:{path}")
            if base.kind.startswith("class:"):
                return self.class_member(base.kind, attr)
            if base.kind.startswith("member:") and attr == "name":  # `Enum.MEMBER.name`
                return base.kind.rsplit(".", 1)[-1]
            if base.kind.startswith("module:"):
                return self.lookup_dotted(f"{base.kind[7:]}.{attr}")
        return UNKNOWN

    def call_expr(self, node: ast.Call) -> Any:
        func = node.func
        name = dotted(func) or ""
        last = func.attr if isinstance(func, ast.Attribute) else name.rsplit(".", 1)[-1]
        reads: dict[int | str, frozenset[str]] = {}
        args: list[Any] = []
        for a in node.args:
            if not isinstance(a, ast.Starred):
                value, reads[len(args)] = self.measured(a)
                args.append(value)
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            if k.arg:
                kwargs[k.arg], reads[k.arg] = self.measured(k.value)
        if last == "get" and isinstance(func, ast.Attribute) and not args:
            declared = self.env_field(func.value)
            if declared is not None:
                return declared
        if last in _IDENTITY and args:
            return args[0]
        if last in {"get_platform"} or name == "current_platform.is_out_of_tree":
            return PLATFORM if last == "get_platform" else False
        if name in _MACHINE_CALLS:
            return _MACHINE_CALLS[name]
        if last in _ARGS_GETTERS and not args:
            return ARGS
        if last == "get_device_sm":
            cap = self.world.capability
            return cap[0] * 10 + cap[1] if cap else UNKNOWN
        if last in {"get_device_capability"}:
            return self.world.capability or UNKNOWN
        if last == "get_config" and args and isinstance(args[0], str):  # a checkpoint's config.json
            if args[0] == self.state.fields.get("speculative_draft_model_path"):
                return Sentinel("hf_config:draft")
            if args[0] == self.state.fields.get("model_path"):
                return Sentinel("hf_config")
            return UNKNOWN
        if last in {"model_config_of", "get_model_config"}:
            return Sentinel("model")
        if last == "declare_resolution" and args and args[0] is ARGS:
            for key, value in kwargs.items():
                self.write(key, value, self.stack[-1].rel, node.lineno)
            return None
        if last == "run_post_process_pass" and len(args) >= 2 and isinstance(args[1], FuncRef):
            result = self.call(args[1], [args[0]], {})
            if isinstance(result, dict):
                for key, value in result.items():
                    if isinstance(key, str):
                        if isinstance(value, Maybe):  # some paths leave the field as it was
                            value = _merge_value(self.state.fields.get(key, UNKNOWN), value.value)
                        self.write(key, value, args[1].rel, args[1].node.lineno)
            elif isinstance(result, OneOf) or result is UNKNOWN:
                for key in _dict_keys(args[1].node):
                    self.write(key, UNKNOWN, args[1].rel, args[1].node.lineno)
            return None
        if last == "run_hook" and args and isinstance(args[0], FuncRef):
            return self.call(args[0], args[1:], kwargs)
        if (
            last == "from_string"
            and args
            and isinstance(args[0], str)
            and self.algorithms is not None
        ):
            return Sentinel(f"algo:{args[0].upper()}")
        if isinstance(func, ast.Attribute):
            base = self.expr(func.value)
            if isinstance(base, Sentinel) and base.kind.startswith("algo:"):
                return self.algo_method(base, func.attr, args, kwargs)
        target = self.expr(func)
        if (
            target == Sentinel("builtin:isinstance")
            and len(node.args) == 2
            and args[0] in (Sentinel("hf_config"), Sentinel("hf_config:draft"))
            and dotted(node.args[1]) == "dict"
        ):
            return False  # a transformers PretrainedConfig, not a dict
        if (
            target == Sentinel("builtin:isinstance")
            and args
            and isinstance(args[0], Sentinel)
            and args[0].kind.startswith("algo:")
        ):
            return False  # a built-in member of the enum, not a plugin's algorithm
        if isinstance(target, Sentinel) and target.kind.startswith("probe:"):
            return _tri(self.world.probes.get(target.kind[6:]))
        if (
            target == Sentinel("builtin:getattr")
            and len(args) >= 2
            and args[0] == Sentinel("hf_config:draft")
            and args[1] == "architectures"
        ):
            return self.world.draft_architectures or UNKNOWN
        if (
            target == Sentinel("builtin:getattr")
            and len(args) >= 2
            and args[0] == Sentinel("hf_config")
            and isinstance(args[1], str)
        ):
            if args[1] == "architectures":
                return self.world.architectures or UNKNOWN
            value = self.world.config.get(args[1], args[2] if len(args) > 2 else UNKNOWN)
            return value if isinstance(value, (int, float, str, bool, type(None))) else UNKNOWN
        if isinstance(target, Sentinel) and target.kind.startswith("builtin:"):
            return _builtin(target.kind[8:], args)
        if isinstance(target, FuncRef):
            return self.call(target, args, kwargs, reads)
        if last in _STR_METHODS and isinstance(func, ast.Attribute):
            base = self.expr(func.value)
            if isinstance(base, str) and all(isinstance(a, (str, tuple, int)) for a in args):
                try:
                    result = getattr(base, last)(*args)
                except (TypeError, ValueError):
                    return UNKNOWN
                return tuple(result) if isinstance(result, list) else result
        return UNKNOWN

    def class_member(self, kind: str, attr: str) -> Any:
        """`Phase.DECODE`, `AttentionArch.MLA`: a member the class body assigns (compared by
        identity, as an enum's members are); anything else on a class is unknown."""
        _, module, name = kind.split(":", 2)
        found = self.lookup_module(module)
        if found is None:
            return UNKNOWN
        for cls in found.body:
            if isinstance(cls, ast.ClassDef) and cls.name == name:
                for stmt in cls.body:
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else []
                    if any(isinstance(t, ast.Name) and t.id == attr for t in targets):
                        return Sentinel(f"member:{name}.{attr}")
        return UNKNOWN

    def lookup_module(self, module: str) -> ast.Module | None:
        raise NotImplementedError

    def env_field(self, node: ast.expr) -> Any:
        """`envs.SGLANG_X.get()`: the variable from the launch's environment, parsed by the
        tree's own `EnvBool.parse` (etc.), else the default its `Envs` declaration gives; None
        when `node` is not such a field."""
        name = dotted(node)
        if name is None or not name.startswith("envs.") or name.count(".") != 1:
            return None
        declared = self.env_declaration(name.split(".", 1)[1])
        if declared is None:
            return None
        kind, default, rel = declared
        raw = self.world.environ.get(name.split(".", 1)[1])
        if raw is None:
            return default
        parse = self.env_parser(rel, kind)
        if parse is None:
            return UNKNOWN
        return self.call(parse, [raw], {})

    def env_declaration(self, variable: str) -> tuple[str, Any, str] | None:
        raise NotImplementedError

    def env_parser(self, rel: str, kind: str) -> FuncRef | None:
        raise NotImplementedError

    def algo_method(
        self, algo: Sentinel, method: str, args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        """`algo.is_eagle()` from the enum's predicates; other methods run from the enum's source."""
        assert self.algorithms is not None
        member = algo.kind[5:]
        if method in self.algorithms.predicates:
            return member in self.algorithms.predicates[method]
        rel = self.algorithms.source
        parsed = self.index.parse_file(rel) if rel else None
        if rel is None or parsed is None:
            return UNKNOWN
        for cls in parsed.tree.body:
            if isinstance(cls, ast.ClassDef) and cls.name == "SpeculativeAlgorithm":
                for stmt in cls.body:
                    if isinstance(stmt, ast.FunctionDef) and stmt.name == method:
                        ref = FuncRef(rel, rel[:-3].replace("/", "."), stmt, cls.name, algo)
                        return self.call(ref, args, kwargs)
        return UNKNOWN
