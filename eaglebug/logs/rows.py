"""A sequence of rows read by position: the log's rows, a filter's matches, the rows on show.

They hold their rows in different ways (files and a tail, two arrays, a view), but a slice and
a negative index mean the same for all; `RowSequence` says it once and asks each for one row.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import TypeVar, overload

T = TypeVar("T")


class RowSequence(Sequence[T]):
    """`Sequence` indexing (slices, negative positions, IndexError) over `row(i)`."""

    @abstractmethod
    def row(self, i: int) -> T:
        """The row at position `i`, 0 <= i < len(self)."""

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self.row(k) for k in range(*i.indices(len(self)))]
        size = len(self)
        if i < 0:
            i += size
        if not 0 <= i < size:
            raise IndexError(i)
        return self.row(i)
