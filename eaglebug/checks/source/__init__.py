"""The source index: the audited tree's files, parsed once, their facts (imports, classes,
methods, `__init__` assignments), the class index and registry, out-of-tree packages, and the
caches keyed by the tree's state.
"""
