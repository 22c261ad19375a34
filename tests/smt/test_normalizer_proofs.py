"""Every `core` normalizer is proved over bit-vectors of every width it applies to, as Alive2
proves peephole rules (PHASES.md); see verimim/smt/normalizer_proofs.py for what is proved.

One test per (normalizer, width). Deliberately wrong rules, fed to the same driver, must be
refuted with a counterexample (a proof that cannot fail is a defect), and correct algebraic
rules must be proved. The pieces the proofs trust are tested on their own: the independent
bit-vector semantics against hand-computed values, the exact symbolic integers against Python's
integers, the Boolean abstraction against Z3."""
from __future__ import annotations

import operator
from collections.abc import Callable

import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verimim.smt import bounds, bv
from verimim.smt.normalizer_proofs import (
    NOT_BIT_VECTOR,
    Case,
    CaseResult,
    Query,
    cases,
    plugin_world,
    prove,
)
from verimim.smt.symbolic import Explorer, SymBool, SymInt, signed_width

from verimim.frontend.loader import load_text
from verimim.ir.defs import App, Def, Lit, Pack, Tuple
from verimim.ir.world import World
from verimim.plug import core_rules
from verimim.plug.core import lit_pair, size_of

TIMEOUT_MS = 10_000  # per Z3 query: a time-out is unknown, never proved
CASES = cases()

KNOWN_BUGS: set[tuple[str, object]] = set()  # (annex, size) cases refuted by a bug not yet fixed


def _pow2(t: object) -> bool:
    return isinstance(t, int) and t >= 2 and t & (t - 1) == 0


def _params() -> list[object]:
    out: list[object] = []
    for c in CASES:
        marks = []
        if (c.annex, c.types[0]) in KNOWN_BUGS:
            marks.append(pytest.mark.xfail(strict=True, raises=AssertionError, reason="a known normalizer bug"))
        out.append(pytest.param(c, id=str(c).replace(" ", "-"), marks=marks))
    return out


# ----------------------------------------------------------------------------- the proofs


def test_every_core_normalizer_has_cases_at_every_width() -> None:
    world = plugin_world()
    registered = {a for a in world.normalizers if a.startswith("core.")}
    covered = {c.annex for c in CASES}
    not_bv = {a for a in registered if a.removeprefix("core.").partition(".")[0] in NOT_BIT_VECTOR}
    assert covered | not_bv == registered
    idx_families = {"icmp", "extrema", "wrap", "shr", "bit2", "bit1", "div", "idx"}
    for annex in covered:
        if annex.removeprefix("core.").partition(".")[0] in idx_families:
            widths = {c.types[0] for c in CASES if c.annex == annex}
            assert {2, 2**8, 2**16, 2**32, 2**64} <= widths, annex


@pytest.mark.parametrize("case", _params())
def test_normalizer_is_proved(case: Case) -> None:
    r = prove(case, timeout_ms=TIMEOUT_MS)
    assert r.status == "proved", r.describe()
    if all(t == "Nat" or _pow2(t) for t in case.types):
        assert r.complete, r.describe()  # every defined all-literal application is folded


def test_trait_has_no_bit_vector_meaning() -> None:
    with pytest.raises(bv.NoSemantics, match="layout"):
        w = plugin_world()
        bv.encode_app("core.trait.size", [w.idx_n(256)], {})


def test_odd_size_signed_overflow_stays_fixed() -> None:
    # These proofs found core_ops.wrap_signed_overflow accepting -(s+1)//2 for an odd s (no `Idx s`
    # value reads as that signed number): `core.wrap.add nsw (2, 2)` on Idx 3 (-1 + -1) folded to 1.
    for annex, size in (("core.wrap.add", 3), ("core.wrap.mul", 7), ("core.wrap.sub", 7)):
        r = prove(Case(annex, (size,)), timeout_ms=TIMEOUT_MS)
        assert r.status == "proved", r.describe()


def test_status_is_proved_only_when_every_query_is() -> None:
    def result(*statuses: str) -> CaseResult:
        qs = tuple(Query("q", "sound", s, 0.0) for s in statuses)  # type: ignore[arg-type]
        return CaseResult(Case("core.wrap.add", (256,)), qs, 1, 1, 0.0)
    assert result("proved", "proved").status == "proved"
    assert result("proved", "unknown").status == "unknown"
    assert result("unknown", "refuted").status == "refuted"


# ----------------------------------------------------------------------------- wrong rules, right rules


Rule = Callable[[World, App], "Def | None"]


def world_with(annex: str, rule: Rule, keep_original: bool = False) -> World:
    """A fresh World whose normalizer for `annex` is `rule` (tried before the real one if
    `keep_original`)."""
    world, _ = load_text("plugin core; plugin mem;", "<rules>")
    arity, original = world.normalizers[annex]

    def norm(w: World, app: App) -> Def | None:
        out = rule(w, app)
        return out if out is not None or not keep_original else original(w, app)

    world.register_normalizer(annex, arity, norm)
    return world


def operands(pair: Def) -> tuple[Def, Def] | None:
    if isinstance(pair, Tuple) and len(pair.ops) == 2:
        return pair.ops[0], pair.ops[1]
    if isinstance(pair, Pack) and pair.body.closed:
        return pair.body, pair.body
    return None


