"""Import an SGLang-shaped tree from its folder, and the modules of it a launch goes through."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from eaglebug.demo.knobs import UsageError


@dataclass(frozen=True)
class Tree:
    """The modules of the imported tree that a launch goes through."""

    sglang: ModuleType
    server_args: ModuleType
    tp_worker: ModuleType
    model_runner: ModuleType
    cuda_graph_runner: ModuleType
    spec_info: ModuleType


def import_tree(python_dir: Path) -> Tree:
    sys.dont_write_bytecode = True  # leave the scratch repository as clean as it was
    sys.path.insert(0, str(python_dir))
    sglang = importlib.import_module("sglang")
    where = Path(str(sglang.__file__)).resolve()
    if python_dir not in where.parents:
        raise UsageError(
            f"`import sglang` found {where}, not the tree in {python_dir}",
            "run the stand-in in a fresh interpreter",
        )
    names = {
        "server_args": "sglang.srt.server_args",
        "tp_worker": "sglang.srt.managers.tp_worker",
        "model_runner": "sglang.srt.model_executor.model_runner",
        "cuda_graph_runner": "sglang.srt.model_executor.cuda_graph_runner",
        "spec_info": "sglang.srt.speculative.spec_info",
    }
    modules = {key: importlib.import_module(name) for key, name in names.items()}
    if not hasattr(modules["server_args"], "prepare_server_args"):
        raise UsageError(
            f"{python_dir}/sglang/srt/server_args.py has no prepare_server_args",
            "the stand-in parses the launch flags with the tree's own parser",
        )
    return Tree(sglang=sglang, **modules)
