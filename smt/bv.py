"""The meaning of the `core` operations as Z3 bit-vector formulas, and an encoder of IR terms.

This is an *independent* statement of `core`'s integer semantics, written from core.mim,
PLUGINS.md and SEMANTICS.md with bit-vector operations only (bvadd, bvmul, bvudiv, ULT, LShR,
sign/zero extension, …). It deliberately shares no code with `verimim.plug.core_ops`, which the
normalizers and the interpreter compute with: the normalizer proofs check one against the other.

Values. A value of `Idx s` is its unsigned bit pattern 0 ≤ v < s, held in `width(s)` =
⌈log2 s⌉ bits (at least 1): for s = 2^w that is the usual w-bit vector; for any other s the
vector is wider than the type and every value also satisfies v < s (the driver assumes it of
its inputs, and a literal outside it is not a value). Signedness belongs to the operation:
signed, v is non-negative iff v ≤ ⌊(s-1)/2⌋ (core.mim), i.e. the signed range is
[-⌊s/2⌋, ⌊(s-1)/2⌋], two's complement for s = 2^w. `Bool` is `Idx 2`: one bit.
`Nat` is unbounded in the interpreter; it is held exactly in NAT_BITS bits, which is exact for
one operation on operands below 2^NAT_OPERAND_BITS (the proof driver assumes that bound).
A memory token `mem.M` is a constant of an uninterpreted sort: only equality matters.

Undefined behaviour. Every encoded term has `ub`, true where the term has no defined value:
a wrap-around that the mode forbids (bit 0 of the mode: no signed wrap, bit 1: no unsigned
wrap), a shift by the width or more, a division by zero, a signed division whose quotient does
not fit (INT_MIN / -1, for `srem` too, as LLVM), `core.idx` / `core.bitcast` of a value the
target does not hold, `core.idx` / `core.conv` into `Idx 0` (a type without values), and any
operand that is itself undefined (UB propagates).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import z3

from verimim.ir.defs import (
    App,
    Axiom,
    Def,
    Extract,
    IdxT,
    Lit,
    NatT,
    Pack,
    Param,
    Tuple,
)
from verimim.layout import ptr_space
from verimim.printer import show
from verimim.smt import z3_threads
from verimim.smt import z3_typed as z3t

NAT_BITS = 130
NAT_OPERAND_BITS = 64

MODE_NSW = 0b01  # core.mode.uS: no signed wrap-around
MODE_NUW = 0b10  # core.mode.Us: no unsigned wrap-around

MEM = z3.DeclareSort("Mem")

Value = z3.ExprRef | tuple["Value", ...]

z3_threads.install()  # z3 objects are released on verimim's thread only


class NoSemantics(Exception):
    """The term is outside what this encoder gives a meaning to."""


class SymbolicLiteral(Protocol):
    """A literal value that is a symbolic integer (`verimim.smt.symbolic.SymInt`)."""

    def unsigned_bv(self, width: int) -> tuple[z3.BitVecRef, z3.BoolRef]: ...


@dataclass(frozen=True)
class Encoded:
    """A term's value and the condition under which it has none."""

    value: Value
    ub: z3.BoolRef


FALSE = z3.BoolVal(False)


def _bit(c: z3.BoolRef) -> z3.BitVecRef:
    return z3t.If(c, z3.BitVecVal(1, 1), z3.BitVecVal(0, 1))


def _any(*conds: z3.BoolRef) -> z3.BoolRef:
    live = [c for c in conds if not z3.is_false(c)]
    return z3t.Or(*live) if live else FALSE


# ---------------------------------------------------------------------------- Idx s


