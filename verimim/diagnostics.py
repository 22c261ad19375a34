"""Diagnostics: source locations, the one exception hierarchy, and their JSON form.

Every user-facing error carries a stable code from spec/CLI.md and a file:line:col; the CLI turns
a `VerimimError` into text or JSON and an exit code, never a traceback.
"""
from __future__ import annotations

import re
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "note"]

# Exit codes of spec/CLI.md.
EXIT_OK = 0
EXIT_USER = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it; outside CLI.md's table

# The note naming the launch a kernel's fault happened in (run's and check's alike).
LAUNCHED_HERE = "launched here"

# Codes whose presence means verimim itself is at fault (exit 3).
INTERNAL_CODES = frozenset({"E-SPEC", "E-DIFF", "E-INTERNAL"})


@dataclass(frozen=True)
class Loc:
    """A 1-based source position; `line`/`col` of 0 mean unknown."""

    file: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if not self.line:
            return self.file
        return f"{self.file}:{self.line}:{self.col}"


NO_LOC = Loc("<unknown>")

# Messages quote identifiers and terms in backticks; a generated program can make one a megabyte
# long. Quotes beyond _QUOTE_MAX characters keep their ends and say how long they were; a message
# beyond _MESSAGE_MAX is cut likewise.
_QUOTE_MAX = 160
_MESSAGE_MAX = 2000
_QUOTED = re.compile(r"`([^`]*)`")


def _shorten(text: str, limit: int) -> str:
    head, tail = limit * 2 // 3, limit // 4
    return f"{text[:head]}…{text[-tail:]}"


def elide(message: str) -> str:
    """The message with every over-long quoted text elided to its ends and its length."""
    def quote(m: re.Match[str]) -> str:
        body = m.group(1)
        if len(body) <= _QUOTE_MAX:
            return m.group(0)
        return f"`{_shorten(body, _QUOTE_MAX)}` ({len(body)} characters)"

    out = _QUOTED.sub(quote, message)
    if len(out) > _MESSAGE_MAX:
        out = f"{_shorten(out, _MESSAGE_MAX)} ({len(out)} characters)"
    return out


@dataclass(frozen=True)
class Related:
    message: str
    loc: Loc | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "message": elide(self.message),
            "file": self.loc.file if self.loc else None,
            "line": self.loc.line if self.loc and self.loc.line else None,
            "col": self.loc.col if self.loc and self.loc.col else None,
        }


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    loc: Loc | None = None
    severity: Severity = "error"
    related: tuple[Related, ...] = ()

    def to_json(self) -> dict[str, Any]:
        loc = self.loc
        return {
            "severity": self.severity,
            "code": self.code,
            "message": elide(self.message),
            "file": loc.file if loc else None,
            "line": loc.line if loc and loc.line else None,
            "col": loc.col if loc and loc.col else None,
            "related": [r.to_json() for r in self.related],
        }

    def render(self) -> str:
        """The one-line form (`file:line:col: error[CODE]: message`); the CLI shows the full
        layout of verimim.render."""
        where = f"{self.loc}: " if self.loc else ""
        text = f"{where}{self.severity}[{self.code}]: {elide(self.message)}"
        for rel in self.related:
            rwhere = f"{rel.loc}: " if rel.loc else ""
            text += f"\n  {rwhere}note: {elide(rel.message)}"
        return text


@dataclass
class VerimimError(Exception):
    """The root of every error verimim reports to a user."""

    code: str
    message: str
    loc: Loc | None = None
    related: tuple[Related, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.diagnostic().render()

    def diagnostic(self) -> Diagnostic:
        return Diagnostic(self.code, self.message, self.loc, "error", tuple(self.related))

    def diagnostics(self) -> list[Diagnostic]:
        """This error's diagnostic and those of the independent errors found with it."""
        return [self.diagnostic()] + [e.diagnostic() for e in getattr(self, "also", ())]


class ParseError(VerimimError):
    def __init__(self, message: str, loc: Loc | None = None) -> None:
        super().__init__("E-PARSE", message, loc)


class NameError_(VerimimError):
    def __init__(self, message: str, loc: Loc | None = None, related: tuple[Related, ...] = ()) -> None:
        super().__init__("E-NAME", message, loc, related)


class TypeError_(VerimimError):
    def __init__(self, message: str, loc: Loc | None = None, related: tuple[Related, ...] = ()) -> None:
        super().__init__("E-TYPE", message, loc, related)


class ImportError_(VerimimError):
    def __init__(self, message: str, loc: Loc | None = None) -> None:
        super().__init__("E-IMPORT", message, loc)


class UnsupportedError(VerimimError):
    """A program verimim cannot process (a limit of verimim, not an error of the program)."""

    def __init__(self, message: str, loc: Loc | None = None) -> None:
        super().__init__("E-UNSUPPORTED", message, loc)


class UsageError(VerimimError):
    """A bad option or an unreadable file: exit 2."""

    def __init__(self, message: str, loc: Loc | None = None) -> None:
        super().__init__("E-USAGE", message, loc)


def exit_code_for(diags: list[Diagnostic]) -> int:
    errors = [d for d in diags if d.severity == "error"]
    if not errors:
        return EXIT_OK
    if any(d.code in INTERNAL_CODES for d in errors):
        return EXIT_INTERNAL
    if any(d.code == "E-USAGE" for d in errors):
        return EXIT_USAGE
    return EXIT_USER


# How many of the innermost frames of a RecursionError are searched for a source location.
_RECURSION_FRAMES = 5000


def _loc_in(value: object) -> Loc | None:
    """A position in the user's program that `value` is or has (a plugin's own `.mim` file is
    not where the program is nested too deeply)."""
    try:
        loc = value if isinstance(value, Loc) else getattr(value, "loc", None)
    except Exception:  # a property of some local that fails: no location there
        return None
    if not isinstance(loc, Loc) or not loc.line or str(loc.file).startswith(_PLUGIN_DIR):
        return None
    return loc


_PLUGIN_DIR = str(Path(__file__).resolve().parent / "plug")


def recursion_diagnostic(exc: RecursionError) -> Diagnostic:
    """Python's recursion limit, reached while verimim walked a program: `E-UNSUPPORTED` at the
    innermost source location the recursion was working on (the program is nested more deeply
    than verimim can follow there), or `E-INTERNAL` when no frame knows one — then it is not the
    program's nesting verimim can point to, and verimim takes the blame."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames[-_RECURSION_FRAMES:]):
        for value in frame.f_locals.values():
            loc = _loc_in(value)
            if loc is not None:
                return Diagnostic("E-UNSUPPORTED", "the program is nested too deeply here for verimim "
                                  "to process (Python's recursion limit was reached)", loc)
    return Diagnostic("E-INTERNAL", "internal error: recursion limit reached with no source location "
                      "in reach", None)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, …, 11th, 12th, 13th, …, 21st (for messages)."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
