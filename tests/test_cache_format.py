"""The cache cannot execute (issue 24): one codec, driven by the reader's types, for every value
kept on disk; anything planted, damaged or of another shape is a miss, never code that runs."""

from __future__ import annotations

import enum
import json
import os
import pickle
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pytest

from eaglebug.checks.contract import codec
from eaglebug.checks.reach.conditions import And, Cond, Flag, Not, Opaque, Or, Pred
from eaglebug.checks.reach.resolve import ResolvedUse, consumers
from eaglebug.checks.source import cache
from eaglebug.checks.source.answers import Answers
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate

REPO = Path(__file__).resolve().parent.parent
MINI = REPO / "examples" / "sglang-mini"
KIMI = "KimiK25ForConditionalGeneration"


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Leaf:
    name: str
    weight: float = 1.0


@dataclass(frozen=True)
class Node:
    """A recursive shape, as conditions are: nodes hold nodes or leaves."""

    children: tuple[Node | Leaf, ...]
    colour: Colour | None = None
    tags: frozenset[str] = frozenset()
    by_pair: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    extra: object = None


class Span(NamedTuple):
    """A record of the other kind: what a warm run reads is kept as NamedTuples."""

    start: int
    label: str = ""


def test_values_come_back_as_they_went() -> None:
    value = Node(
        (Leaf("a"), Node((Leaf("b", 2.5),), Colour.RED, frozenset({"x", "y"}))),
        Colour.BLUE,
        by_pair={("k", 1): [1, 2]},
        extra=(1, "two", None, [3.0], {"k": frozenset({4})}, Opaque("c"), b"\x00\xff"),
    )
    text = codec.dumps(value, Node)
    assert codec.loads(text, Node) == value
    cond: Cond = Not(And((Flag("enable_x"), Or((Pred("is_eagle"), Opaque("x > 1"))))))
    assert codec.loads(codec.dumps(cond, Cond), Cond) == cond
    spans = (Span(1, "a"), [Span(2)], {"k": Span(3, "c")})
    kind = tuple[Span, list[Span], dict[str, Span]]
    back = codec.loads(codec.dumps(spans, kind), kind)
    assert back == spans and type(back[0]) is Span and type(back[2]["k"]) is Span
    assert codec.named(Span(4, "d")) == {"start": 4, "label": "d"}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('["a"]', Leaf),  # a field missing
        ('["a", 1.0, 2]', Leaf),  # one too many
        ("[1, 1.0]", Leaf),  # a name that is not text
        ('[[["Leaf", ["a", 1.0]]], "green", [], [], null]', Node),  # not a colour
        ('[[["Tree", ["a", 1.0]]], null, [], [], null]', Node),  # not a member of the union
        ('{"name": "a"}', Leaf),  # another spelling of the same thing
        ('[[], null, [], [], {"own": ["os:system", ["true"]]}]', Node),  # not eaglebug's
        ('[[], null, [], [], {"own": ["eaglebug.tui.app:EaglebugApp", []]}]', Node),  # a class
        ('[[], null, [], [], {"call": ["print", "x"]}]', Node),  # no such tag
        ("[" * 100_000 + "]" * 100_000, Node),  # nested past the parser
        ('["a", ' + "9" * 5000 + "]", Leaf),  # a number past int's text limit
        ("not json", Leaf),
        ('"00 ff"', bytes),  # hex is written without spaces
        ('"zz"', bytes),
        ("[1]", Span),  # a NamedTuple's fields are all written, defaults too
        ('[1, "a", 2]', Span),
        ('["1", "a"]', Span),
        ('{"start": 1, "label": "a"}', Span),
    ],
)
def test_anything_else_is_invalid(text: str, kind: object) -> None:
    with pytest.raises(codec.Invalid):
        codec.loads(text, kind)


def test_own_types_come_only_from_loaded_eaglebug_modules() -> None:
    """A dynamic field names the type to build; only eaglebug's own dataclasses and enums,
    from modules this process has already imported, can be built: nothing is imported. Run in
    a fresh interpreter, where no other test has imported the app."""
    code = (
        "import sys\n"
        "from eaglebug.checks.contract import codec\n"
        "from tests.test_cache_format import Node\n"
        "assert 'eaglebug.tui.app' not in sys.modules\n"
        'planted = \'[[], null, [], [], {"own": ["eaglebug.tui.app:EaglebugApp", []]}]\'\n'
        "try:\n"
        "    codec.loads(planted, Node)\n"
        "except codec.Invalid:\n"
        "    print('invalid', 'eaglebug.tui.app' in sys.modules)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert (run.returncode, run.stdout.strip()) == (0, "invalid False"), run.stderr


def test_contract_to_json_is_the_codec_spelling() -> None:
    from eaglebug.checks.contract.evidence import Site

    site = Site("sglang/srt/x.py", 3, "call", "target", ("a",), ("b:1",))
    assert site.to_json() == codec.named(site)
    assert codec.named(site)["guards"] == ["a"]


# -- the cache files, planted and damaged --------------------------------------------------------
@pytest.fixture
def mini(tmp_path: Path) -> Path:
    target = tmp_path / "mini"
    shutil.copytree(MINI / "python", target / "python")
    return target


def _audit(mini: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "eaglebug", "audit", "--sglang", str(mini)]
    argv += ["--model-class", KIMI, "--json", *extra]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)


