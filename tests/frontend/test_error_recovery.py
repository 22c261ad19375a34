"""Front-end error recovery (issue 14): every top-level declaration is checked on its own, so a
program with independent errors shows each, at its line and column, with its caret; a use of
a declaration that failed does not repeat its error."""
from __future__ import annotations

import subprocess
import sys

import pytest

from verimim.diagnostics import VerimimError
from verimim.frontend.loader import load_text

SRC = """plugin core;
lam f (x: I32): I32 = core.wrap.add 0 (x, 1I8);
lam g (x: I32): Bool = x;
lam h (y: I32): I32 = f y;
lam k (y: I32): I32 = f (f y);
"""


def errors(src: str) -> list[tuple[str, int, int]]:
    with pytest.raises(VerimimError) as info:
        load_text(src, "t.mim")
    return [(d.code, d.loc.line, d.loc.col) for d in info.value.diagnostics() if d.loc]


def test_independent_errors_are_all_reported_at_their_places() -> None:
    assert errors(SRC) == [("E-TYPE", 2, 43), ("E-TYPE", 3, 24)]


def test_a_use_of_a_failed_declaration_repeats_nothing() -> None:
    src = "plugin core;\nlet a: I32 = 1I8;\nlet b = a;\nlet c = (a, b);\nlet d = nope;\n"
    assert errors(src) == [("E-TYPE", 2, 14), ("E-NAME", 5, 9)]


def test_one_error_is_one_diagnostic() -> None:
    assert errors("plugin core;\nlet a: Bool = 1I8;\n") == [("E-TYPE", 2, 15)]


def test_the_cli_shows_each_with_its_source_line_and_caret(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "two.mim"
    p.write_text(SRC, encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "verimim.cli", "check", str(p), "--color", "never"],
                         capture_output=True, text=True)
    assert out.returncode == 1
    for line, text in ((2, "lam f (x: I32): I32 = core.wrap.add 0 (x, 1I8);"), (3, "lam g (x: I32): Bool = x;")):
        assert f"{p}:{line}:" in out.stderr or f"two.mim:{line}:" in out.stderr
        assert f"{line} | {text}" in out.stderr
    assert out.stderr.count("^") >= 4  # `1I8` and `x` underlined
