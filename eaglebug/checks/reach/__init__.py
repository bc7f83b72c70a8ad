"""Where the runtime touches a model object, and under which conditions: the consumer scan, the
guards on each use, the flags those guards read, and their resolution per role.
"""
