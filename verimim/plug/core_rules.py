"""Algebraic identities of the `core` normalizers: the normal forms upstream MimIR's CHECK lines
expect, for applications whose operands are not all literals (verimim.plug.core folds those).

- Commutative operations put a literal operand first (`x + 3` ↦ `3 + x`), so that the rules
  below look at one side only and `x + 3`, `3 + x` are one node.
- Identities: `x + 0`, `x * 1`, `x * 0`, `x - 0`, `x - x`, `x << 0`, `x ∧ ff`, `x ∧ tt`, `x ∧ x`,
  `x ⊕ x`, `fst`/`snd`, `¬¬x`, `x / 1`, `x % 1`, `icmp.e (x, x)`, `conv` to the same size, a
  `bitcast` through a type that holds every value, …
- `x - c` ↦ `(-c) + x` (wrap-around mode only), as upstream does.
- Reassociation of literals outward (upstream's four rules, `23 + (42 + w)` ↦ `65 + w`).
- Two comparisons of the same operands combined by a bitwise operation become one comparison
  (`uge ∧ ug` ↦ `ug`), through the five disjoint relations of upstream's icmp encoding.

Undefined behaviour is never folded away, and never introduced: a rule whose operand may make
the application undefined (`0 << b` for a symbolic `b`, `0 / y`) is not applied, and a rule that
changes the wrap-around obligations (reassociation under `nsw`/`nuw`, `x *nsw 1` on `Idx 2`, where
1 reads as -1) only fires where they stay the same. Upstream drops the modes when it
reassociates (a refinement); verimim's interpreter must report the overflow (SEMANTICS.md), so
here the modes must be 0. Every rule is proved over bit-vectors of every width by
verimim.smt.normalizer_proofs, which runs this very code on symbolic literals.

Literal values may be symbolic integers during those proofs: the code compares them with Python
operators only (`==`, `<`), never with `isinstance(v, int)`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from verimim.ir.defs import App, Axiom, Def, Extract, IdxT, Lit, NatT, Pack, Param, Tuple, Var
from verimim.ir.world import World
from verimim.plug import core_ops as ops

MODE_NSW = 1  # core.mode.uS: no signed wrap-around

# ---------------------------------------------------------------------------- operands


def operands(pair: Def) -> tuple[Def, Def] | None:
    """The two operands of a `«2; T»` argument: a pair, or a pack of one value twice."""
    if isinstance(pair, Tuple) and len(pair.ops) == 2:
        return pair.ops[0], pair.ops[1]
    if isinstance(pair, Pack) and isinstance(pair.shape, Lit) and pair.shape.value == 2 and pair.body.closed:
        return pair.body, pair.body
    return None


def is_lit(d: Def) -> bool:
    return isinstance(d, Lit)


def lit_is(d: Def, v: int) -> bool:
    """d is the literal v (v may be compared with a symbolic literal: a branch in the proofs)."""
    return isinstance(d, Lit) and bool(d.value == v)


def core_app(d: Def, annex: str, depth: int) -> App | None:
    """d as a fully applied `annex` (depth curried arguments), if it is one."""
    if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == annex and d.depth == depth:
        return d
    return None


def tag_of(d: Def, family: str, depth: int) -> tuple[str, App] | None:
    """(tag, application) if d is a fully applied `core.FAMILY.tag`."""
    if isinstance(d, App) and isinstance(d.head, Axiom) and d.depth == depth:
        fam, _, tag = d.head.annex.removeprefix("core.").partition(".")
        if d.head.annex.startswith("core.") and fam == family:
            return tag, d
    return None


def same_operation(a: App, b: App) -> bool:
    """Same head and the same arguments before the operands (size, mode)."""
    return a.head is b.head and all(p is q for p, q in zip(a.args()[:-1], b.args()[:-1]))


def with_operands(w: World, app: App, x: Def, y: Def) -> Def:
    """`app`'s operation (its head, size and mode) applied to (x, y), normalized."""
    return w.apps(app.head, *app.args()[:-1], w.tuple([x, y]))


# Operations without undefined behaviour of their own (bv.py): only their operands can make them undefined.
TOTAL_FAMILIES = {"bit1", "bit2", "icmp", "ncmp", "extrema", "conv", "nat"}


