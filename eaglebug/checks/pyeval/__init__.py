"""The evaluator of SGLang's Python: values, operators, name resolution, calls and branches, so
that every check reads SGLang's behaviour from the tree instead of a table.
"""