@dataclass(frozen=True)
class Idx:
    """The type `Idx s` and the helpers its operations need."""

    s: int

    @property
    def width(self) -> int:
        return max((self.s - 1).bit_length(), 1)

    @property
    def pow2(self) -> bool:
        """s = 2^w with w ≥ 1: the w-bit vectors are exactly the values (Idx 1 is not: its one
        value 0 lives in a 1-bit vector that could also hold 1)."""
        return self.s >= 2 and self.s & (self.s - 1) == 0

    @property
    def shift_width(self) -> int:
        """A shift by this many bits or more is undefined (⌈log2 s⌉, at least 1)."""
        return self.width

    @property
    def wide(self) -> int:
        """Bits in which results are computed exactly before they are reduced modulo s: sums,
        differences and products of two values below 2^width (signed or unsigned), and shifts
        by less than width, all stay within 2·width + 2 bits."""
        return 2 * self.width + 2

    @property
    def smin(self) -> int:
        return -(self.s // 2)

    @property
    def smax(self) -> int:
        return (self.s - 1) // 2

    def in_range(self, v: z3.BitVecRef) -> z3.BoolRef:
        return z3.BoolVal(True) if self.pow2 else z3.ULT(v, self.s)

    def u(self, v: z3.BitVecRef) -> z3.BitVecRef:
        """The unsigned value, exact in `wide` bits."""
        return z3.ZeroExt(self.wide - self.width, v)

    def negative(self, v: z3.BitVecRef) -> z3.BoolRef:
        """Signed, v is negative: v ≥ ⌊(s-1)/2⌋ + 1 (for s = 2^w: the top bit is set)."""
        return self.u(v) >= self.smax + 1

    def sv(self, v: z3.BitVecRef) -> z3.BitVecRef:
        """The signed value, exact in `wide` bits (two's complement)."""
        return z3t.If(self.negative(v), self.u(v) - self.s, self.u(v))

    def magnitude(self, v: z3.BitVecRef) -> z3.BitVecRef:
        """|signed value|, exact in `wide` bits."""
        return z3t.If(self.negative(v), -(self.u(v) - self.s), self.u(v))

    def reduce(self, e: z3.BitVecRef, nonneg: bool = False) -> z3.BitVecRef:
        """An exact integer (two's complement, at least `wide` bits) modulo s, into [0, s), back
        to `width` bits. `nonneg`: e is known to be ≥ 0 (then the unsigned remainder)."""
        if self.pow2:
            return z3t.Extract(self.width - 1, 0, e)  # two's complement: the low bits
        r = z3.URem(e, self.s) if nonneg else e % self.s  # z3py's % is bvsmod: in [0, s) for s > 0
        return z3t.Extract(self.width - 1, 0, r)

    def unsigned_overflow(self, e: z3.BitVecRef) -> z3.BoolRef:
        return z3t.Or(e < 0, e >= self.s)

    def signed_overflow(self, e: z3.BitVecRef) -> z3.BoolRef:
        return z3t.Or(e < self.smin, e > self.smax)


# ---------------------------------------------------------------------------- wrap


_EXACT: dict[str, Callable[[z3.BitVecRef, z3.BitVecRef], z3.BitVecRef]] = {
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
    "shl": lambda x, y: x * (1 << y),  # x · 2^y: exact in `wide` bits for y below the width
}


Mode = int | z3.BitVecRef  # a literal mode, or a symbolic one (a Nat)


def mode_bit(mode: Mode, bit: int) -> z3.BoolRef:
    """Whether `mode` has `bit` set (a Python truth value lifted, or a bit-vector test)."""
    if isinstance(mode, int):
        return z3.BoolVal(bool(mode & bit))
    return cast(z3.BoolRef, (mode & bit) != 0)


def wrap(name: str, t: Idx, mode: Mode, a: z3.BitVecRef, b: z3.BitVecRef) -> tuple[z3.BitVecRef, z3.BoolRef]:
    """`core.wrap.NAME` (add, sub, mul, shl): (value, undefined). The mode may be symbolic.

    The value is the exact result modulo s. An overflow is an exact result outside the
    unsigned range [0, s) (forbidden by mode bit 1, LLVM's nuw) or outside the signed range
    [-⌊s/2⌋, ⌊(s-1)/2⌋] (mode bit 0, nsw); for shl the exact results are a·2^b and
    signed(a)·2^b. A shift by the width or more is undefined whatever the mode."""
    if name not in _EXACT:
        raise NoSemantics(f"core.wrap.{name}")
    f = _EXACT[name]

    # The exact results are built only where needed: most wraps have the literal mode 0 (no
    # overflow condition) and a power-of-two type (the low bits), and z3 terms are not free.
    def e_u() -> z3.BitVecRef:
        return f(t.u(a), t.u(b))

    def e_s() -> z3.BitVecRef:
        return f(t.sv(a), t.u(b) if name == "shl" else t.sv(b))

    value = _wrap_pow2(name, a, b) if t.pow2 else t.reduce(e_u(), nonneg=name != "sub")

    def when(bit: int, overflow: Callable[[], z3.BoolRef]) -> z3.BoolRef:
        if isinstance(mode, int) and not mode & bit:
            return FALSE
        on = z3t.simplify(mode_bit(mode, bit))
        return FALSE if z3.is_false(on) else z3t.simplify(z3t.And(on, overflow()))

    return value, _any(z3.UGE(b, t.shift_width) if name == "shl" else FALSE,
                       when(MODE_NUW, lambda: t.unsigned_overflow(e_u())),
                       when(MODE_NSW, lambda: t.signed_overflow(e_s())))


def _wrap_pow2(name: str, a: z3.BitVecRef, b: z3.BitVecRef) -> z3.BitVecRef:
    """For s = 2^w the value is plain w-bit arithmetic (which wraps modulo 2^w)."""
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "shl": lambda: a * (1 << b)}[name]()  # a · 2^b (for b below the width)