def _wrap_literals(app: App) -> tuple[Def, int, int, int, int] | None:
    s_def, mode_def, pair_def = app.args()
    s, pair = size_of(s_def), lit_pair(pair_def)
    if s is None or pair is None or not isinstance(mode_def, Lit):
        return None
    return s_def, s, mode_def.value, *pair


def wrong_carry_add(w: World, app: App) -> Def | None:
    """Adds with an end-around carry (one's complement) instead of dropping it."""
    got = _wrap_literals(app)
    if got is None or got[2] != 0:
        return None
    s_def, s, _, a, b = got
    total = a + b
    return w.lit(w.idx(s_def), (total + (1 if total >= s else 0)) % s)


def add_without_nsw_check(w: World, app: App) -> Def | None:
    """Checks nuw but forgets nsw: folds an undefined signed overflow to its wrapped value."""
    got = _wrap_literals(app)
    if got is None:
        return None
    s_def, s, mode, a, b = got
    if mode & 2 and a + b >= s:
        return None
    return w.lit(w.idx(s_def), (a + b) % s)


def sub_of_itself_forgets_an_operand(w: World, app: App) -> Def | None:
    """x -nsw x ↦ 0 -nsw x: the value is wrong, and INT_MIN becomes undefined."""
    s_def, mode_def, pair_def = app.args()
    ops = operands(pair_def)
    if ops is None or ops[0] is not ops[1] or isinstance(ops[0], Lit) or not isinstance(mode_def, Lit):
        return None
    s = size_of(s_def)
    if s is None:
        return None
    zero = w.lit(w.idx(s_def), 0)
    return w.apps(w.annex("core.wrap.sub"), s_def, mode_def, w.tuple([zero, ops[0]]))


