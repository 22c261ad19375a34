"""verimim.fuzz.mutants: the catalogue stays in step with the code, and a mutant loaded in a
fresh process is the code verimim runs (caught by the killer that should catch it)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from verimim.fuzz.mutants import CATALOGUE, kill, occurrences, source_path

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "programs"


def test_catalogue_has_eighty_distinct_mutants_each_applying_once() -> None:
    assert len(CATALOGUE) >= 80
    assert len({m.id for m in CATALOGUE}) == len(CATALOGUE)
    assert {m.kind for m in CATALOGUE} >= {"wrong side", "off-by-one", "forgotten case", "wrong size",
                                           "symbolic as literal"}
    for m in CATALOGUE:
        assert m.old != m.new
        assert occurrences(m) == 1, f"{m.id}: its text occurs {occurrences(m)} times in {m.module}"
        text = source_path(m).read_text(encoding="utf-8")
        compile(text.replace(m.old, m.new, 1), str(source_path(m)), "exec")  # a mutant is valid Python


def _worker(mid: str, corpus: list[str], baseline: dict, tmp: Path) -> dict:
    (tmp / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    (tmp / "base.json").write_text(json.dumps(baseline), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "verimim.fuzz.mutants", mid, str(tmp / "corpus.json"),
                          str(tmp / "base.json"), "0", "1"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_checker_mutant_is_killed_by_check(tmp_path: Path) -> None:
    corpus = [str(PROGRAMS / "phase_errors" / "store_const.mim")]
    base = kill(None, corpus, {}, 0, 1)
    assert base["check"][corpus[0]], "the unmutated checker rejects the program"
    r = _worker("cas-store-const", corpus, base, tmp_path)
    assert r["killed_by"] == "check" and r["program"] == corpus[0], r


def test_a_semantics_mutant_is_killed_by_run(tmp_path: Path) -> None:
    # Nat subtraction saturating at 1: no phase's spec sees it (the interpreter and the folds
    # share it), a program stating its result does.
    prog = tmp_path / "nat_sub.mim"
    prog.write_text("// EXPECT: 0\nplugin core;\nplugin mem;\n\n"
                    "fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)\n"
                    "              : [mem.M 0, I32] =\n"
                    "    let n = core.nat.sub (0, core.bitcast Nat argc);\n"
                    "    return (m0, core.bitcast I32 n);\n", encoding="utf-8")
    corpus = [str(prog)]
    base = kill(None, corpus, {}, 0, 1)
    assert base["run"] == {str(prog): "0"}, base["run"]
    r = _worker("ops-nat-sub", corpus, base, tmp_path)
    assert r["killed_by"] == "run", r