# ---------------------------------------------------------------------------- compare, extrema, shifts


def icmp(name: str, t: Idx, a: z3.BitVecRef, b: z3.BitVecRef) -> z3.BoolRef:
    if name in ("e", "ne"):
        return cast(z3.BoolRef, (a == b) if name == "e" else (a != b))
    rel, x, y = name[1:], a, b
    if name[0] == "u":
        table = {"l": z3.ULT, "le": z3.ULE, "g": z3.UGT, "ge": z3.UGE}
    elif name[0] == "s":
        if t.pow2:
            table = {"l": lambda p, q: p < q, "le": lambda p, q: p <= q,
                     "g": lambda p, q: p > q, "ge": lambda p, q: p >= q}
        else:  # signed values exactly in `wide` bits, compared signed
            x, y = t.sv(a), t.sv(b)
            table = {"l": lambda p, q: p < q, "le": lambda p, q: p <= q,
                     "g": lambda p, q: p > q, "ge": lambda p, q: p >= q}
    else:
        raise NoSemantics(f"core.icmp.{name}")
    if rel not in table:
        raise NoSemantics(f"core.icmp.{name}")
    return table[rel](x, y)


def extrema(name: str, t: Idx, a: z3.BitVecRef, b: z3.BitVecRef) -> z3.BitVecRef:
    first = {"umin": "ule", "umax": "uge", "smin": "sle", "smax": "sge"}.get(name)
    if first is None:
        raise NoSemantics(f"core.extrema.{name}")
    return z3t.If(icmp(first, t, a, b), a, b)


def shr(arith: bool, t: Idx, a: z3.BitVecRef, b: z3.BitVecRef) -> tuple[z3.BitVecRef, z3.BoolRef]:
    """Logical: the unsigned value divided by 2^b; arithmetic: the signed value, rounding to -∞."""
    ub = z3.UGE(b, t.shift_width)
    if not arith:
        return z3.LShR(a, b), ub
    if t.pow2:
        return a >> b, ub  # z3's >> on bit-vectors is the arithmetic shift
    return t.reduce(t.sv(a) >> t.u(b)), ub


# ---------------------------------------------------------------------------- bit operations