def shr_by_the_width(w: World, app: App) -> Def | None:
    """Logical shift right whose guard is `b > width` instead of `b >= width`."""
    s_def, pair_def = app.args()
    s, pair = size_of(s_def), lit_pair(pair_def)
    if s is None or pair is None:
        return None
    a, b = pair
    if b > s.bit_length() - 1:
        return None
    return w.lit(w.idx(s_def), a // 2**b)


def signed_of(v: int, s: int) -> int:
    return v - s if v >= (s + 1) // 2 else v


def sdiv_rounding_down(w: World, app: App) -> Def | None:
    """Signed division with Python's floor division instead of C's truncation."""
    s_def, arg = app.args()
    s = size_of(s_def)
    if s is None or not isinstance(arg, Tuple):
        return None
    mem, pair_def = arg.ops
    pair = lit_pair(pair_def)
    if pair is None or pair[1] == 0:
        return None
    a, b = signed_of(pair[0], s), signed_of(pair[1], s)
    if a == -(s // 2) and b == -1:
        return None
    return w.tuple([mem, w.lit(w.idx(s_def), (a // b) % s)])


def srem_without_overflow_check(w: World, app: App) -> Def | None:
    """srem folds INT_MIN % -1 to 0 (its mathematical value), hiding LLVM's undefined case."""
    s_def, arg = app.args()
    s = size_of(s_def)
    if s is None or not isinstance(arg, Tuple):
        return None
    mem, pair_def = arg.ops
    pair = lit_pair(pair_def)
    if pair is None or pair[1] == 0:
        return None
    a, b = signed_of(pair[0], s), signed_of(pair[1], s)
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return w.tuple([mem, w.lit(w.idx(s_def), (a - q * b) % s)])


def udiv_without_zero_check(w: World, app: App) -> Def | None:
    """Folds udiv without looking at the divisor: Python raises on a zero one."""
    s_def, arg = app.args()
    if not isinstance(arg, Tuple):
        return None
    mem, pair_def = arg.ops
    pair = lit_pair(pair_def)
    return None if pair is None else w.tuple([mem, w.lit(w.idx(s_def), pair[0] // pair[1])])


def signed_less_compares_unsigned(w: World, app: App) -> Def | None:
    pair = lit_pair(app.args()[1])
    return None if pair is None else w.lit_bool(bool(pair[0] < pair[1]))


def conv_s_zero_extends(w: World, app: App) -> Def | None:
    _ss, ds_def, x = app.args()
    ds = size_of(ds_def)
    return None if ds is None or not isinstance(x, Lit) else w.lit(w.idx(ds_def), x.value % ds)


def nand_as_and(w: World, app: App) -> Def | None:
    """A truth table off by eight: nand (tag 7) folded as and_ (tag 8)."""
    pair = lit_pair(app.args()[2])
    return None if pair is None else w.lit(w.idx(app.args()[0]), pair[0] & pair[1])


def mul_minus_one_to_neg(w: World, app: App) -> Def | None:
    """x *nsw -1 ↦ 0 -us x: right value, but INT_MIN·-1 was undefined and no longer is."""
    s_def, mode_def, pair_def = app.args()
    ops, s = operands(pair_def), size_of(s_def)
    if ops is None or s is None or not isinstance(mode_def, Lit) or isinstance(ops[0], Lit):
        return None
    x, m1 = ops
    if not (isinstance(m1, Lit) and m1.value == s - 1):
        return None
    zero = w.lit(w.idx(s_def), 0)
    return w.apps(w.annex("core.wrap.sub"), s_def, w.lit_nat(0), w.tuple([zero, x]))


P, Q = 2147483647, 2147483629  # two primes: P·Q = 4611685975477714963


def mul_wrong_on_a_semiprime(w: World, app: App) -> Def | None:
    """Wrong only where a·b = P·Q with both factors > 1: refuting it means factoring."""
    got = _wrap_literals(app)
    if got is None:
        return None
    s_def, s, mode, a, b = got
    if mode != 2 or a * b >= s:
        return None
    wrong = a * b == P * Q and a > 1 and b > 1
    return w.lit(w.idx(s_def), 0 if wrong else a * b)


def idx_wraps_in_every_mode(w: World, app: App) -> Def | None:
    """Wraps a value out of range whatever the mode: only mode 0 allows it (upstream's
    normalize_idx makes ⊥ otherwise); folding it in mode 1 gives a value to undefined behaviour."""
    s_def, mode_def, l_def = app.args()
    s = size_of(s_def)
    if s is None or not s or not isinstance(l_def, Lit) or not isinstance(mode_def, Lit):
        return None
    return w.lit(w.idx(s_def), l_def.value % s)


WRONG_RULES: list[tuple[str, str, Rule, tuple[int, ...]]] = [
    ("idx wraps in every mode", "core.idx", idx_wraps_in_every_mode, (2, 2**8, 23)),
    ("wrong carry", "core.wrap.add", wrong_carry_add, (2, 2**8, 2**64)),
    ("nsw check dropped", "core.wrap.add", add_without_nsw_check, (2**8, 2**64)),
    ("x - x with nsw", "core.wrap.sub", sub_of_itself_forgets_an_operand, (2**8, 2**64)),
    ("shr by the width", "core.shr.l", shr_by_the_width, (2**8, 2**64)),
    ("sdiv rounds down", "core.div.sdiv", sdiv_rounding_down, (2**8, 2**32)),
    ("srem INT_MIN % -1", "core.div.srem", srem_without_overflow_check, (2**8, 2**64)),
    ("udiv by zero crashes", "core.div.udiv", udiv_without_zero_check, (2**8,)),
    ("sl compares unsigned", "core.icmp.sl", signed_less_compares_unsigned, (2**8, 2**64)),
    ("nand as and", "core.bit2.nand", nand_as_and, (2**8, 2**64)),
    ("x * -1 to 0 - x", "core.wrap.mul", mul_minus_one_to_neg, (2**8, 2**64)),
]


@pytest.mark.parametrize("name, annex, rule, sizes", [pytest.param(*r, id=r[0]) for r in WRONG_RULES])
def test_wrong_rule_is_refuted_with_a_counterexample(name: str, annex: str, rule: Rule,
                                                     sizes: tuple[int, ...]) -> None:
    world = world_with(annex, rule, keep_original=True)
    for s in sizes:
        r = prove(Case(annex, (s,)), world, timeout_ms=TIMEOUT_MS)
        assert r.status == "refuted", r.describe()
        sound = [q for q in r.failures() if q.status == "refuted"]
        assert any("=" in q.detail for q in sound), r.describe()  # names the inputs


def test_conv_s_zero_extending_is_refuted() -> None:
    world = world_with("core.conv.s", conv_s_zero_extends)
    r = prove(Case("core.conv.s", (2**8, 2**32)), world, timeout_ms=TIMEOUT_MS)
    assert r.status == "refuted" and "a = " in r.failures()[0].detail, r.describe()


def test_a_counterexample_z3_cannot_find_is_unknown_never_proved() -> None:
    world = world_with("core.wrap.mul", mul_wrong_on_a_semiprime, keep_original=True)
    r = prove(Case("core.wrap.mul", (2**64,)), world, timeout_ms=100)
    assert r.status == "unknown", r.describe()


def x_plus_zero(w: World, app: App) -> Def | None:
    _s, _m, pair = app.args()
    ops = operands(pair)
    return ops[0] if ops and not isinstance(ops[0], Lit) and isinstance(ops[1], Lit) and ops[1].value == 0 else None


def x_times_one(w: World, app: App) -> Def | None:
    _s, _m, pair = app.args()
    ops = operands(pair)
    return ops[0] if ops and not isinstance(ops[0], Lit) and isinstance(ops[1], Lit) and ops[1].value == 1 else None


def dropping_x_minus_x(w: World, app: App) -> Def | None:
    """x - x ↦ 0 for any x: drops an x that may be undefined (the interpreter reported it)."""
    s_def, _m, pair = app.args()
    ops = operands(pair)
    return w.lit(w.idx(s_def), 0) if ops and ops[0] is ops[1] and not isinstance(ops[0], Lit) else None


def x_minus_x(w: World, app: App) -> Def | None:
    s_def, _m, pair = app.args()
    ops = operands(pair)
    same = ops and ops[0] is ops[1] and not isinstance(ops[0], Lit) and core_rules.never_undefined(ops[0])
    return w.lit(w.idx(s_def), 0) if same else None  # an x that may be undefined must stay


def x_and_x(w: World, app: App) -> Def | None:
    ops = operands(app.args()[2])
    return ops[0] if ops and ops[0] is ops[1] and not isinstance(ops[0], Lit) else None


def x_xor_x(w: World, app: App) -> Def | None:
    ops = operands(app.args()[2])
    same = ops and ops[0] is ops[1] and not isinstance(ops[0], Lit) and core_rules.never_undefined(ops[0])
    return w.lit(w.idx(app.args()[0]), 0) if same else None


def x_udiv_one(w: World, app: App) -> Def | None:
    _s, arg = app.args()
    if not isinstance(arg, Tuple):
        return None
    mem, pair = arg.ops
    ops = operands(pair)
    if ops and not isinstance(ops[0], Lit) and isinstance(ops[1], Lit) and ops[1].value == 1:
        return w.tuple([mem, ops[0]])
    return None


RIGHT_RULES: list[tuple[str, str, Rule]] = [
    ("x + 0", "core.wrap.add", x_plus_zero), ("x * 1", "core.wrap.mul", x_times_one),
    ("x - x", "core.wrap.sub", x_minus_x), ("x & x", "core.bit2.and_", x_and_x),
    ("x ^ x", "core.bit2.xor_", x_xor_x), ("x udiv 1", "core.div.udiv", x_udiv_one),
]


@pytest.mark.parametrize("name, annex, rule", [pytest.param(*r, id=r[0]) for r in RIGHT_RULES])
def test_right_algebraic_rule_is_proved(name: str, annex: str, rule: Rule) -> None:
    world = world_with(annex, rule, keep_original=True)
    for w_bits in (1, 8, 64) if name != "x * 1" else (8, 64):
        r = prove(Case(annex, (2**w_bits,)), world, timeout_ms=TIMEOUT_MS)
        assert r.status == "proved", r.describe()
        assert r.rewrites > 0  # the rule did fire on the symbolic shapes


def test_x_times_one_hides_undefined_behaviour_on_i1() -> None:
    """On Idx 2 the literal 1 is -1 signed, and (-1)·(-1) = 1 overflows nsw: folding x *nsw 1
    to x is a refinement (Alive2 and LLVM accept it) but removes UB the interpreter reports."""
    world = world_with("core.wrap.mul", x_times_one, keep_original=True)
    r = prove(Case("core.wrap.mul", (2,)), world, timeout_ms=TIMEOUT_MS)
    assert r.status == "refuted"
    assert "before = undefined, after = 1" in r.failures()[0].detail, r.describe()


# ----------------------------------------------------------------------------- the independent semantics


def semantics(annex: str, args: list[Def]) -> tuple[int | None, bool]:
    """(value, undefined) of an all-literal application under the bit-vector semantics."""
    e = bv.encode_app(annex, args, {})
    undefined = z3.is_true(z3.simplify(e.ub))
    value = e.value[1] if isinstance(e.value, tuple) else e.value
    v = z3.simplify(value)
    return (None if undefined else v.as_long()), undefined


@pytest.mark.parametrize("annex, s, mode, a, b, want", [
    ("core.wrap.add", 256, 0, 200, 100, 44), ("core.wrap.add", 256, 2, 200, 100, None),
    ("core.wrap.add", 256, 1, 100, 100, None), ("core.wrap.add", 256, 1, 200, 100, 44),
    ("core.wrap.sub", 256, 2, 1, 2, None), ("core.wrap.sub", 256, 1, 0x80, 1, None),
    ("core.wrap.sub", 256, 1, 1, 2, 255),
    ("core.wrap.mul", 256, 1, 0x80, 0xFF, None), ("core.wrap.mul", 256, 1, 0xFF, 0xFF, 1),
    ("core.wrap.mul", 256, 2, 16, 16, None),
    ("core.wrap.mul", 2**64, 3, 2**32, 2**31, None),  # 2^63 fits unsigned, not signed
    ("core.wrap.shl", 256, 0, 1, 8, None), ("core.wrap.shl", 256, 1, 1, 7, None),
    ("core.wrap.shl", 256, 1, 0xFF, 7, 0x80), ("core.wrap.shl", 256, 2, 3, 7, None),
    ("core.wrap.add", 3, 1, 2, 2, None),   # -1 + -1 = -2: Idx 3 holds -1..1 signed
    ("core.wrap.add", 3, 0, 2, 2, 1), ("core.wrap.add", 6, 1, 3, 5, None),  # -3 + -1 = -4 < -3
    ("core.wrap.mul", 7, 1, 5, 2, None),   # -2 · 2 = -4 < -3
    ("core.wrap.sub", 1000, 0, 1, 2, 999),
])
def test_wrap_semantics(annex: str, s: int, mode: int, a: int, b: int, want: int | None) -> None:
    w = plugin_world()
    args = [w.lit_nat(s), w.lit_nat(mode), w.tuple([w.lit_idx(s, a), w.lit_idx(s, b)])]
    assert semantics(annex, args)[0] == want


@pytest.mark.parametrize("annex, s, a, b, want", [
    ("core.div.sdiv", 256, 0xF9, 2, 0xFD), ("core.div.srem", 256, 0xF9, 2, 0xFF),
    ("core.div.sdiv", 256, 7, 0xFE, 0xFD), ("core.div.srem", 256, 7, 0xFE, 1),
    ("core.div.sdiv", 256, 0x80, 0xFF, None), ("core.div.srem", 256, 0x80, 0xFF, None),
    ("core.div.udiv", 256, 200, 0, None), ("core.div.urem", 256, 200, 7, 4),
    ("core.div.sdiv", 6, 3, 5, None),   # -3 / -1 = 3 > 2
    ("core.div.sdiv", 7, 4, 6, 3),      # -3 / -1 = 3 fits: the signed range of Idx 7 is symmetric
    ("core.div.srem", 1000, 501, 7, (-499 - (-71) * 7) % 1000),
])
def test_div_semantics(annex: str, s: int, a: int, b: int, want: int | None) -> None:
    w = plugin_world()
    m = w.param(w.app(w.annex("mem.M"), w.lit_nat(0)), "m")
    e = bv.encode_app(annex, [w.lit_nat(s), w.tuple([m, w.tuple([w.lit_idx(s, a), w.lit_idx(s, b)])])],
                      {m: z3.Const("m", bv.MEM)})
    undefined = z3.is_true(z3.simplify(e.ub))
    assert isinstance(e.value, tuple)
    assert (None if undefined else z3.simplify(e.value[1]).as_long()) == want


@pytest.mark.parametrize("annex, s, a, b, want", [
    ("core.shr.a", 256, 0x80, 3, 0xF0), ("core.shr.l", 256, 0x80, 3, 0x10),
    ("core.shr.a", 256, 0xFF, 7, 0xFF), ("core.shr.l", 256, 0x80, 8, None),
    ("core.shr.a", 6, 4, 1, 5),         # -2 >> 1 = -1
    ("core.icmp.sl", 256, 0xFF, 0, 1), ("core.icmp.ul", 256, 0xFF, 0, 0),
    ("core.icmp.sge", 7, 4, 3, 0),      # -3 ≥ 3 is false
    ("core.extrema.smin", 256, 0x80, 0x7F, 0x80), ("core.extrema.umin", 256, 0x80, 0x7F, 0x7F),
])
def test_shift_compare_extrema_semantics(annex: str, s: int, a: int, b: int, want: int | None) -> None:
    w = plugin_world()
    assert semantics(annex, [w.lit_nat(s), w.tuple([w.lit_idx(s, a), w.lit_idx(s, b)])])[0] == want


def test_conversion_semantics() -> None:
    w = plugin_world()

    def conv(tag: str, ss: int, ds: int, x: int) -> int | None:
        return semantics(f"core.conv.{tag}", [w.lit_nat(ss), w.lit_nat(ds), w.lit_idx(ss, x)])[0]
    assert conv("s", 256, 65536, 200) == 65480 and conv("u", 256, 65536, 200) == 200
    assert conv("s", 2, 256, 1) == 255 and conv("s", 65536, 256, 65535) == 255
    assert conv("s", 3, 1000, 2) == 999 and conv("u", 1000, 3, 999) == 0

    def bitcast(src: Def, dst: Def, x: Def) -> int | None:
        return semantics("core.bitcast", [src, dst, x])[0]
    assert bitcast(w.nat(), w.idx_n(256), w.lit_nat(256)) is None
    assert bitcast(w.idx_n(256), w.idx_n(2**32), w.lit_idx(256, 200)) == 200
    assert bitcast(w.idx_n(2**32), w.idx_n(256), w.lit_idx(2**32, 300)) is None
    # 42 into Idx 23: wrapped in mode 0 (upstream's normalize_idx), undefined in the others
    assert semantics("core.idx", [w.lit_nat(23), w.lit_nat(0), w.lit_nat(42)])[0] == 19
    assert semantics("core.idx", [w.lit_nat(23), w.lit_nat(1), w.lit_nat(42)])[0] is None


def test_nothing_is_made_into_idx_0() -> None:
    """`Idx 0` holds no value (docs/semantics.md; I64 is `Idx 2^64`): the interpreter reports
    `E-OOB` for `core.conv` and `core.idx` into it in every mode, and the normalizers never fold
    one (core_rules.never_undefined). The bit-vector semantics made both defined (conv.u 4 → 0
    of 3 was 1, `core.idx 0 0 5` was 1), so a rule that drops such a term would be proved."""
    w = plugin_world()
    for tag in ("s", "u"):
        assert semantics(f"core.conv.{tag}", [w.lit_nat(4), w.lit_nat(0), w.lit_idx(4, 3)]) == (None, True)
        assert semantics(f"core.conv.{tag}", [w.lit_nat(4), w.lit_nat(1), w.lit_idx(4, 3)]) == (0, False)
    for mode in (0, 1):
        for n in (0, 5):
            assert semantics("core.idx", [w.lit_nat(0), w.lit_nat(mode), w.lit_nat(n)]) == (None, True)
    assert semantics("core.idx", [w.lit_nat(1), w.lit_nat(0), w.lit_nat(5)]) == (0, False)


def test_bit2_semantics_follow_the_names_in_core_mim() -> None:
    w = plugin_world()
    a, b = 0b1100, 0b1010
    table = {"and_": a & b, "or_": a | b, "xor_": a ^ b, "nand": ~(a & b) & 255, "nor": ~(a | b) & 255,
             "nxor": ~(a ^ b) & 255, "iff": (~a | b) & 255, "ciff": (a | ~b) & 255,
             "niff": a & ~b & 255, "nciff": ~a & b & 255, "fst": a, "snd": b, "f": 0, "t": 255,
             "nfst": ~a & 255, "nsnd": ~b & 255}
    for tag, want in table.items():
        args = [w.lit_nat(256), w.lit_nat(0), w.tuple([w.lit_idx(256, a), w.lit_idx(256, b)])]
        assert semantics(f"core.bit2.{tag}", args)[0] == want, tag


@pytest.mark.parametrize("s", [3, 5, 6, 7, 10, 12])
def test_bit2_on_a_size_not_a_power_of_two_agrees_with_the_interpreter_and_neg(s: int) -> None:
    """smt.bv's bitwise operations on `Idx s`, s not 2^w (written apart from core_ops), give the
    interpreter's values for every pair; `nand (x, x)` is `bit1.neg x` = s - 1 - x in both, and
    `bit2.t` is s - 1 (they disagreed: the negated operations complemented ⌈log2 s⌉ bits)."""
    from verimim.plug import core_ops
    from verimim.plug.core import BIT2_TAGS

    t, width = bv.Idx(s), core_ops.width(s)
    for tag in BIT2_TAGS:
        for a in range(s):
            for b in range(s):
                got = z3.simplify(bv.bit2(tag, t, z3.BitVecVal(a, width), z3.BitVecVal(b, width)))
                assert isinstance(got, z3.BitVecNumRef) and got.as_long() == core_ops.bit2_not_pow2(tag, s, a, b), \
                    (tag, a, b)
    for a in range(s):
        neg = z3.simplify(bv.bit1("neg", t, z3.BitVecVal(a, width)))
        assert isinstance(neg, z3.BitVecNumRef) and neg.as_long() == s - 1 - a
        assert core_ops.bit2_not_pow2("nand", s, a, a) == s - 1 - a
        assert core_ops.bit2_not_pow2("t", s, a, 0) == s - 1


# ----------------------------------------------------------------------------- the exact symbolic integers


_OPS: dict[str, Callable[[object, object], object]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
    "%": operator.mod, "&": operator.and_, "|": operator.or_, "^": operator.xor,
    "<<": operator.lshift, ">>": operator.rshift, "<": operator.lt, "<=": operator.le,
    "==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
}


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(_OPS)), st.sampled_from([1, 40, 130]),
       st.integers(-(2**70), 2**70), st.integers(0, 2**66), st.data())
def test_symbolic_integers_are_python_integers(op: str, min_width: int, lo1: int, span1: int,
                                               data: st.DataObject) -> None:
    """A SymInt operation, evaluated at a point, is Python's result there, inside its interval
    (these intervals also become facts for Z3: they must be sound); Python's exceptions on a
    zero divisor or a negative shift are raised on the same inputs."""
    shift = op in ("<<", ">>")
    lo2 = data.draw(st.integers(-4, 0) if shift else st.integers(-(2**20), 2**20))
    hi2 = lo2 + data.draw(st.integers(0, 80))
    hi1 = lo1 + span1
    a, b = data.draw(st.integers(lo1, hi1)), data.draw(st.integers(lo2, hi2))
    width = 100
    va, vb = z3.BitVec("a", width), z3.BitVec("b", width)
    ex = Explorer(assumptions=[va == z3.BitVecVal(a, width), vb == z3.BitVecVal(b, width)],
                  min_width=min_width)
    wa = max(signed_width(lo1, hi1), width)
    sa = SymInt(z3.SignExt(wa - width, va) if wa > width else va, lo1, hi1, ex)
    sb = SymInt(vb, lo2, hi2, ex)
    try:
        want: object = _OPS[op](a, b)
    except (ZeroDivisionError, ValueError) as e:
        want = type(e)
    (path,) = ex.run(lambda: _OPS[op](sa, sb))
    if path.error is not None:
        assert type(path.error) is want
        return
    got = path.outcome
    at = [(va, z3.BitVecVal(a, width)), (vb, z3.BitVecVal(b, width))]
    if isinstance(got, SymInt):
        assert got.lo <= want <= got.hi  # type: ignore[operator]
        assert z3.simplify(z3.substitute(got.bv, *at)).as_signed_long() == want
    elif isinstance(got, SymBool):
        assert z3.is_true(z3.simplify(z3.substitute(got.expr, *at))) == want
    else:
        assert got == want


def test_explorer_follows_both_sides_of_a_branch() -> None:
    ex = Explorer()
    x, _ = ex.var("x", 0, 255)
    paths = ex.run(lambda: "big" if x >= 128 else "small")
    assert sorted(p.outcome for p in paths) == ["big", "small"]  # type: ignore[type-var]
    assert all(len(p.conditions) == 1 for p in paths)


# ----------------------------------------------------------------------------- the Boolean abstraction


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["sle", "ule", "sge", "uge", "eq"]), st.integers(0, 15),
                          st.booleans()), min_size=1, max_size=5), st.booleans())
def test_abstraction_refutes_only_what_z3_refutes(atoms: list[tuple[str, int, bool]], disjoin: bool) -> None:
    x, y = z3.BitVecs("x y", 4)
    t = x * y + x
    make = {"sle": lambda c: t <= c, "ule": lambda c: z3.ULE(t, c), "sge": lambda c: t >= c,
            "uge": lambda c: z3.UGE(t, c), "eq": lambda c: t == c}
    fs = [z3.simplify(make[k](z3.BitVecVal(c, 4)) if pos else z3.Not(make[k](z3.BitVecVal(c, 4))))
          for k, c, pos in atoms]
    if disjoin and len(fs) > 1:
        fs = [z3.Or(fs[0], fs[1]), *fs[2:]]
    s = z3.Solver()
    s.add(*fs)
    if bounds.refutes(fs):
        assert s.check() == z3.unsat


# ----------------------------------------------------------------------------- wrong identities, wrong reassociation


def reassociate_ignoring_modes(w: World, app: App) -> Def | None:
    """Upstream's reassociation, which forgets nsw/nuw: `A +nsw (B +nsw y)` ↦ `(A + B) + y`
    is a refinement, but the overflow the interpreter reports is gone."""
    s_def, mode_def, pair = app.args()
    ops, s = operands(pair), size_of(s_def)
    if ops is None or s is None or not isinstance(ops[0], Lit):
        return None
    inner = core_rules.core_app(ops[1], "core.wrap.add", 3)
    if inner is None or inner.args()[0] is not s_def:
        return None
    z, y = core_rules.operands(inner.arg) or (None, None)
    if not isinstance(z, Lit) or y is None:
        return None
    folded = w.lit(w.idx(s_def), (ops[0].value + z.value) % s)
    return w.apps(w.annex("core.wrap.add"), s_def, w.lit_nat(0), w.tuple([folded, y]))


def and_merges_as_or(w: World, app: App) -> Def | None:
    """Two comparisons merged with the truth table of or_ (14) instead of and_ (8)."""
    ops = operands(app.args()[2])
    return None if ops is None else core_rules.merge_comparisons(w, 14, *ops)


def less_of_itself_is_true(w: World, app: App) -> Def | None:
    ops = operands(app.args()[1])
    return w.lit_bool(True) if ops and ops[0] is ops[1] and not isinstance(ops[0], Lit) else None


def minus_literal_adds_it(w: World, app: App) -> Def | None:
    """x - c ↦ c + x: the literal not negated."""
    s_def, mode_def, pair = app.args()
    ops = operands(pair)
    if ops is None or isinstance(ops[0], Lit) or not isinstance(ops[1], Lit) or not core_rules.lit_is(mode_def, 0):
        return None
    return w.apps(w.annex("core.wrap.add"), s_def, mode_def, w.tuple([ops[1], ops[0]]))


def zero_shl_anything(w: World, app: App) -> Def | None:
    """Upstream's 0 << b ↦ 0, for a symbolic b too: hides the poison of b ≥ the width."""
    ops = operands(app.args()[2])
    return ops[0] if ops and core_rules.lit_is(ops[0], 0) and not isinstance(ops[1], Lit) else None


def zero_udiv_anything(w: World, app: App) -> Def | None:
    """Upstream's 0 / b ↦ 0: hides the division by zero when b is 0."""
    _s, arg = app.args()
    if not isinstance(arg, Tuple):
        return None
    mem, pair = arg.ops
    ops = operands(pair)
    return w.tuple([mem, ops[0]]) if ops and core_rules.lit_is(ops[0], 0) and not isinstance(ops[1], Lit) else None


def sdiv_by_one_on_bool(w: World, app: App) -> Def | None:
    """x / 1 ↦ x for sdiv whatever the size: on Idx 2 the 1 is -1, and -1 / -1 overflows."""
    _s, arg = app.args()
    if not isinstance(arg, Tuple):
        return None
    mem, pair = arg.ops
    ops = operands(pair)
    return w.tuple([mem, ops[0]]) if ops and core_rules.lit_is(ops[1], 1) and not isinstance(ops[0], Lit) else None


def conv_s_truncates_as_conv_u(w: World, app: App) -> Def | None:
    """Upstream's conv.s ↦ conv.u to a smaller size, also where ds does not divide ss."""
    ss_def, ds_def, x = app.args()
    ss, ds = size_of(ss_def), size_of(ds_def)
    if ss is None or ds is None or ds >= ss or isinstance(x, Lit):
        return None
    return w.apps(w.annex("core.conv.u"), ss_def, ds_def, x)


def bitcast_chain_through_anything(w: World, app: App) -> Def | None:
    """bitcast D (bitcast M y) ↦ bitcast D y even when M does not hold y's values."""
    _m, dst, x = app.args()
    inner = core_rules.core_app(x, "core.bitcast", 3)
    if inner is None:
        return None
    src, _mid, y = inner.args()
    return y if src is dst else w.apps(w.annex("core.bitcast"), src, dst, y)


def zero_times_anything(w: World, app: App) -> Def | None:
    """0 · b ↦ 0 whatever b is: drops an operand that may be undefined."""
    ops = operands(app.args()[2])
    return ops[0] if ops and core_rules.lit_is(ops[0], 0) and not isinstance(ops[1], Lit) else None


WRONG_IDENTITIES: list[tuple[str, str, Rule, tuple[object, ...], str]] = [
    ("reassociation forgets nsw", "core.wrap.add", reassociate_ignoring_modes, (2**8,), "(A, (B, y))"),
    ("merged comparisons as or", "core.bit2.and_", and_merges_as_or, (2,), "icmp"),
    ("ul (x, x) is tt", "core.icmp.ul", less_of_itself_is_true, (2**8,), "(x, x)"),
    ("x - c adds c", "core.wrap.sub", minus_literal_adds_it, (2**8, 7), "(x, B)"),
    ("0 << b is 0", "core.wrap.shl", zero_shl_anything, (2**8,), "(A, y)"),
    ("0 / b is 0", "core.div.udiv", zero_udiv_anything, (2**8,), "(A, y)"),
    ("sdiv x 1 on Idx 2", "core.div.sdiv", sdiv_by_one_on_bool, (2,), "(x, B)"),
    ("conv.s as conv.u", "core.conv.s", conv_s_truncates_as_conv_u, ((2**8, 3),), "x"),
    ("bitcast chain through a narrow type", "core.bitcast", bitcast_chain_through_anything,
     ((2**16, "Nat"),), "through "),
    ("0 · u drops an undefined u", "core.wrap.mul", zero_times_anything, (2**8,), "u"),
    ("u - u drops an undefined u", "core.wrap.sub", dropping_x_minus_x, (2, 2**8), "(u, u)"),
]


@pytest.mark.parametrize("name, annex, rule, types, where",
                         [pytest.param(*r, id=r[0]) for r in WRONG_IDENTITIES])
def test_wrong_identity_is_refuted(name: str, annex: str, rule: Rule, types: tuple[object, ...],
                                   where: str) -> None:
    """Each wrong rule, tried before the real normalizer, is refuted on the shape it breaks."""
    world = world_with(annex, rule, keep_original=True)
    for t in types:
        r = prove(Case(annex, t if isinstance(t, tuple) else (t,)), world, timeout_ms=TIMEOUT_MS)
        assert r.status == "refuted", r.describe()
        assert any(where in q.detail for q in r.failures() if q.status == "refuted"), r.describe()


@pytest.mark.parametrize("annex, types", [
    ("core.wrap.add", (2**64,)), ("core.wrap.mul", (2**32,)), ("core.bit2.xor_", (2**64,)),
    ("core.bit2.and_", (2,)), ("core.bit1.neg", (2**8,)), ("core.bitcast", (2**8, 2**32)),
])
def test_identities_and_reassociation_fire_in_the_proofs(annex: str, types: tuple[object, ...],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The nested, comparison and chain shapes reach the rules of core_rules: with them the
    normalizer rewrites more of the shapes than folding alone (a proof where no rule fires
    would prove nothing about them)."""
    r = prove(Case(annex, types), timeout_ms=TIMEOUT_MS)  # type: ignore[arg-type]
    assert r.status == "proved", r.describe()
    for name in dir(core_rules):
        if name.endswith("_rules"):
            monkeypatch.setattr(core_rules, name, lambda *args: None)  # folding only
    plain = prove(Case(annex, types), timeout_ms=TIMEOUT_MS)  # type: ignore[arg-type]
    assert r.rewrites > plain.rewrites, (r.rewrites, plain.rewrites)


def test_a_pointer_cast_to_an_integer_is_an_unknown_address_of_that_pointer() -> None:
    # ptrtoint (`core.bitcast I64 p`): no fold of a comparison with it was decided ("not an
    # integer type: mem.Ptr …", normalize `unknown`). It is one variable per pointer node: a fold
    # that holds for every address is proved, one that assumes an address (NULL or not) is not.
    from verimim.layout import ptr_space
    from verimim.phases.base import walk

    src = ("plugin core;\nfun extern main (mem: %mem.M 0, argc: I32, argv: %mem.Ptr0 «⊤:Nat; %mem.Ptr0 «⊤:Nat; I8»»)"
           ": [%mem.M 0, I32] =\n    let (mem, s) = %mem.load (mem, %mem.lea (argv, argc));\n"
           "    return (mem, %core.bitcast I32 (%core.bitcast I64 s));\n")
    world, _ = load_text(src, "<ptrtoint>")
    (cast,) = [d for d in walk(world) if isinstance(d, App) and getattr(d.head, "annex", None) == "core.bitcast"
               and len(d.args()) == 3 and ptr_space(d.args()[0]) is not None]
    a, b = bv.encode(cast, {}), bv.encode(cast, {})
    assert a.value.eq(b.value) and z3.is_false(a.ub)  # type: ignore[union-attr]
    s = z3.Solver()
    assert s.check(a.value == 0) == z3.sat and s.check(a.value != 0) == z3.sat  # type: ignore[operator]
