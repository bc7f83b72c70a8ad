"""The model and draft configs of a launch: where they live, what they hold, and the checks
between target and draft (context length, vocabulary, hidden size, aux layers).
"""
