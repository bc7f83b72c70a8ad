"""Run code when functions of the imported tree start and return, without wrapping them."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

EXIT_INTERNAL = 70  # a bug in the stand-in itself, never the tree's failure

Hook = Callable[[FrameType], None]


class Tracer:
    """Runs hooks when the watched functions of the tree start and return normally.

    A `sys.settrace` function adds no frame to the stack, so a traceback the tree's code raises
    is exactly what it would be without the stand-in. A hook that fails is the stand-in's bug:
    reported as such on stderr, and the process ends with status 70.
    """

    def __init__(self) -> None:
        self.hooks: dict[CodeType, tuple[Hook | None, Hook | None]] = {}

    def watch(self, owner: object, name: str, enter: Hook | None, leave: Hook | None) -> None:
        function = getattr(owner, name, None)
        code = getattr(function, "__code__", None)
        if isinstance(code, CodeType):
            self.hooks[code] = (enter, leave)

    def trace(self, frame: FrameType, event: str, arg: object) -> Any:
        if event != "call":
            return None
        hooks = self.hooks.get(frame.f_code)
        if hooks is None:
            return None
        enter, leave = hooks
        if enter is not None:
            _run_hook(enter, frame)
        raised = False

        def local(frame: FrameType, event: str, arg: object) -> Any:
            nonlocal raised
            if event == "exception":
                raised = True
            elif event == "line":
                raised = False  # caught inside: the function goes on
            elif event == "return" and not raised and leave is not None:
                _run_hook(leave, frame)
            return local

        return local


def _run_hook(hook: Hook, frame: FrameType) -> None:
    try:
        hook(frame)
    except Exception:
        sys.stderr.write(
            "eaglebug stand-in: internal error in its own log hook (not the SGLang tree's):\n"
            + traceback.format_exc()
        )
        sys.stderr.flush()
        os._exit(EXIT_INTERNAL)