def never_undefined(d: Def, depth: int = 6) -> bool:
    """d has a value whatever its free variables are: a rule may drop it (`0 · d` ↦ 0, `d - d`
    ↦ 0, `d ∧ ff` ↦ ff) without hiding an overflow, a failed bitcast or a call the interpreter
    would report. Literals, variables and projections of them, and total operations of such
    terms (wrap-around arithmetic, bit operations, comparisons, conversions); anything else
    (or too deep a term) counts as possibly undefined, so the rule does not fire."""
    if isinstance(d, (Lit, Param, Var)):
        return True
    if isinstance(d, Extract):
        return never_undefined(d.tup, depth) and never_undefined(d.index, depth)
    if isinstance(d, Tuple):
        return all(never_undefined(x, depth) for x in d.ops)
    if isinstance(d, Pack):
        return d.body.closed and never_undefined(d.body, depth)
    if depth == 0 or not (isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex.startswith("core.")):
        return False
    family, _, tag = d.head.annex.removeprefix("core.").partition(".")
    args = d.args()
    # An operation into `Idx 0`, a type without values, never has one (`core.conv.u 0 x`: E-OOB)
    result_size = args[1] if family == "conv" else args[0] if family in ("wrap", "bit1", "bit2", "extrema") else None
    if result_size is not None and lit_is(result_size, 0):
        return False
    total = family in TOTAL_FAMILIES or (family == "wrap" and tag != "shl" and lit_is(args[1], 0))
    return total and never_undefined(args[-1], depth - 1)


def bitwise_size(s: int | None) -> bool:
    """Bitwise operations have a meaning on `Idx 2^w` (and on `Idx 1`, whose one value is 0)."""
    return s is not None and s >= 1 and s & (s - 1) == 0


# ---------------------------------------------------------------------------- canonical order


def literal_first(w: World, app: App, commutative: bool) -> Def | None:
    """A commutative operation with its literal operand second, rebuilt with it first."""
    ops = operands(app.arg)
    if not commutative or ops is None:
        return None
    a, b = ops
    if is_lit(b) and not is_lit(a):
        return with_operands(w, app, b, a)
    return None


# ---------------------------------------------------------------------------- reassociation


def reassociate(w: World, app: App, a: Def, b: Def) -> Def | None:
    """Upstream's four rules for an associative (and commutative) operation `op`, literals
    written with an l and kept first by `literal_first`:

        (1)     la    op (lz op w) ↦ (la op lz) op w
        (2) (lx op y) op (lz op w) ↦ (lx op lz) op (y op w)
        (3)      a    op (lz op w) ↦  lz op (a op w)
        (4) (lx op y) op      b    ↦  lx op (y op b)

    An operand counts as `x op y` only if it is the same operation: the same size and the same
    mode. Each rule moves a literal outward, so rewriting terminates."""
    def split(d: Def) -> tuple[Def, Def] | None:
        if isinstance(d, App) and same_operation(d, app):
            return operands(d.arg)
        return None

    xy, zw = split(a), split(b)
    lx = xy is not None and is_lit(xy[0])
    lz = zw is not None and is_lit(zw[0])

    def op(p: Def, q: Def) -> Def:
        return with_operands(w, app, p, q)

    if is_lit(a) and lz:
        assert zw is not None
        return op(op(a, zw[0]), zw[1])
    if lx and lz:
        assert xy is not None and zw is not None
        return op(op(xy[0], zw[0]), op(xy[1], zw[1]))
    if lz:
        assert zw is not None
        return op(zw[0], op(a, zw[1]))
    if lx:
        assert xy is not None
        return op(xy[0], op(xy[1], b))
    return None


# ---------------------------------------------------------------------------- comparisons as relation sets


# A comparison is a set of disjoint relations between its operands (upstream's icmp encoding):
# for Idx, exactly one of X (a ≥ 0 > b signed: "plus minus"), Y (a < 0 ≤ b), G (same sign, a > b),
# L (same sign, a < b), E (a = b) holds; for Nat one of G, L, E.
X, Y, G, L, E = 16, 8, 4, 2, 1


