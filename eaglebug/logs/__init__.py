"""Following a launch's log live: offsets, folds per rank, several nodes merged, the watch thread
and its snapshots, and the acceptance watch.
"""
