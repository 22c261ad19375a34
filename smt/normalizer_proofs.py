"""Alive2-style proofs of the `core` normalizers, for every width they apply to (PHASES.md).

For each normalizer (each `core.*` annex with a registered normalizer) and each width, the
World's own normalizer is applied to the annex in every operand shape it can match at the top
level: free variables (`Param`s), literals, and the same operand twice. A literal here is a
*symbolic literal* (`verimim.smt.symbolic.SymInt`) that stands for every value of its type, and
the real normalizer code (core.py and the core_ops functions it calls) runs on it by symbolic
execution, once per path. Each path that rewrites yields a term `after`; it and `before` (the
application itself) are encoded with the independent bit-vector semantics of
`verimim.smt.bv`, and Z3 looks for inputs on which

- before is defined and after is undefined or differs (refinement, as Alive2 checks), or
- before is undefined and after is defined (UB kept: stricter than Alive2 on purpose, because
  verimim's interpreter must report undefined behaviour (SEMANTICS.md) and so core.py leaves
  such applications unfolded; a normalizer that folded them would hide it).

unsat for every path: proved. sat: refuted, with a counterexample. A time-out or `unknown`:
unknown, never proved. A normalizer that raises on some input is refuted.

Two more checks per case. *Samples*: the same obligations on concrete boundary literals
(0, 1, INT_MAX, INT_MIN, -1, …), with the normalizer run on real Python ints — a `SymInt` is
not an `int`, and this closes that gap (core_ops keeps separate branches for its own symbolic
use, and tests `isinstance(shift, int)`). *Completeness* (reported, not required for
soundness): a defined all-literal application that the normalizer leaves unfolded.

Solving. Each query is first given to Z3 as it is, briefly; what is not settled is split on
the sign of each input (`_sign_cases`), completed with the interval facts the SymInts carry,
tried on its Boolean abstraction (`verimim.smt.bounds`) and only then bit-blasted by Z3 with
the full time-out. Both sides compute exact results in the same `bv.Idx.wide` bits, so with
the signs fixed they meet in identical multiplier and divider terms: 64-bit `mul nsw`,
`sdiv` and `srem` are proved in tenths of a second, where an equivalence of differently built
multipliers would not finish. The trusted pieces are the semantics in `bv`, the exactness and
intervals of `SymInt` and the abstraction in `bounds`; the tests check each on its own.

Widths: `Idx 2^w` for w in 1, 8, 16, 32, 64; and, for normalizers that apply to any `Idx s`,
`Idx 1` and sizes that are no power of two (3, 6, 7, 1000), held in ⌈log2 s⌉ bits with the
range constraint v < s. Shift amounts stay concrete (every amount below the width, one by
one, and one symbolic literal for all the amounts from the width up), because core_ops
computes `2 ** b` and tests `isinstance(b, int)`. `Nat` is unbounded; its operands are
taken below 2^64 (i64 on targets) so that one operation is exact in `bv.NAT_BITS` bits.
`core.trait.*` reads a type's layout and has no bit-vector operand: it is not proved here.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, cast

import z3
from verimim.smt import bounds, bv
from verimim.smt import z3_typed as z3t
from verimim.smt.symbolic import Explorer, Path, SymbolicError, SymInt, term_ids

from verimim.ir.defs import App, Axiom, Def
from verimim.ir.world import World
from verimim.printer import show

Status = Literal["proved", "refuted", "unknown"]
TypeSpec = int | str  # an Idx size, "Nat", or "Ptr" (a pointer type, for bitcast's identity)

DEFAULT_TIMEOUT_MS = 10_000
QUICK_TIMEOUT_MS = 50  # a first try on the formula as it is (see `solve`)
QUICK_MS_PER_OBLIGATION = 1  # more for a disjunction of many obligations (see `_query`)
NESTED_MAX_OTHER_SIZE = 7  # nested shapes on sizes that are no power of two: up to Idx 7
MAX_SIGN_ATOMS = 3  # split on the signs of at most this many inputs (see `_sign_cases`)
# Branches of the normalizer are not checked for feasibility with Z3 (that was the slowest part:
# bounds of 128-bit products); an impossible path only adds an obligation refuted with the rest.
FEASIBILITY_TIMEOUT_MS = 0
POW2_BITS = (1, 8, 16, 32, 64)
OTHER_SIZES = (1, 3, 6, 7, 1000)  # Idx 1, and sizes that are no power of two: odd, even, larger
PTR = z3.DeclareSort("Ptr")


def idx_sizes() -> tuple[int, ...]:
    return tuple(2**w for w in POW2_BITS) + OTHER_SIZES


def type_label(t: TypeSpec) -> str:
    if isinstance(t, str):
        return t
    return f"i{t.bit_length() - 1}" if t >= 2 and t & (t - 1) == 0 else f"Idx {t}"


@dataclass(frozen=True)
class Case:
    """One normalizer at one width (for conv and bitcast: a source and a target type)."""

    annex: str
    types: tuple[TypeSpec, ...]

    @property
    def family(self) -> str:
        return self.annex.removeprefix("core.").partition(".")[0]

    @property
    def tag(self) -> str:
        return self.annex.removeprefix("core.").partition(".")[2]

    @property
    def label(self) -> str:
        return "→".join(type_label(t) for t in self.types)

    @property
    def work_width(self) -> int:
        """The width the specification computes exact results in (`bv.Idx.wide`, or Nat's)."""
        widths = [bv.NAT_BITS if t == "Nat" else bv.Idx(cast(int, t)).wide for t in self.types if t != "Ptr"]
        if self.family == "idx":
            widths.append(bv.NAT_BITS)
        return max(widths, default=1)

    def __str__(self) -> str:
        return f"{self.annex} {self.label}"


@dataclass(frozen=True)
class Query:
    """One question about a case: `kind` is "sound" (refinement and UB kept, for the symbolic
    applications), "samples" (the same on concrete boundary literals) or "complete" (no missed
    fold). It may take several Z3 calls (`solve`): `z3_s` is the time spent in them, `wall_s`
    the time with the formulas' preparation."""

    application: str
    kind: str
    status: Status
    z3_s: float
    wall_s: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class CaseResult:
    case: Case
    queries: tuple[Query, ...]
    paths: int
    rewrites: int  # paths on which the normalizer rewrote the application
    feasibility_s: float  # Z3 time spent deciding which branches of the normalizer are possible

    @property
    def status(self) -> Status:
        decisive = [q for q in self.queries if q.kind != "complete"]
        if any(q.status == "refuted" for q in decisive):
            return "refuted"
        if any(q.status == "unknown" for q in decisive):
            return "unknown"
        return "proved"

    @property
    def complete(self) -> bool:
        return all(q.status == "proved" for q in self.queries if q.kind == "complete")

    @property
    def z3_s(self) -> float:
        return sum(q.z3_s for q in self.queries) + self.feasibility_s

    @property
    def wall_s(self) -> float:
        return sum(q.wall_s for q in self.queries)

    @property
    def slowest(self) -> Query | None:
        return max(self.queries, key=lambda q: q.z3_s, default=None)

    def failures(self, kinds: Sequence[str] = ("sound", "samples")) -> list[Query]:
        return [q for q in self.queries if q.kind in kinds and q.status != "proved"]

    def describe(self) -> str:
        head = (f"{self.case}: {self.status} ({len(self.queries)} queries, {self.paths} paths, "
                f"{self.rewrites} rewrites, Z3 {self.z3_s * 1000:.0f} ms)")
        lines = [head]
        lines += [f"  {q.kind} {q.status} [{q.application}]: {q.detail}"
                  for q in self.queries if q.status != "proved"]
        return "\n".join(lines)


# ---------------------------------------------------------------------------- operands


@dataclass
class _Inputs:
    """Makes operands: free variables, symbolic literals, or (for samples) concrete literals."""

    world: World
    explorer: Explorer
    env: dict[Def, z3.ExprRef] = field(default_factory=dict)
    variables: dict[str, z3.BitVecRef] = field(default_factory=dict)
    types: dict[str, TypeSpec] = field(default_factory=dict)
    signed: set[str] = field(default_factory=set)  # Idx inputs over their whole type: split on the sign
    sample: dict[str, int] | None = None  # name → index into the boundary values
    z3_s: float = 0.0  # time spent in Z3 calls so far

    def type_def(self, t: TypeSpec) -> Def:
        w = self.world
        if t == "Nat":
            return w.nat()
        if t == "Ptr":
            return w.app(w.annex("mem.Ptr"), w.tuple([w.idx_n(2**32), w.lit_nat(0)]))
        assert isinstance(t, int)
        return w.idx_n(t)

    @staticmethod
    def range_of(t: TypeSpec) -> tuple[int, int]:
        return (0, 2**bv.NAT_OPERAND_BITS - 1) if t == "Nat" else (0, int(t) - 1)

    def param(self, name: str, t: TypeSpec) -> Def:
        p = self.world.param(self.type_def(t), name)
        if self.sample is not None:
            return p  # samples use all-literal applications only: no value needed
        if t == "Ptr":
            self.env[p] = z3.Const(name, PTR)
            return p
        _, var = self._variable(name, t, *self.range_of(t))
        self.env[p] = z3.ZeroExt(bv.NAT_BITS - var.size(), var) if t == "Nat" else var
        return p

    def _variable(self, name: str, t: TypeSpec, lo: int, hi: int) -> tuple[SymInt, z3.BitVecRef]:
        sym, var = self.explorer.var(name, lo, hi)
        self.variables[name], self.types[name] = var, t
        if isinstance(t, int) and t >= 2 and (lo, hi) == self.range_of(t):
            self.signed.add(name)
        return sym, var

    def sign_atom(self, name: str) -> z3.BoolRef:
        """"The input `name` is negative", as the specification and core_ops both write it."""
        t = self.types[name]
        assert isinstance(t, int)
        return bv.Idx(t).negative(self.variables[name])

    def literal(self, name: str, t: TypeSpec, lo: int | None = None, hi: int | None = None) -> Def:
        """A literal standing for every value in [lo, hi] (the whole type by default)."""
        t_lo, t_hi = self.range_of(t)
        lo, hi = t_lo if lo is None else lo, t_hi if hi is None else hi
        if self.sample is not None:
            values = boundary_values(lo, hi)
            return self.concrete(t, values[min(self.sample.get(name, 0), len(values) - 1)])
        sym, _ = self._variable(name, t, lo, hi)
        return self.world.lit(self.type_def(t), sym)  # type: ignore[arg-type]

    def concrete(self, t: TypeSpec, v: int) -> Def:
        return self.world.lit(self.type_def(t), v)

    def mem(self) -> Def:
        w = self.world
        m = w.param(w.app(w.annex("mem.M"), w.lit_nat(0)), "mem")
        self.env[m] = z3.Const("mem", bv.MEM)
        return m

    def mode_param(self) -> Def:
        """A mode that is no literal: any Nat (wrap's overflow rules then depend on its bits)."""
        return self.param("mode", "Nat")


SAMPLES_PER_OPERAND = 5


def boundary_values(lo: int, hi: int) -> list[int]:
    """The edges of [lo, hi]: 0, 1, INT_MAX, INT_MIN and -1 for a whole `Idx 2^w`."""
    mid = (lo + hi + 1) // 2
    picks = {lo, lo + 1, mid - 1, mid, hi}
    return sorted(v for v in picks if lo <= v <= hi)


@dataclass(frozen=True)
class Application:
    label: str
    args: tuple[Def, ...]
    all_literal: bool  # every operand is a literal: the normalizer is expected to fold it


Operands = list[tuple[str, Def, bool]]  # (label, operand, all literal)


def _pairs(inp: _Inputs, t: TypeSpec) -> Operands:
    x, y = inp.param("a", t), inp.param("b", t)
    a, b = inp.literal("a", t), inp.literal("b", t)
    tup = inp.world.tuple
    return [("(x, y)", tup([x, y]), False), ("(x, x)", tup([x, x]), False),
            ("(x, B)", tup([x, b]), False), ("(A, y)", tup([a, y]), False),
            ("(A, B)", tup([a, b]), True), ("(A, A)", tup([a, a]), True)] + _partial_pairs(inp, t)


def _partial(inp: _Inputs, t: TypeSpec) -> Def | None:
    """An operand of type t that may be undefined: `core.idx s 1 n` (for Nat: that, bitcast),
    undefined for n ≥ s (mode 1 forbids the wrap-around that mode 0 makes). A rule that drops an operand (`0 · u`, `u - u`, `u ∧ ff`) must not
    drop this one: the interpreter would have reported it."""
    if inp.sample is not None or t == "Ptr":
        return None
    w = inp.world
    n = inp.param("u_n", "Nat")
    s = 256 if t == "Nat" else int(t)
    u = raw_app(w, w.annex("core.idx"), w.lit_nat(s), w.lit_nat(1), n)
    return raw_app(w, w.annex("core.bitcast"), w.idx_n(256), w.nat(), u) if t == "Nat" else u


def _partial_pairs(inp: _Inputs, t: TypeSpec) -> Operands:
    u = _partial(inp, t)
    if u is None:
        return []
    b = inp.literal("b", t)
    tup = inp.world.tuple
    return [("(u, B)", tup([u, b]), False), ("(B, u)", tup([b, u]), False), ("(u, u)", tup([u, u]), False)]


def _shift_pairs(inp: _Inputs, s: int) -> Operands:
    """As `_pairs`, with the shift amount concrete below the width and symbolic from it up."""
    width = bv.Idx(s).shift_width
    x, y, a = inp.param("a", s), inp.param("b", s), inp.literal("a", s)
    # Every amount below the width; for samples (concrete literals everywhere), the edges.
    below = range(min(width, s)) if inp.sample is None else boundary_values(0, min(width, s) - 1)
    amounts = [(str(c), inp.concrete(s, c)) for c in below]
    if width <= s - 1:
        amounts.append((f"B≥{width}", inp.literal("b_hi", s, width, s - 1)))
    tup = inp.world.tuple
    out: Operands = [("(x, y)", tup([x, y]), False), ("(x, x)", tup([x, x]), False),
                     ("(A, y)", tup([a, y]), False)]
    for label, c in amounts:
        out += [(f"(x, {label})", tup([x, c]), False), (f"(A, {label})", tup([a, c]), True),
                (f"({label}, {label})", tup([c, c]), True)]
    return out


def _unary(inp: _Inputs, t: TypeSpec) -> Operands:
    u = _partial(inp, t)
    return [("x", inp.param("a", t), False), ("A", inp.literal("a", t), True)] + \
        ([("u", u, False)] if u is not None else [])


# ---------------------------------------------------------------------------- operands that are applications


def raw_app(world: World, head: Def, *args: Def) -> Def:
    """`head args…` built without its normalizer: the term as written, as a rule may meet it
    (an operand built before it was simplified, or by a phase). Used as an operand, it makes
    `before` the unsimplified nested term, so that a rule looking into its operands (reassociation,
    ¬¬x, merged comparisons, bitcast chains) is checked against the meaning of what it matched."""
    assert isinstance(head, Axiom)
    saved = world.normalizers.pop(head.annex, None)
    try:
        return world.apps(head, *args)
    finally:
        if saved is not None:
            world.normalizers[head.annex] = saved


def _nested(inp: _Inputs, t: TypeSpec, outer: Def, inner: Callable[[Def, Def], Def]) -> Operands:
    """Pairs whose operands are applications `inner (p, q)` of the same kind of operation:
    every shape of upstream's reassociation rules (literals A, B; free variables x, y, z), a
    literal second inside, and one without literals. None is all-literal (no fold expected).
    `outer` only names the operation in the labels."""
    if inp.sample is not None:
        return []  # samples are all-literal applications
    if isinstance(t, int) and t > NESTED_MAX_OTHER_SIZE and t & (t - 1):
        return []  # Idx 1000: Z3 does not prove the nested remainder circuits within the budget
    x, y, z = inp.param("nx", t), inp.param("ny", t), inp.param("nz", t)
    a, b = inp.literal("nA", t), inp.literal("nB", t)
    tup = inp.world.tuple
    return [("(A, (B, y))", tup([a, inner(b, y)]), False),
            ("((A, x), (B, y))", tup([inner(a, x), inner(b, y)]), False),
            ("(x, (B, y))", tup([x, inner(b, y)]), False),
            ("((A, x), y)", tup([inner(a, x), y]), False),
            ("(A, (x, B))", tup([a, inner(x, b)]), False),
            ("(x, (y, z))", tup([x, inner(y, z)]), False)]


# (outer mode, inner mode) of nested wrap operations: equal modes, and each kind of mismatch.
NESTED_MODES = ((0, 0), (0, 1), (0, 2), (1, 0), (2, 0), (1, 1), (3, 3))


def _nested_wrap(inp: _Inputs, case: Case) -> list[Application]:
    if case.tag == "shl":
        return []  # shl neither associates nor commutes; its shapes are the shift amounts
    s_val, s = int(case.types[0]), _size(inp, case)
    head, out = inp.world.annex(case.annex), []
    for m_out, m_in in NESTED_MODES:
        mo, mi = inp.world.lit_nat(m_out), inp.world.lit_nat(m_in)
        shapes = _nested(inp, s_val, head, lambda p, q: raw_app(inp.world, head, s, mi, inp.world.tuple([p, q])))
        out += [Application(f"modes {m_out}/{m_in}, {lbl}", (s, mo, pair), False) for lbl, pair, _ in shapes]
    return out


def _nested_bit2(inp: _Inputs, case: Case, s: Def, m: Def) -> list[Application]:
    s_val = int(case.types[0])
    if s_val & (s_val - 1):
        return []  # bitwise operations need s = 2^w
    head = inp.world.annex(case.annex)
    shapes = _nested(inp, s_val, head, lambda p, q: raw_app(inp.world, head, s, m, inp.world.tuple([p, q])))
    return [Application(lbl, (s, m, pair), False) for lbl, pair, _ in shapes]


def _merged_comparisons(inp: _Inputs, case: Case, s: Def, m: Def) -> list[Application]:
    """On Bool: the operation applied to two comparisons of the same operands, every pair of
    icmp tags at every Idx size and every pair of ncmp tags (upstream's merge_cmps)."""
    if case.types[0] != 2 or inp.sample is not None:
        return []
    w, out = inp.world, []
    families: Sequence[tuple[str, TypeSpec, tuple[Def, ...]]] = \
        [("icmp", t, (w.lit_nat(t),)) for t in idx_sizes()] + [("ncmp", "Nat", ())]
    for family, t, implicit in families:
        x, y = inp.param(f"c{t}x", t), inp.param(f"c{t}y", t)
        tags = [a.removeprefix(f"core.{family}.") for a in sorted(w.normalizers) if a.startswith(f"core.{family}.")]
        for p, q in itertools.product(tags, repeat=2):
            cp = w.apps(w.annex(f"core.{family}.{p}"), *implicit, w.tuple([x, y]))
            cq = w.apps(w.annex(f"core.{family}.{q}"), *implicit, w.tuple([x, y]))
            out.append(Application(f"({family}.{p}, {family}.{q}) on {type_label(t)}", (s, m, w.tuple([cp, cq])), False))
    return out


def _nested_bit1(inp: _Inputs, case: Case, s: Def, m: Def) -> list[Application]:
    """The operation applied to each unary bit operation of a free variable (¬¬x)."""
    if inp.sample is not None:
        return []
    x, w = inp.param("nx", case.types[0]), inp.world
    size = int(case.types[0])
    tags = ("f", "neg", "id", "t") if size & (size - 1) == 0 else ("f", "id", "t")  # neg: bitwise sizes only
    return [Application(f"{tag} x", (s, m, raw_app(w, w.annex(f"core.bit1.{tag}"), s, m, x)), False)
            for tag in tags]


def _bitcast_chains(inp: _Inputs, case: Case) -> list[Application]:
    """bitcast D (bitcast M x) for x of type S, (S, D) the case's types, through every M."""
    if inp.sample is not None or "Ptr" in case.types:
        return []
    w = inp.world
    src, dst = (inp.type_def(t) for t in case.types)
    x, a = inp.param("nx", case.types[0]), inp.literal("nA", case.types[0])
    out = []
    for mid in [*_BITCAST_TYPES, 3, 1000]:
        m = inp.type_def(mid)
        for lbl, operand in (("x", x), ("A", a)):
            inner = raw_app(w, w.annex("core.bitcast"), src, m, operand)
            out.append(Application(f"through {type_label(mid)}, {lbl}", (m, dst, inner), False))
    return out


# ---------------------------------------------------------------------------- the applications of each family


Builder = Callable[[_Inputs, Case], list[Application]]


def _size(inp: _Inputs, case: Case, i: int = 0) -> Def:
    return inp.world.lit_nat(int(case.types[i]))


def _build_nat(inp: _Inputs, case: Case) -> list[Application]:
    return [Application(lbl, (pair,), lit) for lbl, pair, lit in _pairs(inp, "Nat")]


def _build_sized_pair(inp: _Inputs, case: Case) -> list[Application]:
    """icmp, extrema: {s} → «2; Idx s»."""
    s = _size(inp, case)
    return [Application(lbl, (s, pair), lit) for lbl, pair, lit in _pairs(inp, case.types[0])]


def _build_wrap(inp: _Inputs, case: Case) -> list[Application]:
    s_val = int(case.types[0])
    s = _size(inp, case)
    out: list[Application] = []
    operands = _shift_pairs(inp, s_val) if case.tag == "shl" else _pairs(inp, s_val)
    for mode in range(4):
        m = inp.world.lit_nat(mode)
        out += [Application(f"mode {mode}, {lbl}", (s, m, pair), lit) for lbl, pair, lit in operands]
    a, b = inp.literal("a", s_val), inp.literal("b", s_val)
    out.append(Application("mode m, (A, B)", (s, inp.mode_param(), inp.world.tuple([a, b])), False))
    return out + _nested_wrap(inp, case)


def _build_shr(inp: _Inputs, case: Case) -> list[Application]:
    s = _size(inp, case)
    return [Application(lbl, (s, pair), lit) for lbl, pair, lit in _shift_pairs(inp, int(case.types[0]))]


def _build_bit2(inp: _Inputs, case: Case) -> list[Application]:
    s, m = _size(inp, case), inp.mode_param()
    return [Application(lbl, (s, m, pair), lit) for lbl, pair, lit in _pairs(inp, case.types[0])] + \
        _nested_bit2(inp, case, s, m) + _merged_comparisons(inp, case, s, m)


def _build_bit1(inp: _Inputs, case: Case) -> list[Application]:
    s, m = _size(inp, case), inp.mode_param()
    return [Application(lbl, (s, m, x), lit) for lbl, x, lit in _unary(inp, case.types[0])] + \
        _nested_bit1(inp, case, s, m)


def _build_div(inp: _Inputs, case: Case) -> list[Application]:
    s, mem = _size(inp, case), inp.mem()
    return [Application(lbl, (s, inp.world.tuple([mem, pair])), lit)
            for lbl, pair, lit in _pairs(inp, case.types[0])]


def _build_conv(inp: _Inputs, case: Case) -> list[Application]:
    ss, ds = _size(inp, case, 0), _size(inp, case, 1)
    return [Application(lbl, (ss, ds, x), lit) for lbl, x, lit in _unary(inp, case.types[0])]


def _build_idx(inp: _Inputs, case: Case) -> list[Application]:
    # each literal mode (0 wraps a value out of range, the others leave it undefined), then a
    # mode that is no literal, which need not fold
    s, operands = _size(inp, case), _unary(inp, "Nat")
    out = [Application(f"mode {mode}, {lbl}", (s, inp.world.lit_nat(mode), n), lit)
           for mode in range(4) for lbl, n, lit in operands]
    return out + [Application(f"mode m, {lbl}", (s, inp.mode_param(), n), False) for lbl, n, _ in operands]


def _build_bitcast(inp: _Inputs, case: Case) -> list[Application]:
    src, dst = (inp.type_def(t) for t in case.types)
    if case.types[0] == "Ptr":
        return [Application("x", (src, dst, inp.param("a", "Ptr")), False)]
    return [Application(lbl, (src, dst, x), lit) for lbl, x, lit in _unary(inp, case.types[0])] + \
        _bitcast_chains(inp, case)


_PAIRS_OF_SIZES = [(ss, ds) for ss in (2**w for w in POW2_BITS) for ds in (2**w for w in POW2_BITS)] + [
    (3, 2**8), (2**8, 3), (1000, 2**16), (2**16, 1000), (6, 3), (1, 2**8), (2**8, 1)]
_BITCAST_TYPES: list[TypeSpec] = ["Nat", 2, 2**8, 2**16, 2**32, 2**64]
_BITCAST_PAIRS: list[tuple[TypeSpec, TypeSpec]] = \
    [(a, b) for a in _BITCAST_TYPES for b in _BITCAST_TYPES] + \
    [(3, 2**8), (2**8, 3), ("Nat", 1000), (1000, "Nat"), ("Ptr", "Ptr")]


@dataclass(frozen=True)
class Family:
    build: Builder
    widths: Callable[[], list[tuple[TypeSpec, ...]]]


def _each_size() -> list[tuple[TypeSpec, ...]]:
    return [(s,) for s in idx_sizes()]


FAMILIES: dict[str, Family] = {
    "nat": Family(_build_nat, lambda: [("Nat",)]),
    "ncmp": Family(_build_nat, lambda: [("Nat",)]),
    "icmp": Family(_build_sized_pair, _each_size),
    "extrema": Family(_build_sized_pair, _each_size),
    "wrap": Family(_build_wrap, _each_size),
    "shr": Family(_build_shr, _each_size),
    "bit2": Family(_build_bit2, _each_size),
    "bit1": Family(_build_bit1, _each_size),
    "div": Family(_build_div, _each_size),
    "conv": Family(_build_conv, lambda: list(_PAIRS_OF_SIZES)),
    "idx": Family(_build_idx, _each_size),
    "bitcast": Family(_build_bitcast, lambda: list(_BITCAST_PAIRS)),
}
NOT_BIT_VECTOR = {"trait": "reads a type's layout; it has no bit-vector operand",
                  "idx_unsafe": "retypes a Nat literal as an index of unknown size (`Idx ⊤`): no width "
                                "to prove at (tests/programs/*/idx_unsafe*.mim run it)"}


@functools.cache
def plugin_world() -> World:
    """A World with `core` and `mem` loaded (their normalizers registered)."""
    from verimim.frontend.loader import load_text

    world, _ = load_text("plugin core; plugin mem;", "<normalizer proofs>")
    return world


def cases(world: World | None = None) -> list[Case]:
    """Every (normalizer, width) to prove: each registered `core.*` normalizer at each width."""
    world = world or plugin_world()
    out: list[Case] = []
    for annex in sorted(a for a in world.normalizers if a.startswith("core.")):
        family = annex.removeprefix("core.").partition(".")[0]
        if family in NOT_BIT_VECTOR:
            continue
        if family not in FAMILIES:
            raise KeyError(f"no proof cases for the normalizer of `{annex}`")
        out += [Case(annex, types) for types in FAMILIES[family].widths()]
    return out


# ---------------------------------------------------------------------------- solving


Assignment = dict[str, int]


@dataclass(frozen=True)
class _Outcome:
    status: Status
    witness: Assignment | None = None


def _sign_cases(inp: _Inputs, constraints: Sequence[z3.BoolRef]) -> list[list[z3.BoolRef]]:
    """The constraints split on the sign of each `Idx s` input they mention.

    The atom "v is negative" (`bv.Idx.negative`, the very term core_ops' `signed` produces
    when it runs on a SymInt) is replaced by true, then by false, with that case added as a
    constraint: an exhaustive split, so it proves no less. It matters for speed: core_ops
    branches on signs and the specification computes `If(negative, …)`; with the sign fixed
    both sides simplify to the same multiplier or divider terms, which Z3 then need not prove
    equivalent bit by bit (a 64-bit multiplier equivalence it cannot do in minutes becomes
    milliseconds). The interval facts of the SymInts in the formula are added too."""
    goal = z3t.And(*constraints)
    goal = z3t.simplify(z3t.And(goal, *inp.explorer.range_facts(goal)))  # one normal form for the atoms
    ids = term_ids(goal)
    atoms = [z3.simplify(inp.sign_atom(n)) for n in sorted(inp.signed) if inp.variables[n].get_id() in ids]
    if len(atoms) > MAX_SIGN_ATOMS:
        return [[goal]]  # 2^k cases would cost more than they save (the hard ones have two inputs)
    cases = []
    for signs in itertools.product((True, False), repeat=len(atoms)):
        subs = [(a, z3.BoolVal(neg)) for a, neg in zip(atoms, signs)]
        cases.append([*(a if neg else z3.Not(a) for a, neg in zip(atoms, signs)),
                      z3.simplify(z3.substitute(goal, *subs)) if subs else goal])
    return cases


def solve(inp: _Inputs, constraints: Sequence[z3.BoolRef], timeout_ms: int) -> _Outcome:
    """Look for inputs that satisfy `constraints` (a violation): unsat proves, sat refutes,
    anything else is unknown. Cheapest first: Z3's simplifier, then Z3 on the formula as it is
    for QUICK_TIMEOUT_MS, then (for the hard ones: signed multiplication and division) each
    sign case on its Boolean abstraction (`bounds.refutes`) and, if that does not refute it,
    Z3 with the full time-out."""
    goal = z3t.simplify(z3t.And(*constraints))
    if z3.is_false(goal):
        return _Outcome("proved")
    r, witness = _check(inp, [goal], min(QUICK_TIMEOUT_MS, timeout_ms))
    if r != z3.unknown:
        return _Outcome("proved" if r == z3.unsat else "refuted", witness)
    unknown = False
    for case in _sign_cases(inp, constraints):
        if _abstraction_refutes(inp, case):
            continue
        r, witness = _check(inp, case, timeout_ms)
        if r == z3.sat:
            return _Outcome("refuted", witness)
        unknown = unknown or r != z3.unsat
    return _Outcome("unknown" if unknown else "proved")


def _check(inp: _Inputs, constraints: Sequence[z3.BoolRef], timeout_ms: int) -> tuple[z3.CheckSatResult, Assignment | None]:
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    s.add(*constraints)
    t0 = time.perf_counter()
    r = s.check()
    inp.z3_s += time.perf_counter() - t0
    if r != z3.sat:
        return r, None
    m = s.model()
    return r, {n: cast(z3.BitVecNumRef, m.eval(v, model_completion=True)).as_long() for n, v in inp.variables.items()}


def _abstraction_refutes(inp: _Inputs, constraints: Sequence[z3.BoolRef]) -> bool:
    """Whether the Boolean abstraction (`bounds.refutes`) of the constraints is unsatisfiable."""
    t0 = time.perf_counter()
    try:
        return bounds.refutes(list(constraints))
    finally:
        inp.z3_s += time.perf_counter() - t0


def _abstraction_refutes_each_sign(inp: _Inputs, constraints: Sequence[z3.BoolRef]) -> bool:
    return all(_abstraction_refutes(inp, case) for case in _sign_cases(inp, constraints))


def _evaluate(inp: _Inputs, e: z3.ExprRef, at: Assignment) -> z3.ExprRef:
    subs = [(v, z3.BitVecVal(at[n], v.size())) for n, v in inp.variables.items() if n in at]
    return z3.simplify(z3.substitute(e, *subs) if subs else e)


def _show_number(v: int, t: TypeSpec | None) -> str:
    if isinstance(t, int) and t >= 2 and v > bv.Idx(t).smax:
        return f"{v} (signed {v - t})"
    return str(v)


def _show_value(inp: _Inputs, v: bv.Value, at: Assignment) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(_show_value(inp, e, at) for e in v) + ")"
    x = _evaluate(inp, v, at)
    return str(x.as_long()) if isinstance(x, z3.BitVecNumRef) else str(x)


def _show_inputs(inp: _Inputs, at: Assignment) -> str:
    return ", ".join(f"{n} = {_show_number(v, inp.types.get(n))}" for n, v in sorted(at.items()))


# ---------------------------------------------------------------------------- proving one case


def _unchanged(out: Def, head: Def, args: Sequence[Def]) -> bool:
    """The normalizer left the application as it was."""
    return isinstance(out, App) and out.head is head and out.depth == len(args) and \
        all(p is q for p, q in zip(out.args(), args))


def violation(before: bv.Encoded, after: bv.Encoded) -> z3.BoolRef:
    """after does not stand for before: a defined value changed or became undefined
    (refinement), or an undefined application became defined (UB not kept)."""
    changed = z3t.Or(after.ub, z3t.Not(bv.same_value(after.value, before.value)))
    return z3t.Or(z3t.And(z3t.Not(before.ub), changed), z3t.And(before.ub, z3t.Not(after.ub)))


@dataclass(frozen=True)
class _Obligation:
    """Inputs satisfying `condition` are a failure: a wrong rewrite, a crash, or (for the
    completeness query) a defined application left unfolded."""

    application: str
    condition: z3.BoolRef
    what: str
    before: bv.Encoded | None = None
    after: bv.Encoded | None = None

    def explain(self, inp: _Inputs, at: Assignment) -> str:
        used = term_ids(self.condition)
        inputs = {n: v for n, v in at.items() if inp.variables[n].get_id() in used}
        shown = _show_inputs(inp, inputs)
        text = f"[{self.application}] {shown + ': ' if shown else ''}{self.what}"
        if self.before is not None and self.after is not None:
            def side(e: bv.Encoded) -> str:
                return "undefined" if z3.is_true(_evaluate(inp, e.ub, at)) else _show_value(inp, e.value, at)
            text += f"; before = {side(self.before)}, after = {side(self.after)}"
        return text


@dataclass
class _Collected:
    sound: list[_Obligation] = field(default_factory=list)
    complete: list[_Obligation] = field(default_factory=list)
    unknown: list[Query] = field(default_factory=list)
    paths: int = 0
    rewrites: int = 0


@contextlib.contextmanager
def one_step(world: World) -> Iterator[None]:
    """Normalizers that run only when no other one is running: the applications a rule builds
    (`(A·B)·y` from `A·(B·y)`) stay as the rule wrote them.

    A proof then covers one step of normalization, and normalization is a sequence of such
    steps: each application a rule builds is normalized by its own normalizer, whose step is
    proved for the operand shapes it can meet (literals, which stand for every value, free
    variables, nested and possibly undefined terms). Proving the steps one by one is what
    keeps the obligations easy: `A·(B·y) = (A·B)·y` is simplified away by Z3 at 64 bits, where
    the composed `A·B ≡ 1 ⇒ A·(B·y) = y` (the fold, then `1·y ↦ y`) is an associativity fact
    that bit-blasting does not finish."""
    saved = world.normalizers
    running = [False]

    def guarded(fn: Callable[[World, App], Def | None]) -> Callable[[World, App], Def | None]:
        def norm(w: World, app: App) -> Def | None:
            if running[0]:
                return None
            running[0] = True
            try:
                return fn(w, app)
            finally:
                running[0] = False
        return norm

    world.normalizers = {k: (arity, guarded(fn)) for k, (arity, fn) in saved.items()}
    try:
        yield
    finally:
        world.normalizers = saved


def _collect(inp: _Inputs, annex: str, app: Application, into: _Collected) -> None:
    """Run the normalizer on one application, path by path (one step, see `one_step`), and
    collect its obligations."""
    head = inp.world.annex(annex)
    try:
        with one_step(inp.world):
            paths: list[Path[Def]] = inp.explorer.run(lambda: inp.world.apps(head, *app.args))
    except SymbolicError as e:
        into.unknown.append(Query(app.label, "sound", "unknown", 0.0, detail=str(e)))
        return
    into.paths += len(paths)
    cache: list[bv.Encoded] = []

    def before() -> bv.Encoded:
        if not cache:
            cache.append(bv.encode_app(annex, app.args, inp.env))
        return cache[0]

    for p in paths:
        if p.error is not None:
            if isinstance(p.error, TypeError) and "SymInt" in str(p.error):
                # C code of `int` refused the symbolic literal: a limit of this method, not a crash
                into.unknown.append(Query(app.label, "sound", "unknown", 0.0,
                                          detail=f"the normalizer cannot run on symbolic literals: {p.error}"))
            else:
                into.sound.append(_Obligation(app.label, p.condition(),
                                              f"the normalizer raised {type(p.error).__name__}: {p.error}"))
            continue
        assert p.outcome is not None
        if _unchanged(p.outcome, head, app.args):
            if app.all_literal:
                try:
                    into.complete.append(_Obligation(app.label, z3t.And(p.condition(), z3t.Not(before().ub)),
                                                     "defined, but left unfolded"))
                except bv.NoSemantics:
                    pass  # no meaning to compare with (bit2 on Idx 3): completeness is not judged
            continue
        into.rewrites += 1
        try:
            b, a = before(), bv.encode(p.outcome, inp.env)
        except bv.NoSemantics as e:
            into.unknown.append(Query(app.label, "sound", "unknown", 0.0, detail=f"cannot encode: {e}"))
            continue
        into.sound.append(_Obligation(app.label, z3t.And(p.condition(), violation(b, a)),
                                      f"rewrites to `{show(p.outcome)}`", b, a))


def _query(inp: _Inputs, kind: str, obligations: list[_Obligation], timeout_ms: int) -> Query | None:
    """Is some obligation satisfiable? Their disjunction is first tried on its Boolean
    abstraction, split on signs (`_sign_cases`), which settles the multiplications and
    divisions at once; otherwise each obligation goes to `solve` on its own (a disjunction of
    them all is often much slower for Z3: the search mixes unrelated multipliers). The first
    counterexample refutes."""
    if not obligations:
        return None
    label = f"{len(obligations)} obligations of {len({o.application for o in obligations})} applications"
    t0, z0 = time.perf_counter(), inp.z3_s

    def query(status: Status, detail: str = "") -> Query:
        return Query(label, kind, status, inp.z3_s - z0, time.perf_counter() - t0, detail)

    pre = inp.explorer.assumptions
    everything = [*pre, z3.Or(*(o.condition for o in obligations))]
    # Many easy obligations (every pair of comparisons, say) are one easy disjunction, which
    # needs more than the quick budget of one: it grows with their number.
    budget = QUICK_TIMEOUT_MS + QUICK_MS_PER_OBLIGATION * len(obligations)
    r, _ = _check(inp, [z3t.simplify(z3t.And(*everything))], min(budget, timeout_ms))
    if r == z3.unsat or (r == z3.unknown and _abstraction_refutes_each_sign(inp, everything)):
        return query("proved")
    unknown = ""
    for o in obligations:
        out = solve(inp, [*pre, o.condition], timeout_ms)
        if out.witness is not None:
            return query("refuted", o.explain(inp, out.witness))
        if out.status == "unknown" and not unknown:
            unknown = f"[{o.application}] Z3 gave no answer within {timeout_ms} ms ({o.what})"
    return query("unknown" if unknown else "proved", unknown)


def _samples(case: Case, world: World, timeout_ms: int) -> list[Query]:
    """The normalizer on concrete boundary literals, as Python ints: the code path the compiler
    really runs (a SymInt is no int, and core_ops keeps branches for its own symbolic use)."""
    build = FAMILIES[case.family].build
    head = world.annex(case.annex)
    inp = _Inputs(world, Explorer())
    sound: list[_Obligation] = []
    missed: list[str] = []
    unknown: list[str] = []
    seen: set[tuple[int, ...]] = set()
    for i, j in itertools.product(range(SAMPLES_PER_OPERAND), repeat=2):
        inp.sample = {"a": i, "b": j, "b_hi": j}
        for app in build(inp, case):
            key = tuple(id(a) for a in app.args)
            if not app.all_literal or key in seen:
                continue
            seen.add(key)
            text = _args_text(app.args)
            try:
                out = world.apps(head, *app.args)
            except (ArithmeticError, ValueError, TypeError) as e:
                sound.append(_Obligation(app.label, z3.BoolVal(True), f"{text}: the normalizer raised {e!r}"))
                continue
            unchanged = _unchanged(out, head, app.args)
            try:
                before = bv.encode_app(case.annex, app.args, inp.env)
                after = None if unchanged else bv.encode(out, inp.env)
            except bv.NoSemantics as e:
                if not unchanged:
                    unknown.append(f"{text} ↦ `{show(out)}`: {e}")
                continue
            if after is None:
                if not z3.is_true(z3.simplify(before.ub)):
                    missed.append(text)
                continue
            sound.append(_Obligation(app.label, violation(before, after), f"{text} ↦ `{show(out)}`",
                                     before, after))
    queries = [q for q in [_query(inp, "samples", sound, timeout_ms)] if q is not None]
    if unknown:
        queries.append(Query("boundary literals", "samples", "unknown", 0.0, detail=f"cannot encode: {unknown[0]}"))
    if missed:
        queries.append(Query("boundary literals", "complete", "refuted", 0.0,
                             detail=f"{len(missed)} defined applications left unfolded, e.g. {missed[0]}"))
    return queries


def _args_text(args: Sequence[Def]) -> str:
    return " ".join(f"({show(a)})" for a in args)


def prove(case: Case, world: World | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> CaseResult:
    """Prove one normalizer at one width, with the normalizers registered in `world`."""
    world = world or plugin_world()
    explorer = Explorer(min_width=case.work_width, timeout_ms=min(timeout_ms, FEASIBILITY_TIMEOUT_MS))
    inp = _Inputs(world, explorer)
    got = _Collected()
    for app in FAMILIES[case.family].build(inp, case):
        _collect(inp, case.annex, app, got)
    queries = list(got.unknown)
    for kind, obligations in (("sound", got.sound), ("complete", got.complete)):
        q = _query(inp, kind, obligations, timeout_ms)
        if q is not None:
            queries.append(q)
    queries += _samples(case, world, timeout_ms)
    return CaseResult(case, tuple(queries), got.paths, got.rewrites, explorer.z3_s)


def prove_all(world: World | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Iterator[CaseResult]:
    for case in cases(world):
        yield prove(case, world, timeout_ms)
