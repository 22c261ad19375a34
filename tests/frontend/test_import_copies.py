"""A file's imports are elaborated once per process and copied into each new World
(verimim.ir.copy, verimim.frontend.loader.adopt_imports): the copy must be the World a fresh
elaboration makes, independent of the one it was copied from, and never stale."""
from __future__ import annotations

from pathlib import Path

import pytest

import verimim.frontend.loader as loader
from verimim.diagnostics import VerimimError
from verimim.dump import dump_world
from verimim.frontend.loader import load_text
from verimim.ir.defs import Def
from verimim.phases.runner import run_pipeline

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((ROOT / "tests" / "programs").rglob("*.mim"))[:40]

KERNEL = """plugin core;
plugin mem;
plugin gpu;

con kernel(mem: %mem.M 0, n: I32, return: Cn %mem.M 0) = return mem;

fun extern main(mem: %mem.M 0, argc: I32, argv: %mem.Ptr0 (%mem.Ptr0 I8)): [%mem.M 0, I32] =
    let x = %core.wrap.add 0 (argc, 41I32);
    return (mem, %core.wrap.mul 0 (x, 1I32))
"""


def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "adopt_imports", lambda *a: None)


def _reachable(roots: list[Def]) -> set[int]:
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        d = stack.pop()
        if id(d) in seen:
            continue
        seen.add(id(d))
        stack.extend(d.ops)
        body = getattr(d, "body", None)
        if isinstance(body, Def):
            stack.append(body)
    return seen


def test_a_copied_import_gives_the_world_a_fresh_elaboration_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    assert PROGRAMS, "the test corpus is missing"
    copied = []
    for p in PROGRAMS:
        try:
            w, _ = load_text(p.read_text(encoding="utf-8"), str(p))
            copied.append((dump_world(w, []), sorted(m.name or "" for m in w.muts), len(w.folds or {})))
        except VerimimError as e:
            copied.append((e.code, str(e.loc), e.message))
    _fresh(monkeypatch)
    for p, got in zip(PROGRAMS, copied):
        try:
            w, _ = load_text(p.read_text(encoding="utf-8"), str(p))
            want = (dump_world(w, []), sorted(m.name or "" for m in w.muts), len(w.folds or {}))
        except VerimimError as e:
            want = (e.code, str(e.loc), e.message)
        assert got == want, p.name


def test_the_copy_hash_conses_with_its_own_nodes_and_shares_none_with_the_original() -> None:
    a, _ = load_text(KERNEL, "a.mim")
    b, _ = load_text(KERNEL, "b.mim")
    add_a, add_b = a.annex("core.wrap.add"), b.annex("core.wrap.add")
    assert add_a is not add_b and add_a.gid != add_b.gid
    # a node the plugins made is found again by the copy's hash-consing, not built twice
    assert b.app(b.annex("mem.M"), b.lit_nat(0)) is b.app(b.annex("mem.M"), b.lit_nat(0))
    nodes_b = _reachable(list(b.annexes.values()) + list(b.externals.values()))
    assert not nodes_b & _reachable(list(a.annexes.values()) + list(a.externals.values()))
    assert all(d.home == b.serial for d in b.annexes.values())


def test_elaborating_into_a_copy_leaves_the_kept_world_as_it_was() -> None:
    load_text(KERNEL, "first.mim")
    kept = next(k for key, k in loader._IMPORTS.items() if key[1] == (("plugin", "core"), ("plugin", "mem"), ("plugin", "gpu")))
    before = (kept.plan.base.num_nodes, len(kept.plan.base.muts), len(kept.plan.base.folds or {}))
    w, _ = load_text(KERNEL.replace("41I32", "7I32"), "second.mim")
    assert (kept.plan.base.num_nodes, len(kept.plan.base.muts), len(kept.plan.base.folds or {})) == before
    assert w.num_nodes > before[0]
    run = run_pipeline(w, verify=False)
    assert not [d for d in run.diagnostics if d.severity == "error"]


def test_an_import_whose_file_changed_is_elaborated_again(tmp_path: Path) -> None:
    lib = tmp_path / "mylib.mim"
    lib.write_text("plugin core;\nlet answer = 41I32;\n", encoding="utf-8")
    prog = "plugin core;\nimport mylib;\nfun extern main(argc: I32): I32 = return (%core.wrap.add 0 (argc, answer));\n"
    w1, u1 = load_text(prog, "p.mim", [str(tmp_path)])
    lib.write_text("plugin core;\nlet answer = 99I32;\n", encoding="utf-8")
    w2, u2 = load_text(prog, "p.mim", [str(tmp_path)])
    assert "41" in dump_world(w1, []) and "99" in dump_world(w2, []) and "41" not in dump_world(w2, [])
    lib.unlink()
    with pytest.raises(VerimimError) as e:
        load_text(prog, "p.mim", [str(tmp_path)])
    assert e.value.code == "E-IMPORT" and e.value.loc is not None and e.value.loc.line == 2


def test_an_import_that_fails_is_reported_as_without_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken.mim").write_text("plugin core;\nlet x: I32 = 1I8;\n", encoding="utf-8")
    prog = "plugin core;\nimport broken;\nfun extern main(argc: I32): I32 = return argc;\n"
    errors = []
    for _ in range(2):
        with pytest.raises(VerimimError) as e:
            load_text(prog, "p.mim", [str(tmp_path)])
        errors.append((e.value.code, str(e.value.loc), e.value.message))
    _fresh(monkeypatch)
    with pytest.raises(VerimimError) as e:
        load_text(prog, "p.mim", [str(tmp_path)])
    assert errors == [(e.value.code, str(e.value.loc), e.value.message)] * 2
