"""What each headless command does, between parsing its flags and printing its result."""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from eaglebug.checks.audit import audit, find_class
from eaglebug.checks.errors import InputError
from eaglebug.checks.findings import Finding, has_errors
from eaglebug.checks.index import TreeIndex
from eaglebug.checks.launch import env_and_argv, split_words
from eaglebug.checks.modelconfig import architecture, read_config
from eaglebug.checks.preflight import GpuMemory, preflight
from eaglebug.checks.tree import SglangTree, locate
from eaglebug.interpreter import sglang_of
from eaglebug.report import audit_json, print_audit, print_preflight

EXIT_OK, EXIT_FINDINGS = 0, 1


def _write_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        sys.stderr.write(f"warning: {warning}\n")


def _launch_words(args: argparse.Namespace) -> list[str]:
    words = list(getattr(args, "launch", None) or [])
    return words[1:] if words and words[0] == "--" else words


def _tree(args: argparse.Namespace, words: list[str]) -> SglangTree:
    """--sglang; else the importable sglang; else the one the launch's own python imports."""
    sglang = args.sglang
    if sglang is None and words and importlib.util.find_spec("sglang") is None:
        program = next((w for w in split_words(words) if "=" not in w), "")
        sglang = sglang_of(program)
    return locate(sglang)


def _target_class(args: argparse.Namespace, index: TreeIndex) -> str:
    """The class named by --model-class, or by --model-path's config.json through the registry."""
    if not args.model_path:
        return find_class(index, args.model_class).qualname  # fails early on a typo
    config = read_config(args.model_path)
    arch = architecture(config, f"{args.model_path}/config.json")
    exported = index.exporters_of(arch)
    if exported:
        return exported[0].qualname
    close = difflib.get_close_matches(arch, sorted(index.registry()), n=3, cutoff=0.6)
    hint = (
        f"closest registered: {', '.join(close)}"
        if close
        else "is the model supported by this SGLang version?"
    )
    raise InputError(
        f"architecture {arch!r} is not registered by any EntryClass in this tree", hint
    )


def audit_command(args: argparse.Namespace) -> int:
    index = TreeIndex(locate(args.sglang), use_cache=not args.no_cache)
    result = audit(index, _target_class(args, index), args.algorithm, args.draft_class)
    _warn(result.warnings)
    if args.json:
        _write_json(audit_json(result))
    else:
        print_audit(result)
    return EXIT_FINDINGS if has_errors(result.findings) else EXIT_OK


def _gpu(args: argparse.Namespace) -> GpuMemory | None:
    if args.gpu_mem_gib is not None:  # finite and positive: checked where it is parsed
        return GpuMemory(int(args.gpu_mem_gib * 1024**3), "--gpu-mem-gib")
    from eaglebug.nvml import smallest_gpu_memory  # NVML only when asked for

    found = smallest_gpu_memory()
    return GpuMemory(*found) if found is not None else None


def preflight_command(args: argparse.Namespace) -> int:
    words = _launch_words(args)
    if not words:
        raise InputError(
            "no launch command given",
            "eaglebug preflight -- python -m sglang.launch_server --model-path ...",
        )
    index = TreeIndex(_tree(args, words), use_cache=not args.no_cache)
    result = preflight(index, words, os.environ, _gpu(args))
    _warn(result.warnings)
    if args.json:
        _write_json(result.to_json())
    else:
        print_preflight(result)
    return EXIT_FINDINGS if has_errors(result.findings) else EXIT_OK


