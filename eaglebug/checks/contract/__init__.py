"""The findings contract every front end shares: findings, their typed evidence and fixes, the
one input error, and what eaglebug agrees to read.
"""