BIT2: dict[str, Callable[[z3.BitVecRef, z3.BitVecRef], z3.BitVecRef]] = {
    # by name, from core.mim's description (independent of the truth-table order core.py uses)
    "f": lambda a, b: a & 0, "nor": lambda a, b: ~(a | b), "nciff": lambda a, b: ~a & b,
    "nfst": lambda a, b: ~a, "niff": lambda a, b: a & ~b, "nsnd": lambda a, b: ~b,
    "xor_": lambda a, b: a ^ b, "nand": lambda a, b: ~(a & b), "and_": lambda a, b: a & b,
    "nxor": lambda a, b: ~(a ^ b), "snd": lambda a, b: b, "iff": lambda a, b: ~a | b,
    "fst": lambda a, b: a, "ciff": lambda a, b: a | ~b, "or_": lambda a, b: a | b,
    "t": lambda a, b: ~(a & 0),
}


def bit2(name: str, t: Idx, a: z3.BitVecRef, b: z3.BitVecRef) -> z3.BitVecRef:
    if t.s == 1:
        return z3.BitVecVal(0, 1)  # the only value of Idx 1
    if name not in BIT2:
        raise NoSemantics(f"core.bit2.{name}")
    if t.pow2:
        return BIT2[name](a, b)
    # s not 2^w (docs/semantics.md): and_/or_/xor_ on the w bits reduced modulo s (below 2^w < 2s:
    # one subtraction); ¬x is s - 1 - x; the others are those two composed, as for s = 2^w.
    s = z3.BitVecVal(t.s, t.width)

    def red(r: z3.BitVecRef) -> z3.BitVecRef:
        return cast(z3.BitVecRef, z3.If(z3.UGE(r, s), r - s, r))

    def neg(x: z3.BitVecRef) -> z3.BitVecRef:
        return (s - 1) - x

    rough: dict[str, Callable[[z3.BitVecRef, z3.BitVecRef], z3.BitVecRef]] = {
        "f": lambda x, y: z3.BitVecVal(0, t.width), "t": lambda x, y: s - 1,
        "fst": lambda x, y: x, "snd": lambda x, y: y, "nfst": lambda x, y: neg(x), "nsnd": lambda x, y: neg(y),
        "and_": lambda x, y: x & y, "or_": lambda x, y: red(x | y), "xor_": lambda x, y: red(x ^ y),
        "nand": lambda x, y: neg(x & y), "nor": lambda x, y: neg(red(x | y)), "nxor": lambda x, y: neg(red(x ^ y)),
        "iff": lambda x, y: red(neg(x) | y), "ciff": lambda x, y: red(x | neg(y)),
        "niff": lambda x, y: x & neg(y), "nciff": lambda x, y: neg(x) & y,
    }
    return rough[name](a, b)


def bit1(name: str, t: Idx, x: z3.BitVecRef) -> z3.BitVecRef:
    if name == "f":
        return z3.BitVecVal(0, t.width)
    if name == "t":
        return z3.BitVecVal(t.s - 1, t.width)  # all bits set for 2^w; the largest value otherwise
    if name == "id":
        return x
    if name == "neg" and t.pow2:
        return ~x
    if name == "neg" and t.s == 1:
        return z3.BitVecVal(0, 1)  # the only value of Idx 1
    if name == "neg":
        return z3.BitVecVal(t.s - 1, t.width) - x  # -1 - x modulo s (core_ops: the complement)
    raise NoSemantics(f"core.bit1.{name} on Idx {t.s}")


# ---------------------------------------------------------------------------- division


