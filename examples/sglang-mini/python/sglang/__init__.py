"""A miniature SGLang source tree for eaglebug's README and demo.

Written for eaglebug, not copied from SGLang: the same file names, class shapes and call sites
as SGLang 0.5.9 where EAGLE-3 speculative decoding meets a wrapper model class
(KimiK25ForConditionalGeneration), small enough to read in one sitting. It imports with the
standard library alone; `sglang.srt.torch_stub` stands in for the few torch pieces it uses.
"""

from sglang.version import __version__

__all__ = ["__version__"]
