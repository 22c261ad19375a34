"""Tests of the `core` normalizers (verimim/plug/core.py): constant folding of `core.*` axioms on
literals, and the cases that must *not* fold because they are undefined behaviour (an overflow
the wrap mode forbids, a shift by the width or more, a division by zero, `sdiv INT_MIN/-1`, a
bitcast of a value that does not fit).

Most tests build the applications through the World after loading the plugins; a few go through
Mim text, as a program would. Hypothesis compares folding with a Python reference."""
from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verimim.frontend.loader import load_text
from verimim.frontend.scope import Lazy
from verimim.ir.defs import App, Axiom, Def, Lit, Pi
from verimim.ir.world import World

WIDTHS = [8, 16, 32, 64]
_PROP = settings(max_examples=200, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def w() -> World:
    world, _ = load_text("plugin core; plugin mem; plugin gpu;", "<normalizers>")
    return world


# ----------------------------------------------------------------------------- helpers


def ax(w: World, name: str) -> Def:
    return w.annex(name)


def n(w: World, v: int) -> Def:
    return w.lit_nat(v)


def pair(w: World, s: int, a: int, b: int) -> Def:
    return w.tuple([w.lit_idx(s, a), w.lit_idx(s, b)])


def wrap(w: World, op: str, bits: int, mode: int, a: int, b: int) -> Def:
    s = 2**bits
    return w.apps(ax(w, f"core.wrap.{op}"), n(w, s), n(w, mode), pair(w, s, a, b))


def icmp(w: World, op: str, bits: int, a: int, b: int) -> Def:
    s = 2**bits
    return w.apps(ax(w, f"core.icmp.{op}"), n(w, s), pair(w, s, a, b))


def mem_token(w: World) -> Def:
    return w.param(w.app(ax(w, "mem.M"), n(w, 0)), "m")


def div(w: World, op: str, bits: int, a: int, b: int, m: Def) -> Def:
    s = 2**bits
    return w.apps(ax(w, f"core.div.{op}"), n(w, s), w.tuple([m, pair(w, s, a, b)]))


def folded(d: Def) -> bool:
    return not isinstance(d, App)


def signed(v: int, bits: int) -> int:
    return v - 2**bits if v >= 2 ** (bits - 1) else v


def value_of(src: str, name: str) -> tuple[World, Def]:
    world, unit = load_text(src, "t.mim")
    v = unit.scope.names[name]
    return world, v.force() if isinstance(v, Lazy) else v


# ----------------------------------------------------------------------------- registration


def _pi_depth(t: Def) -> int:
    depth = 0
    while isinstance(t, Pi):
        depth += 1
        t = t.codom
    return depth


def test_every_core_axiom_has_a_normalizer_of_its_full_arity(w: World) -> None:
    # (an alias, such as upstream's `core.icmp.xyglE` for `core.icmp.e`, names the same axiom)
    axioms = {d.annex: d for name, d in w.annexes.items() if name.startswith("core.") and isinstance(d, Axiom)}
    registered = {name for name in w.normalizers if name.startswith("core.")}
    assert set(axioms) == registered
    assert w.annexes["core.icmp.xyglE"] is w.annexes["core.icmp.e"]
    for name, d in axioms.items():
        arity, _ = w.normalizers[name]
        assert arity == _pi_depth(w.type_of(d)), name


# ----------------------------------------------------------------------------- through Mim text


def test_fold_through_mim_text() -> None:
    world, x = value_of("plugin core; plugin mem; let x = core.wrap.add 0 (200I8, 100I8);", "x")
    assert x is world.lit_idx(256, 44)


@pytest.mark.parametrize("expr, expected", [
    ("core.nat.add (2, 3)", ("nat", 5)),
    ("core.nat.sub (2, 3)", ("nat", 0)),
    ("core.nat.mul (6, 7)", ("nat", 42)),
    ("core.ncmp.l (2, 3)", ("bool", 1)),
    ("core.icmp.sl (255I8, 0I8)", ("bool", 1)),
    ("core.icmp.ul (255I8, 0I8)", ("bool", 0)),
    ("core.wrap.sub core.mode.nuw (1I8, 2I8)", None),
    ("core.wrap.sub core.mode.us (1I8, 2I8)", ("idx", 256, 255)),
    ("core.bitcast Nat ff", ("nat", 0)),
    ("core.bitcast Nat tt", ("nat", 1)),
    ("core.bitcast I8 7", ("idx", 256, 7)),
    ("core.bitcast I8 256", None),
    ("core.trait.size I32", ("nat", 4)),
    ("core.trait.align [I8, I32]", ("nat", 4)),
    ("core.conv.s 65536 200I8", ("idx", 65536, 65480)),
    ("core.idx 4 0 3", ("idx", 4, 3)),
    ("core.select (tt, 1I8, 2I8)", ("idx", 256, 1)),
    ("core.bit2.xor_ 0 (0b1100I8, 0b1010I8)", ("idx", 256, 0b0110)),
])
def test_fold_expressions_in_mim(expr: str, expected: tuple[str, ...] | None) -> None:
    world, v = value_of(f"plugin core; plugin mem; let x = {expr};", "x")
    if expected is None:
        assert isinstance(v, App)
        return
    kind, *args = expected
    want = {"nat": lambda: world.lit_nat(args[0]), "bool": lambda: world.lit_bool(bool(args[0])),
            "idx": lambda: world.lit_idx(args[0], args[1])}[kind]()
    assert v is want


# ----------------------------------------------------------------------------- nat and ncmp


@pytest.mark.parametrize("op, a, b, want", [
    ("add", 2, 3, 5), ("add", 0, 0, 0), ("add", 2**64, 2**64, 2**65),
    ("sub", 5, 3, 2), ("sub", 3, 5, 0), ("sub", 3, 3, 0),
    ("mul", 6, 7, 42), ("mul", 0, 99, 0),
])
def test_nat(w: World, op: str, a: int, b: int, want: int) -> None:
    assert w.app(ax(w, f"core.nat.{op}"), w.tuple([n(w, a), n(w, b)])) is n(w, want)


def test_nat_with_equal_operands_as_a_pack(w: World) -> None:
    # (4, 4) is the pack ‹2; 4›: still folded
    assert w.app(ax(w, "core.nat.add"), w.tuple([n(w, 4), n(w, 4)])) is n(w, 8)


def test_nat_with_a_symbolic_operand_does_not_fold(w: World) -> None:
    x = w.param(w.nat(), "x")
    assert isinstance(w.app(ax(w, "core.nat.add"), w.tuple([x, n(w, 1)])), App)


_NCMP: dict[str, Callable[[int, int], bool]] = {
    "e": lambda a, b: a == b, "ne": lambda a, b: a != b, "l": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "g": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


@pytest.mark.parametrize("op", sorted(_NCMP))
@pytest.mark.parametrize("a, b", [(1, 2), (2, 2), (3, 2)])
def test_ncmp(w: World, op: str, a: int, b: int) -> None:
    assert w.app(ax(w, f"core.ncmp.{op}"), w.tuple([n(w, a), n(w, b)])) is w.lit_bool(_NCMP[op](a, b))


@_PROP
@given(st.integers(0, 2**70), st.integers(0, 2**70))
def test_property_nat_and_ncmp(w: World, a: int, b: int) -> None:
    t = w.tuple([n(w, a), n(w, b)])
    assert w.app(ax(w, "core.nat.add"), t) is n(w, a + b)
    assert w.app(ax(w, "core.nat.sub"), t) is n(w, max(a - b, 0))
    assert w.app(ax(w, "core.nat.mul"), t) is n(w, a * b)
    for op, f in _NCMP.items():
        assert w.app(ax(w, f"core.ncmp.{op}"), t) is w.lit_bool(f(a, b))


# ----------------------------------------------------------------------------- icmp


_ICMP: dict[str, tuple[bool, Callable[[int, int], bool]]] = {
    "e": (False, lambda a, b: a == b), "ne": (False, lambda a, b: a != b),
    "ul": (False, lambda a, b: a < b), "ule": (False, lambda a, b: a <= b),
    "ug": (False, lambda a, b: a > b), "uge": (False, lambda a, b: a >= b),
    "sl": (True, lambda a, b: a < b), "sle": (True, lambda a, b: a <= b),
    "sg": (True, lambda a, b: a > b), "sge": (True, lambda a, b: a >= b),
}


@pytest.mark.parametrize("op, a, b, want", [
    ("sl", 0xFF, 0x00, True),    # -1 < 0
    ("ul", 0xFF, 0x00, False),   # 255 < 0
    ("sg", 0x7F, 0x80, True),    # 127 > -128
    ("ug", 0x7F, 0x80, False),
    ("sle", 0x80, 0x80, True),
    ("sge", 0x80, 0x7F, False),
    ("e", 5, 5, True), ("ne", 5, 5, False),
])
def test_icmp_i8(w: World, op: str, a: int, b: int, want: bool) -> None:
    assert icmp(w, op, 8, a, b) is w.lit_bool(want)


def test_icmp_signed_on_i64_extremes(w: World) -> None:
    int_min, minus1 = 2**63, 2**64 - 1
    assert icmp(w, "sl", 64, int_min, minus1) is w.lit_bool(True)
    assert icmp(w, "ul", 64, int_min, minus1) is w.lit_bool(True)
    assert icmp(w, "sl", 64, minus1, 0) is w.lit_bool(True)
    assert icmp(w, "ug", 64, minus1, 0) is w.lit_bool(True)


@_PROP
@given(st.sampled_from(WIDTHS), st.data())
def test_property_icmp(w: World, bits: int, data: st.DataObject) -> None:
    a = data.draw(st.integers(0, 2**bits - 1))
    b = data.draw(st.one_of(st.just(a), st.integers(0, 2**bits - 1)))
    for op, (is_signed, f) in _ICMP.items():
        x, y = (signed(a, bits), signed(b, bits)) if is_signed else (a, b)
        assert icmp(w, op, bits, a, b) is w.lit_bool(f(x, y)), (op, a, b)


# ----------------------------------------------------------------------------- wrap


MODE_NSW, MODE_NUW = 1, 2


def wrap_ref(op: str, bits: int, mode: int, a: int, b: int) -> int | None:
    """The folded value, or None when the operation is undefined (must not fold)."""
    s = 2**bits
    if op == "shl":
        if b >= bits:
            return None
        exact_u = a << b
        exact_s = signed(a, bits) * 2**b
    else:
        f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y}[op]
        exact_u = f(a, b)
        exact_s = f(signed(a, bits), signed(b, bits))
    if mode & MODE_NUW and not 0 <= exact_u < s:
        return None
    if mode & MODE_NSW and not -(s // 2) <= exact_s < s // 2:
        return None
    return exact_u % s


@pytest.mark.parametrize("op, mode, a, b, want", [
    ("add", 0, 200, 100, 44),
    ("add", 1, 200, 100, 44),      # -56 + 100 = 44: no signed overflow
    ("add", 2, 200, 100, None),    # 300 > 255: unsigned overflow
    ("add", 3, 200, 100, None),
    ("add", 1, 100, 100, None),    # 200 > 127: signed overflow
    ("add", 2, 100, 100, 200),
    ("add", 3, 100, 27, 127),
    ("sub", 0, 1, 2, 255),
    ("sub", 2, 1, 2, None),        # nuw: 1 - 2 < 0
    ("sub", 1, 1, 2, 255),         # 1 - 2 = -1 fits signed
    ("sub", 1, 0x80, 1, None),     # -128 - 1 overflows signed
    ("mul", 0, 16, 16, 0),
    ("mul", 2, 16, 16, None),
    ("mul", 1, 0xFF, 0xFF, 1),     # -1 * -1 = 1
    ("mul", 2, 0xFF, 0xFF, None),  # 255 * 255 overflows unsigned
    ("mul", 1, 0x80, 0xFF, None),  # -128 * -1 = 128 overflows signed
    ("shl", 0, 1, 7, 128),
    ("shl", 1, 1, 7, None),        # 1 << 7 = 128 = -128 ≠ 128 signed
    ("shl", 2, 1, 7, 128),
    ("shl", 2, 3, 7, None),        # shifts a 1 out
    ("shl", 0, 3, 7, 128),
    ("shl", 0, 1, 8, None),        # shift by the width: poison
    ("shl", 0, 1, 200, None),
    ("shl", 1, 0xFF, 7, 128),      # -1 << 7 = -128: fits
])
def test_wrap_i8(w: World, op: str, mode: int, a: int, b: int, want: int | None) -> None:
    assert wrap_ref(op, 8, mode, a, b) == want  # the reference agrees with the table
    r = wrap(w, op, 8, mode, a, b)
    if want is None:
        assert isinstance(r, App) and r.head is ax(w, f"core.wrap.{op}")
    else:
        assert r is w.lit_idx(256, want)


def test_wrap_with_a_symbolic_mode_or_operand_does_not_fold(w: World) -> None:
    m = w.param(w.nat(), "m")
    assert isinstance(w.apps(ax(w, "core.wrap.add"), n(w, 256), m, pair(w, 256, 1, 2)), App)
    x = w.param(w.idx_n(256), "x")
    assert isinstance(w.apps(ax(w, "core.wrap.add"), n(w, 256), n(w, 0), w.tuple([x, w.lit_idx(256, 1)])), App)


def test_wrap_with_an_implicit_hole_folds_only_after_zonk(w: World) -> None:
    h = w.hole(w.nat(), "s")
    app = w.apps(ax(w, "core.wrap.add"), h, n(w, 0), pair(w, 256, 1, 2))
    assert isinstance(app, App)
    h.value = n(w, 256)
    assert w.zonk(app) is w.lit_idx(256, 3)


@_PROP
@given(st.sampled_from(["add", "sub", "mul"]), st.sampled_from(WIDTHS), st.integers(0, 3), st.data())
def test_property_wrap(w: World, op: str, bits: int, mode: int, data: st.DataObject) -> None:
    edge = st.sampled_from([0, 1, 2 ** (bits - 1) - 1, 2 ** (bits - 1), 2**bits - 1])
    a = data.draw(st.one_of(edge, st.integers(0, 2**bits - 1)))
    b = data.draw(st.one_of(edge, st.integers(0, 2**bits - 1)))
    want = wrap_ref(op, bits, mode, a, b)
    r = wrap(w, op, bits, mode, a, b)
    if want is None:
        assert isinstance(r, App), (op, bits, mode, a, b, r)
    else:
        assert r is w.lit_idx(2**bits, want), (op, bits, mode, a, b, r)
    if mode == 0:
        assert want is not None  # mode 0 always wraps


@_PROP
@given(st.sampled_from(WIDTHS), st.integers(0, 3), st.data())
def test_property_shl(w: World, bits: int, mode: int, data: st.DataObject) -> None:
    a = data.draw(st.integers(0, 2**bits - 1))
    b = data.draw(st.integers(0, bits + 3))
    want = wrap_ref("shl", bits, mode, a, b)
    r = wrap(w, "shl", bits, mode, a, b)
    assert (r is w.lit_idx(2**bits, want)) if want is not None else isinstance(r, App)


# ----------------------------------------------------------------------------- extrema and shr


@pytest.mark.parametrize("op, a, b, want", [
    ("umin", 0xFF, 1, 1), ("umax", 0xFF, 1, 0xFF),
    ("smin", 0xFF, 1, 0xFF), ("smax", 0xFF, 1, 1),
    ("smin", 0x80, 0x7F, 0x80), ("smax", 0x80, 0x7F, 0x7F),
    ("umin", 3, 3, 3),
])
def test_extrema(w: World, op: str, a: int, b: int, want: int) -> None:
    assert w.apps(ax(w, f"core.extrema.{op}"), n(w, 256), pair(w, 256, a, b)) is w.lit_idx(256, want)


@pytest.mark.parametrize("op, a, b, want", [
    ("a", 0x80, 3, 0xF0),   # -128 >> 3 = -16
    ("l", 0x80, 3, 0x10),
    ("a", 0x7F, 3, 0x0F),
    ("a", 0xFF, 7, 0xFF),   # -1 >> 7 = -1
    ("l", 0xFF, 7, 0x01),
    ("a", 0x80, 0, 0x80),
    ("a", 0x80, 8, None),   # shift by the width
    ("l", 0x80, 8, None),
    ("l", 1, 255, None),
])
def test_shr(w: World, op: str, a: int, b: int, want: int | None) -> None:
    r = w.apps(ax(w, f"core.shr.{op}"), n(w, 256), pair(w, 256, a, b))
    assert (r is w.lit_idx(256, want)) if want is not None else isinstance(r, App)


@_PROP
@given(st.sampled_from(WIDTHS), st.data())
def test_property_shr(w: World, bits: int, data: st.DataObject) -> None:
    s = 2**bits
    a = data.draw(st.integers(0, s - 1))
    b = data.draw(st.integers(0, bits - 1))
    assert w.apps(ax(w, "core.shr.l"), n(w, s), pair(w, s, a, b)) is w.lit_idx(s, a >> b)
    assert w.apps(ax(w, "core.shr.a"), n(w, s), pair(w, s, a, b)) is w.lit_idx(s, (signed(a, bits) >> b) % s)


# ----------------------------------------------------------------------------- bit1 and bit2


@pytest.mark.parametrize("op, x, want", [
    ("f", 0x5A, 0x00), ("t", 0x5A, 0xFF), ("id", 0x5A, 0x5A), ("neg", 0x5A, 0xA5), ("neg", 0, 0xFF),
])
def test_bit1(w: World, op: str, x: int, want: int) -> None:
    assert w.apps(ax(w, f"core.bit1.{op}"), n(w, 256), n(w, 0), w.lit_idx(256, x)) is w.lit_idx(256, want)


_BIT2: dict[str, Callable[[int, int], int]] = {
    "f": lambda a, b: 0, "nor": lambda a, b: ~(a | b), "nciff": lambda a, b: ~a & b,
    "nfst": lambda a, b: ~a, "niff": lambda a, b: a & ~b, "nsnd": lambda a, b: ~b,
    "xor_": lambda a, b: a ^ b, "nand": lambda a, b: ~(a & b), "and_": lambda a, b: a & b,
    "nxor": lambda a, b: ~(a ^ b), "snd": lambda a, b: b, "iff": lambda a, b: ~a | b,
    "fst": lambda a, b: a, "ciff": lambda a, b: a | ~b, "or_": lambda a, b: a | b,
    "t": lambda a, b: -1,
}


@pytest.mark.parametrize("op, want", [
    ("and_", 0b1000), ("or_", 0b1110), ("xor_", 0b0110), ("nand", 0b11110111),
    ("nor", 0b11110001), ("nxor", 0b11111001), ("fst", 0b1100), ("snd", 0b1010),
])
def test_bit2_i8(w: World, op: str, want: int) -> None:
    r = w.apps(ax(w, f"core.bit2.{op}"), n(w, 256), n(w, 0), pair(w, 256, 0b1100, 0b1010))
    assert r is w.lit_idx(256, want)


def test_bit2_on_bool(w: World) -> None:
    for a in (0, 1):
        for b in (0, 1):
            t = pair(w, 2, a, b)
            assert w.apps(ax(w, "core.bit2.and_"), n(w, 2), n(w, 0), t) is w.lit_bool(bool(a & b))
            assert w.apps(ax(w, "core.bit2.or_"), n(w, 2), n(w, 0), t) is w.lit_bool(bool(a | b))
            assert w.apps(ax(w, "core.bit2.xor_"), n(w, 2), n(w, 0), t) is w.lit_bool(bool(a ^ b))


@_PROP
@given(st.sampled_from(sorted(_BIT2)), st.sampled_from(WIDTHS), st.data())
def test_property_bit2(w: World, op: str, bits: int, data: st.DataObject) -> None:
    s = 2**bits
    a = data.draw(st.integers(0, s - 1))
    b = data.draw(st.integers(0, s - 1))
    r = w.apps(ax(w, f"core.bit2.{op}"), n(w, s), n(w, 0), pair(w, s, a, b))
    assert r is w.lit_idx(s, _BIT2[op](a, b) & (s - 1))


# ----------------------------------------------------------------------------- bitcast and conv


def bitcast(w: World, src: Def, dst: Def, x: Def) -> Def:
    return w.apps(ax(w, "core.bitcast"), src, dst, x)


def test_bitcast_preserves_the_value(w: World) -> None:
    i8, i32 = w.idx_n(2**8), w.idx_n(2**32)
    assert bitcast(w, w.bool_t(), w.nat(), w.lit_bool(False)) is n(w, 0)
    assert bitcast(w, w.bool_t(), w.nat(), w.lit_bool(True)) is n(w, 1)
    assert bitcast(w, w.nat(), i32, n(w, 7)) is w.lit_idx(2**32, 7)
    assert bitcast(w, i32, i8, w.lit_idx(2**32, 200)) is w.lit_idx(256, 200)
    assert bitcast(w, i8, i32, w.lit_idx(256, 200)) is w.lit_idx(2**32, 200)  # not sign-extended
    assert bitcast(w, w.nat(), w.idx_n(4), n(w, 3)) is w.lit_idx(4, 3)
    assert bitcast(w, i8, w.nat(), w.lit_idx(256, 255)) is n(w, 255)


def test_bitcast_to_the_same_type_is_the_identity(w: World) -> None:
    x = w.param(w.idx_n(2**32), "x")
    assert bitcast(w, w.idx_n(2**32), w.idx_n(2**32), x) is x


@pytest.mark.parametrize("src, dst, v", [
    ("nat", 4, 4), ("nat", 4, 100), ("nat", 2**8, 256), (2**32, 2**8, 300), (2**32, 2, 2),
])
def test_bitcast_of_a_value_that_does_not_fit_does_not_fold(w: World, src: object, dst: int, v: int) -> None:
    src_t = w.nat() if src == "nat" else w.idx_n(src)  # type: ignore[arg-type]
    x = n(w, v) if src == "nat" else w.lit_idx(src, v)  # type: ignore[arg-type]
    r = bitcast(w, src_t, w.idx_n(dst), x)
    assert isinstance(r, App) and r.head is ax(w, "core.bitcast")


def test_bitcast_to_a_non_integer_type_does_not_fold(w: World) -> None:
    ptr = w.app(ax(w, "mem.Ptr"), w.tuple([w.idx_n(2**32), n(w, 0)]))
    assert isinstance(bitcast(w, w.idx_n(2**64), ptr, w.lit_idx(2**64, 0)), App)


def conv(w: World, op: str, ss: int, ds: int, v: int) -> Def:
    return w.apps(ax(w, f"core.conv.{op}"), n(w, ss), n(w, ds), w.lit_idx(ss, v))


@pytest.mark.parametrize("op, ss, ds, v, want", [
    ("s", 2**8, 2**16, 200, 65480),      # sign extension of -56
    ("u", 2**8, 2**16, 200, 200),        # zero extension
    ("s", 2**8, 2**16, 100, 100),
    ("u", 2**16, 2**8, 300, 44),         # truncation
    ("s", 2**16, 2**8, 65535, 255),      # -1 stays -1
    ("s", 2**32, 2**64, 2**32 - 1, 2**64 - 1),
    ("u", 2**32, 2**64, 2**32 - 1, 2**32 - 1),
    ("s", 2, 2**8, 1, 255),              # a Bool tt, sign-extended, is -1
    ("u", 2, 2**8, 1, 1),
])
def test_conv(w: World, op: str, ss: int, ds: int, v: int, want: int) -> None:
    assert conv(w, op, ss, ds, v) is w.lit_idx(ds, want)


@_PROP
@given(st.sampled_from(WIDTHS), st.sampled_from(WIDTHS), st.data())
def test_property_conv(w: World, sb: int, db: int, data: st.DataObject) -> None:
    v = data.draw(st.integers(0, 2**sb - 1))
    assert conv(w, "u", 2**sb, 2**db, v) is w.lit_idx(2**db, v % 2**db)
    assert conv(w, "s", 2**sb, 2**db, v) is w.lit_idx(2**db, signed(v, sb) % 2**db)


# ----------------------------------------------------------------------------- trait


def _types(w: World) -> dict[str, Def]:
    i8, i16, i32 = w.idx_n(2**8), w.idx_n(2**16), w.idx_n(2**32)
    return {
        "Bool": w.bool_t(), "I8": i8, "I16": i16, "I32": i32, "I64": w.idx_n(2**64), "Nat": w.nat(),
        "Idx 3": w.idx_n(3), "Idx 1000": w.idx_n(1000),
        "ptr": w.app(ax(w, "mem.Ptr"), w.tuple([i32, n(w, 0)])),
        "gptr": w.app(ax(w, "mem.Ptr"), w.tuple([w.arr(n(w, 4), i8), n(w, 1)])),
        "Stream": ax(w, "gpu.Stream"),
        "[I8, I32]": w.sigma([i8, i32]),
        "[I32, I8]": w.sigma([i32, i8]),
        "[I8, I16, I8]": w.sigma([i8, i16, i8]),
        "«4; I16»": w.arr(n(w, 4), i16),
        "«3; [I8, I32]»": w.arr(n(w, 3), w.sigma([i8, i32])),
        "[]": w.unit_t(),
        "[I8, Nat]": w.sigma([i8, w.nat()]),
    }


@pytest.mark.parametrize("name, size, align", [
    ("Bool", 1, 1), ("I8", 1, 1), ("I16", 2, 2), ("I32", 4, 4), ("I64", 8, 8), ("Nat", 8, 8),
    ("Idx 3", 1, 1), ("Idx 1000", 2, 2), ("ptr", 8, 8), ("gptr", 8, 8), ("Stream", 8, 8),
    ("[I8, I32]", 8, 4), ("[I32, I8]", 8, 4), ("[I8, I16, I8]", 6, 2), ("«4; I16»", 8, 2),
    ("«3; [I8, I32]»", 24, 4), ("[I8, Nat]", 16, 8),
])
def test_trait_size_and_align(w: World, name: str, size: int, align: int) -> None:
    t = _types(w)[name]
    assert w.app(ax(w, "core.trait.size"), t) is n(w, size)
    assert w.app(ax(w, "core.trait.align"), t) is n(w, align)


def test_trait_of_an_unknown_type_does_not_fold(w: World) -> None:
    sym = w.arr(w.param(w.nat(), "n"), w.idx_n(256))
    assert isinstance(w.app(ax(w, "core.trait.size"), sym), App)
    assert isinstance(w.app(ax(w, "core.trait.size"), w.idx(w.param(w.nat(), "k"))), App)


# ----------------------------------------------------------------------------- idx


@pytest.mark.parametrize("s, mode, l, want", [(4, 0, 3, 3), (4, 0, 0, 0), (256, 0, 255, 255), (2, 3, 1, 1),
                                           # mode 0 wraps (upstream's lit/core/idx.mim: 42 into Idx 23 is 19)
                                           (23, 0, 42, 19), (4, 0, 4, 0), (1, 0, 1, 0)])
def test_idx(w: World, s: int, mode: int, l: int, want: int) -> None:
    assert w.apps(ax(w, "core.idx"), n(w, s), n(w, mode), n(w, l)) is w.lit_idx(s, want)


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_idx_out_of_range_without_wrap_does_not_fold(w: World, mode: int) -> None:
    # undefined (upstream: ⊥): left for the interpreter to report
    assert isinstance(w.apps(ax(w, "core.idx"), n(w, 23), n(w, mode), n(w, 42)), App)


# ----------------------------------------------------------------------------- div


@pytest.mark.parametrize("op, a, b, want", [
    ("udiv", 200, 7, 28), ("urem", 200, 7, 4),
    ("sdiv", 0xF9, 2, 0xFD),   # -7 / 2 = -3 (truncation)
    ("srem", 0xF9, 2, 0xFF),   # -7 % 2 = -1 (sign of the dividend)
    ("sdiv", 7, 0xFE, 0xFD),   # 7 / -2 = -3
    ("srem", 7, 0xFE, 1),
    ("sdiv", 0x80, 1, 0x80),
    ("udiv", 0x80, 0xFF, 0),
])
def test_div(w: World, op: str, a: int, b: int, want: int) -> None:
    m = mem_token(w)
    assert div(w, op, 8, a, b, m) is w.tuple([m, w.lit_idx(256, want)])


@pytest.mark.parametrize("op", ["sdiv", "udiv", "srem", "urem"])
def test_division_by_zero_does_not_fold(w: World, op: str) -> None:
    r = div(w, op, 8, 7, 0, mem_token(w))
    assert isinstance(r, App) and r.head is ax(w, f"core.div.{op}")


def test_sdiv_int_min_by_minus_one_does_not_fold(w: World) -> None:
    for bits in WIDTHS:
        assert isinstance(div(w, "sdiv", bits, 2 ** (bits - 1), 2**bits - 1, mem_token(w)), App)


def test_srem_int_min_by_minus_one_does_not_fold(w: World) -> None:
    assert isinstance(div(w, "srem", 8, 0x80, 0xFF, mem_token(w)), App)


@_PROP
@given(st.sampled_from(WIDTHS), st.data())
def test_property_udiv_urem(w: World, bits: int, data: st.DataObject) -> None:
    s = 2**bits
    a = data.draw(st.integers(0, s - 1))
    b = data.draw(st.integers(1, s - 1))
    m = mem_token(w)
    assert div(w, "udiv", bits, a, b, m) is w.tuple([m, w.lit_idx(s, a // b)])
    assert div(w, "urem", bits, a, b, m) is w.tuple([m, w.lit_idx(s, a % b)])


@_PROP
@given(st.sampled_from(WIDTHS), st.data())
def test_property_sdiv_srem(w: World, bits: int, data: st.DataObject) -> None:
    s = 2**bits
    a = data.draw(st.integers(0, s - 1))
    b = data.draw(st.integers(1, s - 1))
    sa, sb = signed(a, bits), signed(b, bits)
    m = mem_token(w)
    r = div(w, "sdiv", bits, a, b, m)
    if sa == -(s // 2) and sb == -1:
        assert isinstance(r, App)
        return
    q = abs(sa) // abs(sb) * (1 if (sa < 0) == (sb < 0) else -1)  # C: truncation toward zero
    assert r is w.tuple([m, w.lit_idx(s, q % s)])
    assert div(w, "srem", bits, a, b, m) is w.tuple([m, w.lit_idx(s, (sa - q * sb) % s)])


def test_div_result_type(w: World) -> None:
    m = mem_token(w)
    r = div(w, "udiv", 32, 10, 3, m)
    assert w.type_of(r) is w.sigma([w.app(ax(w, "mem.M"), n(w, 0)), w.idx_n(2**32)])
    assert isinstance(w.extract_n(r, 2, 1), Lit)