def div(name: str, t: Idx, a: z3.BitVecRef, b: z3.BitVecRef) -> tuple[z3.BitVecRef, z3.BoolRef]:
    """Unsigned: the quotient and remainder of the unsigned values; by zero is undefined.
    Signed, as C and LLVM: the quotient truncated toward zero (|q| = ⌊|a| / |b|⌋, negative
    iff the signs differ) and the remainder a - q·b; undefined by zero and when q does not
    fit the signed range (INT_MIN / -1), for the remainder too. Computed exactly in `wide`
    bits, then brought back to `width`."""
    by_zero = cast(z3.BoolRef, b == 0)
    if name in ("udiv", "urem"):
        op = z3.UDiv if name == "udiv" else z3.URem
        return z3t.Extract(t.width - 1, 0, op(t.u(a), t.u(b))), by_zero
    if name not in ("sdiv", "srem"):
        raise NoSemantics(f"core.div.{name}")
    q_mag = z3.UDiv(t.magnitude(a), t.magnitude(b))
    q = z3t.If(t.negative(a) == t.negative(b), q_mag, -q_mag)
    value = q if name == "sdiv" else t.sv(a) - q * t.sv(b)
    # The one quotient that does not fit: the most negative value divided by -1, when it has no
    # positive counterpart (s even; for odd s the signed range is symmetric).
    overflow = z3t.And(t.sv(a) == t.smin, t.sv(b) == -1) if -t.smin > t.smax else FALSE
    return t.reduce(value), z3t.Or(by_zero, overflow)


# ---------------------------------------------------------------------------- conversions


def conv(signed: bool, src: Idx, dst: Idx, x: z3.BitVecRef) -> z3.BitVecRef:
    """The unsigned (conv.u) or signed (conv.s) value modulo the destination size."""
    if src.pow2 and dst.pow2:
        ws, wd = src.width, dst.width
        if wd <= ws:
            return z3t.Extract(wd - 1, 0, x)
        return (z3.SignExt if signed else z3.ZeroExt)(wd - ws, x)
    wide = max(src.wide, dst.wide)
    v = z3.SignExt(wide - src.wide, src.sv(x) if signed else src.u(x))
    return dst.reduce(v, nonneg=not signed)


IntType = Idx | None  # None: Nat


def int_type(t: Def) -> IntType:
    """`Nat` (None) or a literal `Idx s`; NoSemantics for any other type."""
    if isinstance(t, NatT):
        return None
    if isinstance(t, IdxT) and isinstance(t.size, Lit) and isinstance(t.size.value, int):
        return Idx(t.size.value)
    raise NoSemantics(f"not an integer type: {show(t)}")


def _bits(t: IntType) -> int:
    return NAT_BITS if t is None else t.width


def _resize(x: z3.BitVecRef, bits: int) -> z3.BitVecRef:
    have = x.size()
    return x if have == bits else (z3.ZeroExt(bits - have, x) if bits > have else z3t.Extract(bits - 1, 0, x))


def bitcast(src: Def, dst: Def, x: z3.ExprRef) -> tuple[z3.ExprRef, z3.BoolRef]:
    """Between integer types the value is kept, undefined where the target does not hold it
    (SEMANTICS.md); any type to itself is the identity."""
    if src is dst:
        return x, FALSE
    s_t, d_t = int_type(src), int_type(dst)
    assert isinstance(x, z3.BitVecRef)
    common = max(_bits(s_t), _bits(d_t)) + 1  # + 1: the target size s itself is a constant here
    wide = _resize(x, common)
    does_not_fit = FALSE if d_t is None else z3.UGE(wide, d_t.s)
    return _resize(wide, _bits(d_t)), does_not_fit


# ---------------------------------------------------------------------------- Nat


def nat(name: str, a: z3.BitVecRef, b: z3.BitVecRef) -> z3.BitVecRef:
    if name == "add":
        return a + b
    if name == "sub":
        return z3t.If(z3.UGE(a, b), a - b, 0)  # saturates at 0
    if name == "mul":
        return a * b
    raise NoSemantics(f"core.nat.{name}")


