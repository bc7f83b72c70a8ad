"""The embedded default: `eaglebug demo`'s scratch SGLang tree, stand-in server and GPU memory.

- `scenario.DemoScenario` prepares a scratch git repository with the SGLang-shaped tree of
  `examples/sglang-mini`, model folders, and the launch command for the stand-in server.
- `standin_server` (`python -m eaglebug.demo.standin_server ...`) imports that tree and runs a
  launch through it: SGLang's log lines, simulated time and GPU memory, and the tree's own
  exceptions until the fixes are in.
- `memfile` is the stand-in's simulated GPU memory file, for a simulated GPU source to follow.
"""

from __future__ import annotations

from eaglebug.demo.memfile import MemoryReport, memory_curve, memory_path, read_memory
from eaglebug.demo.scenario import DemoScenario

__all__ = ["DemoScenario", "MemoryReport", "memory_curve", "memory_path", "read_memory"]
