"""The context length SGLang derives from a model's config.json, by the tree's own code.

Why: SGLang refuses a draft whose context length is shorter than the target's, and a
`--context-length` longer than the target's own, after loading the weights; the memory check
sizes one full-length request by the same length. How a release derives it is its code:
`ModelConfig` assigns a local (`derived_context_len = get_context_length(self.hf_text_config)`
in every release so far; `max_position_embeddings` straight in a smaller tree) and compares
the `context_length` it was given with it. That assignment is found in the tree (the method
that sets `self.context_len` and compares a parameter with a local it assigns once) and its
expression evaluated by the one evaluator (`pyeval`) on an object whose `hf_config` and
`hf_text_config` are the config.json's, so the keys it tries, the rope scaling it multiplies
by and whatever a later release adds are the tree's. A config that names none of the tree's
context keys (`save_pretrained` leaves a class default out, as Gemma-3's does, and no
transformers the launch would import supplied it, `classdefaults.py`) has no length here, not
the tree's fallback of 2048: the real config object would have had its class's.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import Choice, EnvFix, FlagFix
from eaglebug.checks.models.checks import text_config
from eaglebug.checks.pyeval.machine import Machine, Policy
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.values import FunctionSite, FuncVal, Top
from eaglebug.checks.source import syntax
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import TreeIndex

# SGLang's EnvBool spellings of true (environ.py: lower-cased, not stripped; anything else,
# "on" included, is warned about and read as the default, False).
_TRUE = frozenset({"1", "true", "yes", "y"})
_DEFAULT_CONTEXT_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)
_DEFAULT_CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
_FIELD = "context_len"  # what ModelConfig sets from the derivation
_ANSWER = "context_length:"
_KEEP_ANSWERS = 16


@dataclass(frozen=True)
class Derivation:
    """Where the tree derives a model's context length: `name = <expression>` at `line` of
    `file`, in the method `qualname` of its model-config class."""

    file: str
    qualname: str
    line: int
    name: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class ContextRules:
    """How the audited SGLang derives context lengths and lets a user override them."""

    keys: tuple[str, ...]
    env_var: str
    message: str | None  # SGLang's own refusal text, placeholders filled in later
    source: str | None  # where it was read from: file:line of SGLang's refusal
    derivation: Derivation | None = None


# The keys and the variable of the releases read so far, for a reading without a tree (it
# derives no length: that is the tree's code).
DEFAULT_CONTEXT = ContextRules(_DEFAULT_CONTEXT_KEYS, _DEFAULT_CONTEXT_ENV, None, None)


def context_rules(index: TreeIndex) -> ContextRules:
    """How this tree derives and guards the context length (a tree answer)."""
    return index.answer("context_rules", ContextRules, lambda: _context_rules(index))


def _context_rules(index: TreeIndex) -> ContextRules:
    keys: tuple[str, ...] = _DEFAULT_CONTEXT_KEYS
    env_var = _DEFAULT_CONTEXT_ENV
    message = None
    source = None
    derivation = None
    for rel in index.entries:
        if not rel.startswith("sglang/srt/"):
            continue
        name = rel.rsplit("/", 1)[-1]
        if name not in {"hf_transformers_utils.py", "common.py", "model_config.py"}:
            continue
        try:
            text = (index.tree.root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "CONTEXT_LENGTH_KEYS = [" in text:
            start = text.index("CONTEXT_LENGTH_KEYS = [")
            end = text.find("]", start)
            try:
                value = ast.literal_eval(text[start + len("CONTEXT_LENGTH_KEYS = ") : end + 1])
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    keys = tuple(value)
            except (SyntaxError, ValueError):
                pass
        if name == "model_config.py":
            env = re.search(r"envs\.(SGLANG_\w*CONTEXT\w*)\.get\(\)", text) or re.search(
                r"set the env var (SGLANG_\w+)=1", text
            )
            if env:
                env_var = env.group(1)
                source = rel
            wording = re.search(
                r'f"(Warning: \{reason\} context_length[^"]*)"((?:\s*f?"[^"]*")*)', text
            )
            if wording:
                more = re.findall(r'f?"([^"]*)"', wording.group(2))
                message = wording.group(1) + "".join(more)
                source = f"{rel}:{text.count(chr(10), 0, wording.start()) + 1}"
            if derivation is None and "context_len" in text:
                parsed = index.parse_file(rel)
                derivation = _derivation(rel, parsed.tree) if parsed is not None else None
    return ContextRules(keys, env_var, message, source, derivation)


def _derivation(rel: str, tree: ast.Module) -> Derivation | None:
    """The assignment a model-config method compares its given context length with: in a
    method that sets `self.context_len`, a comparison of one of its parameters with a local it
    assigns exactly once (`if context_length > derived_context_len:`)."""
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef) or not _sets_self(fn, _FIELD):
                continue
            found = _compared_local(fn)
            if found is not None:
                return Derivation(rel, f"{cls.name}.{fn.name}", found.lineno, _target(found))
    return None


def _sets_self(fn: ast.FunctionDef, attr: str) -> bool:
    return any(
        isinstance(t, ast.Attribute)
        and t.attr == attr
        and isinstance(t.value, ast.Name)
        and t.value.id == "self"
        for stmt in syntax.walk(fn)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign))
        for t in syntax.assigned(stmt)
    )


def _target(stmt: ast.Assign) -> str:
    target = stmt.targets[0]
    assert isinstance(target, ast.Name)
    return target.id


def _compared_local(fn: ast.FunctionDef) -> ast.Assign | None:
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    writes: dict[str, int] = {}
    single: dict[str, ast.Assign] = {}
    for node in syntax.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            writes[node.id] = writes.get(node.id, 0) + 1
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                single[target.id] = node
    for node in syntax.walk(fn):
        if not isinstance(node, ast.Compare) or len(node.comparators) != 1:
            continue
        pair = (node.left, node.comparators[0])
        names = [n.id for n in pair if isinstance(n, ast.Name)]
        if len(names) != 2:
            continue
        for given, local in (names, names[::-1]):
            if given in params and local in single and writes.get(local) == 1:
                return single[local]
    return None


def check_context_length(
    index: TreeIndex,
    target: Mapping[str, Any],
    draft: Mapping[str, Any] | None,
    user_context: int | None,
    env: Mapping[str, str],
    rules: ContextRules,
) -> list[Finding]:
    findings: list[Finding] = []
    allowed = env.get(rules.env_var, "").lower() in _TRUE
    derived = derived_context_length(index, target, rules)
    target_len = derived if isinstance(derived, int) else None
    effective = user_context if user_context is not None else target_len
    env_fix = f"{rules.env_var}=1"
    if user_context is not None and target_len is not None and user_context > target_len:
        findings.append(
            Finding(
                id="config.context_length",
                severity="info" if allowed else "error",
                message=(
                    f"--context-length {user_context} is longer than the target's derived "
                    f"context length {target_len}"
                    + (f"; allowed by {env_fix}" if allowed else "; SGLang refuses to start")
                ),
                role="target",
                attribute="context_length",
                fix=EnvFix(rules.env_var, "1", "set: SGLang allows the longer context")
                if allowed
                else Choice(
                    (
                        FlagFix(
                            "--context-length",
                            str(target_len),
                            "stays within what the target was configured for",
                        ),
                        EnvFix(rules.env_var, "1", "forces the longer context on SGLang"),
                    )
                ),
                evidence=ConfigEvidence.of(
                    {"target_context_length": target_len, "requested": user_context}
                ),
            )
        )
    if draft is None:
        return findings
    of_draft = derived_context_length(index, draft, rules)
    draft_len = of_draft if isinstance(of_draft, int) else None
    if effective is None and draft_len is not None and not allowed:
        assert isinstance(derived, str)
        findings.append(_unknown_target_length(draft_len, rules, derived))
    if effective is not None and draft_len is None and not allowed:
        assert isinstance(of_draft, str)
        findings.append(_unknown_draft_length(effective, rules, of_draft))
    if effective is None or draft_len is None or effective <= draft_len:
        return findings
    sglang_says = None
    placeholder = rules.derivation.name if rules.derivation else "derived_context_len"
    if rules.message:
        sglang_says = (
            rules.message.replace("{reason}", "Target model's")
            .replace("{context_length}", str(effective))
            .replace(f"{{{placeholder}}}", str(draft_len))
        )
    choice = Choice(
        (
            EnvFix(
                rules.env_var,
                "1",
                f"keeps the full {effective}-token context; the draft runs past the {draft_len} "
                "positions it was trained on, so its acceptance rate (and the speed-up) drops on "
                "long prompts; outputs stay correct because the target verifies every token",
            ),
            FlagFix(
                "--context-length",
                str(draft_len),
                f"keeps the draft inside its trained range; the server then rejects prompts "
                f"longer than {draft_len} tokens",
            ),
        )
    )
    evidence = ConfigEvidence.of(
        {
            "target_context_length": effective,
            "draft_max_position_embeddings": draft_len,
            "env_var": rules.env_var,
        },
        read_from=rules.source,
        sglang=sglang_says,
    )
    findings.append(
        Finding(
            id="config.context_length",
            severity="info" if allowed else "error",
            message=(
                f"the draft's context length ({draft_len}) is shorter than the target's ({effective})"
                + (
                    f"; {env_fix} is set, so SGLang starts and the draft runs past its trained positions"
                    if allowed
                    else "; SGLang refuses to start after loading the target"
                )
            ),
            role="draft",
            attribute="max_position_embeddings",
            fix=choice.env if allowed else choice,
            evidence=evidence,
        )
    )
    return findings


def _unknown_draft_length(effective: int, rules: ContextRules, why: str) -> Finding:
    """The draft's context length is not known (its config.json names none of the keys the
    tree's derivation reads, and no config class at hand says what the object SGLang builds
    would have): SGLang compares it with the target's all the same, so the check is said as a
    warning resting on the unknown, never passed in silence."""
    return Finding(
        id="config.context_length",
        severity="warning",
        message=(
            f"the draft's context length is not known here ({why}); if the one SGLang gets "
            f"is shorter than the target's ({effective}), SGLang refuses to start after "
            "loading the target"
        ),
        role="draft",
        attribute="max_position_embeddings",
        fix=EnvFix(rules.env_var, "1", "lets SGLang start whatever the draft's length"),
        evidence=ConfigEvidence.of(
            {"target_context_length": effective, "draft_max_position_embeddings": None},
            read_from=rules.source,
        ),
    )


def _unknown_target_length(draft_len: int, rules: ContextRules, why: str) -> Finding:
    """The target's context length is not known (its config.json names none, as Gemma-3's
    does when `save_pretrained` leaves a class default out and no transformers the launch
    would import says what its config class gives, `classdefaults.py`; or the tree's
    derivation came out unknown): SGLang compares that length with the draft's all the same,
    so the draft's shorter one is said, as a warning resting on the unknown, not an error on
    a guess."""
    return Finding(
        id="config.context_length",
        severity="warning",
        message=(
            f"the target's context length is not known here ({why}); if the one SGLang gets "
            f"is longer than the draft's ({draft_len}), SGLang refuses to start after loading "
            "the target"
        ),
        role="draft",
        attribute="max_position_embeddings",
        fix=Choice(
            (
                FlagFix(
                    "--context-length",
                    str(draft_len),
                    f"keeps the draft inside its trained range; the server then rejects "
                    f"prompts longer than {draft_len} tokens",
                ),
                EnvFix(rules.env_var, "1", "lets SGLang start with the target's longer context"),
            )
        ),
        evidence=ConfigEvidence.of(
            {"target_context_length": None, "draft_max_position_embeddings": draft_len},
            read_from=rules.source,
        ),
    )


def derived_context_length(
    index: TreeIndex, config: Mapping[str, Any], rules: ContextRules
) -> int | str:
    """The context length the tree derives from this config.json, or why it is not known
    (a tree answer per config, the newest few kept)."""
    text = text_config(config)
    if not any(text.get(k) is not None for k in rules.keys):
        return (
            f"config.json names no context length ({', '.join(rules.keys)}), and no "
            "transformers config class the launch's Python would find gives one"
        )
    derivation = rules.derivation
    if derivation is None:
        return "no derivation of the context length found in this tree's model config"
    return index.answer_for(
        _ANSWER,
        [config, derivation.where],
        int | str,
        lambda: _evaluate(index, derivation, config),
        _KEEP_ANSWERS,
    )


def _evaluate(index: TreeIndex, derivation: Derivation, config: Mapping[str, Any]) -> int | str:
    """`derivation`'s expression, run as the body of its method on an object whose
    `hf_config` is config.json and `hf_text_config` its text part (both complete; any other
    attribute of the object unknown)."""
    source = Source.of(index)
    module, _ = module_name(derivation.file)
    method = source.function(module, derivation.qualname)
    stmt = next(
        (
            s
            for s in (syntax.walk(method.node) if method is not None and method.node else [])
            if isinstance(s, ast.Assign) and s.lineno == derivation.line
        ),
        None,
    )
    if stmt is None:
        return f"{derivation.where}: the derivation is no longer there"
    owner_name, _, name = derivation.qualname.partition(".")
    owner = source.class_val(f"{module}.{owner_name}")
    machine = Machine(source, policy=Policy(record_raises=False))
    fields = {f"hf_config.{k}": v for k, v in _dotted(config).items()}
    fields.update({f"hf_text_config.{k}": v for k, v in _dotted(text_config(config)).items()})
    self_obj = machine.bag(fields, owner, closed=False)
    for path in ("hf_config", "hf_text_config"):
        machine.heap.closed_paths.add((self_obj.oid, path))
    body = ast.Return(value=stmt.value)
    ast.copy_location(body, stmt)
    node = ast.FunctionDef(
        name=name,
        args=ast.arguments(
            posonlyargs=[], args=[ast.arg("self")], kwonlyargs=[], kw_defaults=[], defaults=[]
        ),
        body=[body],
        decorator_list=[],
        returns=None,
    )
    ast.copy_location(node, stmt)
    site = FunctionSite(derivation.file, module, derivation.qualname, node)
    value = machine.run(FuncVal(site, owner, self_obj, "method"), [], {}).value
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, Top):
        return f"{derivation.where}: {value.why}"
    return f"{derivation.where}: the derived length is {value!r}"


def _dotted(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """config.json's keys as the dotted attributes of the config object (`rope_scaling.factor`:
    the evaluator reads a nested mapping as a dict or as an object, as the code uses it)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping) and value:
            out.update(_dotted(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
