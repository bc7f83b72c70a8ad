"""`config.flag_deprecated`: the flags each real release deprecates, with the replacement it names.

0.5.9 has its own `DeprecatedAction` in `server_args.py` (the replacement only in the help);
0.5.14 retires flags through `Deprecated*Action` classes with `new_flag=`; 0.5.22 and 0.5.23
keep a few such registrations in `server_args.py` and say it in the help of annotated fields
(`A[bool, "Deprecated. Use ..."]`). `--enable-dp-attention` is plain in 0.5.14 and deprecated
from 0.5.22, so it is tested on both sides; so is the flag 0.5.14 points to.
"""

from __future__ import annotations

import pytest

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.launch.command import parse_launch
from eaglebug.checks.launch.deprecations import check_deprecated_flags, deprecated_flags
from eaglebug.checks.launch.flags import server_flags
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate

LAUNCH = ("python", "-m", "sglang.launch_server", "--model-path", "m")


def release_index(request: pytest.FixtureRequest, version: str) -> TreeIndex:
    folder = request.getfixturevalue("sglang_0" + version.replace(".", "")[1:])
    return TreeIndex(locate(str(folder)), use_cache=False)


def findings(index: TreeIndex, *flags: str) -> list[Finding]:
    launch = parse_launch([*LAUNCH, *flags], server_flags(index), "test")
    return check_deprecated_flags(index, launch)


def tree_lines(index: TreeIndex, read_from: str | None, count: int) -> str:
    assert read_from is not None
    rel, line = read_from.rsplit(":", 1)
    lines = (index.tree.root / rel).read_text(encoding="utf-8").splitlines()
    return "\n".join(lines[int(line) - 1 : int(line) - 1 + count])


@pytest.mark.parametrize(
    ("version", "flags", "replacement", "said"),
    [
        (
            "0.5.9",  # server_args.py's own DeprecatedAction; the replacement from its help text
            ("--hybrid-kvcache-ratio",),
            "--swa-full-tokens-ratio",
            "The command line argument '--hybrid-kvcache-ratio' is deprecated",
        ),
        (
            "0.5.14",
            ("--cuda-graph-max-bs", "8"),
            "--cuda-graph-max-bs-decode",
            "Use '--cuda-graph-max-bs-decode' instead.",
        ),
        (
            "0.5.14",
            ("--disable-cuda-graph",),
            "--cuda-graph-backend-{decode,prefill}=disabled",
            "'--disable-cuda-graph' is deprecated",
        ),
        (
            "0.5.22",
            ("--enable-dp-attention",),
            "--attn-dp-size <dp-size>",
            "Use '--attn-dp-size <dp-size>' instead.",
        ),
        (
            "0.5.23",
            ("--enable-dp-attention",),
            "--attn-dp-size <dp-size>",
            "will be removed in a future release",
        ),
        (
            "0.5.22",
            ("--disable-fast-image-processor",),
            "--image-processor-backend=pil",
            "Deprecated. Use --image-processor-backend=pil instead.",
        ),
        (
            "0.5.23",
            ("--disable-fast-image",),
            "--image-processor-backend=pil",
            "Deprecated.",
        ),  # a prefix
    ],
)
def test_deprecated_flag_with_the_trees_replacement(
    request: pytest.FixtureRequest,
    version: str,
    flags: tuple[str, ...],
    replacement: str,
    said: str,
) -> None:
    index = release_index(request, version)
    (finding,) = findings(index, *flags)
    assert finding.id == "config.flag_deprecated" and finding.severity == "warning"
    assert finding.fix is not None and finding.fix.text() == replacement
    assert isinstance(finding.evidence, ConfigEvidence)
    assert finding.evidence.sglang_message is not None and said in finding.evidence.sglang_message
    declared = tree_lines(index, finding.evidence.read_from, 4)  # the call or the field
    assert flags[0] in declared or flags[0][2:].replace("-", "_") in declared


@pytest.mark.parametrize(
    ("version", "flags"),
    [
        ("0.5.14", ("--enable-dp-attention",)),  # deprecated only from 0.5.22 on
        ("0.5.23", ("--cuda-graph-max-bs-decode", "8")),  # what 0.5.14 pointed to
        ("0.5.23", ("--tp-size", "2")),
    ],
)
def test_flags_the_release_does_not_deprecate(
    request: pytest.FixtureRequest, version: str, flags: tuple[str, ...]
) -> None:
    assert findings(release_index(request, version), *flags) == []


def test_every_release_declares_some(request: pytest.FixtureRequest) -> None:
    for version in ("0.5.14", "0.5.22", "0.5.23"):
        listed = deprecated_flags(release_index(request, version))
        assert listed and all(d.read_from.startswith("sglang/srt/") for d in listed)


def test_deprecated_switches_take_no_value(request: pytest.FixtureRequest) -> None:
    """0.5.14's `DeprecatedStoreTrueAction.__init__(..., nargs=0, ...)` makes its flags switches
    (read from the class, not assumed); `DeprecatedAliasStoreAction` keeps the value."""
    index = release_index(request, "0.5.14")
    words = [*LAUNCH, "--disable-cuda-graph", "--cuda-graph-max-bs", "8", "--tp-size", "2"]
    launch = parse_launch(words, server_flags(index), "0.5.14")
    assert launch.get("disable_cuda_graph") is True
    assert launch.text("cuda_graph_max_bs_decode") == "8" and launch.text("tp_size") == "2"
