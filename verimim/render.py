"""Diagnostics as a terminal user reads them, in the layout rustc taught: the headline, an arrow to
file:line:col, the source line with a caret span under what is meant, and each related location
as a note of its own with its line.

Locations are points (line, col); the caret spans the token that starts there — a name, a number,
a bracketed group closed on the same line — because that is what the point designates. Colour
follows `--color auto|always|never`; `auto` means a terminal without `NO_COLOR` set
(https://no-color.org). Sources are read from disk again here, decoded leniently: the renderer
must never fail on a file the front end has already rejected.
"""
from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

from verimim.diagnostics import Diagnostic, Loc, elide
from verimim.source import text_read

ColorChoice = Literal["auto", "always", "never"]
COLOR_CHOICES: tuple[ColorChoice, ...] = ("auto", "always", "never")

# Longest source excerpt shown on one line; longer lines show a window around the caret.
_WIDTH = 100
_TAB = "    "
_OPEN_CLOSE = {"(": ")", "[": "]", "{": "}", "«": "»", "‹": "›", "⟨": "⟩"}
_SEVERITY_STYLE = {"error": "1;31", "warning": "1;33", "note": "1;32"}
_GUTTER_STYLE = "1;34"


def use_color(choice: ColorChoice, stream: TextIO) -> bool:
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty: Callable[[], bool] | None = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@dataclass
class Sources:
    """Source lines by file, read once; a file that cannot be read has no lines (no snippet)."""

    lines: dict[str, list[str] | None] = field(default_factory=dict)

    def line(self, file: str, n: int) -> str | None:
        if file not in self.lines:
            try:
                text = text_read(file) or Path(file).read_bytes().decode("utf-8", errors="replace")
            except OSError:
                self.lines[file] = None
            else:
                # lines as the lexer counts them: only "\n" ends one (str.splitlines also ends
                # lines at \f, \v, \x1c, U+0085, U+2028…, and the snippet showed another line)
                self.lines[file] = [ln.removesuffix("\r") for ln in text.removeprefix("\ufeff").split("\n")]
        got = self.lines[file]
        if got is None or not 1 <= n <= len(got):
            return None
        return got[n - 1]


def _ident_char(c: str) -> bool:
    return c.isalnum() or c in "_.%'"


def token_span(text: str, start: int) -> int:
    """How many characters from `start` (0-based) the token at that point covers, at least 1."""
    if start >= len(text):
        return 1
    c = text[start]
    if _ident_char(c):
        end = start
        while end < len(text) and _ident_char(text[end]):
            end += 1
        return end - start
    close = _OPEN_CLOSE.get(c)
    if close is not None:
        depth = 0
        for i in range(start, len(text)):
            if text[i] == c:
                depth += 1
            elif text[i] == close:
                depth -= 1
                if depth == 0:
                    return i - start + 1
    return 1


@dataclass(frozen=True)
class Renderer:
    color: bool = False
    sources: Sources = field(default_factory=Sources)

    def _paint(self, style: str, text: str) -> str:
        return f"\x1b[{style}m{text}\x1b[0m" if self.color and text else text

    def render(self, diag: Diagnostic) -> str:
        head = self._paint(_SEVERITY_STYLE.get(diag.severity, "1"), f"{diag.severity}[{diag.code}]")
        out = [f"{head}{self._paint('1', ': ' + elide(diag.message))}"]
        gutter = self._gutter_width(diag)
        out += self._location(diag.loc, gutter, diag.severity)
        for rel in diag.related:
            # A related location that is missing or repeats the primary one adds no place to look.
            if rel.loc is None or not rel.loc.line or rel.loc == diag.loc:
                out.append(f"{' ' * gutter} {self._paint(_GUTTER_STYLE, '=')} "
                           f"{self._paint('1', 'note')}: {elide(rel.message)}")
                continue
            out.append(f"{self._paint(_SEVERITY_STYLE['note'], 'note')}: {elide(rel.message)}")
            out += self._location(rel.loc, gutter, "note")
        return "\n".join(out)

    def _gutter_width(self, diag: Diagnostic) -> int:
        lines = [loc.line for loc in [diag.loc, *(r.loc for r in diag.related)] if loc is not None]
        return len(str(max(lines, default=0)))

    def _location(self, loc: Loc | None, gutter: int, severity: str) -> list[str]:
        if loc is None:
            return []
        pad = " " * gutter
        out = [f"{pad}{self._paint(_GUTTER_STYLE, '-->')} {loc}"]
        text = self.sources.line(loc.file, loc.line) if loc.line else None
        if text is None:
            return out
        shown, start, width = self._excerpt(text, max(loc.col, 1) - 1)
        bar = self._paint(_GUTTER_STYLE, "|")
        carets = self._paint(_SEVERITY_STYLE.get(severity, "1"), "^" * width)
        out += [f"{pad} {bar}",
                f"{self._paint(_GUTTER_STYLE, str(loc.line).rjust(gutter))} {bar} {shown}",
                f"{pad} {bar} {' ' * start}{carets}"]
        return out

    @staticmethod
    def _excerpt(text: str, col0: int) -> tuple[str, int, int]:
        """The line as shown (tabs expanded, a window around the caret when it is too long), the
        caret's start and its width in that shown text."""
        col0 = min(col0, len(text))
        span = token_span(text, col0)
        before, token = text[:col0].replace("\t", _TAB), text[col0:col0 + span].replace("\t", _TAB)
        after = text[col0 + span:].replace("\t", _TAB)
        shown = before + token + after
        start, width = len(before), max(_columns(token), 1)
        if len(shown) <= _WIDTH:
            return shown.rstrip(), _columns(before), width
        width = min(width, _WIDTH // 2)
        left = max(0, start - _WIDTH // 3)
        window = shown[left:left + _WIDTH]
        prefix = "…" if left else ""
        suffix = "…" if left + _WIDTH < len(shown) else ""
        return prefix + window + suffix, _columns(prefix + shown[left:start]), width


def _columns(text: str) -> int:
    """The terminal columns `text` takes: a wide (East Asian) character two, a combining mark
    none, so that the carets stand under the token (a count of characters put them to its
    left after `≠` in CJK text, or to its right after an accent written as a combining mark)."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def render_all(diags: list[Diagnostic], color: bool) -> str:
    r = Renderer(color)
    return "\n\n".join(r.render(d) for d in diags)