def ncmp(name: str, a: z3.BitVecRef, b: z3.BitVecRef) -> z3.BoolRef:
    table = {"e": lambda: a == b, "ne": lambda: a != b, "l": lambda: z3.ULT(a, b),
             "le": lambda: z3.ULE(a, b), "g": lambda: z3.UGT(a, b), "ge": lambda: z3.UGE(a, b)}
    if name not in table:
        raise NoSemantics(f"core.ncmp.{name}")
    return table[name]()


# ---------------------------------------------------------------------------- the encoder


Env = Mapping[Def, z3.ExprRef]


def encode(d: Def, env: Env) -> Encoded:
    """The value of a term built of `core.*` applications, literals, tuples, packs, extracts
    and free variables (`env` gives each free variable's Z3 value)."""
    if d in env:
        return Encoded(env[d], FALSE)
    if isinstance(d, Lit):
        return literal(d)
    if isinstance(d, Tuple):
        elems = [encode(e, env) for e in d.ops]
        return Encoded(tuple(e.value for e in elems), _any(*(e.ub for e in elems)))
    if isinstance(d, Pack) and isinstance(d.shape, Lit) and d.body.closed:
        body = encode(d.body, env)  # a closed body does not use the index: every element is it
        return Encoded(tuple(body.value for _ in range(d.shape.value)), body.ub)
    if isinstance(d, Extract) and isinstance(d.index, Lit):
        tup = encode(d.tup, env)
        if not isinstance(tup.value, tuple):
            raise NoSemantics(f"extract from a non-tuple: {show(d)}")
        return Encoded(tup.value[d.index.value], tup.ub)
    if isinstance(d, Extract):
        return _select(d, env)
    if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex.startswith("core."):
        return encode_app(d.head.annex, d.args(), env)
    if isinstance(d, Param):
        raise NoSemantics(f"a free variable without a value: {show(d)}")
    raise NoSemantics(f"no bit-vector meaning for `{show(d)}`")


def _select(d: Extract, env: Env) -> Encoded:
    """An element of a tuple of integers chosen by a run-time index (`(2I32, 4I32)#c`, Mim's
    select): the element the index names, a chain of ifs (the index's type `Idx n` holds only
    the tuple's positions)."""
    tup, idx = encode(d.tup, env), encode(d.index, env)
    i = idx.value
    elems = [e for e in tup.value if isinstance(e, z3.BitVecRef)] if isinstance(tup.value, tuple) else []
    if not (elems and isinstance(tup.value, tuple) and len(elems) == len(tup.value) and isinstance(i, z3.BitVecRef)
            and all(e.sort() == elems[0].sort() for e in elems)):
        raise NoSemantics(f"an extract at a run-time index of what is not a tuple of integers: {show(d)}")
    if len(elems) > (1 << i.size()):
        raise NoSemantics(f"an index too narrow for its tuple: {show(d)}")
    out = elems[-1]
    for k in range(len(elems) - 2, -1, -1):
        out = z3t.If(i == k, elems[k], out)
    return Encoded(out, _any(tup.ub, idx.ub))


def literal(d: Lit) -> Encoded:
    """A literal; one whose value the type does not hold is no value (ub)."""
    t = int_type(d.ops[0])
    bits = _bits(t)
    v = cast("int | SymbolicLiteral", d.value)  # a symbolic literal holds a SymInt (verimim.smt.symbolic)
    if isinstance(v, int):
        if t is None and v >= (1 << bits):
            # a Nat is unbounded (SEMANTICS.md): this one is a value the model cannot hold, not
            # an undefined one (a fold reaching it was refuted, `2^129 + 2^129` and the like)
            raise NoSemantics(f"the Nat {v} is beyond the {bits} bits the model holds a Nat in")
        fits = 0 <= v < (1 << bits)
        bv, ok = z3.BitVecVal(v % (1 << bits), bits), z3.BoolVal(fits)
    else:
        bv, ok = v.unsigned_bv(bits)
    if t is not None:
        ok = z3t.And(ok, t.in_range(bv)) if not t.pow2 else ok
    return Encoded(bv, z3t.simplify(z3t.Not(ok)))