@dataclass(frozen=True)
class Relations:
    """The tags of one comparison family and the relation set each stands for."""

    family: str
    masks: dict[str, int]
    full: int

    def tag(self, mask: int) -> str | None:
        return next((t for t, m in self.masks.items() if m == mask), None)


ICMP = Relations("icmp", {"e": E, "ne": X | Y | G | L, "ul": X | L, "ule": X | L | E, "ug": Y | G,
                          "uge": Y | G | E, "sl": Y | L, "sle": Y | L | E, "sg": X | G,
                          "sge": X | G | E}, X | Y | G | L | E)
NCMP = Relations("ncmp", {"e": E, "ne": G | L, "l": L, "le": L | E, "g": G, "ge": G | E}, G | L | E)
COMPARISONS = (ICMP, NCMP)


def compare_same(w: World, rel: Relations, tag: str, a: Def, b: Def) -> Def | None:
    """A comparison of an operand with itself. Only the E relation can hold; like upstream, a
    comparison that includes it is tt and `ne` is ff (`ul (x, x)` stays: upstream's form)."""
    if a is not b or is_lit(a) or not never_undefined(a):
        return None
    if rel.masks[tag] & E:
        return w.lit_bool(True)
    return w.lit_bool(False) if tag == "ne" else None


def table_bit(table: int, x: int, y: int) -> int:
    """Bit (x, y) of a bit2 truth table (tag i of core.BIT2_TAGS has table i)."""
    return (table >> (x << 1 | y)) & 1


def merge_comparisons(w: World, table: int, a: Def, b: Def) -> Def | None:
    """`bit2 (cmp₁ (x, y), cmp₂ (x, y))` ↦ the comparison whose relation set is the truth table
    applied to the two sets relation by relation (exactly one relation holds, so the result is
    the table applied to the two truth values); tt or ff for all or none of them. Left alone if
    core.mim has no tag for the resulting set."""
    for rel in COMPARISONS:
        depth = 2 if rel is ICMP else 1
        ta, tb = tag_of(a, rel.family, depth), tag_of(b, rel.family, depth)
        if ta is None or tb is None or ta[0] not in rel.masks or tb[0] not in rel.masks:
            continue
        (tag_a, app_a), (tag_b, app_b) = ta, tb
        if any(p is not q for p, q in zip(app_a.args(), app_b.args())):
            continue
        ma, mb = rel.masks[tag_a], rel.masks[tag_b]
        mask = 0
        for bit in (X, Y, G, L, E):
            if rel.full & bit:
                mask |= bit * table_bit(table, int(bool(ma & bit)), int(bool(mb & bit)))
        if mask in (0, rel.full):
            return w.lit_bool(mask == rel.full) if never_undefined(app_a.arg) else None
        tag = rel.tag(mask)
        if tag is None:
            return None
        return w.apps(w.annex(f"core.{rel.family}.{tag}"), *app_a.args())
    return None


# ---------------------------------------------------------------------------- integer types


def int_size(t: Def) -> int | None | str:
    """None for Nat (unbounded), s for `Idx s` with a literal s, "other" for any other type."""
    if isinstance(t, NatT):
        return None
    if isinstance(t, IdxT) and isinstance(t.size, Lit):
        return t.size.value
    return "other"


def holds_every_value(outer: int | None | str, inner: int | None | str) -> bool:
    """Every value of the integer type of size `inner` is a value of the type of size `outer`."""
    if outer == "other" or inner == "other":
        return False
    if outer is None:
        return True
    return inner is not None and inner <= outer  # type: ignore[operator]


def pair_args(args: Sequence[Def]) -> tuple[Def, Def] | None:
    return operands(args[-1])


# ---------------------------------------------------------------------------- the rules of each family


def shift_limit(s: int) -> int:
    """Shift amounts from this one up are undefined (the guard core.py folds shifts with)."""
    return ops.width(s)


