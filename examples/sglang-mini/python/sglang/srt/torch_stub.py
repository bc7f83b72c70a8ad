"""Stand-ins for the few torch pieces the mini tree uses, so it imports with the stdlib alone.

Real SGLang model files do `from torch import nn`; the mini tree's do
`from sglang.srt import torch_stub as nn`. Weights carry a shape and no storage.
"""

from __future__ import annotations

from typing import Any


class Parameter:
    """A weight tensor reduced to its shape."""

    def __init__(self, *shape: int) -> None:
        self.shape = tuple(shape)

    def __repr__(self) -> str:
        return f"Parameter(shape={self.shape})"


class Module:
    """The slice of torch.nn.Module the mini tree relies on: construction, `__call__`, `to`."""

    def __init__(self) -> None:
        self.training = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        # Like torch's own nn.Module.forward: subclasses must override it.
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing forward()")

    def to(self, *args: Any, **kwargs: Any) -> Module:
        return self

    def eval(self) -> Module:
        self.training = False
        return self


class Embedding(Module):
    """A vocabulary embedding (also used as an LM head): `weight` is (vocab, hidden)."""

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        self.weight = Parameter(num_embeddings, embedding_dim)

    def forward(self, input_ids: list[int]) -> list[int]:
        # No arithmetic in the mini tree: hidden states stand in as the token ids themselves.
        return list(input_ids)