class _Payload:
    """What a planted pickle does when it is loaded: write a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def _findings(proc: subprocess.CompletedProcess[str]) -> object:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    return json.loads(proc.stdout)["findings"]


def test_a_planted_pickle_runs_nothing(mini: Path, tmp_path: Path) -> None:
    expected = _findings(_audit(mini, "--no-cache"))
    tree = locate(str(mini))
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Payload(marker))
    folder = cache.cache_dir()
    folder.mkdir(parents=True)
    digest = cache.files_path(tree.root).name.split("-", 1)[1].split(".")[0]
    planted = [
        cache.files_path(tree.root),
        cache.answers_path(tree.root),
        cache.store_path(),
        folder / f"facts-{digest}.pickle",  # where the older eaglebug kept its pickles
        folder / f"answers-{digest}.pickle",
    ]
    for path in planted:
        path.write_bytes(payload)
    assert pickle.loads(payload) == 0 and marker.exists(), "the payload does run when unpickled"
    marker.unlink()
    for _run in ("cold", "warm"):
        assert _findings(_audit(mini)) == expected
    assert not marker.exists(), "a planted cache file ran code"
    assert cache.read(cache.answers_path(tree.root), tree.root) is not None, "not replaced"


def test_planted_json_is_a_miss(mini: Path, tmp_path: Path) -> None:
    """A well-formed cache file whose values are not what their readers expect (a type to
    build from another module, a function's name, nesting past the parser, a field of the
    wrong type): each value is a miss, computed again; nothing runs."""
    expected = _findings(_audit(mini))  # fills the cache
    tree = locate(str(mini))
    marker = tmp_path / "pwned"
    hostile = [
        json.dumps({"own": ["os:system", [f"touch {marker}"]]}),
        json.dumps(["__import__('os').system('touch " + str(marker) + "')"]),
        "[" * 50_000 + "]" * 50_000,
        json.dumps([[1, 2, 3], {"x": None}]),
    ]
    for path, root in (
        (cache.answers_path(tree.root), tree.root),
        (cache.files_path(tree.root), tree.root),
        (cache.store_path(), None),
    ):
        read = cache.read(path, root)
        assert read is not None and read.spans
        values = {k: hostile[i % len(hostile)].encode() for i, k in enumerate(read.spans)}
        cache.write(path, root, read.meta, values)
    assert _findings(_audit(mini)) == expected
    assert not marker.exists()


@pytest.mark.parametrize("field", [1, 3, 4])  # folder mtimes, file sizes, file mtimes
@pytest.mark.parametrize("cut", [2, 16])  # one byte (not a whole stamp), one whole stamp
@pytest.mark.parametrize("walked", [False, True])
def test_a_fingerprint_cut_short_is_a_miss(mini: Path, field: int, cut: int, walked: bool) -> None:
    """A well-formed answers file whose fingerprint's stamps do not line up with its names:
    a miss, whether the fingerprint is checked by stat calls (an unchanged tree) or compared
    with a walk's (`walked`: a folder changed), never an internal error."""
    expected = _findings(_audit(mini))
    tree = locate(str(mini))
    path = cache.answers_path(tree.root)
    read = cache.read(path, tree.root)
    assert read is not None
    meta = read.meta
    meta[0][field] = meta[0][field][:-cut]  # bytes are written as hex
    cache.write(path, tree.root, meta, {k: read.value(k) or b"" for k in read.spans})
    if walked:
        (mini / "python/sglang/srt/notes").mkdir()
    assert _findings(_audit(mini)) == expected


