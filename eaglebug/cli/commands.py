"""What each headless command does, between parsing its flags and printing its result."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from eaglebug.checks import (
    Answers,
    InputError,
    SglangTree,
    closest_hint,
    locate,
)
from eaglebug.cli import replies
from eaglebug.cli.output import json_text, write_json
from eaglebug.session.stamps import FolderStamp, model_folders, question

if TYPE_CHECKING:  # the engine loads only when a reply is not kept (see replies.py)
    from collections.abc import Callable

    from eaglebug.checks import (
        ClassReport,
        ExternalPackage,
        Finding,
        GpuArch,
        Listing,
        TreeIndex,
    )
    from eaglebug.gpu.nvml import Gpu

    _GpuFigures = tuple[int, str, int | None, str | None, int | None, tuple[Gpu, ...]]

EXIT_OK, EXIT_FINDINGS = 0, 1


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        sys.stderr.write(f"warning: {warning}\n")


def launch_words(args: argparse.Namespace) -> list[str]:
    """The launch command given after `--` (every command that takes one reads it so)."""
    words = list(getattr(args, "launch", None) or [])
    return words[1:] if words and words[0] == "--" else words


def _tree(args: argparse.Namespace, words: list[str]) -> SglangTree:
    """--sglang; else the importable sglang; else the one the launch's own python imports."""
    sglang = args.sglang
    if sglang is None and words and importlib.util.find_spec("sglang") is None:
        from eaglebug.checks import env_and_argv, is_compose, is_kubectl, launch_python, unwrapped
        from eaglebug.server.pyenv import sglang_of

        wrapped, command = unwrapped(env_and_argv(words)[1])
        runner = next((w.name for w in wrapped if w.container), None)
        if runner is None and is_compose(command):
            runner = f"{os.path.basename(command[0]).partition('-')[0]} compose"
        if runner is None and is_kubectl(command):
            runner = "a Kubernetes pod"
        if runner is not None:
            raise InputError(
                f"the launch runs in a container ({runner}): its SGLang is the image's",
                "pass --sglang with the same release's tree (pip download --no-deps "
                "sglang==VERSION, then unzip the wheel)",
            )
        python = launch_python(words, os.environ)  # through wrappers, shims, `#!` lines
        sglang = sglang_of(str(python)) if python is not None else None
    return locate(sglang)


def _index(
    args: argparse.Namespace,
    tree: SglangTree,
    answers: Answers | None,
    listing: Callable[[], Listing] | None = None,
    external: ExternalPackage | None = None,
) -> TreeIndex:
    from eaglebug.checks import TreeIndex
    from eaglebug.session.forkmap import forked_map, in_background

    return TreeIndex(
        tree,
        use_cache=not args.no_cache,
        mapper=forked_map,
        answers=answers,
        listing=listing,
        external=external,
        background=in_background,
    )


def _external(args: argparse.Namespace, words: list[str]) -> ExternalPackage | None:
    """--external-models, else the package the launch's SGLANG_EXTERNAL_MODEL_PACKAGE names."""
    if getattr(args, "external_models", None) is not None:  # '' too: package_at refuses it
        from eaglebug.checks import package_at

        return package_at(args.external_models, sys.path)
    if not words:
        return None
    from eaglebug.server.pyenv import external_for_launch

    return external_for_launch(words, os.environ)


def _external_key(external: ExternalPackage | None) -> str:
    if external is None:
        return ""
    from eaglebug.checks import stamp_key  # the package's files, stat'ed

    return stamp_key(external)


def _listing(tree: SglangTree, answers: Answers) -> Callable[[], Listing] | None:
    """When the tree will be walked (its answers do not hold as they are: the index walks as
    it is built, and takes this listing), the walk starts in a helper now, while this process
    loads the engine."""
    if answers.quick:
        return None
    from eaglebug.checks import list_tree
    from eaglebug.session.forkmap import in_background

    return in_background(functools.partial(list_tree, str(tree.root), str(tree.package_dir)))


def _architecture(args: argparse.Namespace) -> str | None:
    """--model-path's config.json `architectures[0]` (None with --model-class)."""
    config = _model_config(args)
    if config is None:
        return None
    from eaglebug.checks import architecture

    return architecture(config, f"{args.model_path}/config.json")


def _model_config(args: argparse.Namespace) -> dict[str, object] | None:
    """--model-path's config.json, read once (None with --model-class)."""
    if not args.model_path:
        return None
    if getattr(args, "_config", None) is None:
        from eaglebug.checks import read_config

        args._config = read_config(args.model_path)
    return args._config  # type: ignore[no-any-return]


