"""The support matrix of a release: every registered model class x every speculative algorithm
the tree defines x role, and what changed between two trees (`eaglebug matrix`).

`roles.py` decides, from the tree, which roles a class can take under an algorithm (and why
not); `table.py` audits every applicable cell with the interface audit; `compare.py` diffs two
matrices (a release against the next, a base branch against a pull request).
"""
