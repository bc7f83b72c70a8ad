"""The launched server: starting it detached, stopping its whole process tree, the state file of
launches, and the calibration kept from them.
"""
