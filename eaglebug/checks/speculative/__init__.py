"""The speculative algorithms a release defines, read from its own `SpeculativeAlgorithm`: the
members, their predicates and the worker each one builds.
"""