def _target_class(args: argparse.Namespace, index: TreeIndex, arch: str | None) -> str:
    """The class named by --model-class, or by --model-path's config.json through the registry."""
    config = _model_config(args)
    if config is not None:  # the classes the registry picks from its sub-configs, too
        index.use_model_config(config)
    if arch is None:
        from eaglebug.checks import find_class

        return find_class(index, args.model_class).qualname  # fails early on a typo
    exported = index.exporters_of(arch)
    if exported:
        return exported[0].qualname
    hint = closest_hint(
        arch,
        index.registry(),
        "closest registered: {}",
        "is the model supported by this SGLang version?",
    )
    raise InputError(
        f"architecture {arch!r} is not registered by any EntryClass in this tree", hint
    )


class _Answered(NamedTuple):
    """What a tree command computed: its reply as printed on stdout (JSON, SARIF, or the text
    report rendered for this terminal), its exit code, and the folders outside the tree it
    read (None: some it cannot stamp, and the reply is not kept)."""

    warnings: tuple[str, ...]
    stdout: str
    code: int
    folders: tuple[FolderStamp, ...] | None = ()


def _answer(
    args: argparse.Namespace,
    tree: SglangTree,
    command: str,
    parts: list[object],
    compute: Callable[[TreeIndex], _Answered],
    external: ExternalPackage | None = None,
) -> int:
    """A tree command's answer: the reply kept for these `parts`, if there is one, printed
    without loading the engine; else `compute` over an index (and its reply kept).
    An external package's files are part of the key: a change there is a new question; so is
    the format, and for the text report the terminal it is rendered for."""
    answers = Answers(tree, use_cache=not args.no_cache)
    parts = [str(tree.package_dir), tree.version, *parts, _external_key(external)]
    key = replies.key(command, [*parts, *_rendering(args)])
    keeps = not args.no_cache
    if keeps and (reply := replies.kept(answers, key)):
        return replies.say(reply)
    index = _index(args, tree, answers, _listing(tree, answers), external)
    if keeps and (reply := replies.kept(answers, key)):
        return replies.say(reply)  # the walk found the files as the answers knew them
    try:
        done = compute(index)
    finally:
        index.close()  # no helper working ahead outlives the command
    _warn(list(done.warnings))
    sys.stdout.write(done.stdout)
    if keeps and done.folders is not None:
        reply = replies.Reply(done.warnings, done.stdout, done.code, done.folders)
        replies.keep(answers, key, reply)
    return done.code


def _rendering(args: argparse.Namespace) -> list[object]:
    """What a reply's bytes depend on besides the question: the format, and for the text
    report what Rich reads to render it that the key's other parts do not hold."""
    if args.json:
        return ["json"]
    if args.sarif:
        return ["sarif"]
    return ["text", *replies.terminal()]


def _sarif_text(index: TreeIndex, reports: list[ClassReport], findings: list[Finding]) -> str:
    """The findings as SARIF 2.1.0, each at its class's definition (a config finding at the
    tree file its rule was read from), with the delegation patches `fix --apply` would write."""
    from eaglebug.checks import plan_patches
    from eaglebug.cli.sarif import Result, sarif_log

    where = {(r.ref.qualname, r.role): (r.ref.file, r.ref.facts.line) for r in reports}
    algorithms = {(r.ref.qualname, r.role): r.algorithm for r in reports}
    results = [
        Result(
            f,
            where.get((f.class_ or "", f.role or "")),
            algorithms.get((f.class_ or "", f.role or "")),
        )
        for f in findings
    ]
    log = sarif_log(results, index.tree.root, index.tree.version, plan_patches(index, reports))
    return json_text(log)


def _use_format(args: argparse.Namespace) -> None:
    """--json is --format json (the format is part of a kept reply's key, `_rendering`)."""
    args.json = args.json or args.format == "json"
    args.sarif = args.format == "sarif" and not args.json


def audit_command(args: argparse.Namespace) -> int:
    _use_format(args)
    tree = locate(args.sglang)
    arch = _architecture(args)
    external = _external(args, [])

    def compute(index: TreeIndex) -> _Answered:
        from eaglebug.checks import audit, has_errors
        from eaglebug.cli.report import audit_json, print_audit, rendered

        target = _target_class(args, index, arch)
        result = audit(index, target, args.algorithm, args.draft_class)
        code = EXIT_FINDINGS if has_errors(result.findings) else EXIT_OK
        if args.sarif:
            text = _sarif_text(index, result.reports, result.findings)
        elif args.json:
            text = json_text(audit_json(result))
        else:
            text = rendered(print_audit, result)
        return _Answered(tuple(result.warnings), text, code)

    config = _model_config(args) or {}
    picks = {k: v.get("architectures") for k, v in config.items() if isinstance(v, dict)}
    selection = [args.model_class, arch, args.algorithm, args.draft_class, picks]
    return _answer(args, tree, "audit", selection, compute, external)


