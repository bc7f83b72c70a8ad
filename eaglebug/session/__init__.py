"""One launch's session: the controller's queue of actions, the problems it reports, and the
forked workers for cold checks.
"""
