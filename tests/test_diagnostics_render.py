"""Diagnostics in rustc's layout (verimim.render): source line, caret span, related locations as
notes with their own lines, colour only when asked for, long texts elided with their length."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.test_cli import verimim
from verimim.diagnostics import Diagnostic, Loc, Related, elide
from verimim.render import Renderer, token_span, use_color


def _file(tmp_path: Path, text: str) -> str:
    f = tmp_path / "p.mim"
    f.write_text(text, encoding="utf-8")
    return str(f)


def test_source_line_and_caret_under_the_token(tmp_path: Path) -> None:
    path = _file(tmp_path, "plugin core;\nlet x = core.wrap.add 0 (1, 2);\n")
    text = Renderer().render(Diagnostic("E-TYPE", "type mismatch", Loc(path, 2, 9)))
    assert text.splitlines() == [
        "error[E-TYPE]: type mismatch",
        f" --> {path}:2:9",
        "  |",
        "2 | let x = core.wrap.add 0 (1, 2);",
        "  |         ^^^^^^^^^^^^^",
    ]


def test_caret_spans_a_bracketed_group_and_one_char_otherwise() -> None:
    assert token_span("f (a, (b)) c", 2) == 8
    assert token_span("x = 1", 2) == 1
    assert token_span("%mem.M 0", 0) == 6
    assert token_span("(unclosed", 0) == 1


def test_related_location_elsewhere_has_its_own_snippet(tmp_path: Path) -> None:
    path = _file(tmp_path, "a\nbb\nccc\n")
    diag = Diagnostic("E-USE-AFTER-FREE", "load after free", Loc(path, 3, 2),
                      related=(Related("freed here", Loc(path, 1, 1)), Related("no place", None),
                               Related("same place", Loc(path, 3, 2))))
    lines = Renderer().render(diag).splitlines()
    assert lines[0] == "error[E-USE-AFTER-FREE]: load after free"
    assert lines[3:5] == ["3 | ccc", "  |  ^^"]
    i = lines.index("note: freed here")
    assert lines[i + 1] == f" --> {path}:1:1" and lines[i + 3] == "1 | a" and lines[i + 4] == "  | ^"
    assert "  = note: no place" in lines and "  = note: same place" in lines


def test_tabs_are_expanded_and_caret_follows(tmp_path: Path) -> None:
    path = _file(tmp_path, "\tlet y = z;\n")
    lines = Renderer().render(Diagnostic("E-NAME", "unknown name `z`", Loc(path, 1, 10))).splitlines()
    assert lines[3] == "1 |     let y = z;"
    assert lines[4].index("^") == lines[3].index("z")


def test_caret_stands_under_the_token_after_wide_and_combining_characters(tmp_path: Path) -> None:
    # 日本 takes four terminal columns in two characters; "é" written e + U+0301 one in two
    path = _file(tmp_path, "/* 日本 e\u0301 */ let y = z;\n")
    lines = Renderer().render(Diagnostic("E-NAME", "unknown name `z`", Loc(path, 1, 21))).splitlines()
    assert lines[3] == "1 | /* 日本 e\u0301 */ let y = z;"
    assert lines[4] == "  | " + " " * 21 + "^"


def test_long_line_shows_a_window_around_the_caret(tmp_path: Path) -> None:
    line = "let v = " + "a + " * 200 + "bad + " + "c + " * 200 + "d;"
    path = _file(tmp_path, line + "\n")
    col = line.index("bad") + 1
    lines = Renderer().render(Diagnostic("E-TYPE", "m", Loc(path, 1, col))).splitlines()
    shown, carets = lines[3], lines[4]
    assert len(shown) < 120 and shown.startswith("1 | …") and shown.endswith("…")
    assert shown[carets.index("^"):carets.index("^") + 3] == "bad"


def test_no_snippet_for_unreadable_file_or_no_location() -> None:
    text = Renderer().render(Diagnostic("E-FUEL", "ran out", Loc("/nonexistent/x.mim", 3, 1)))
    assert text.splitlines() == ["error[E-FUEL]: ran out", " --> /nonexistent/x.mim:3:1"]
    assert Renderer().render(Diagnostic("E-INTERNAL", "boom")) == "error[E-INTERNAL]: boom"


def test_colour_codes_only_when_enabled(tmp_path: Path) -> None:
    path = _file(tmp_path, "x\n")
    diag = Diagnostic("W-LEAK", "leak", Loc(path, 1, 1), "warning")
    assert "\x1b[" not in Renderer(color=False).render(diag)
    coloured = Renderer(color=True).render(diag)
    assert "\x1b[1;33mwarning[W-LEAK]\x1b[0m" in coloured


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_use_color_auto_respects_terminal_and_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_color("auto", _Tty()) and not use_color("auto", io.StringIO())
    assert use_color("always", io.StringIO()) and not use_color("never", _Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color("auto", _Tty()) and use_color("always", _Tty())


def test_elide_keeps_ends_and_says_the_length() -> None:
    name = "v" * 1_000_000
    out = elide(f"unknown name `{name}`; did you mean `w`?")
    assert len(out) < 300 and "(1000000 characters)" in out and out.endswith("did you mean `w`?")
    assert elide("short `x`") == "short `x`"
    assert "(5000 characters)" in elide("y" * 5000)


def test_cli_elides_a_huge_identifier_in_text_and_json(tmp_path: Path) -> None:
    name = "q" * 200_000
    path = _file(tmp_path, f"plugin core;\nlet y = {name};\n")
    p = verimim("check", path, "--json")
    assert p.returncode == 1
    (diag,) = json.loads(p.stdout)["diagnostics"]
    assert diag["code"] == "E-NAME" and len(diag["message"]) < 1000 and "200000 characters" in diag["message"]
    assert len(p.stderr) < 2000


def test_cli_colour_option(tmp_path: Path) -> None:
    path = _file(tmp_path, "plugin core;\nlet y = nosuch;\n")
    assert "\x1b[" in verimim("check", path, "--color", "always").stderr
    plain = verimim("check", path, "--color", "never").stderr
    assert "\x1b[" not in plain and "2 | let y = nosuch;" in plain and "^^^^^^" in plain
    assert "\x1b[" not in verimim("check", path).stderr  # auto: stderr is a pipe here
    assert verimim("check", path, "--color", "sometimes").returncode == 2
