"""Reading SGLang's logs: one fast scan, the launch's phase, failures as findings, the memory
lines, speculative acceptance.
"""
