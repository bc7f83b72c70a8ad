"""A launch command written as shell text: one pasted line, or a `bash -c "..."` string.

The words come from `shlex` (POSIX quoting). What shlex does not say is which of them were
quoted: `--served-model-name '|'` is a value, an unquoted `|` a pipe. So the text is split a
second time with every quoted or escaped operator character masked (`_masked`). The two
splits give the same words, character for character, and the operators, the redirections
and the glued lists (`m;echo`) are read from the masked one.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.launch.wrappers import ASSIGNMENT

_OPERATOR_CHARACTERS = frozenset(";&|()<>")
_MASK = "_"  # a word character: within quotes, where it stands, splitting is the same
# `>log`, `2>&1`, `&>log`, `<in`, `>>log`: the target is the rest of the word or the next one
_REDIRECT = re.compile(r"^(\d*|&)(>>?|<)(&?\d+|&?-|.+)?$")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh"})


def split_words(words: Sequence[str]) -> list[str]:
    """One string (a shell command line) or argv words; shell syntax only in the former:
    quoting, `\\` continuations, and what a script's launch line carries that does not change
    the command (an `exec` in front, its output redirections, `> server.log 2>&1`, a trailing
    `&`) left out; a pipe or a list (`|`, `&&`, `;`) is a script, not one command."""
    if len(words) == 1 and (" " in words[0] or "\n" in words[0]):
        text = joined_lines(words[0])
        return _command_words(
            text,
            "the launch command does not parse",
            "the launch command is a shell pipeline or list ({!r} in it), not one command",
            "pass the launch command alone (what runs before or after it is not the launch)",
        )
    return list(words)


def shell_string(command: Sequence[str]) -> list[str] | None:
    """The words of a `bash -c "python3 -m sglang.launch_server ..."` command (how launches in
    a container are often written: `docker run ... IMAGE bash -c "..."`); None for any other
    command. Its output redirections and a trailing `&` are left out, as on a command line
    (`split_words`); a list or a pipe (`cd x && python3 ...`) is a script: an input error."""
    if not runs_a_string(command):
        return None
    return _command_words(
        joined_lines(command[2]),  # a script's `\` line continuations, as a pasted line's
        f"the {command[0]} -c string does not parse",
        f"the {command[0]} -c string is a shell script ({{!r}} in it), not one launch command",
        "pass the launch command itself (its preparation can run before eaglebug)",
    )


def joined_lines(text: str) -> str:
    """`text` with each `\\`-newline the shell removes removed: outside quotes and inside
    double quotes, where bash joins the lines (`/m/ll\\<newline>ama` is `/m/llama`, one
    word); inside single quotes both stay, as written. shlex keeps the newline instead."""
    if "\\\n" not in text:
        return text
    out: list[str] = []
    quote = ""  # the open quote, if any
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and quote != "'":
            if text[i + 1 : i + 2] != "\n":
                out.append(text[i : i + 2])  # the escape and what it escapes, as written
            i += 2
            continue
        if char in "'\"" and quote in ("", char):
            quote = "" if quote == char else char
        out.append(char)
        i += 1
    return "".join(out)


def runs_a_string(command: Sequence[str]) -> bool:
    """Is `command` a shell given its script as a string (`bash -c "..."`), whatever the
    string holds? (`shell_string` reads the string.)"""
    if len(command) < 3 or os.path.basename(command[0]) not in _SHELLS:
        return False
    flag = command[1]  # `-c`, `-lc`, `-ec`: the string is the next word
    return flag.startswith("-") and flag.endswith("c") and "-" not in flag[1:]


def _command_words(text: str, unparsed: str, scripted: str, hint: str) -> list[str]:
    """The words of one command in shell `text`, its redirections and a trailing `&` left out;
    `unparsed` or `scripted` (its `{!r}` the operator found) with `hint` is the error."""
    try:
        words, masks = shlex.split(text), shlex.split(_masked(text))
    except ValueError as exc:
        raise InputError(f"{unparsed}: {exc}", "check its quoting") from None
    if masks[-1:] == ["&"]:  # started in the background: the command is the same
        words, masks = words[:-1], masks[:-1]
    elif masks and re.search(r"[^&|<>]&$", masks[-1]):  # `--tp 2&`: the same, glued
        words, masks = [*words[:-1], words[-1][:-1]], [*masks[:-1], masks[-1][:-1]]
    first = next((i for i, w in enumerate(masks) if not ASSIGNMENT.match(w)), len(masks))
    if masks[first : first + 1] == ["exec"]:  # a script's last line: the shell replaced by it
        words, masks = words[:first] + words[first + 1 :], masks[:first] + masks[first + 1 :]
    kept: list[str] = []
    i = 0
    while i < len(words):
        word, mask = words[i], masks[i]
        at = next((j for j, c in enumerate(mask) if c in _OPERATOR_CHARACTERS), None)
        if at is None:
            kept.append(word)
            i += 1
            continue
        whole = _REDIRECT.match(mask)
        if whole is not None:
            i += 1 if whole.group(3) else 2
            continue
        tail = _REDIRECT.match(mask[at:]) if mask[at] in "<>" else None
        if tail is None:
            operator = re.match(r"[;&|()<>]+", mask[at:])
            raise InputError(scripted.format(operator.group() if operator else mask[at]), hint)
        kept.append(word[:at])  # `x>log`: the word before it is the command's
        i += 1 if tail.group(3) else 2
    return kept


def _masked(text: str) -> str:
    """`text` with each quoted or escaped operator character (`;&|()<>`) as `_`, the rest as it
    is: shlex splits it into the same words, of the same lengths, as `text`, and an operator
    left in one of them is one the shell reads as an operator."""
    out: list[str] = []
    quote = ""  # the open quote, if any
    escaped = False
    for char in text:
        if escaped:
            escaped = False
            out.append(_MASK if char in _OPERATOR_CHARACTERS else char)
            continue
        if char == "\\" and quote != "'":
            escaped = True
        elif quote:
            if char == quote:
                quote = ""
            elif char in _OPERATOR_CHARACTERS:
                char = _MASK
        elif char in "'\"":
            quote = char
        out.append(char)
    return "".join(out)


# A shell variable's value in a word: `$NAME`, `${NAME}`, `${NAME:-word}`, `${NAME-word}` (the
# word where it is unset: empty too, with the colon), a word without quotes, `$` or braces;
# anything else (`$1`, `${#NAME}`, a default that quotes or refers) stays as written.
REFERENCE = re.compile(
    r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)-([^}\"'$`{\\]*))?\}|([A-Za-z_][A-Za-z0-9_]*))"
)
# Longer than one argument can be (Linux's MAX_ARG_STRLEN, 128 KiB): no `bash -c` gets it.
SCRIPT_BYTES = 128 << 10
_IFS = re.compile(r"[ \t\n]+")  # bash's default field separators
_ASSIGNING = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")  # a word that sets a variable


def referenced(word: str) -> set[str]:
    """The variables a word refers to."""
    return {m[1] or m[4] for m in REFERENCE.finditer(word)}


def expanded_script(
    text: str, shell: Mapping[str, str], later: frozenset[str] = frozenset()
) -> tuple[str, frozenset[str]]:
    """A `bash -c` script with its variables expanded as the shell does where `shell` has
    them (`later`: set only when the launch runs, default or not): outside single quotes,
    command substitutions (`$(...)`, backquotes, left as written) and escapes; each value
    taken as itself (quoted for the split, never expanded again), split into words as bash
    splits it where unquoted, but in an assignment (`NAME=$V`); and the names it has not,
    which stay as written (set when the script runs, not known here)."""
    if len(text) > SCRIPT_BYTES:
        raise InputError(
            f"the bash -c script is over {SCRIPT_BYTES >> 10} KiB, longer than one argument can be",
            "pass the launch command itself",
        )
    out: list[str] = []
    size = 0
    unknown: set[str] = set()
    quote = ""  # the open quote, if any
    word = 0  # where the word being read began, in `text`
    i = 0
    while i < len(text):
        char = text[i]
        if quote != "'" and text.startswith(("$(", "`", "${"), i) and not REFERENCE.match(text, i):
            end = _substitution_end(text, i)  # a substitution, or a `${...}` not read: as is
            out.append(text[i:end])
            i = end
            continue
        found = REFERENCE.match(text, i) if char == "$" and quote != "'" else None
        if found is not None:
            name = found[1] or found[4]
            value = None if name in later else shell.get(name)
            if name not in later and (value is None or (found[2] and not value)):
                value = found[3]  # the default, where the reference has one
            if value is None:
                unknown.add(name)
                piece = found[0]
            elif quote or _ASSIGNING.match(text, word):  # one word
                piece = f'"{shlex.quote(value)}"' if quote else shlex.quote(value)
            else:
                piece = " ".join(shlex.quote(part) for part in _IFS.split(value) if part)
            size += len(piece)
            if size > SCRIPT_BYTES:
                raise InputError(
                    f"the bash -c script expands past {SCRIPT_BYTES >> 10} KiB, longer than "
                    "one argument can be",
                    "check the variables it refers to",
                )
            out.append(piece)
            i = found.end()
            continue
        if char == "\\" and quote != "'":
            out.append(text[i : i + 2])
            i += 2
            continue
        if char in "'\"" and quote in ("", char):
            quote = "" if quote else char
        elif not quote and char in " \t\n":
            word = i + 1
        out.append(char)
        i += 1
    return "".join(out), frozenset(unknown)


def _substitution_end(text: str, at: int) -> int:
    """Where a substitution that starts at `at` ends: a backquote's next one, or the bracket
    that closes `$(` or `${` (nested ones counted; an unclosed one runs to the end)."""
    if text[at] == "`":
        close = text.find("`", at + 1)
        return len(text) if close == -1 else close + 1
    opening = text[at + 1]
    closing = ")" if opening == "(" else "}"
    depth = 0
    for j in range(at + 1, len(text)):
        depth += 1 if text[j] == opening else -1 if text[j] == closing else 0
        if depth == 0:
            return j + 1
    return len(text)
