"""The launched server: starting it detached, stopping its whole process tree, the state file of
launches, and the calibration kept from them.
"""

# Where a working folder keeps its launches (`state.py`): here, so that a command can see there
# is no state without loading the state's record types (a warm `preflight`, `calibration.py`).
STATE_DIR = ".eaglebug"
STATE_FILE = "state.json"
