"""README.md and docs/ say what the code does: every check id the engine can report is in the
checks reference, every key binding of the TUI in the TUI reference, every example command
parses with the real parsers, every repository path they name exists, the README's two commands
are the ones CI runs, and no machine's own path leaks into them.

Each list is read from the code (the engine's source, the app's classes, the parsers), never
typed here, so a check, a key or a flag added without its documentation fails the suite.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import pkgutil
import re
import shlex
from pathlib import Path

import pytest
from textual.binding import Binding  # noqa: TID251 (reads the Textual app's bindings)

import eaglebug.tui
from eaglebug.cli import options as cli_options
from eaglebug.cli import parser as cli
from eaglebug.tui import entry

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
# The documentation a newcomer is promised, one file per concern (issue 20, point 5).
REFERENCE = (
    "architecture",
    "checks",
    "json",
    "memory",
    "logs",
    "tui",
    "development",
    "upstream",
)
ID = re.compile(r"^(interface|config|runtime|log)\.[a-z_]+$")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# -- check ids -------------------------------------------------------------------------------
def _str_constants(tree: ast.Module) -> dict[str, str]:
    """A module's top-level `NAME = "text"` constants."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    found[target.id] = node.value.value
    return found


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def engine_ids() -> set[str]:
    """Every finding id the engine can report, read from its source: an `id=` given to a call
    (a literal or a module constant), and `log.<category>` for every log failure category
    (the `CategoryRule`s and every `Result` made with a literal category)."""
    ids: set[str] = set()
    log_family = False
    for path in sorted((ROOT / "eaglebug" / "checks").rglob("*.py")):
        tree = ast.parse(_text(path), filename=str(path))
        constants = _str_constants(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                if kw.arg != "id":
                    continue
                value = kw.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    text: str | None = value.value
                elif isinstance(value, ast.Name):
                    text = constants.get(value.id)
                elif isinstance(value, ast.JoinedStr):
                    first = value.values[0] if value.values else None
                    log_family |= isinstance(first, ast.Constant) and first.value == "log."
                    text = None
                else:
                    text = None
                if text is not None and ID.match(text):
                    ids.add(text)
            if _callee(node) in ("CategoryRule", "Result") and node.args:
                first_arg = node.args[0]
                if isinstance(first_arg, ast.Constant) and isinstance(first_arg.value, str):
                    ids.add(f"log.{first_arg.value}")
    assert log_family, "no f'log.{category}' finding id found: has the log reader moved?"
    return ids


def test_the_engine_ids_are_read() -> None:
    ids = engine_ids()
    families = {i.split(".")[0] for i in ids}
    assert families == {"interface", "config", "runtime", "log"}
    assert {"interface.missing", "config.context_length", "log.missing_interface_method"} <= ids


def test_every_check_id_is_in_the_checks_reference() -> None:
    text = _text(ROOT / "docs" / "checks.md")
    missing = sorted(i for i in engine_ids() if f"`{i}`" not in text)
    assert not missing, f"docs/checks.md does not describe: {', '.join(missing)}"


def test_the_checks_reference_names_no_id_the_engine_lacks() -> None:
    text = _text(ROOT / "docs" / "checks.md")
    headed = set(re.findall(r"^#+ `([a-z]+\.[a-z_]+)`", text, flags=re.M))
    assert headed, "docs/checks.md has no `### `id`` headings"
    stale = sorted(headed - engine_ids())
    assert not stale, f"docs/checks.md describes ids the engine never reports: {stale}"


# -- key bindings ----------------------------------------------------------------------------
def tui_bindings() -> list[tuple[str, Binding]]:
    """Every `Binding` a class of the app declares itself (not those Textual's classes bring)."""
    found: list[tuple[str, Binding]] = []
    package = eaglebug.tui
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            for item in cls.__dict__.get("BINDINGS", ()):
                if isinstance(item, Binding):
                    found.append((f"{cls.__module__}.{cls.__qualname__}", item))
    return found


def test_every_binding_id_is_in_the_tui_reference() -> None:
    bindings = tui_bindings()
    assert len(bindings) >= 20
    text = _text(ROOT / "docs" / "tui.md")
    missing = sorted(f"{b.id} ({where})" for where, b in bindings if f"`{b.id}`" not in text)
    assert not missing, f"docs/tui.md does not name the bindings: {', '.join(missing)}"


# -- example commands ------------------------------------------------------------------------
def _blocks(text: str) -> list[tuple[str, str]]:
    """The fenced blocks of a Markdown text: (language, body)."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)


def example_commands(text: str) -> list[str]:
    """`eaglebug ...` as the docs show it: the lines of `sh` blocks (continuations joined,
    `&&`, `|` and `>` ending a command) and the `$ eaglebug ...` lines of output blocks."""
    return [c for language, body in _blocks(text) for c in _commands_in(language, body)]


def _commands_in(language: str, body: str) -> list[str]:
    commands: list[str] = []
    lines = body.replace("\\\n", " ").splitlines()
    if language in ("sh", "bash", "console"):
        candidates = lines
    else:
        candidates = [line[2:] for line in lines if line.startswith("$ ")]
    for line in candidates:
        for part in re.split(r"&&|;", line.removeprefix("$ ")):
            words = shlex.split(part, comments=True)
            for stop in ("|", ">", "2>", "2>&1"):
                if stop in words:
                    words = words[: words.index(stop)]
            if words and words[0] == "eaglebug":
                commands.append(shlex.join(words))
    return commands


def parse(words: list[str]) -> None:
    """Parse `eaglebug WORDS` as `eaglebug.tui.entry.main` dispatches it, without running it:
    the headless commands through the CLI's parser, the TUI modes through the entry's."""
    split = words.index("--") if "--" in words else len(words)
    options = words[:split]
    first = options[0] if options else None
    if first == "launch" and "--tui" in options:
        entry._parser().parse_args([w for w in options[1:] if w != "--tui"])
    elif first == "--version" or (
        first is not None and first not in entry.TUI_MODES and not first.startswith("-")
    ):
        cli_options.build_parser().parse_args(words)
    else:
        entry._parser().parse_args(options)


ALL_COMMANDS = [(page.name, c) for page in PAGES for c in example_commands(_text(page))]


def test_the_docs_show_commands() -> None:
    in_readme = [c for page, c in ALL_COMMANDS if page == "README.md"]
    assert len(in_readme) >= 15
    assert "eaglebug demo" in in_readme


@pytest.mark.parametrize(("page", "command"), ALL_COMMANDS)
def test_every_example_command_parses(
    page: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    words = shlex.split(command)[1:]
    if words == ["--version"]:
        return  # argparse's version action exits 0 by design
    try:
        parse(words)
    except SystemExit as exc:
        err = capsys.readouterr().err
        pytest.fail(f"{page}: `{command}` does not parse (exit {exc.code}): {err}")


def test_a_command_that_does_not_parse_is_caught() -> None:
    with pytest.raises(SystemExit):
        parse(["audit", "--sglang", "x", "--no-such-flag"])
    with pytest.raises(SystemExit):
        parse(["demo", "--scenario", "nonsense"])


# -- example outputs -------------------------------------------------------------------------
# What the README's output blocks can be checked against here: commands on the repository's own
# material (the demo's tree, the log fixtures, simulated GPUs). The demo's narration holds
# pids, times and commit ids of its run, and the real releases' outputs other tests cover.
RUNNABLE = re.compile(r"examples/sglang-mini|tests/fixtures/|--simulate-gpus")


def shown_outputs(text: str) -> list[tuple[str, list[str]]]:
    """(command, the lines shown as its output) for each output block of a runnable command:
    a `text` block whose first line is `$ eaglebug ...`, or one right after an `sh` block of
    one command. A line with `...` was trimmed and is not compared."""
    found: list[tuple[str, list[str]]] = []
    blocks = _blocks(text)
    for i, (language, body) in enumerate(blocks):
        if language != "text":
            continue
        lines = body.splitlines()
        if lines and lines[0].startswith("$ eaglebug "):
            command, shown = lines[0][2:], lines[1:]
        elif i > 0 and len(before := _commands_in(*blocks[i - 1])) == 1:
            command, shown = before[0], lines
        else:
            continue
        if RUNNABLE.search(command) and "demo" not in command:
            found.append((command, [line for line in shown if line and "..." not in line]))
    return found


README_OUTPUTS = shown_outputs(_text(README))


def test_the_readme_shows_real_outputs() -> None:
    assert len(README_OUTPUTS) >= 4


@pytest.mark.parametrize(("command", "shown"), README_OUTPUTS, ids=[c for c, _ in README_OUTPUTS])
def test_every_output_line_the_readme_shows_is_printed(
    command: str,
    shown: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    words = shlex.split(command)[1:]
    capsys.readouterr()
    with contextlib.suppress(SystemExit):  # a usage error: its lines are on stderr
        cli.main(words)
    captured = capsys.readouterr()
    printed = {line.rstrip() for line in (captured.out + captured.err).splitlines()}
    missing = [line for line in shown if line.rstrip() not in printed]
    assert not missing, f"`{command}` no longer prints: {missing}"


# -- the two commands ------------------------------------------------------------------------
def test_the_two_commands_are_what_ci_runs() -> None:
    ci = _text(ROOT / ".ci" / "run").splitlines()
    install = next(line for line in ci if line.startswith("pip install "))
    tests = next(line for line in ci if "pytest" in line and not line.startswith("#"))
    blocks = [body for _, body in _blocks(_text(README))]
    two = next(body for body in blocks if "eaglebug demo" in body and "pytest" in body)
    assert two.splitlines() == [f"{install} && eaglebug demo", tests]


# -- links and paths -------------------------------------------------------------------------
def test_the_reference_files_exist_and_the_readme_links_each() -> None:
    readme = _text(README)
    for name in REFERENCE:
        assert (ROOT / "docs" / f"{name}.md").is_file(), f"docs/{name}.md is missing"
        assert f"(docs/{name}.md)" in readme, f"README.md does not link docs/{name}.md"


def test_the_readme_is_an_introduction() -> None:
    assert len(_text(README).splitlines()) <= 320


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", _text(page)):
        if re.match(r"[a-z]+://", target):
            continue
        assert (page.parent / target).exists(), f"{page.name}: link to {target} is broken"


REPO_PATH = re.compile(
    r"(?<![\w./~$-])((?:checks|eaglebug|tui|tests|scripts|bench|docs|examples|screenshots|\.ci)"
    r"/[\w./-]*[\w/])"
)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_repository_path_named_exists(page: Path) -> None:
    missing = []
    for path in set(REPO_PATH.findall(_text(page))):
        if not (ROOT / path).exists():
            missing.append(path)
    assert not missing, f"{page.name} names paths that do not exist: {sorted(missing)}"


MACHINE_PATH = re.compile(r"/work/|/root/|/home/|/Users/|[A-Z]:\\\\")


@pytest.mark.parametrize("page", [*PAGES, *sorted((ROOT / "docs").glob("*.yml"))], ids=str)
def test_no_machine_path(page: Path) -> None:
    hits = [line for line in _text(page).splitlines() if MACHINE_PATH.search(line)]
    assert not hits, f"{page.name} shows a machine's own path: {hits[:3]}"


def test_the_path_checks_can_fail() -> None:
    assert REPO_PATH.findall("see `checks/pyeval/machine.py:12` and ~/.cache/eaglebug/demo/") == [
        "checks/pyeval/machine.py"
    ]
    assert MACHINE_PATH.search("error: ... at /work/main/examples/sglang-mini")
    assert example_commands("```sh\npip x && eaglebug demo --fast  # c\n```\n") == [
        "eaglebug demo --fast"
    ]
