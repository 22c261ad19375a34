"""The algebraic identities of verimim/plug/core_rules.py on concrete IR: the normal forms they
produce, and the applications they must leave alone (undefined behaviour, modes, sizes).
Their soundness for every value is proved in tests/smt/test_normalizer_proofs.py."""
from __future__ import annotations

import pytest

from verimim.frontend.loader import load_text
from verimim.ir.defs import App, Axiom, Def
from verimim.ir.world import World


@pytest.fixture(scope="module")
def w() -> World:
    world, _ = load_text("plugin core; plugin mem;", "<rules>")
    return world


def op(w: World, annex: str, *args: Def) -> Def:
    return w.apps(w.annex(annex), *args)


def wrap(w: World, tag: str, s: int, mode: int, a: Def, b: Def) -> Def:
    return op(w, f"core.wrap.{tag}", w.lit_nat(s), w.lit_nat(mode), w.tuple([a, b]))


def bit2(w: World, tag: str, s: int, a: Def, b: Def) -> Def:
    return op(w, f"core.bit2.{tag}", w.lit_nat(s), w.lit_nat(0), w.tuple([a, b]))


def icmp(w: World, tag: str, s: int, a: Def, b: Def) -> Def:
    return op(w, f"core.icmp.{tag}", w.lit_nat(s), w.tuple([a, b]))


def is_app(d: Def, annex: str) -> bool:
    return isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == annex


def test_identities_of_wrap(w: World) -> None:
    x = w.param(w.idx_n(256), "x")
    zero, one = w.lit_idx(256, 0), w.lit_idx(256, 1)
    assert wrap(w, "add", 256, 3, x, zero) is x  # x + 0, whatever the mode
    assert wrap(w, "mul", 256, 0, one, x) is x
    assert wrap(w, "mul", 256, 1, x, zero) is zero
    assert wrap(w, "sub", 256, 2, x, x) is zero
    assert wrap(w, "shl", 256, 0, x, zero) is x


def test_literal_first_and_sub_of_a_literal(w: World) -> None:
    x = w.param(w.idx_n(256), "x")
    assert wrap(w, "add", 256, 0, x, w.lit_idx(256, 3)) is wrap(w, "add", 256, 0, w.lit_idx(256, 3), x)
    # x - 1 ↦ 255 + x with wrap-around, upstream's form; with nsw it stays a subtraction
    assert wrap(w, "sub", 256, 0, x, w.lit_idx(256, 1)) is wrap(w, "add", 256, 0, w.lit_idx(256, 255), x)
    assert is_app(wrap(w, "sub", 256, 1, x, w.lit_idx(256, 1)), "core.wrap.sub")


def test_reassociation_moves_literals_outward(w: World) -> None:
    x, y = w.param(w.idx_n(2**32), "x"), w.param(w.idx_n(2**32), "y")
    lit = lambda v: w.lit_idx(2**32, v)  # noqa: E731
    assert wrap(w, "add", 2**32, 0, lit(23), wrap(w, "add", 2**32, 0, lit(42), x)) is \
        wrap(w, "add", 2**32, 0, lit(65), x)
    both = wrap(w, "mul", 2**32, 0, wrap(w, "mul", 2**32, 0, lit(2), x), wrap(w, "mul", 2**32, 0, lit(3), y))
    assert both is wrap(w, "mul", 2**32, 0, lit(6), wrap(w, "mul", 2**32, 0, x, y))
    # under nsw the overflow of the inner sum must still be reported: no reassociation
    nsw = wrap(w, "add", 2**32, 1, lit(23), wrap(w, "add", 2**32, 1, lit(42), x))
    assert isinstance(nsw, App) and is_app(nsw.arg.ops[1], "core.wrap.add")  # type: ignore[attr-defined]


def test_bit2_identities(w: World) -> None:
    i = w.param(w.bool_t(), "i")
    ff, tt = w.lit_bool(False), w.lit_bool(True)
    assert bit2(w, "and_", 2, i, ff) is ff
    assert bit2(w, "and_", 2, i, tt) is i
    assert bit2(w, "and_", 2, i, i) is i
    assert bit2(w, "xor_", 2, i, i) is ff
    assert bit2(w, "or_", 2, tt, i) is tt
    x = w.param(w.idx_n(256), "x")
    assert bit2(w, "xor_", 256, w.lit_idx(256, 255), x) is op(w, "core.bit1.neg", w.lit_nat(256), w.lit_nat(0), x)
    neg = op(w, "core.bit1.neg", w.lit_nat(256), w.lit_nat(0), x)
    assert op(w, "core.bit1.neg", w.lit_nat(256), w.lit_nat(0), neg) is x