def fix_command(args: argparse.Namespace) -> int:
    # libcst and GitPython load only for the commands that use them.
    from eaglebug.checks.patching import plan_patches
    from eaglebug.fixing import Applied, apply_patch
    from eaglebug.report import print_patches

    words = _launch_words(args)
    if not words and not (args.model_class or args.model_path):
        raise InputError(
            "nothing selected to fix",
            "pass --model-class NAME (or --model-path DIR), or a launch command after --",
        )
    if args.no_commit and not args.apply:
        raise InputError(
            "--no-commit only applies with --apply", "add --apply, or drop --no-commit"
        )
    tree = _tree(args, words)
    index = TreeIndex(tree, use_cache=not args.no_cache)
    if words:
        selection = preflight(index, words, os.environ, None)
        reports = selection.reports
        algorithm = selection.algorithm or args.algorithm
        target = next((r.ref.qualname for r in reports if r.role == "target"), None)
        draft = next((r.ref.qualname for r in reports if r.role == "draft"), None)
    else:
        target = _target_class(args, index)
        algorithm, draft = args.algorithm, args.draft_class
        reports = audit(index, target, algorithm, draft).reports
    patches = plan_patches(index, reports)

    def reaudit() -> list[Finding]:
        if target is None and draft is None:
            return []
        fresh = TreeIndex(tree, use_cache=not args.no_cache)
        return audit(fresh, target, algorithm, draft).findings

    applied: list[Applied] = []
    if args.apply:
        for patch in patches:
            if patch.methods:
                applied.append(apply_patch(patch, commit=not args.no_commit, reaudit=reaudit))
    if args.json:
        _write_json(
            {
                "patches": [p.to_json() for p in patches],
                "applied": [
                    {
                        "class": a.patch.class_name,
                        "file": a.patch.file,
                        "commit": a.commit,
                        "written": str(a.written or a.patch.path),
                    }
                    for a in applied
                ],
            }
        )
    else:
        print_patches(patches, applied, args.apply)
    pending = not args.apply and any(p.methods for p in patches)
    return EXIT_FINDINGS if pending or any(p.refused for p in patches) else EXIT_OK


def undo_command(args: argparse.Namespace) -> int:
    from eaglebug.fixing import undo

    done = undo(Path(args.repo))
    if args.json:
        _write_json({"reverted": done.reverted, "commit": done.commit, "summary": done.summary})
    else:
        sys.stdout.write(
            f"reverted {done.reverted[:10]} ({done.summary}) with {done.commit[:10]}\n"
        )
    return EXIT_OK


def launch_command(args: argparse.Namespace) -> int:
    from eaglebug.server import Server

    words = _launch_words(args)
    if not words:
        raise InputError(
            "no launch command given", "eaglebug launch -- python -m sglang.launch_server ..."
        )
    env, argv = env_and_argv(words)
    record = Server(Path.cwd()).launch(argv, env)
    if args.json:
        _write_json(asdict(record))
    else:
        sys.stdout.write(
            f"launch {record.number}: pid {record.pid}, log {record.log}\n"
            "it keeps running when this shell or SSH session ends; `eaglebug stop` stops it\n"
        )
    return EXIT_OK


def stop_command(args: argparse.Namespace) -> int:
    from eaglebug.server import Server

    server = Server(Path.cwd())
    record = server.attached()
    if record is None:
        raise InputError(
            "no running server launched from this folder", "`eaglebug status` lists past launches"
        )
    result = server.stop(record, grace_s=args.grace)
    if args.json:
        _write_json({"launch": record.number, **asdict(result)})
    else:
        sys.stdout.write(
            f"launch {record.number} stopped: {len(result.terminated)} exited on SIGTERM, "
            f"{len(result.killed)} needed SIGKILL\n"
        )
        if result.survivors:
            sys.stdout.write(f"still running: {', '.join(map(str, result.survivors))}\n")
    return EXIT_FINDINGS if result.survivors else EXIT_OK


def status_command(args: argparse.Namespace) -> int:
    from eaglebug.server import Server

    server = Server(Path.cwd())
    state = server.state()
    rows = []
    for record in state.launches:
        left = server.processes(record)
        rows.append(
            {
                **asdict(record),
                "alive": bool(left),
                "root_alive": server.root_alive(record),
                "processes": left,
            }
        )
    if args.json:
        _write_json({"launches": rows, "pending_env": state.pending_env})
        return EXIT_OK
    if not rows:
        sys.stdout.write("no launches recorded in this folder (.eaglebug/state.json)\n")
        return EXIT_OK
    for row in rows:
        if row["root_alive"]:
            alive = "running"
        elif row["alive"]:
            count = len(row["processes"])
            alive = (
                f"{row['outcome']}, but {count} of its processes still run "
                "(`eaglebug stop` stops them)"
            )
        elif row["outcome"] in {"running", "ready"}:
            alive = "exited"  # it ended while no eaglebug was watching
        else:
            alive = row["outcome"]
        ready = (
            f", ready after {row['ready_after_s']:.0f} s"
            if row["ready_after_s"] is not None
            else ""
        )
        sys.stdout.write(
            f"launch {row['number']}: {alive}{ready}, pid {row['pid']}, log {row['log']}\n"
        )
    return EXIT_OK