def _gpu(args: argparse.Namespace) -> _GpuFigures | None:
    """(bytes per GPU, its source, free bytes before the load, its source, GPUs here, each
    GPU's figures), or None when no GPU is known; --gpu-mem-gib / --gpu-free-gib replace what
    NVML says (the count and the GPUs are then unknown)."""
    free = getattr(args, "gpu_free_gib", None)
    free_given = (int(free * 1024**3), "--gpu-free-gib") if free is not None else (None, None)
    if args.gpu_mem_gib is not None:  # finite and positive: checked where it is parsed
        return int(args.gpu_mem_gib * 1024**3), "--gpu-mem-gib", *free_given, None, ()
    from eaglebug.gpu.nvml import smallest_gpu_memory  # NVML only when asked for

    found = smallest_gpu_memory()
    if found is None:
        return None
    total, source, free_now, free_from, count, each = found
    if free is not None:  # the least free is given: no GPU's own figure replaces it
        return total, source, *free_given, count, each
    return total, source, free_now, free_from, count, each


def _gpu_arch(args: argparse.Namespace) -> GpuArch | None:
    """The GPUs' compute capability: --gpu-arch, else NVML's, else unknown."""
    from eaglebug.checks import GpuArch, parse_gpu_arch

    if getattr(args, "gpu_arch", None):
        return parse_gpu_arch(args.gpu_arch)
    from eaglebug.gpu.nvml import compute_capability

    found = compute_capability()
    return GpuArch(*found) if found else None


def preflight_command(args: argparse.Namespace) -> int:
    _use_format(args)
    words = launch_words(args)
    if not words:
        raise InputError(
            "no launch command given",
            "eaglebug preflight -- python -m sglang.launch_server --model-path ...",
        )
    tree = _tree(args, words)
    gpu = _gpu(args)
    external = _external(args, words)
    from eaglebug.server.calibration import measured_for

    calibrating: list[str] = []
    measured = measured_for(Path.cwd(), words, calibrating)  # this command's last launch, if any
    _warn(calibrating)
    arch = _gpu_arch(args)

    def compute(index: TreeIndex) -> _Answered:
        from eaglebug.checks import GpuMemory, HostGpu, has_errors, preflight
        from eaglebug.cli.report import print_preflight, rendered

        gpu_memory = GpuMemory(*gpu[:5], tuple(HostGpu(*g) for g in gpu[5])) if gpu else None
        result = preflight(
            index, words, os.environ, gpu_memory, arch, external=external, measured=measured
        )
        code = EXIT_FINDINGS if has_errors(result.findings) else EXIT_OK
        if args.sarif:
            text = _sarif_text(index, result.reports, result.findings)
        elif args.json:
            text = json_text(result.to_json())
        else:
            text = rendered(print_preflight, result)
        folders = model_folders(
            result.target,
            result.draft,
            roots=result.package_roots,
            chosen_by=result.python_chosen_by,
        )
        return _Answered(tuple(result.warnings), text, code, folders)

    # Besides the tree, the answer depends on the launch, the environment and the GPU, and
    # the folder the launch's relative paths start from (a child process keeps its parent's
    # PWD wherever it runs): the question the TUI's worker keeps its answers by, too.
    calibration = measured.to_json() if measured else None
    capability = arch.capability if arch else None
    parts = question(words, os.environ, gpu, capability, calibration)
    return _answer(args, tree, "preflight", parts, compute, external)


def fix_command(args: argparse.Namespace) -> int:
    # libcst and GitPython load only for the commands that use them.
    from eaglebug.checks import audit, plan_patches, preflight
    from eaglebug.cli.report import print_patches
    from eaglebug.git.fixing import Applied, apply_patch

    words = launch_words(args)
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
    external = _external(args, words)
    index = _index(args, tree, None, external=external)
    try:
        if words:
            selection = preflight(index, words, os.environ, None, external=external)
            reports = selection.reports
            algorithm = selection.algorithm or args.algorithm
            target = next((r.ref.qualname for r in reports if r.role == "target"), None)
            draft = next((r.ref.qualname for r in reports if r.role == "draft"), None)
        else:
            target = _target_class(args, index, _architecture(args))
            algorithm, draft = args.algorithm, args.draft_class
            reports = audit(index, target, algorithm, draft).reports
    finally:
        index.close()  # before any write to the tree: no helper works on behind it
    patches = plan_patches(index, reports)

    def reaudit() -> list[Finding]:
        if target is None and draft is None:
            return []
        from eaglebug.checks import TreeIndex

        fresh = TreeIndex(tree, use_cache=not args.no_cache, external=index.external)
        return audit(fresh, target, algorithm, draft).findings

    applied: list[Applied] = []
    if args.apply:
        for patch in patches:
            if patch.methods:
                applied.append(apply_patch(patch, commit=not args.no_commit, reaudit=reaudit))
    if args.json:
        write_json(
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
    from eaglebug.git.fixing import undo

    done = undo(Path(args.repo))
    if args.json:
        write_json({"reverted": done.reverted, "commit": done.commit, "summary": done.summary})
    else:
        sys.stdout.write(
            f"reverted {done.reverted[:10]} ({done.summary}) with {done.commit[:10]}\n"
        )
    return EXIT_OK
