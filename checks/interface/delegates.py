"""Which inner object of a wrapper could provide an attribute the wrapper lacks.

Multimodal wrappers hold their language model in an attribute set in `__init__`
(`self.language_model = DeepseekV3ForCausalLM(...)`), sometimes one of several classes picked
by the config. An inner attribute is a delegate for a missing attribute when some class it may
hold provides it; the best is one whose every choice does, held under a conventional name.
"""

from __future__ import annotations

from dataclasses import dataclass

from eaglebug.checks.source.classes import ClassIndex, ClassRef, Provider, RegistryPick

# Inner attributes wrappers conventionally hold their language model in, best first.
_PREFERRED_DELEGATES = ("language_model", "model", "llm", "text_model", "lm")


@dataclass(frozen=True)
class Delegate:
    attribute: str  # the inner attribute on self, e.g. language_model
    classes: tuple[str, ...]  # qualified inner classes that provide the missing attribute
    lacking: tuple[str, ...]  # inner choices (picked by config) that do not
    lacking_when: tuple[str | None, ...]  # the condition that picks each lacking class
    provider: Provider  # where the inner class gets it from
    pick: RegistryPick | None = None  # the classes are what the registry may pick


def find_delegate(classes: ClassIndex, ref: ClassRef, attribute: str) -> Delegate | None:
    """The best inner attribute of `ref` (or of a base) whose classes provide `attribute`."""
    order, _, _ = classes.mro(ref)
    options: list[Delegate] = []
    for current in order:
        for inner_attr, inner in current.facts.inner.items():
            providing: list[tuple[ClassRef, Provider]] = []
            lacking: list[str] = []
            lacking_when: list[str | None] = []
            choices = classes.inner_choices(current, inner)
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
    name = delegate.attribute
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