def test_a_truncated_or_appended_file_is_a_miss(mini: Path) -> None:
    expected = _findings(_audit(mini))
    tree = locate(str(mini))
    answers = cache.answers_path(tree.root)
    data = answers.read_bytes()
    assert cache.read(answers, tree.root) is not None
    answers.write_bytes(data[: len(data) // 2])
    assert cache.read(answers, tree.root) is None
    answers.write_bytes(data + b"{}")
    assert cache.read(answers, tree.root) is None
    assert _findings(_audit(mini)) == expected


def test_a_cache_that_is_a_fifo_is_not_waited_on(mini: Path) -> None:
    tree = locate(str(mini))
    folder = cache.cache_dir()
    folder.mkdir(parents=True)
    os.mkfifo(cache.answers_path(tree.root))
    assert cache.read(cache.answers_path(tree.root), tree.root) is None


def test_every_answer_of_a_real_audit_is_kept(sglang_059: Path) -> None:
    """The codec writes every kind of answer the audit computes (none kept for one run only),
    and what is read back is what was computed."""
    tree = locate(str(sglang_059))
    index = TreeIndex(tree)
    cold = consumers(index)
    from eaglebug.checks.interface.audit import audit

    audit(index, KIMI)
    index.save()
    computed = index.answers.keys("")
    warm = Answers(tree, use_cache=True)
    assert warm.quick and warm.keys("") == computed
    assert warm.get("consumers", [], list[ResolvedUse]) == cold


def test_every_answer_of_a_real_preflight_is_kept(sglang_0523: Path, tmp_path: Path) -> None:
    """The seed launch on 0.5.23 (interface, config, attention, memory, weights): every answer
    it computes is written by the codec and read back as computed."""
    from eaglebug.checks.launch.devices import GpuMemory
    from eaglebug.checks.orchestrator import preflight
    from eaglebug.checks.source.answers import MISSING
    from tests.configs import kimi_k25, kimi_k25_eagle3, write_model

    target = write_model(tmp_path / "target", kimi_k25())
    draft = write_model(tmp_path / "draft", kimi_k25_eagle3())
    words = ["python", "-m", "sglang.launch_server", "--model-path", str(target)]
    words += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft)]
    words += ["--tp", "8", "--trust-remote-code"]
    tree = locate(str(sglang_0523))
    index = TreeIndex(tree)
    cold = preflight(index, words, {}, GpuMemory(141 << 30, "--gpu-mem-gib"))
    index.save()
    computed = index.answers.keys("")
    assert len(computed) > 20
    warm = Answers(tree, use_cache=True)
    assert warm.quick and warm.keys("") == computed
    # Read back through the same checks: the same findings.
    again = TreeIndex(tree, answers=warm)
    assert [
        f.to_json()
        for f in preflight(again, words, {}, GpuMemory(141 << 30, "--gpu-mem-gib")).findings
    ] == [f.to_json() for f in cold.findings]
    assert warm.get("no such answer", [], object) is MISSING


# -- the facts store: by content, shared by every tree ------------------------------------------
def test_the_same_files_elsewhere_are_warm_and_a_changed_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cold_parsing: None
) -> None:
    """A copy of the tree in another folder (or a checkout of another branch) finds what was
    learnt from the files it shares, by their bytes; a file that differs is read afresh."""
    from eaglebug.checks.interface.audit import audit
    from eaglebug.checks.source import facts, files

    first, second = tmp_path / "a", tmp_path / "b"
    for root in (first, second):
        shutil.copytree(MINI / "python", root / "python")
    model = "sglang/srt/models/kimi_k25.py"
    kimi = second / "python" / model
    kimi.write_text(kimi.read_text() + "\n# another branch\n")
    audit(TreeIndex(locate(str(first))), KIMI)
    learnt = {rel: e for rel, e in TreeIndex(locate(str(first))).entries.items() if e.parsed}
    assert model in learnt and "sglang/launch_server.py" in learnt and len(learnt) > 5

    def no_parse(rel: str, data: bytes) -> object:
        raise AssertionError(f"{rel} parsed again")

    monkeypatch.setattr(facts, "parse", no_parse)
    monkeypatch.setattr(files, "parse", no_parse)
    index = TreeIndex(locate(str(second)))
    for rel, entry in learnt.items():
        if rel == model:
            continue
        # The runtime's files are read and hashed by the walk; the others when reached.
        found = index.files.ensure_parsed(rel)
        assert found.parsed and found.digest == entry.digest, rel
        assert found.facts == entry.facts, rel
    changed = index.entries[model]
    assert not changed.parsed and changed.digest != learnt[model].digest
    monkeypatch.undo()
    # And the second tree's audit is its own: the answers are per tree.
    result = audit(TreeIndex(locate(str(second))), KIMI)
    assert {f.attribute for f in result.findings if f.severity == "error"} == {
        "get_embed_and_head",
        "set_eagle3_layers_to_capture",
    }


