"""The notes of a memory fault: "allocated here" points at the allocation, and a block the
program did not make (argv) has no such note (it was one with no place: `= note: allocated here`
in text, all-null positions in JSON)."""
from __future__ import annotations

from pathlib import Path

from verimim import driver

MAIN = ("plugin core;\nplugin mem;\n"
        "fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»») : [mem.M 0, I32] =\n")


def _related(tmp_path: Path, body: str, args: list[str]) -> list[tuple[str, int | None]]:
    src = tmp_path / "p.mim"
    src.write_text(MAIN + body, encoding="utf-8")
    report = driver.run(str(src), [], args)
    (err,) = [d for d in report.diagnostics if d.severity == "error"]
    assert err.code == "E-OOB", err.message
    return [(r.message, r.loc.line if r.loc else None) for r in err.related]


def test_argv_past_its_end_has_no_note_without_a_place(tmp_path: Path) -> None:
    body = ("    let (m0, s) = mem.load (m0, mem.lea (argv, 1I32));\n"
            "    let (m0, d) = mem.load (m0, mem.lea (s, 3I32));\n"
            "    return (m0, core.conv.u 4294967296 d);\n")
    assert _related(tmp_path, body, ["ab"]) == []


def test_a_heap_block_says_where_it_was_allocated(tmp_path: Path) -> None:
    body = ("    let (m0, s) = mem.malloc («⊤:Nat; I8», 0) (m0, 3);\n"
            "    let (m0, d) = mem.load (m0, mem.lea (s, 3I32));\n"
            "    return (m0, core.conv.u 4294967296 d);\n")
    assert _related(tmp_path, body, []) == [("allocated here", 4)]