def wrap_rules(w: World, app: App, name: str, s: int | None, mode: int | None) -> Def | None:
    """`core.wrap.NAME {s} mode (a, b)` with operands that are not both literals."""
    ops = operands(app.arg)
    if ops is None or s is None or s == 0:
        return None  # (`Idx 0` has no value: no literal to fold to)
    swapped = literal_first(w, app, name in ("add", "mul"))
    if swapped is not None:
        return swapped
    a, b = ops
    if name == "add" and lit_is(a, 0):
        return b  # 0 + b is b exactly: no wrap-around, whatever the mode
    if name == "mul" and lit_is(a, 0) and never_undefined(b):
        return a
    # 1 · b is b, but on Idx 2 the literal 1 reads as -1 signed, and -1 · -1 overflows nsw.
    if name == "mul" and lit_is(a, 1) and mode is not None and (s > 2 or not mode & MODE_NSW):
        return b
    if name in ("sub", "shl") and lit_is(b, 0):
        return a
    if name == "shl" and lit_is(a, 0) and is_lit(b) and bool(b.value < shift_limit(s)):  # type: ignore[attr-defined]
        return a  # 0 << b, for an amount below the width only (a larger one is poison)
    if name == "sub" and a is b and not is_lit(a) and never_undefined(a):
        return w.lit(w.idx(app.args()[0]), 0)
    if name == "sub" and mode == 0 and isinstance(b, Lit) and not is_lit(a):
        # a - c ↦ (s - c) + a: one operation fewer to reassociate; only where both wrap around.
        negated = w.lit(w.idx(app.args()[0]), (s - b.value) % s)
        return w.apps(w.annex("core.wrap.add"), *app.args()[:-1], w.tuple([negated, a]))
    # Modulo 2^w only: for other sizes every step adds a remainder, and Z3 does not prove the
    # reassociated remainders equal within the proofs' budget, so the rule is not applied.
    if name in ("add", "mul") and mode == 0 and bitwise_size(s) and s > 1:
        return reassociate(w, app, a, b)  # the inner operation has the same mode: 0
    return None


def nat_rules(w: World, app: App, name: str) -> Def | None:
    ops = operands(app.arg)
    if ops is None:
        return None
    swapped = literal_first(w, app, name in ("add", "mul"))
    if swapped is not None:
        return swapped
    a, b = ops
    if lit_is(a, 0) and (name == "add" or never_undefined(b)):
        return b if name == "add" else a  # 0 + b = b, 0 - b = 0 (saturating), 0 · b = 0
    if name == "mul" and lit_is(a, 1):
        return b
    if name == "sub" and lit_is(b, 0):
        return a
    if name == "sub" and a is b and never_undefined(a):
        return w.lit_nat(0)
    return None


def compare_rules(w: World, app: App, rel: Relations, tag: str) -> Def | None:
    """icmp and ncmp: equality is commutative (literal first); an operand compared with itself."""
    swapped = literal_first(w, app, tag in ("e", "ne"))
    if swapped is not None:
        return swapped
    ops = operands(app.arg)
    return None if ops is None else compare_same(w, rel, tag, *ops)


def extrema_rules(w: World, app: App) -> Def | None:
    ops = operands(app.arg)
    return ops[0] if ops is not None and ops[0] is ops[1] else None


def shr_rules(w: World, app: App, s: int | None) -> Def | None:
    ops = operands(app.arg)
    if ops is None or s is None:
        return None
    a, b = ops
    if lit_is(b, 0):
        return a
    if lit_is(a, 0) and is_lit(b) and bool(b.value < shift_limit(s)):  # type: ignore[attr-defined]
        return a
    return None


# bit2 tags whose operands commute (truth table symmetric in its operands) and that associate.
ASSOCIATIVE_BIT2 = {"and_", "or_", "xor_", "nxor"}


