"""Which inner object of a wrapper could provide an attribute the wrapper lacks.

Multimodal wrappers hold their language model in an attribute set in `__init__`
(`self.language_model = DeepseekV3ForCausalLM(...)`), sometimes one of several classes picked
by the config. An inner attribute is a delegate for a missing attribute when some class it may
hold provides it; the best is one whose every choice does, held under a conventional name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eaglebug.checks.source.classes import Choice, ClassIndex, ClassRef, Provider, RegistryPick
from eaglebug.checks.source.classfacts import InnerAssignment
from eaglebug.checks.source.initfacts import SELF_CALL

# Inner attributes wrappers conventionally hold their language model in, best first.
_PREFERRED_DELEGATES = ("language_model", "model", "llm", "text_model", "lm")
# (instance class, method) -> the classes `instance.method(...)` may return
MadeByMethod = Callable[[ClassRef, str], list[ClassRef]]
_MAX_DEPTH = 1  # how many `__getattr__` forwardings a delegate path follows


@dataclass(frozen=True)
class Delegate:
    attribute: str  # the inner attribute on self, e.g. language_model
    classes: tuple[str, ...]  # qualified inner classes that provide the missing attribute
    lacking: tuple[str, ...]  # inner choices (picked by config) that do not
    lacking_when: tuple[str | None, ...]  # the condition that picks each lacking class
    provider: Provider  # where the inner class gets it from
    pick: RegistryPick | None = None  # the classes are what the registry may pick


def find_delegate(
    classes: ClassIndex,
    ref: ClassRef,
    attribute: str,
    made_by: MadeByMethod | None = None,
    depth: int = 0,
) -> Delegate | None:
    """The best inner attribute of `ref` (or of a base) whose classes provide `attribute`; else,
    where `__getattr__` forwards to an inner object that does not provide it either, that
    object's own delegate, one level further in (sglang 0.5.9's Mistral3 forwards to
    `self.inner`, a Llava, which holds `language_model`: the path is `inner.language_model`).
    `made_by` gives the classes an inner object made by a method of the instance may hold
    (`self.llm = self.init_llm(...)`, `interface/made.py`)."""
    found = _one_level(classes, ref, attribute, made_by)
    if found is not None or depth >= _MAX_DEPTH:
        return found
    order, _, _ = classes.mro(ref)
    for current in order:
        forward = current.facts.getattr_forward
        if not forward:
            continue
        options = (
            [
                sub
                for choice in _choices(classes, current, inner, ref, made_by)
                if (sub := find_delegate(classes, choice.ref, attribute, made_by, depth + 1))
                is not None
            ]
            if (inner := current.facts.inner.get(forward)) is not None
            else []
        )
        if options:
            best = min(options, key=_rank)
            return Delegate(
                f"{forward}.{best.attribute}",
                best.classes,
                best.lacking,
                best.lacking_when,
                best.provider,
                best.pick,
            )
    return None


def _choices(
    classes: ClassIndex,
    current: ClassRef,
    inner: InnerAssignment,
    instance: ClassRef,
    made_by: MadeByMethod | None,
) -> list[Choice]:
    """The classes `current`'s `self.<x> = ...` may assign on an instance of `instance`."""
    out = classes.inner_choices(current, inner)
    if made_by is None:
        return out
    for written, when in zip(inner.classes, inner.conditions, strict=True):
        if written.startswith(SELF_CALL):
            for made in made_by(instance, written[len(SELF_CALL) :]):
                if all(c.ref.qualname != made.qualname for c in out):
                    out.append(Choice(made, when))
    return out


def _one_level(
    classes: ClassIndex, ref: ClassRef, attribute: str, made_by: MadeByMethod | None
) -> Delegate | None:
    order, _, _ = classes.mro(ref)
    options: list[Delegate] = []
    for current in order:
        for inner_attr, inner in current.facts.inner.items():
            providing: list[tuple[ClassRef, Provider]] = []
            lacking: list[str] = []
            lacking_when: list[str | None] = []
            choices = _choices(classes, current, inner, ref, made_by)
            for choice in choices:
                provider = classes.lookup(choice.ref, attribute)
                if provider is not None:
                    providing.append((choice.ref, provider))
                else:
                    lacking.append(choice.ref.qualname)
                    lacking_when.append(choice.when)
            if providing:
                options.append(
                    Delegate(
                        inner_attr,
                        tuple(r.qualname for r, _ in providing),
                        tuple(lacking),
                        tuple(lacking_when),
                        providing[0][1],
                        next((c.pick for c in choices if c.pick is not None), None),
                    )
                )
    return min(options, key=_rank) if options else None


def _rank(delegate: Delegate) -> tuple[bool, int]:
    """Every choice providing it first, then the conventional names in their order."""
    name = delegate.attribute.rsplit(".", 1)[-1]
    preferred = _PREFERRED_DELEGATES.index(name) if name in _PREFERRED_DELEGATES else 99
    return (len(delegate.lacking) > 0, preferred)


# How many class names a summary of registry candidates names before "and N more".
_NAMED = 6


def picked_by(pick: RegistryPick) -> str:
    """Where and from what the registry picks the delegate's class."""
    read = f" ({pick.architecture}, from the model's config.json)" if pick.architecture else ""
    return f"the registry, from {pick.config}{read} ({pick.file}:{pick.line})"


def names(qualified: tuple[str, ...] | list[str], limit: int = _NAMED) -> str:
    """Short class names, the first `limit` of them and how many more."""
    short = [q.rsplit(".", 1)[-1] for q in qualified]
    more = f" and {len(short) - limit} more" if len(short) > limit else ""
    return ", ".join(short[:limit]) + more


def summary(delegate: Delegate) -> str:
    """What a finding says about its delegate: which classes provide the attribute, and
    which choices do not (with what picks them)."""
    if delegate.pick is not None and delegate.pick.architecture is None:
        total = len(delegate.classes) + len(delegate.lacking)
        text = (
            f"self.{delegate.attribute} is picked by {picked_by(delegate.pick)}: "
            f"{len(delegate.classes)} of its {total} candidates provide it "
            f"({names(delegate.classes)})"
        )
        if delegate.lacking:
            text += f", not {names(delegate.lacking)}"
        if delegate.pick.config_read:
            key = delegate.pick.config.rsplit(".", 1)[-1]
            return text + f"; the model's config.json names no architectures in {key}"
        return text + "; --model-path resolves the choice"
    text = f"self.{delegate.attribute} ({names(delegate.classes, 99)}) provides it"
    if delegate.pick is not None:
        text += f", picked by {picked_by(delegate.pick)}"
    for lacking, when in zip(delegate.lacking, delegate.lacking_when, strict=True):
        picked = f"when {when}" if when else "in some configurations"
        text += f", but not {lacking.rsplit('.', 1)[-1]}, picked {picked}"
    return text
