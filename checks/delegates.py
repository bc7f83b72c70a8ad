"""Which inner object of a wrapper could provide an attribute the wrapper lacks.

Multimodal wrappers hold their language model in an attribute set in `__init__`
(`self.language_model = DeepseekV3ForCausalLM(...)`), sometimes one of several classes picked
by the config. An inner attribute is a delegate for a missing attribute when some class it may
hold provides it; the best is one whose every choice does, held under a conventional name.
"""

from __future__ import annotations

from dataclasses import dataclass

from eaglebug.checks.classindex import ClassIndex, ClassRef, Provider

# Inner attributes wrappers conventionally hold their language model in, best first.
_PREFERRED_DELEGATES = ("language_model", "model", "llm", "text_model", "lm")


@dataclass(frozen=True)
class Delegate:
    attribute: str  # the inner attribute on self, e.g. language_model
    classes: tuple[str, ...]  # qualified inner classes that provide the missing attribute
    lacking: tuple[str, ...]  # inner choices (picked by config) that do not
    lacking_when: tuple[str | None, ...]  # the condition that picks each lacking class
    provider: Provider  # where the inner class gets it from


def find_delegate(classes: ClassIndex, ref: ClassRef, attribute: str) -> Delegate | None:
    """The best inner attribute of `ref` (or of a base) whose classes provide `attribute`."""
    order, _, _ = classes.mro(ref)
    options: list[Delegate] = []
    for current in order:
        for inner_attr, inner in current.facts.inner.items():
            providing: list[tuple[ClassRef, Provider]] = []
            lacking: list[str] = []
            lacking_when: list[str | None] = []
            for written in inner.classes:
                found = classes.resolve_class(current, written)
                if found is None:
                    continue
                provider = classes.lookup(found, attribute)
                if provider is not None:
                    providing.append((found, provider))
                else:
                    lacking.append(found.qualname)
                    lacking_when.append(inner.condition_of(written))
            if providing:
                options.append(
                    Delegate(
                        inner_attr,
                        tuple(r.qualname for r, _ in providing),
                        tuple(lacking),
                        tuple(lacking_when),
                        providing[0][1],
                    )
                )
    return min(options, key=_rank) if options else None


def _rank(delegate: Delegate) -> tuple[bool, int]:
    """Every choice providing it first, then the conventional names in their order."""
    name = delegate.attribute
    preferred = _PREFERRED_DELEGATES.index(name) if name in _PREFERRED_DELEGATES else 99
    return (len(delegate.lacking) > 0, preferred)
