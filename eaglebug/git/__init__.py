"""Applying fixes as git commits, one per fix, each a transaction, and undoing them."""
