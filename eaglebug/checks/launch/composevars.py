"""Docker Compose's variables: interpolation (`${VAR:-default}`) and its `.env` files.

Read as the Compose specification gives them (docs.docker.com/reference/compose-file/
interpolation, and /compose/how-tos/environment-variables/variable-interpolation for the
`.env` syntax): `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`,
`${VAR?error}`, `${VAR:+alt}`, `${VAR+alt}`, nested, `$$` a literal dollar; an unset variable
without a default is empty, with a warning. In an env file: `NAME=VALUE` lines (an `export` in
front allowed), `#` comments (inline only after a space, in an unquoted value), single quotes
literal, double quotes with `\\n`, `\\t`, `\\r`, `\\\\` and `\\"` escapes and interpolation,
unquoted values interpolated and trimmed, `NAME` alone the shell's value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.inputs import read_named
from eaglebug.checks.contract.limits import COMPOSE_VALUES

_VARIABLE = re.compile(r"\$(?:(\$)|\{|([_a-zA-Z][_a-zA-Z0-9]*))")
_NAME = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_MODIFIER = re.compile(r":?[-?+]")
# `\$` is kept a dollar through the interpolation that follows: `$$`
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "$": "$$"}


class Interpolation:
    """Interpolation in one file (`where`, for its messages) from `variables`; what it warns
    of goes to `warnings`. It reads at most `COMPOSE_VALUES` values (`contract/limits.py`)."""

    def __init__(self, where: str, variables: Mapping[str, str], warnings: list[str]) -> None:
        self.where, self.variables, self.warnings = where, variables, warnings
        self.budget = COMPOSE_VALUES

    def value(self, value: Any) -> Any:
        """`value` (a YAML value) with every string in it interpolated."""
        self.budget -= 1
        if self.budget < 0:
            raise InputError(
                f"{self.where}: over {COMPOSE_VALUES:,} values in its services (YAML aliases?)",
                "simplify the compose file",
            )
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def text(self, text: str) -> str:
        out: list[str] = []
        at = 0
        while (found := _VARIABLE.search(text, at)) is not None:
            out.append(text[at : found.start()])
            if found.group(1):  # `$$`: a dollar
                out.append("$")
                at = found.end()
            elif found.group(2):  # `$NAME`
                out.append(self._lookup(found.group(2), "", ""))
                at = found.end()
            else:  # `${...}`, nested braces counted
                end = _closing(text, found.end())
                if end is None:
                    raise InputError(
                        f"{self.where}: `{text[found.start() :][:40]}` has no closing brace",
                        "fix the compose file",
                    )
                out.append(self._braced(text[found.end() : end]))
                at = end + 1
        out.append(text[at:])
        return "".join(out)

    def _braced(self, inner: str) -> str:
        name = _NAME.match(inner)
        modifier = _MODIFIER.match(inner, name.end()) if name is not None else None
        if name is None or (modifier is None and name.end() != len(inner)):
            raise InputError(
                f"{self.where}: `${{{inner}}}` is not an interpolation compose reads",
                "fix the compose file",
            )
        if modifier is None:
            return self._lookup(name.group(), "", "")
        return self._lookup(name.group(), modifier.group(), inner[modifier.end() :])

    def _lookup(self, name: str, modifier: str, word: str) -> str:
        value = self.variables.get(name)
        empty = value is None or (modifier.startswith(":") and not value)
        kind = modifier.lstrip(":")
        if kind == "-":
            return self.text(word) if empty else str(value)
        if kind == "?":
            if empty:
                raise InputError(
                    f"{self.where}: {name} is required: {self.text(word) or 'not set'}",
                    f"set {name} (in the shell or the project's .env)",
                )
            return str(value)
        if kind == "+":
            return "" if empty else self.text(word)
        if value is None:
            self.warnings.append(
                f"{self.where}: {name} is not set: read as empty, as docker compose does"
            )
            return ""
        return value


def _closing(text: str, at: int) -> int | None:
    depth = 1
    for i in range(at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def read_dotenv(path: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """An env file's variables, as Compose reads a `.env` or a service's `env_file`; its
    values interpolated from `environ` and the lines before."""
    data = read_named(path, "an env file")
    found: dict[str, str] = {}
    warnings: list[str] = []
    lines = data.decode("utf-8", "replace").splitlines()
    i = 0
    while i < len(lines):
        line, i = lines[i].strip(), i + 1
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, eq, raw = line.partition("=")
        name = name.strip()
        if not _NAME.fullmatch(name):
            raise InputError(f"{path}: `{line[:40]}` is not NAME=VALUE", "fix the env file")
        if not eq:
            if name in environ:
                found[name] = environ[name]
            continue
        raw = raw.lstrip()
        quote = raw[:1] if raw[:1] in ("'", '"') else ""
        while quote and _unclosed(raw, quote) and i < len(lines):  # a value over lines
            raw, i = f"{raw}\n{lines[i]}", i + 1
        interpolate = Interpolation(str(path), {**environ, **found}, warnings)
        if quote == "'":
            found[name] = _quoted(raw, "'", escapes=False)
        elif quote == '"':
            found[name] = interpolate.text(_quoted(raw, '"', escapes=True))
        else:
            found[name] = interpolate.text(re.split(r"\s#", raw, maxsplit=1)[0].strip())
    return found


def _unclosed(raw: str, quote: str) -> bool:
    i = 1
    while i < len(raw):
        if raw[i] == "\\":
            i += 2
            continue
        if raw[i] == quote:
            return False
        i += 1
    return True


def _quoted(raw: str, quote: str, escapes: bool) -> str:
    """The text between `raw`'s quotes (what follows the closing one is a comment)."""
    out: list[str] = []
    i = 1
    while i < len(raw) and raw[i] != quote:
        if raw[i] == "\\" and i + 1 < len(raw):
            following = raw[i + 1]
            if following == quote:
                out.append(quote)
            elif escapes and following in _ESCAPES:
                out.append(_ESCAPES[following])
            else:
                out.append(raw[i : i + 2])
            i += 2
            continue
        out.append(raw[i])
        i += 1
    return "".join(out)
