__version__ = "0.5.9-mini"
