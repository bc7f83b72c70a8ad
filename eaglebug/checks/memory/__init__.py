"""Will it fit: weights per GPU from the checkpoint and the tree's layer classes, the KV, mamba
and SWA pools from the tree's own arithmetic, against the GPUs' memory.
"""
