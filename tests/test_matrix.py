"""`eaglebug matrix` on real releases: the seed's wrapper, the tree's reasons for cells that do
not apply, agreement with `eaglebug audit`, `--compare` between real releases, the formats and
the progress bar (a terminal only)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from eaglebug.checks import (
    Matrix,
    TreeIndex,
    audit,
    compare_matrices,
    locate,
    support_matrix,
)
from tests.clirun import cli, refused

KIMI = "KimiK25ForConditionalGeneration"


@pytest.fixture(scope="module")
def matrix_059(index_059: TreeIndex) -> Matrix:
    return support_matrix(index_059)


@pytest.fixture(scope="module")
def matrix_0510(sglang_0510: Path) -> Matrix:
    return support_matrix(TreeIndex(locate(str(sglang_0510)), use_cache=False))


@pytest.fixture(scope="module")
def matrix_058(sglang_058post1: Path) -> Matrix:
    return support_matrix(TreeIndex(locate(str(sglang_058post1)), use_cache=False))


def _row(matrix: Matrix, name: str):  # type: ignore[no-untyped-def]
    return next(r for r in matrix.rows if r.architecture == name)


def test_the_seed_wrapper_lacks_what_eagle3_calls_with_the_delegate(matrix_059: Matrix) -> None:
    assert matrix_059.algorithms == ("EAGLE", "EAGLE3", "STANDALONE", "NGRAM")
    kimi = _row(matrix_059, KIMI)
    assert kimi.file == "sglang/srt/models/kimi_k25.py"
    cell = kimi.cell("EAGLE3", "target")
    assert cell is not None and cell.status == "missing"
    lacks = {m.attribute: m for m in cell.missing}
    assert set(lacks) == {"get_embed_and_head", "set_eagle3_layers_to_capture"}
    assert all(m.delegate == "language_model" and m.fixable for m in lacks.values())
    assert kimi.cell("NGRAM", "target").status == "supported"  # type: ignore[union-attr]
    assert kimi.draft is None and kimi.cell("EAGLE3", "draft") is None  # a target only


def test_cells_that_do_not_apply_say_the_trees_reason(matrix_059: Matrix) -> None:
    nextn = _row(matrix_059, "DeepseekV3ForCausalLMNextN")
    target = nextn.cell("EAGLE", "target")
    assert target is not None and target.status == "n/a"
    assert "sglang/srt/configs/model_config.py:" in (target.reason or "")
    assert "renames DeepseekV3ForCausalLM to it" in (target.reason or "")
    assert nextn.cell("EAGLE", "draft").status == "supported"  # type: ignore[union-attr]
    ngram = nextn.cell("NGRAM", "draft")
    assert (
        ngram is not None
        and ngram.status == "n/a"
        and "runs no draft model" in (ngram.reason or "")
    )
    eagle3 = _row(matrix_059, "LlamaForCausalLMEagle3")
    assert "spec_info.hidden_states" in (eagle3.draft or "")
    assert eagle3.cell("EAGLE3", "draft").status == "supported"  # type: ignore[union-attr]
    wrong = eagle3.cell("EAGLE", "draft")
    assert wrong is not None and wrong.status == "n/a"
    assert "an EAGLE-3 draft" in (wrong.reason or "")
    assert "sglang/srt/models/llama_eagle3.py:" in (wrong.reason or "")


def test_the_matrix_gives_the_index_back_its_budget_of_trees(
    sglang_059: Path, matrix_059: Matrix
) -> None:
    """The matrix keeps fewer trees while it runs (`MATRIX_SOURCE_BYTES`, its memory), then
    the index keeps its usual budget for what asks next (a preflight on the same index)."""
    from eaglebug.checks.contract.limits import MATRIX_SOURCE_BYTES, PARSED_SOURCE_BYTES

    index = TreeIndex(locate(str(sglang_059)), use_cache=False)
    seen: list[int] = []
    parse_bytes = index.files.parse_bytes

    def watched(rel: str, data: bytes) -> object:
        seen.append(index.files.kept_bytes)
        return parse_bytes(rel, data)

    index.files.parse_bytes = watched  # type: ignore[method-assign, assignment]
    kimi = _row(matrix_059, KIMI)
    assert support_matrix(index, files=[kimi.file]).rows == tuple(
        r for r in matrix_059.rows if r.file == kimi.file
    )
    assert MATRIX_SOURCE_BYTES in seen, "the rows' parses ran with the matrix's budget"
    assert index.files.kept_bytes == PARSED_SOURCE_BYTES


@pytest.mark.parametrize(
    ("name", "algorithm", "role"),
    [
        (KIMI, "EAGLE3", "target"),
        (KIMI, "EAGLE", "target"),
        ("DeepseekV3ForCausalLM", "EAGLE3", "target"),
        ("LlamaForCausalLMEagle3", "EAGLE3", "draft"),
        ("DeepseekV3ForCausalLMNextN", "EAGLE", "draft"),
    ],
)
def test_a_cell_says_what_eaglebug_audit_says(
    index_059: TreeIndex, matrix_059: Matrix, name: str, algorithm: str, role: str
) -> None:
    row = _row(matrix_059, name)
    cell = row.cell(algorithm, role)
    assert cell is not None
    if role == "target":
        result = audit(index_059, row.class_, algorithm)
    else:
        result = audit(index_059, None, algorithm, draft_class=row.class_)
    expected = sorted(f.key.text() for f in result.findings if f.severity != "info")
    assert sorted(f.key.text() for f in cell.findings) == expected
    assert (cell.status == "missing") == any(f.severity == "error" for f in result.findings)


def test_compare_flags_the_wrapper_in_the_release_that_added_it(
    matrix_058: Matrix, matrix_059: Matrix
) -> None:
    comparison = compare_matrices(matrix_058, matrix_059)
    assert comparison.regressions == []
    new = {(c.architecture, c.algorithm, c.role) for c in comparison.of_kind("new_unsupported")}
    assert (KIMI, "EAGLE3", "target") in new and (KIMI, "EAGLE", "target") in new
    assert all(c.architecture != KIMI for c in comparison.of_kind("regression"))


def test_compare_next_release_gained_and_backwards_is_a_regression(
    matrix_059: Matrix, matrix_0510: Matrix
) -> None:
    forward = compare_matrices(matrix_059, matrix_0510)
    gained = {(c.architecture, c.algorithm) for c in forward.of_kind("gained")}
    assert (KIMI, "EAGLE3") in gained
    backward = compare_matrices(matrix_0510, matrix_059)
    lost = [c for c in backward.regressions if c.architecture == KIMI]
    assert {c.algorithm for c in lost} == {"EAGLE", "EAGLE3"}
    eagle3 = next(c for c in lost if c.algorithm == "EAGLE3")
    assert eagle3.after is not None
    assert {m.attribute for m in eagle3.after.missing} == {
        "get_embed_and_head",
        "set_eagle3_layers_to_capture",
    }


def test_cli_compare_exits_1_on_a_regression_and_says_it(
    capsys: pytest.CaptureFixture[str], sglang_059: Path, sglang_0510: Path
) -> None:
    run = cli(capsys, "matrix", "--sglang", str(sglang_0510), "--compare", str(sglang_059))
    assert run.code == 1, run.err
    assert "lost support (regression)" in run.out
    assert f"{KIMI} · EAGLE3: now lacks get_embed_and_head, set_eagle3_layers_to_capture" in run.out
    forward = cli(capsys, "matrix", "--sglang", str(sglang_059), "--compare", str(sglang_0510))
    assert forward.code == 0, forward.err
    data = cli(
        capsys, "matrix", "--sglang", str(sglang_059), "--compare", str(sglang_0510), "--json"
    )
    changes = json.loads(data.out)
    assert changes["counts"]["regression"] == 0
    assert any(
        c["kind"] == "gained" and c["architecture"] == KIMI and c["algorithm"] == "EAGLE3"
        for c in changes["changes"]
    )


def test_cli_formats(capsys: pytest.CaptureFixture[str], sglang_059: Path) -> None:
    text = cli(capsys, "matrix", "--sglang", str(sglang_059))
    assert text.code == 0 and text.err == ""  # no progress bar without a terminal
    assert text.out.startswith("SGLang 0.5.9 at ")
    assert f"{KIMI} · EAGLE3: get_embed_and_head (delegate to self.language_model)" in text.out
    md = cli(capsys, "matrix", "--sglang", str(sglang_059), "--format", "md")
    assert "| class | EAGLE | EAGLE3 | STANDALONE | NGRAM |" in md.out
    assert f"| `{KIMI}` | ❌ get_embed_and_head | ❌ get_embed_and_head, set_eagle3" in md.out
    data = json.loads(cli(capsys, "matrix", "--sglang", str(sglang_059), "--json").out)
    kimi = next(r for r in data["rows"] if r["architecture"] == KIMI)
    assert kimi["line"] > 0 and kimi["file"] == "sglang/srt/models/kimi_k25.py"
    assert sum(data["counts"].values()) == sum(len(r["cells"]) for r in data["rows"])


def test_cli_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], sglang_059: Path, tmp_path: Path
) -> None:
    refused(cli(capsys, "matrix", "--sglang", str(tmp_path / "nowhere")), "no such file")
    refused(cli(capsys, "matrix", "--sglang", str(tmp_path)), "not an SGLang source tree")
    refused(
        cli(capsys, "matrix", "--sglang", str(sglang_059), "--compare", str(tmp_path)),
        "not an SGLang source tree",
    )
    refused(
        cli(
            capsys,
            "matrix",
            "--sglang",
            str(sglang_059),
            "--compare",
            str(sglang_059),
            "--format",
            "html",
        ),
        "--format html",
    )
    refused(cli(capsys, "matrix", "--sglang", str(sglang_059), "--format", "xml"), "invalid choice")


def test_progress_bar_on_a_terminal_only(sglang_059: Path, tmp_path: Path) -> None:
    """The real program with its stderr on a pseudo-terminal: the bar is drawn there, and the
    table still goes to stdout alone."""
    main, other = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    with open(tmp_path / "out.txt", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "eaglebug", "matrix", "--sglang", str(sglang_059)],
            stdout=out,
            stderr=other,
            env=env,
        )
    os.close(other)
    drawn = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        drawn += chunk
    os.close(main)
    assert proc.wait() == 0
    assert b"sglang 0.5.9: classes" in drawn and b"178/178" in drawn
    assert (tmp_path / "out.txt").read_text().startswith("SGLang 0.5.9 at ")