def _size(d: Def, what: str) -> int:
    if isinstance(d, Lit) and isinstance(d.value, int):
        return d.value
    raise NoSemantics(f"{what} is not a literal: {show(d)}")


def _pair(d: Def, env: Env) -> tuple[z3.BitVecRef, z3.BitVecRef, z3.BoolRef]:
    e = encode(d, env)
    if not (isinstance(e.value, tuple) and len(e.value) == 2):
        raise NoSemantics(f"not a pair: {show(d)}")
    a, b = e.value
    assert isinstance(a, z3.BitVecRef) and isinstance(b, z3.BitVecRef)
    return a, b, e.ub


def _one(d: Def, env: Env) -> tuple[z3.BitVecRef, z3.BoolRef]:
    e = encode(d, env)
    assert isinstance(e.value, z3.BitVecRef), show(d)
    return e.value, e.ub


def encode_app(annex: str, args: Sequence[Def], env: Env) -> Encoded:
    """`annex` applied to its curried arguments (implicit ones included), as `App.args()`."""
    family, _, tag = annex.removeprefix("core.").partition(".")
    handler = _FAMILIES.get(family)
    if handler is None:
        raise NoSemantics(f"no bit-vector meaning for `{annex}`")
    return handler(tag, list(args), env)


def _enc_nat(tag: str, args: list[Def], env: Env) -> Encoded:
    a, b, ub = _pair(args[0], env)
    return Encoded(nat(tag, a, b), ub)


def _enc_ncmp(tag: str, args: list[Def], env: Env) -> Encoded:
    a, b, ub = _pair(args[0], env)
    return Encoded(_bit(ncmp(tag, a, b)), ub)


def _enc_icmp(tag: str, args: list[Def], env: Env) -> Encoded:
    t = Idx(_size(args[0], "the size"))
    a, b, ub = _pair(args[1], env)
    return Encoded(_bit(icmp(tag, t, a, b)), ub)


def _enc_wrap(tag: str, args: list[Def], env: Env) -> Encoded:
    """The mode may be any Nat term (a free variable in the proofs): its bits decide the UB."""
    t = Idx(_size(args[0], "the size"))
    mode: Mode
    mode_ub = FALSE
    if isinstance(args[1], Lit) and isinstance(args[1].value, int):
        mode = args[1].value
    else:
        mode, mode_ub = _one(args[1], env)
    a, b, ub = _pair(args[2], env)
    v, op_ub = wrap(tag, t, mode, a, b)
    return Encoded(v, _any(ub, mode_ub, op_ub))


def _enc_extrema(tag: str, args: list[Def], env: Env) -> Encoded:
    t = Idx(_size(args[0], "the size"))
    a, b, ub = _pair(args[1], env)
    return Encoded(extrema(tag, t, a, b), ub)


def _enc_shr(tag: str, args: list[Def], env: Env) -> Encoded:
    t = Idx(_size(args[0], "the size"))
    a, b, ub = _pair(args[1], env)
    if tag not in ("a", "l"):
        raise NoSemantics(f"core.shr.{tag}")
    v, op_ub = shr(tag == "a", t, a, b)
    return Encoded(v, _any(ub, op_ub))


def _enc_bit2(tag: str, args: list[Def], env: Env) -> Encoded:
    t = Idx(_size(args[0], "the size"))
    a, b, ub = _pair(args[2], env)
    return Encoded(bit2(tag, t, a, b), ub)


def _enc_bit1(tag: str, args: list[Def], env: Env) -> Encoded:
    t = Idx(_size(args[0], "the size"))
    x, ub = _one(args[2], env)
    return Encoded(bit1(tag, t, x), ub)


