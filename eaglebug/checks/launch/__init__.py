"""The launch command: its flags as the tree's server arguments declare them, deprecations,
the front ends, and the GPU architecture.
"""
