"""Every limit of the evaluator, in one place (as jedi keeps its recursion settings).

A reading of SGLang's code is bounded so that no tree, however large or strange, can take the
box's memory or hang a command. A limit that is reached never truncates silently: the run is
marked incomplete (`Result.incomplete`, with which limit and where), and every caller says
"incomplete" in its finding instead of treating what it got as the answer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    # Calls in progress at once (a deeper call is unknown, not followed). SGLang's resolution
    # pipeline nests about a dozen deep (hook -> handler -> helper -> platform probe).
    depth: int = 24
    # Statements and expressions evaluated in one run, over all paths; the argument resolution
    # of 0.5.23 takes about 60,000 on a speculative launch.
    steps: int = 400_000
    # Distinct values one `OneOf` may hold before it is unknown (two undecided branches that
    # each set a field give two; a few more combine).
    alternatives: int = 16
    # Iterations of one loop over a known sequence before the loop is unrolled no further and
    # what it assigns becomes unknown.
    loop: int = 512
    # Largest exponent of `**` and shift of `<<` evaluated.
    power: int = 256
    # Longest string, list or range a step may build.
    sequence: int = 1_000_000
    # Undecided branches forked in one run before further ones are not split (both sides still
    # run; their writes merge).
    forks: int = 4096
    # Hops through re-exports when a name is resolved (`from .a import b` chains).
    hops: int = 8


DEFAULT = Budget()


class Exhausted(Exception):
    """A limit was reached: unwinds the whole run, which then reports itself incomplete."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