def bit2_rules(w: World, app: App, tags: Sequence[str], tag: str, s: int | None) -> Def | None:
    """`core.bit2.TAG {s} m (a, b)`, s a power of two (or 1), operands not both literals."""
    ops = operands(app.arg)
    if ops is None or not bitwise_size(s):
        return None
    assert s is not None
    table = tags.index(tag)
    commutative = table_bit(table, 0, 1) == table_bit(table, 1, 0)
    swapped = literal_first(w, app, commutative)
    if swapped is not None:
        return swapped
    a, b = ops
    merged = merge_comparisons(w, table, a, b)
    if merged is not None:
        return merged
    s_def, m_def = app.args()[0], app.args()[1]
    zero, ones = w.lit(w.idx(s_def), 0), w.lit(w.idx(s_def), s - 1)

    def neg(x: Def) -> Def:
        return w.apps(w.annex("core.bit1.neg"), s_def, m_def, x)

    def other(name: str, x: Def, y: Def) -> Def:
        return w.apps(w.annex(f"core.bit2.{name}"), s_def, m_def, w.tuple([x, y]))

    # Each rule: what it drops (it must have a value), and the result.
    fixed: dict[str, tuple[tuple[Def, ...], Callable[[], Def]]] = {
        "f": ((a, b), lambda: zero), "t": ((a, b), lambda: ones), "fst": ((b,), lambda: a),
        "snd": ((a,), lambda: b), "nfst": ((b,), lambda: neg(a)), "nsnd": ((a,), lambda: neg(b)),
        "ciff": ((), lambda: other("iff", b, a)), "nciff": ((), lambda: other("niff", b, a))}
    if tag in fixed:
        dropped, result = fixed[tag]
        return result() if all(never_undefined(d) for d in dropped) else None

    def unary(x: int, y: int, d: Def) -> Def | None:
        """The function d ↦ (x where d's bit is 0, y where it is 1)."""
        if x == y:
            return (ones if x else zero) if never_undefined(d) else None
        return d if y else neg(d)

    t = lambda x, y: table_bit(table, x, y)  # noqa: E731
    if a is b:
        return unary(t(0, 0), t(1, 1), a)
    for lit, rest, first in ((a, b, True), (b, a, False)):
        for v in (0, 1):
            if lit_is(lit, 0 if v == 0 else s - 1):
                return unary(t(v, 0), t(v, 1), rest) if first else unary(t(0, v), t(1, v), rest)
    if tag in ASSOCIATIVE_BIT2:
        return reassociate(w, app, a, b)
    return None


def bit1_rules(w: World, app: App, tag: str, s: int | None) -> Def | None:
    s_def, _m, x = app.args()
    if tag == "id":
        return x
    if s is None or s == 0:
        return None  # (`Idx 0` has no value: no literal to fold to)
    if tag in ("f", "t") and never_undefined(x):
        return w.lit(w.idx(s_def), 0 if tag == "f" else s - 1)
    inner = tag_of(x, "bit1", 3)
    if tag == "neg" and bitwise_size(s) and inner is not None and inner[0] == "neg":
        return inner[1].args()[2]  # ¬¬y = y
    return None


def div_rules(w: World, app: App, name: str, s: int | None) -> Def | None:
    """x / 1 and x % 1. The divisor must be the literal 1 (any other operand may be 0), and
    signed it must read as +1: on Idx 2 it is -1, and INT_MIN / -1 is undefined."""
    _s, arg = app.args()
    if s is None or not (isinstance(arg, Tuple) and len(arg.ops) == 2):
        return None
    mem, pair = arg.ops
    ops = operands(pair)
    if ops is None or not lit_is(ops[1], 1) or (name.startswith("s") and s <= 2):
        return None
    if name in ("udiv", "sdiv"):
        return w.tuple([mem, ops[0]])
    return w.tuple([mem, w.lit(w.idx(app.args()[0]), 0)]) if never_undefined(ops[0]) else None


def conv_rules(w: World, app: App, signed: bool, ss: int | None, ds: int | None) -> Def | None:
    ss_def, ds_def, x = app.args()
    if ss is None or ds is None or ds == 0:
        return None  # (into `Idx 0`, a type without values: undefined, E-OOB when it runs)
    if ss == ds:
        return x
    # Signed or unsigned, the value modulo ds is the same when ds divides ss (x and x - ss agree).
    if signed and ds < ss and ss % ds == 0:
        return w.apps(w.annex("core.conv.u"), ss_def, ds_def, x)
    return None


def bitcast_rules(w: World, app: App) -> Def | None:
    """bitcast D (bitcast M y) ↦ bitcast D y (y itself when D is its type), when M holds every
    value of y's type: the inner cast then never fails and keeps the value."""
    _m, dst_t, x = app.args()
    inner = core_app(x, "core.bitcast", 3)
    if inner is None:
        return None
    src_t, mid_t, y = inner.args()
    if not holds_every_value(int_size(mid_t), int_size(src_t)):
        return None
    if src_t is dst_t:
        return y
    return w.apps(w.annex("core.bitcast"), src_t, dst_t, y)
