"""Names of symbolic terms in specifications come from the IR's structure (verimim.smt.names), not
from the printer: a symbolic allocation size is the same unknown before and after a phase."""
from __future__ import annotations

from verimim.driver import run_with_big_stack
from verimim.frontend.loader import load_text
from verimim.ir.defs import Def
from verimim.phases.base import PhaseResult, Program, is_app_of, walk
from verimim.phases.repl import Alloc2Malloc, _Alloc2Malloc
from verimim.printer import show
from verimim.smt.names import Namer
from verimim.smt.solver import SpecContext
from verimim.smt.specs import check_spec

# A symbolic allocation size: `«a; I32»` with `a` computed from argc (the shape of upstream's
# lit/mem/alloc.mim, written here for the test).
SYMBOLIC = """
plugin core;
plugin mem;

fun extern main (m0: mem.M 0, argc: I32): [mem.M 0, I32] =
    let a = core.bitcast Nat argc;
    let (m1, p) = mem.alloc («a; I32», 0) m0;
    let m2 = mem.free (m1, p);
    return (m2, argc);
"""


def _world():  # type: ignore[no-untyped-def]
    world, _ = run_with_big_stack(lambda: load_text(SYMBOLIC, "<symbolic>"))
    return world


def test_equal_terms_of_two_worlds_have_one_key_and_different_ones_differ() -> None:
    w1, w2 = _world(), _world()
    namer = Namer()
    allocs = [[d for d in walk(w) if is_app_of(d, "mem.alloc") and d.depth == 2] for w in (w1, w2)]
    assert len(allocs[0]) == len(allocs[1]) == 1
    a1, a2 = allocs[0][0], allocs[1][0]
    assert a1 is not a2 and namer.key(a1) == namer.key(a2)
    # A fresh Namer gives the same key: nothing depends on what was named before.
    assert Namer().key(a2) == namer.key(a1)
    t1: Def = a1.args()[0]
    assert namer.key(t1) != namer.key(a1) and namer.key(t1.ops[0]) != namer.key(t1)


def test_symbolic_allocation_size_is_proved() -> None:
    world = _world()
    res = run_with_big_stack(lambda: Alloc2Malloc().apply(Program(world)))
    out = run_with_big_stack(lambda: check_spec(res, SpecContext(timeout_ms=10_000)))
    assert out.status == "proved", (out.detail, out.counterexample)
    # The printer shows the two sizes differently, which must not matter.
    sizes = [show(d) for w in res.after.worlds() for d in walk(w) if is_app_of(d, "core.trait.size")]
    assert sizes


class _ElementSized(_Alloc2Malloc):
    """Allocates the size of one element instead of the array (a wrong size)."""

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        new = super().rewrite_imm(old, ops)
        if new is not None and is_app_of(old, "mem.alloc"):
            w = self.new
            ty_a, m = ops[0].ops[1], ops[1]  # type: ignore[union-attr]
            elem = ty_a.ops[0].body if hasattr(ty_a.ops[0], "body") else ty_a.ops[0]
            return w.app(w.app(self.annex("mem.malloc"), ty_a),
                         w.tuple([m, w.app(self.annex("core.trait.size"), elem)]))
        return new


class _BadAlloc2Malloc(Alloc2Malloc):
    def make_rewriter(self, world, res: PhaseResult):  # type: ignore[no-untyped-def]
        return _ElementSized(world, res)


def test_a_wrong_symbolic_size_is_refuted() -> None:
    world = _world()
    res = run_with_big_stack(lambda: _BadAlloc2Malloc().apply(Program(world)))
    out = run_with_big_stack(lambda: check_spec(res, SpecContext(timeout_ms=10_000)))
    assert out.status == "refuted", out.detail
