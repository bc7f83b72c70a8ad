"""What is wrong and how to fix it: pure analysis of source trees, configs and logs.

Nothing in this package starts a process, touches git or NVML, or imports the code it audits.

This module is the engine's facade: the front ends (`eaglebug/`, `eaglebug/tui/`) import only from it,
never from a subpackage (import-linter checks that in CI). Its names load on first use, so a
command that needs little of the engine (`eaglebug status`, `eaglebug gpus`) does not pay for
importing all of it. The subpackages, from the bottom: `contract` (findings, evidence,
fixes), `source` (the tree's files, facts and classes), `pyeval` (the one evaluator of
SGLang's Python), `reach`, `speculative`, `logs`, `launch`, `startup`, `interface` (the
audit), `models`, `args`, `memory`, and `orchestrator` (preflight) and `matrix` (every class of
a release) over them all
(docs/architecture.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eaglebug.checks.contract.environ import launch_environ as launch_environ
    from eaglebug.checks.contract.errors import InputError as InputError
    from eaglebug.checks.contract.errors import closest_hint as closest_hint
    from eaglebug.checks.contract.errors import one_line as one_line
    from eaglebug.checks.contract.evidence import ConfigEvidence as ConfigEvidence
    from eaglebug.checks.contract.evidence import InterfaceEvidence as InterfaceEvidence
    from eaglebug.checks.contract.evidence import LogEvidence as LogEvidence
    from eaglebug.checks.contract.evidence import RuntimeEvidence as RuntimeEvidence
    from eaglebug.checks.contract.findings import SEVERITY_ORDER as SEVERITY_ORDER
    from eaglebug.checks.contract.findings import Finding as Finding
    from eaglebug.checks.contract.findings import FindingKey as FindingKey
    from eaglebug.checks.contract.findings import Step as Step
    from eaglebug.checks.contract.findings import has_errors as has_errors
    from eaglebug.checks.contract.findings import sort_findings as sort_findings
    from eaglebug.checks.contract.fixes import Choice as Choice
    from eaglebug.checks.contract.fixes import EnvFix as EnvFix
    from eaglebug.checks.contract.fixes import FlagFix as FlagFix
    from eaglebug.checks.contract.fixes import PatchFix as PatchFix
    from eaglebug.checks.contract.fixes import env_of as env_of
    from eaglebug.checks.contract.fixes import flag_of as flag_of
    from eaglebug.checks.contract.inputs import read_named as read_named
    from eaglebug.checks.contract.inputs import regular_file as regular_file
    from eaglebug.checks.contract.numbers import MAX_DIGITS as MAX_DIGITS
    from eaglebug.checks.contract.numbers import NotJson as NotJson
    from eaglebug.checks.contract.numbers import float_text as float_text
    from eaglebug.checks.contract.numbers import float_value as float_value
    from eaglebug.checks.contract.numbers import int_text as int_text
    from eaglebug.checks.contract.numbers import int_value as int_value
    from eaglebug.checks.contract.numbers import python_json as python_json
    from eaglebug.checks.contract.numbers import strict_json as strict_json
    from eaglebug.checks.interface.audit import AuditResult as AuditResult
    from eaglebug.checks.interface.audit import ClassReport as ClassReport
    from eaglebug.checks.interface.audit import audit as audit
    from eaglebug.checks.interface.delegates import names as delegate_names
    from eaglebug.checks.interface.patch import TRAILER as TRAILER
    from eaglebug.checks.interface.patch import Patch as Patch
    from eaglebug.checks.interface.patching import plan_patches as plan_patches
    from eaglebug.checks.launch.command import env_and_argv as env_and_argv
    from eaglebug.checks.launch.command import words_environment as words_environment
    from eaglebug.checks.launch.compose import is_compose as is_compose
    from eaglebug.checks.launch.compose import launch_files as launch_files
    from eaglebug.checks.launch.devices import GpuMemory as GpuMemory
    from eaglebug.checks.launch.devices import HostGpu as HostGpu
    from eaglebug.checks.launch.devices import launch_gpus as launch_gpus
    from eaglebug.checks.launch.external import for_launch as for_launch
    from eaglebug.checks.launch.gpuarch import GpuArch as GpuArch
    from eaglebug.checks.launch.gpuarch import parse_gpu_arch as parse_gpu_arch
    from eaglebug.checks.launch.kubectl import is_kubectl as is_kubectl
    from eaglebug.checks.launch.shell import shell_string as shell_string
    from eaglebug.checks.launch.shell import split_words as split_words
    from eaglebug.checks.launch.sitepaths import launch_python as launch_python
    from eaglebug.checks.launch.words import SWITCH as SWITCH
    from eaglebug.checks.launch.words import with_flags as with_flags
    from eaglebug.checks.launch.wrappers import carrying as carrying
    from eaglebug.checks.launch.wrappers import unwrapped as unwrapped
    from eaglebug.checks.logs.acceptance import DEFAULT_RULES as DEFAULT_RULES
    from eaglebug.checks.logs.acceptance import THRESHOLD as THRESHOLD
    from eaglebug.checks.logs.acceptance import AcceptanceRules as AcceptanceRules
    from eaglebug.checks.logs.acceptance import Report as Report
    from eaglebug.checks.logs.acceptance import accept_length as accept_length
    from eaglebug.checks.logs.acceptance import accept_rate as accept_rate
    from eaglebug.checks.logs.acceptance import from_cumulative as from_cumulative
    from eaglebug.checks.logs.acceptance import from_metrics as from_metrics
    from eaglebug.checks.logs.acceptance import low_acceptance as low_acceptance
    from eaglebug.checks.logs.acceptance import reports_in as reports_in
    from eaglebug.checks.logs.bars import Bar as Bar
    from eaglebug.checks.logs.bars import bar_line as bar_line
    from eaglebug.checks.logs.bars import read_bar as read_bar
    from eaglebug.checks.logs.book import rank_summary as rank_summary
    from eaglebug.checks.logs.book import sort_ranks as sort_ranks
    from eaglebug.checks.logs.memory import MemoryLog as MemoryLog
    from eaglebug.checks.logs.nodes import analyze_nodes as analyze_nodes
    from eaglebug.checks.logs.nodes import line_ranks as line_ranks
    from eaglebug.checks.logs.nodes import node_tag as node_tag
    from eaglebug.checks.logs.nodes import with_nodes as with_nodes
    from eaglebug.checks.logs.parse import LogAnalyzer as LogAnalyzer
    from eaglebug.checks.logs.parse import analyze_file as analyze_file
    from eaglebug.checks.logs.parse import finding_json as finding_json
    from eaglebug.checks.logs.parse import read_memory_file as read_memory_file
    from eaglebug.checks.matrix.compare import KINDS as CHANGE_KINDS
    from eaglebug.checks.matrix.compare import Comparison as Comparison
    from eaglebug.checks.matrix.compare import compare as compare_matrices
    from eaglebug.checks.matrix.table import Cell as Cell
    from eaglebug.checks.matrix.table import Matrix as Matrix
    from eaglebug.checks.matrix.table import Row as Row
    from eaglebug.checks.matrix.table import support_matrix as support_matrix
    from eaglebug.checks.models.config import architecture as architecture
    from eaglebug.checks.models.config import read_config as read_config
    from eaglebug.checks.models.source import ModelSource as ModelSource
    from eaglebug.checks.orchestrator import STAGES as STAGES
    from eaglebug.checks.orchestrator import PreflightResult as PreflightResult
    from eaglebug.checks.orchestrator import preflight as preflight
    from eaglebug.checks.source.ahead import Background as Background
    from eaglebug.checks.source.answers import MISSING as NO_ANSWER
    from eaglebug.checks.source.answers import Answers as Answers
    from eaglebug.checks.source.cache import cache_dir as cache_dir
    from eaglebug.checks.source.external import ENV_VAR as ENV_VAR
    from eaglebug.checks.source.external import ExternalPackage as ExternalPackage
    from eaglebug.checks.source.external import package_at as package_at
    from eaglebug.checks.source.index import TreeIndex as TreeIndex
    from eaglebug.checks.source.index import find_class as find_class
    from eaglebug.checks.source.mapper import InProcess as InProcess
    from eaglebug.checks.source.mapper import Mapper as Mapper
    from eaglebug.checks.source.package import stamp_key as stamp_key
    from eaglebug.checks.source.tree import SglangTree as SglangTree
    from eaglebug.checks.source.tree import locate as locate
    from eaglebug.checks.source.trees import ParsedTrees as ParsedTrees
    from eaglebug.checks.source.walk import Listing as Listing
    from eaglebug.checks.source.walk import list_tree as list_tree
    from eaglebug.checks.startup.steps import step_text as step_text

# facade name -> (module, name in it): what `__getattr__` loads on first use.
_EXPORTS: dict[str, tuple[str, str]] = {
    "AcceptanceRules": ("eaglebug.checks.logs.acceptance", "AcceptanceRules"),
    "Answers": ("eaglebug.checks.source.answers", "Answers"),
    "AuditResult": ("eaglebug.checks.interface.audit", "AuditResult"),
    "CHANGE_KINDS": ("eaglebug.checks.matrix.compare", "KINDS"),
    "Cell": ("eaglebug.checks.matrix.table", "Cell"),
    "Bar": ("eaglebug.checks.logs.bars", "Bar"),
    "Choice": ("eaglebug.checks.contract.fixes", "Choice"),
    "Comparison": ("eaglebug.checks.matrix.compare", "Comparison"),
    "ClassReport": ("eaglebug.checks.interface.audit", "ClassReport"),
    "ConfigEvidence": ("eaglebug.checks.contract.evidence", "ConfigEvidence"),
    "DEFAULT_RULES": ("eaglebug.checks.logs.acceptance", "DEFAULT_RULES"),
    "ENV_VAR": ("eaglebug.checks.source.external", "ENV_VAR"),
    "EnvFix": ("eaglebug.checks.contract.fixes", "EnvFix"),
    "ExternalPackage": ("eaglebug.checks.source.external", "ExternalPackage"),
    "Finding": ("eaglebug.checks.contract.findings", "Finding"),
    "FindingKey": ("eaglebug.checks.contract.findings", "FindingKey"),
    "FlagFix": ("eaglebug.checks.contract.fixes", "FlagFix"),
    "GpuArch": ("eaglebug.checks.launch.gpuarch", "GpuArch"),
    "MAX_DIGITS": ("eaglebug.checks.contract.numbers", "MAX_DIGITS"),
    "float_value": ("eaglebug.checks.contract.numbers", "float_value"),
    "int_value": ("eaglebug.checks.contract.numbers", "int_value"),
    "GpuMemory": ("eaglebug.checks.launch.devices", "GpuMemory"),
    "HostGpu": ("eaglebug.checks.launch.devices", "HostGpu"),
    "launch_gpus": ("eaglebug.checks.launch.devices", "launch_gpus"),
    "InProcess": ("eaglebug.checks.source.mapper", "InProcess"),
    "Mapper": ("eaglebug.checks.source.mapper", "Mapper"),
    "Background": ("eaglebug.checks.source.ahead", "Background"),
    "InputError": ("eaglebug.checks.contract.errors", "InputError"),
    "closest_hint": ("eaglebug.checks.contract.errors", "closest_hint"),
    "InterfaceEvidence": ("eaglebug.checks.contract.evidence", "InterfaceEvidence"),
    "Listing": ("eaglebug.checks.source.walk", "Listing"),
    "LogAnalyzer": ("eaglebug.checks.logs.parse", "LogAnalyzer"),
    "LogEvidence": ("eaglebug.checks.contract.evidence", "LogEvidence"),
    "Matrix": ("eaglebug.checks.matrix.table", "Matrix"),
    "MemoryLog": ("eaglebug.checks.logs.memory", "MemoryLog"),
    "ModelSource": ("eaglebug.checks.models.source", "ModelSource"),
    "NO_ANSWER": ("eaglebug.checks.source.answers", "MISSING"),
    "NotJson": ("eaglebug.checks.contract.numbers", "NotJson"),
    "Patch": ("eaglebug.checks.interface.patch", "Patch"),
    "ParsedTrees": ("eaglebug.checks.source.trees", "ParsedTrees"),
    "PatchFix": ("eaglebug.checks.contract.fixes", "PatchFix"),
    "PreflightResult": ("eaglebug.checks.orchestrator", "PreflightResult"),
    "Report": ("eaglebug.checks.logs.acceptance", "Report"),
    "Row": ("eaglebug.checks.matrix.table", "Row"),
    "RuntimeEvidence": ("eaglebug.checks.contract.evidence", "RuntimeEvidence"),
    "SEVERITY_ORDER": ("eaglebug.checks.contract.findings", "SEVERITY_ORDER"),
    "STAGES": ("eaglebug.checks.orchestrator", "STAGES"),
    "SWITCH": ("eaglebug.checks.launch.words", "SWITCH"),
    "SglangTree": ("eaglebug.checks.source.tree", "SglangTree"),
    "Step": ("eaglebug.checks.contract.findings", "Step"),
    "THRESHOLD": ("eaglebug.checks.logs.acceptance", "THRESHOLD"),
    "TRAILER": ("eaglebug.checks.interface.patch", "TRAILER"),
    "TreeIndex": ("eaglebug.checks.source.index", "TreeIndex"),
    "accept_length": ("eaglebug.checks.logs.acceptance", "accept_length"),
    "accept_rate": ("eaglebug.checks.logs.acceptance", "accept_rate"),
    "analyze_file": ("eaglebug.checks.logs.parse", "analyze_file"),
    "analyze_nodes": ("eaglebug.checks.logs.nodes", "analyze_nodes"),
    "bar_line": ("eaglebug.checks.logs.bars", "bar_line"),
    "architecture": ("eaglebug.checks.models.config", "architecture"),
    "audit": ("eaglebug.checks.interface.audit", "audit"),
    "cache_dir": ("eaglebug.checks.source.cache", "cache_dir"),
    "compare_matrices": ("eaglebug.checks.matrix.compare", "compare"),
    "delegate_names": ("eaglebug.checks.interface.delegates", "names"),
    "env_and_argv": ("eaglebug.checks.launch.command", "env_and_argv"),
    "words_environment": ("eaglebug.checks.launch.command", "words_environment"),
    "is_compose": ("eaglebug.checks.launch.compose", "is_compose"),
    "launch_files": ("eaglebug.checks.launch.compose", "launch_files"),
    "is_kubectl": ("eaglebug.checks.launch.kubectl", "is_kubectl"),
    "shell_string": ("eaglebug.checks.launch.shell", "shell_string"),
    "unwrapped": ("eaglebug.checks.launch.wrappers", "unwrapped"),
    "carrying": ("eaglebug.checks.launch.wrappers", "carrying"),
    "launch_python": ("eaglebug.checks.launch.sitepaths", "launch_python"),
    "env_of": ("eaglebug.checks.contract.fixes", "env_of"),
    "find_class": ("eaglebug.checks.source.index", "find_class"),
    "finding_json": ("eaglebug.checks.logs.parse", "finding_json"),
    "flag_of": ("eaglebug.checks.contract.fixes", "flag_of"),
    "float_text": ("eaglebug.checks.contract.numbers", "float_text"),
    "for_launch": ("eaglebug.checks.launch.external", "for_launch"),
    "from_cumulative": ("eaglebug.checks.logs.acceptance", "from_cumulative"),
    "from_metrics": ("eaglebug.checks.logs.acceptance", "from_metrics"),
    "has_errors": ("eaglebug.checks.contract.findings", "has_errors"),
    "int_text": ("eaglebug.checks.contract.numbers", "int_text"),
    "launch_environ": ("eaglebug.checks.contract.environ", "launch_environ"),
    "line_ranks": ("eaglebug.checks.logs.nodes", "line_ranks"),
    "list_tree": ("eaglebug.checks.source.walk", "list_tree"),
    "locate": ("eaglebug.checks.source.tree", "locate"),
    "low_acceptance": ("eaglebug.checks.logs.acceptance", "low_acceptance"),
    "node_tag": ("eaglebug.checks.logs.nodes", "node_tag"),
    "one_line": ("eaglebug.checks.contract.errors", "one_line"),
    "package_at": ("eaglebug.checks.source.external", "package_at"),
    "parse_gpu_arch": ("eaglebug.checks.launch.gpuarch", "parse_gpu_arch"),
    "plan_patches": ("eaglebug.checks.interface.patching", "plan_patches"),
    "preflight": ("eaglebug.checks.orchestrator", "preflight"),
    "python_json": ("eaglebug.checks.contract.numbers", "python_json"),
    "rank_summary": ("eaglebug.checks.logs.book", "rank_summary"),
    "read_bar": ("eaglebug.checks.logs.bars", "read_bar"),
    "read_config": ("eaglebug.checks.models.config", "read_config"),
    "read_memory_file": ("eaglebug.checks.logs.parse", "read_memory_file"),
    "read_named": ("eaglebug.checks.contract.inputs", "read_named"),
    "regular_file": ("eaglebug.checks.contract.inputs", "regular_file"),
    "reports_in": ("eaglebug.checks.logs.acceptance", "reports_in"),
    "sort_findings": ("eaglebug.checks.contract.findings", "sort_findings"),
    "sort_ranks": ("eaglebug.checks.logs.book", "sort_ranks"),
    "split_words": ("eaglebug.checks.launch.shell", "split_words"),
    "stamp_key": ("eaglebug.checks.source.package", "stamp_key"),
    "support_matrix": ("eaglebug.checks.matrix.table", "support_matrix"),
    "step_text": ("eaglebug.checks.startup.steps", "step_text"),
    "strict_json": ("eaglebug.checks.contract.numbers", "strict_json"),
    "with_flags": ("eaglebug.checks.launch.words", "with_flags"),
    "with_nodes": ("eaglebug.checks.logs.nodes", "with_nodes"),
}

__all__ = [
    "CHANGE_KINDS",
    "DEFAULT_RULES",
    "ENV_VAR",
    "MAX_DIGITS",
    "NO_ANSWER",
    "SEVERITY_ORDER",
    "STAGES",
    "SWITCH",
    "THRESHOLD",
    "TRAILER",
    "AcceptanceRules",
    "Answers",
    "AuditResult",
    "Background",
    "Bar",
    "Cell",
    "Choice",
    "ClassReport",
    "Comparison",
    "ConfigEvidence",
    "EnvFix",
    "ExternalPackage",
    "Finding",
    "FindingKey",
    "FlagFix",
    "GpuArch",
    "GpuMemory",
    "HostGpu",
    "InProcess",
    "InputError",
    "InterfaceEvidence",
    "Listing",
    "LogAnalyzer",
    "LogEvidence",
    "Mapper",
    "Matrix",
    "MemoryLog",
    "ModelSource",
    "NotJson",
    "ParsedTrees",
    "Patch",
    "PatchFix",
    "PreflightResult",
    "Report",
    "Row",
    "RuntimeEvidence",
    "SglangTree",
    "Step",
    "TreeIndex",
    "accept_length",
    "accept_rate",
    "analyze_file",
    "analyze_nodes",
    "architecture",
    "audit",
    "bar_line",
    "cache_dir",
    "carrying",
    "closest_hint",
    "compare_matrices",
    "delegate_names",
    "env_and_argv",
    "env_of",
    "find_class",
    "finding_json",
    "flag_of",
    "float_text",
    "float_value",
    "for_launch",
    "from_cumulative",
    "from_metrics",
    "has_errors",
    "int_text",
    "int_value",
    "is_compose",
    "is_kubectl",
    "launch_environ",
    "launch_files",
    "launch_gpus",
    "launch_python",
    "line_ranks",
    "list_tree",
    "locate",
    "low_acceptance",
    "node_tag",
    "one_line",
    "package_at",
    "parse_gpu_arch",
    "plan_patches",
    "preflight",
    "python_json",
    "rank_summary",
    "read_bar",
    "read_config",
    "read_memory_file",
    "read_named",
    "regular_file",
    "reports_in",
    "shell_string",
    "sort_findings",
    "sort_ranks",
    "split_words",
    "stamp_key",
    "step_text",
    "strict_json",
    "support_matrix",
    "unwrapped",
    "with_flags",
    "with_nodes",
    "words_environment",
]


# The per-file extractors the index runs as it reads a tree (`source/facts.py`), registered by
# the layers that own them when they are imported: loaded with the index, so a tree walked
# before the audit asks is looked at for them in the same pass.
_EXTRACTORS = ("eaglebug.checks.reach.consumers",)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    if name == "TreeIndex":
        for extractor in _EXTRACTORS:
            importlib.import_module(extractor)
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # the next use is a plain global
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