def _enc_div(tag: str, args: list[Def], env: Env) -> Encoded:
    t = Idx(_size(args[0], "the size"))
    arg = encode(args[1], env)
    if not (isinstance(arg.value, tuple) and len(arg.value) == 2 and isinstance(arg.value[1], tuple)):
        raise NoSemantics(f"core.div argument is not [mem, «2; Idx s»]: {show(args[1])}")
    mem, (a, b) = cast(tuple[z3.ExprRef, tuple[z3.BitVecRef, z3.BitVecRef]], arg.value)
    v, op_ub = div(tag, t, a, b)
    return Encoded((mem, v), _any(arg.ub, op_ub))


def _enc_conv(tag: str, args: list[Def], env: Env) -> Encoded:
    src, dst = Idx(_size(args[0], "the source size")), Idx(_size(args[1], "the target size"))
    x, ub = _one(args[2], env)
    if tag not in ("s", "u"):
        raise NoSemantics(f"core.conv.{tag}")
    # `Idx 0` holds no value (docs/semantics.md: I64 is `Idx 2^64`): a conversion into it is
    # undefined (the interpreter's E-OOB), whatever x is
    return Encoded(conv(tag == "s", src, dst, x), _any(ub, z3.BoolVal(dst.s == 0)))


def _enc_idx(tag: str, args: list[Def], env: Env) -> Encoded:
    """`core.idx s m n` (upstream's normalize_idx): n when n < s; else n mod s in mode 0 (wrap
    allowed), undefined in any other mode."""
    t = Idx(_size(args[0], "the size"))
    mode, mode_ub = _one(args[1], env)
    n, ub = _one(args[2], env)
    out_of_range = z3.UGE(n, t.s) if t.s < 2 ** n.size() else FALSE
    wrapped = z3.URem(n, z3.BitVecVal(t.s, n.size())) if t.s < 2 ** n.size() else n
    # (`Idx 0` holds no value: undefined in every mode, as the interpreter's E-OOB)
    return Encoded(z3t.Extract(t.width - 1, 0, wrapped),
                   _any(ub, mode_ub, z3t.And(out_of_range, mode != 0), z3.BoolVal(t.s == 0)))


def _enc_bitcast(tag: str, args: list[Def], env: Env) -> Encoded:
    src, dst, x = args
    if ptr_space(src) is not None and ptr_space(dst) is None:
        # ptrtoint: an address, which only the pointer x determines: one variable per node (a fold
        # that holds for every address holds); a value the target does not hold is no value
        t = int_type(dst)
        v = z3.BitVec(f"address!{x.gid}", _bits(t))
        return Encoded(v, FALSE if t is None or t.pow2 else z3t.Not(t.in_range(v)))
    e = encode(x, env)
    assert isinstance(e.value, z3.ExprRef)
    v, op_ub = bitcast(src, dst, e.value)
    return Encoded(v, _any(e.ub, op_ub))


def _enc_trait(tag: str, args: list[Def], env: Env) -> Encoded:
    raise NoSemantics(f"core.trait.{tag} is a fact about a type's layout, not an integer operation")


_FAMILIES: dict[str, Callable[[str, list[Def], Env], Encoded]] = {
    "nat": _enc_nat, "ncmp": _enc_ncmp, "icmp": _enc_icmp, "wrap": _enc_wrap,
    "extrema": _enc_extrema, "shr": _enc_shr, "bit2": _enc_bit2, "bit1": _enc_bit1,
    "div": _enc_div, "conv": _enc_conv, "idx": _enc_idx, "bitcast": _enc_bitcast,
    "trait": _enc_trait,
}


# ---------------------------------------------------------------------------- comparing values


def same_value(x: Value, y: Value) -> z3.BoolRef:
    """Equality of two encoded values; false when their shapes or sorts differ (a rewrite
    that changes the type is wrong)."""
    if isinstance(x, tuple) or isinstance(y, tuple):
        if not (isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y)):
            return FALSE
        return z3t.And(*(same_value(p, q) for p, q in zip(x, y))) if x else z3.BoolVal(True)
    if not x.sort().eq(y.sort()):
        return FALSE
    return cast(z3.BoolRef, x == y)
