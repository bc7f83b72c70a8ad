"""Following a launch's log live: offsets, folds per rank, several nodes merged (the watch thread
and the acceptance watch that use them are in `eaglebug/session/`).
"""
