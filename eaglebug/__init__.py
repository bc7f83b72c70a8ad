"""eaglebug: find, fix and watch what breaks when a model meets SGLang speculative decoding."""

__version__ = "0.1.0"