def test_comparisons_of_the_same_operands_merge(w: World) -> None:
    a, b = w.param(w.bool_t(), "a"), w.param(w.bool_t(), "b")
    merged = bit2(w, "and_", 2, icmp(w, "uge", 2, a, b), icmp(w, "ug", 2, a, b))
    assert merged is icmp(w, "ug", 2, a, b)
    x = w.param(w.idx_n(256), "x")
    c = w.lit_idx(256, 97)
    assert bit2(w, "and_", 2, icmp(w, "uge", 256, x, c), icmp(w, "ule", 256, x, c)) is icmp(w, "e", 256, c, x)
    assert bit2(w, "or_", 2, icmp(w, "ul", 256, x, c), icmp(w, "uge", 256, x, c)) is w.lit_bool(True)


def test_comparison_of_an_operand_with_itself(w: World) -> None:
    x = w.param(w.idx_n(23), "x")
    assert icmp(w, "e", 23, x, x) is w.lit_bool(True)
    assert icmp(w, "ule", 23, x, x) is w.lit_bool(True)
    assert icmp(w, "ne", 23, x, x) is w.lit_bool(False)
    assert is_app(icmp(w, "ul", 23, x, x), "core.icmp.ul")  # upstream's normal form keeps it


def test_nat_identities(w: World) -> None:
    n = w.param(w.nat(), "n")
    assert op(w, "core.nat.add", w.tuple([n, w.lit_nat(0)])) is n
    assert op(w, "core.nat.mul", w.tuple([w.lit_nat(1), n])) is n
    assert op(w, "core.nat.sub", w.tuple([n, n])) is w.lit_nat(0)


def test_a_possibly_undefined_operand_is_never_dropped(w: World) -> None:
    """`0 · (x +nsw 1)` keeps the addition: its overflow is reported by the interpreter."""
    x = w.param(w.idx_n(256), "x")
    risky = wrap(w, "add", 256, 1, x, w.lit_idx(256, 1))
    assert is_app(wrap(w, "mul", 256, 0, w.lit_idx(256, 0), risky), "core.wrap.mul")
    assert is_app(wrap(w, "sub", 256, 0, risky, risky), "core.wrap.sub")
    safe = wrap(w, "add", 256, 0, x, w.lit_idx(256, 1))
    assert wrap(w, "mul", 256, 0, w.lit_idx(256, 0), safe) is w.lit_idx(256, 0)


def test_nothing_folds_to_or_through_a_value_of_idx_0(w: World) -> None:
    """`Idx 0` has no value: a conversion into it is undefined (E-OOB) and no literal of it
    exists. `y ≤ y`, `y − y` and `bit1.t y` of `y = conv.u 0 x` folded (hiding the conversion),
    and `bit1.t` built the literal `-1_0` (probe)."""
    x = w.param(w.idx_n(2**32), "x")
    y = op(w, "core.conv.u", w.lit_nat(2**32), w.lit_nat(0), x)
    assert is_app(icmp(w, "sle", 0, y, y), "core.icmp.sle")
    assert is_app(wrap(w, "sub", 0, 0, y, y), "core.wrap.sub")
    z = w.param(w.idx_n(0), "z")  # (a parameter of a function nothing can call)
    assert is_app(op(w, "core.bit1.t", w.lit_nat(0), w.lit_nat(0), z), "core.bit1.t")
    assert is_app(wrap(w, "sub", 0, 0, z, z), "core.wrap.sub")


def test_undefined_shifts_and_divisions_stay(w: World) -> None:
    x = w.param(w.idx_n(256), "x")
    zero = w.lit_idx(256, 0)
    assert is_app(wrap(w, "shl", 256, 0, zero, x), "core.wrap.shl")  # x may be ≥ 8
    m = w.param(w.app(w.annex("mem.M"), w.lit_nat(0)), "m")
    div = lambda tag, s, a, b: op(w, f"core.div.{tag}", w.lit_nat(s), w.tuple([m, w.tuple([a, b])]))  # noqa: E731
    assert div("udiv", 256, x, w.lit_idx(256, 1)).ops[1] is x  # type: ignore[attr-defined]
    b = w.param(w.bool_t(), "b")
    assert is_app(div("sdiv", 2, b, w.lit_bool(True)), "core.div.sdiv")  # 1 is -1 on Idx 2


def test_bitcast_chains(w: World) -> None:
    x = w.param(w.idx_n(256), "x")
    bc = lambda src, dst, v: op(w, "core.bitcast", src, dst, v)  # noqa: E731
    assert bc(w.nat(), w.idx_n(256), bc(w.idx_n(256), w.nat(), x)) is x
    assert bc(w.nat(), w.idx_n(2**32), bc(w.idx_n(256), w.nat(), x)) is bc(w.idx_n(256), w.idx_n(2**32), x)
    y = w.param(w.idx_n(2**16), "y")
    narrow = bc(w.idx_n(256), w.idx_n(2**16), bc(w.idx_n(2**16), w.idx_n(256), y))
    assert is_app(narrow, "core.bitcast") and is_app(narrow.ops[1], "core.bitcast")  # type: ignore[attr-defined]
