"""The integer meaning of the `core` operations, written once.

Both the constant-folding normalizers (verimim.plug.core) and the interpreter
(verimim.plug.core_interp) compute with these functions, and the tests prove them equal to
Z3's bit-vector semantics for every width they apply to: the functions are written over
"integer-like" values, so they run on Python ints and on Z3 integer terms alike (`ite` picks
`z3.If` for a symbolic condition). A value of `Idx s` is its unsigned bit pattern 0 ≤ v < s;
signedness belongs to the operation, as in LLVM.
"""
from __future__ import annotations

from typing import Any

IntLike = Any  # int or z3.ArithRef
BoolLike = Any  # bool or z3.BoolRef


def _is_symbolic(x: Any) -> bool:
    return type(x).__module__.startswith("z3")


def ite(c: BoolLike, a: IntLike, b: IntLike) -> IntLike:
    if _is_symbolic(c):
        import z3

        return z3.If(c, a, b)
    return a if c else b


def width(s: int) -> int:
    """The bits of an `Idx s` value: ⌈log2 s⌉, at least 1 (as upstream's `Idx::size2bitwidth`).
    A shift by this many bits or more is undefined; bitwise operations act on these bits."""
    return max((s - 1).bit_length(), 1)


def signed(v: IntLike, s: int) -> IntLike:
    """The two's-complement value of the bit pattern v of `Idx s` (s a power of two)."""
    return ite(v >= (s + 1) // 2, v - s, v)


def iabs(x: IntLike) -> IntLike:
    return ite(x >= 0, x, -x)


# ---------------------------------------------------------------------------- wrap


def wrap_exact(name: str, a: IntLike, b: IntLike) -> IntLike:
    """The mathematically exact result of the unsigned operands (shl: b a constant shift)."""
    if name == "add":
        return a + b
    if name == "sub":
        return a - b
    if name == "mul":
        return a * b
    if name == "shl":
        return a * (2 ** b) if isinstance(b, int) else a * b  # b: a concrete shift amount
    raise ValueError(name)


def wrap(name: str, s: int, a: IntLike, b: IntLike) -> IntLike:
    """`core.wrap.NAME` modulo s (the result when no mode forbids the overflow)."""
    return wrap_exact(name, a, b) % s


def wrap_unsigned_overflow(name: str, s: int, a: IntLike, b: IntLike) -> BoolLike:
    e = wrap_exact(name, a, b)
    if _is_symbolic(e):
        import z3

        return z3.Or(e < 0, e >= s)
    return not 0 <= e < s


def wrap_signed_overflow(name: str, s: int, a: IntLike, b: IntLike) -> BoolLike:
    sa, sb = signed(a, s), signed(b, s)
    exact = sa * (2 ** b) if name == "shl" else wrap_exact(name, sa, sb)
    # The signed values of `Idx s` (as `signed` reads them) are -(s // 2) .. (s - 1) // 2: for an
    # odd s the range is symmetric, for an even s it has one more negative value.
    lo, hi = -(s // 2), (s - 1) // 2
    if _is_symbolic(exact):
        import z3

        return z3.Or(exact < lo, exact > hi)
    return not lo <= exact <= hi


# ---------------------------------------------------------------------------- comparisons


def icmp(name: str, s: int, a: IntLike, b: IntLike) -> BoolLike:
    if name.startswith("s"):
        a, b = signed(a, s), signed(b, s)
        name = name[1:]
    elif name.startswith("u"):
        name = name[1:]
    return {"e": lambda: a == b, "ne": lambda: a != b, "l": lambda: a < b, "le": lambda: a <= b,
            "g": lambda: a > b, "ge": lambda: a >= b}[name]()


def ncmp(name: str, a: IntLike, b: IntLike) -> BoolLike:
    """Comparison of two Nats, with Python's operators (which symbolic integers overload, so the
    normalizer proofs run this very code; `int.__lt__` would refuse them)."""
    return {"e": lambda: a == b, "ne": lambda: a != b, "l": lambda: a < b, "le": lambda: a <= b,
            "g": lambda: a > b, "ge": lambda: a >= b}[name]()


def nat(name: str, a: IntLike, b: IntLike) -> IntLike:
    if name == "add":
        return a + b
    if name == "sub":
        return ite(a >= b, a - b, 0)  # saturates at 0
    if name == "mul":
        return a * b
    raise ValueError(name)


# ---------------------------------------------------------------------------- division


def div_defined(name: str, s: int, a: IntLike, b: IntLike) -> BoolLike:
    """Division by zero is undefined; so is the signed overflow INT_MIN / -1 (for srem too)."""
    if name in ("udiv", "urem"):
        return b != 0
    # The only overflow is INT_MIN / -1, whose quotient 2^(w-1) does not fit.
    overflow_case = (signed(a, s) == -((s + 1) // 2), signed(b, s) == -1)
    if _is_symbolic(b) or _is_symbolic(a):
        import z3

        return z3.And(b != 0, z3.Not(z3.And(*overflow_case)))
    return b != 0 and not all(overflow_case)


def _sdiv_trunc(sa: IntLike, sb: IntLike) -> IntLike:
    """Signed division rounding towards zero (C, LLVM)."""
    q = iabs(sa) / iabs(sb) if _is_symbolic(sa) or _is_symbolic(sb) else abs(sa) // abs(sb)
    same = (sa >= 0) == (sb >= 0)
    return ite(same, q, -q)


def div(name: str, s: int, a: IntLike, b: IntLike) -> IntLike:
    """The result where `div_defined` holds."""
    if name == "udiv":
        return a / b if _is_symbolic(a) or _is_symbolic(b) else a // b
    if name == "urem":
        return a % b
    sa, sb = signed(a, s), signed(b, s)
    q = _sdiv_trunc(sa, sb)
    if name == "sdiv":
        return q % s
    return (sa - q * sb) % s


# ---------------------------------------------------------------------------- others


def extrema(name: str, s: int, a: IntLike, b: IntLike) -> IntLike:
    ka, kb = (signed(a, s), signed(b, s)) if name.startswith("s") else (a, b)
    return ite(ka <= kb, a, b) if name.endswith("min") else ite(ka >= kb, a, b)


def conv(sign: bool, ss: int, ds: int, x: IntLike) -> IntLike:
    return (signed(x, ss) if sign else x) % ds


def shr(arith: bool, s: int, a: IntLike, b: int) -> IntLike:
    """Shift right by a concrete amount b (< the width)."""
    if arith:
        sa = signed(a, s)
        q = sa / (2 ** b) if _is_symbolic(sa) else sa // (2 ** b)  # floor division = arithmetic shift
        return q % s
    return a / (2 ** b) if _is_symbolic(a) else a // (2 ** b)


# ---------------------------------------------------------------------------- bitwise, Idx s not 2^w

# On an `Idx s` whose s is not a power of two there are no "all the bits" to negate: the
# complement is c(x) = s - 1 - x (-1 - x modulo s, `bit1.neg`), `and_`/`or_`/`xor_` act on the
# value's ⌈log2 s⌉ bits and reduce the result modulo s, and every other operation is one of
# those composed with c — as each is for s = 2^w, where c is the bitwise complement. So `nand
# (x, x)` is `neg x`, `bit2.t` is `bit1.t` (s - 1), `nfst (a, b)` is `neg a` (upstream's rewrite).
_POSITIVE_OF_NEGATED = {"nand": "and_", "nor": "or_", "nxor": "xor_"}
_WITH_ONE_COMPLEMENTED = {"iff": ("or_", 0), "ciff": ("or_", 1), "niff": ("and_", 1), "nciff": ("and_", 0)}


def bit2_composed(name: str, a: Any, b: Any, positive: Any, complement: Any, zero: Any, ones: Any) -> Any:
    """`core.bit2.NAME (a, b)` from `positive(op, x, y)` (op one of and_/or_/xor_, reduced) and
    `complement(x)`: written once for the interpreter's integers and the code generator's
    LLVM values."""
    fixed = {"f": zero, "t": ones, "fst": a, "snd": b}
    if name in fixed:
        return fixed[name]
    if name in ("nfst", "nsnd"):
        return complement(a if name == "nfst" else b)
    if name in ("and_", "or_", "xor_"):
        return positive(name, a, b)
    if name in _POSITIVE_OF_NEGATED:
        return complement(positive(_POSITIVE_OF_NEGATED[name], a, b))
    op, which = _WITH_ONE_COMPLEMENTED[name]
    return positive(op, complement(a), b) if which == 0 else positive(op, a, complement(b))


def bit2_not_pow2(name: str, s: int, a: int, b: int) -> int:
    """`core.bit2.NAME (a, b)` on an `Idx s`, s not a power of two (see above)."""
    def positive(op: str, x: int, y: int) -> int:
        return {"and_": x & y, "or_": x | y, "xor_": x ^ y}[op] % s
    return int(bit2_composed(name, a, b, positive, lambda x: s - 1 - x, 0, s - 1))
