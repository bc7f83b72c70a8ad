"""The tree's own argument resolution run on a launch, and the rules read from it: attention
backends, multi-node layout, the fields a launch leaves to SGLang.
"""