def test_a_second_release_parses_only_what_changed(
    sglang_0522: Path, sglang_0523: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.5.23 after 0.5.22: the consumer scan's files that the releases share are not parsed
    again for their facts (what changed is)."""
    from eaglebug.checks.source import facts, files

    first = TreeIndex(locate(str(sglang_0522)))
    consumers(first)
    first.save()
    scanned: list[str] = []
    learn = facts.learn

    def counting(entry: facts.FileEntry, rel: str, *args: object, **kw: object) -> None:
        scanned.append(rel)
        learn(entry, rel, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(facts, "learn", counting)
    monkeypatch.setattr(files, "learn", counting)
    index = TreeIndex(locate(str(sglang_0523)))
    uses = consumers(index)
    assert uses
    candidates = index.files.wanted_by("consumers")
    shared = {
        rel
        for rel in candidates
        if (sglang_0522 / rel).is_file()
        and (sglang_0522 / rel).read_bytes() == (sglang_0523 / rel).read_bytes()
    }
    assert shared and len(shared) < len(candidates)  # (0.5.23 changed ~40% of the runtime)
    assert not shared & set(scanned), "a file both releases share was scanned again"
    assert set(candidates) - shared <= set(scanned), "a changed file was not scanned"
    cold = consumers(TreeIndex(locate(str(sglang_0523)), use_cache=False))
    assert uses == cold


def test_a_record_whose_facts_do_not_decode_is_parsed_again(mini: Path) -> None:
    """A store record of the right shape whose facts are not facts (planted, or written by
    a bug): the file is parsed again, and the audit is as it would be without the cache."""
    expected = _findings(_audit(mini, "--no-cache"))
    _findings(_audit(mini))
    store = cache.read(cache.store_path(), None)
    assert store is not None
    values = {}
    for key in store.spans:
        record = json.loads(store.value(key) or b"null")
        record[9] = {"own": ["os:system", ["true"]]}  # the facts (see facts.Record)
        values[key] = json.dumps(record).encode()
    cache.write(cache.store_path(), None, store.meta, values)
    answers = cache.answers_path(locate(str(mini)).root)
    answers.unlink()  # so the tree-wide answers are computed from the files' facts
    assert _findings(_audit(mini)) == expected


def test_a_record_whose_uses_do_not_decode_is_scanned_again(mini: Path) -> None:
    """The same for what an extractor kept (the consumer scan's uses): not a use dropped."""
    expected = _findings(_audit(mini, "--no-cache"))
    _findings(_audit(mini))
    store = cache.read(cache.store_path(), None)
    assert store is not None
    values, spoilt = {}, 0
    for key in store.spans:
        record = json.loads(store.value(key) or b"null")
        kept = record[10]  # the kept facts (see facts.Record)
        if "consumers" in kept:
            kept["consumers"] = [["not", "uses"]]
            spoilt += 1
        values[key] = json.dumps(record).encode()
    assert spoilt
    cache.write(cache.store_path(), None, store.meta, values)
    cache.answers_path(locate(str(mini)).root).unlink()
    assert _findings(_audit(mini)) == expected


def test_field_defaults_are_kept_with_each_files_facts(
    sglang_0522: Path, sglang_0523: Path, monkeypatch: pytest.MonkeyPatch, cold_parsing: None
) -> None:
    """The server-args fields' defaults are learnt in the flags' pass over the same ~90 files
    and kept with each file's facts (by its bytes): a new release re-reads only the files that
    changed, and no file is parsed a second time for them."""
    from eaglebug.checks.args.resolution import field_defaults
    from eaglebug.checks.launch.flags import flag_files
    from eaglebug.checks.source import files

    first = TreeIndex(locate(str(sglang_0522)))
    old = field_defaults(first)
    first.save()
    index = TreeIndex(locate(str(sglang_0523)))
    shared = {
        rel
        for rel in flag_files(index)
        if rel in first.entries
        and (sglang_0522 / rel).read_bytes() == (sglang_0523 / rel).read_bytes()
    }
    assert len(shared) > 20, "0.5.22 and 0.5.23 share most of their server-args files"
    parsed: list[str] = []
    parse = files.parse

    def counting(rel: str, data: bytes) -> object:
        parsed.append(rel)
        return parse(rel, data)

    monkeypatch.setattr(files, "parse", counting)
    new = field_defaults(index)
    assert shared.isdisjoint(parsed), sorted(shared & set(parsed))[:5]
    assert len(parsed) == len(set(parsed)), "a file parsed twice"
    monkeypatch.undo()
    fresh = TreeIndex(locate(str(sglang_0523)), use_cache=False)
    assert new == field_defaults(fresh), "the same defaults as a run with no cache"
    assert new["tp_size"] == old["tp_size"] == 1
