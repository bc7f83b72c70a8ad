"""The headless commands: the argument parser, each command, and how findings are printed."""
