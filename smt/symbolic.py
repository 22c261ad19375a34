"""Symbolic execution of plain Python integer code, exact and bit-vector native.

The `core` normalizers fold literals with ordinary Python code (`verimim.plug.core` calling
`verimim.plug.core_ops`). To prove such code for *every* literal value, as Alive2 proves a
peephole rule, we run the very same code with `SymInt` values in place of the literals:

- A `SymInt` is an integer that a Z3 bit-vector holds *exactly*: `bv` is its two's complement at
  `bv.size()` bits and `lo ≤ value ≤ hi`. Every operation computes the interval of its result
  and works at a width that holds every operand and the result, so no operation ever wraps: the
  arithmetic is Python's unbounded integer arithmetic, yet the formula is pure bit-vector (no
  Z3 `Int`, no `BV2Int`), which Z3 bit-blasts quickly.
- Where the code branches on a symbolic condition (`if a >= b`, `x and y`, `not c`), `SymBool`
  asks the `Explorer`, which follows one side and later re-runs the code to follow the other:
  each run yields one `Path` (its path condition and its outcome). Sides that the path so far
  makes impossible are not followed, as far as the intervals, the syntax of the conditions
  and (with `timeout_ms` > 0) Z3 tell; a path followed in vain only adds an obligation that
  cannot fail.

What this does not model, and why it is still faithful for `core`: a `SymInt` is not an `int`,
so code that tests `isinstance(v, int)` or calls C-level `int` methods on it (`int.__lt__`)
takes another branch or raises `TypeError`. `core_ops.wrap_exact` tests the shift amount of
`shl` that way, so the proof driver keeps shift amounts concrete (and covers every amount);
any `TypeError` ends the path as an error, never as a proof. Python's own exceptions are
modelled: a division by a value that may be zero forks, and the zero side raises
`ZeroDivisionError`, as the real code would.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

import z3

from verimim.smt import z3_typed as z3t

T = TypeVar("T")

MAX_SYMBOLIC_SHIFT = 256  # a left shift by a symbolic amount may move this many bits at most


class SymbolicError(Exception):
    """The code did something this symbolic execution does not model (it is never a proof)."""


class InfeasiblePath(SymbolicError):
    """The path condition so far has no model (a kernel of `Idx 0` work-items: no item exists):
    no execution takes the path, which is dropped."""


def signed_width(lo: int, hi: int) -> int:
    """The fewest bits whose two's complement holds every integer of [lo, hi]."""
    need_hi = hi.bit_length() + 1 if hi > 0 else 1
    need_lo = (-lo - 1).bit_length() + 1 if lo < 0 else 1
    return max(need_hi, need_lo)


def _ext(bv: z3.BitVecRef, width: int) -> z3.BitVecRef:
    """Sign-extend a two's-complement value to `width` bits (at least its own width)."""
    have = bv.size()
    assert width >= have, (width, have)
    return bv if width == have else z3.SignExt(width - have, bv)


def _narrow(x: SymInt, width: int) -> z3.BitVecRef:
    """x at `width` bits, which hold its interval (exact: dropped bits are sign copies)."""
    if x.width > width:
        return z3t.Extract(width - 1, 0, x.bv)
    return _ext(x.bv, width)


def term_ids(e: z3.ExprRef) -> set[int]:
    """The ids of all subterms of `e` (through the C API: Python wrappers for every node of
    a formula with 130-bit multipliers would cost more than the search itself)."""
    ctx = e.ctx.ref()
    seen: set[int] = set()
    todo = [e.as_ast()]
    while todo:
        a = todo.pop()
        i = z3.Z3_get_ast_id(ctx, a)
        if i in seen:
            continue
        seen.add(i)
        if z3.Z3_get_ast_kind(ctx, a) == z3.Z3_APP_AST:
            app = z3.Z3_to_app(ctx, a)
            todo.extend(z3.Z3_get_app_arg(ctx, app, k) for k in range(z3.Z3_get_app_num_args(ctx, app)))
    return seen


# ---------------------------------------------------------------------------- paths


@dataclass(frozen=True)
class Path(Generic[T]):
    """One run of the explored code: the conditions it took and what it returned or raised."""

    conditions: tuple[z3.BoolRef, ...]
    outcome: T | None
    error: BaseException | None = None

    def condition(self) -> z3.BoolRef:
        return z3t.And(*self.conditions) if self.conditions else z3.BoolVal(True)


KEPT_MODELS = 3  # assignments of feasible paths tried before the solver (Explorer._sat)


@dataclass
class _Decision:
    taken: bool
    other_side_open: bool  # the other side is possible and not yet explored from this prefix


@dataclass
class Explorer:
    """Runs code once per feasible path. `assumptions` restrict the symbolic inputs (ranges)."""

    assumptions: list[z3.BoolRef] = field(default_factory=list)
    min_width: int = 1  # inputs and arithmetic results are at least this wide (see `var`)
    timeout_ms: int = 2_000
    max_paths: int = 512
    # Seconds the whole exploration may take (None: no limit). Past it, the exploration stops
    # with a SymbolicError naming the limit: a model with too many paths, each with slow
    # feasibility queries (a counter that a loaded value advances, unknown in every round),
    # must say it is not modelled rather than run for minutes.
    budget_s: float | None = None
    feasibility_queries: int = 0
    z3_s: float = 0.0
    _replay: list[bool] = field(default_factory=list)
    _trail: list[_Decision] = field(default_factory=list)
    _pc: list[z3.BoolRef] = field(default_factory=list)
    _ranges: dict[int, tuple[z3.BitVecRef, int, int]] = field(default_factory=dict)
    # The last few assignments Z3 found for a feasible path: a query one of them satisfies is
    # satisfiable without asking (a path's condition extends its prefix's, whose assignment
    # often takes one side of the next branch too). `known_feasible` counts those answers.
    _models: deque[z3.ModelRef] = field(default_factory=lambda: deque(maxlen=KEPT_MODELS))
    _deadline: float | None = None
    known_feasible: int = 0
    # With `count_symbolic`: the decisions of the current path on a condition that is not a
    # constant once simplified. A stretch of the path without one is fixed by what came before
    # (a loop counting to a literal), however long it runs (Evaluator.concrete_bound). (Off, a
    # replayed decision is not simplified: the kernel models replay many.)
    count_symbolic: bool = False
    symbolic_decisions: int = 0

    # -------------------------------------------------------------- symbolic inputs

    def var(self, name: str, lo: int, hi: int) -> tuple[SymInt, z3.BitVecRef]:
        """A symbolic integer ranging over [lo, hi] (lo ≥ 0), with its unsigned bit-vector
        variable of the fewest bits that hold hi (the range is added to the assumptions).

        Inputs are at least `min_width` bits wide, and so is every arithmetic operation on them.
        Nothing depends on it for exactness; it is for Z3: a specification that computes the
        exact result at that same width (`bv.Idx.wide`) gets the very same terms
        (`ZeroExt(W - w, v) * ZeroExt(W - w, u)`), which Z3 hash-conses, instead of
        multipliers or dividers of different widths whose equivalence is hard to prove."""
        assert 0 <= lo <= hi
        bits = max(hi.bit_length(), 1)
        v = z3.BitVec(name, bits)
        if lo > 0:
            self.assumptions.append(z3.UGE(v, lo))
        if hi < (1 << bits) - 1:
            self.assumptions.append(z3.ULE(v, hi))
        return SymInt(z3.ZeroExt(max(bits + 1, self.min_width) - bits, v), lo, hi, self), v

    def const(self, value: int) -> SymInt:
        """A constant operand, as narrow as it is (operations extend it as they need)."""
        return SymInt(z3.BitVecVal(value, signed_width(value, value)), value, value, self)

    def note_range(self, x: SymInt) -> None:
        """Remember lo ≤ x ≤ hi, a fact interval arithmetic proved (see `range_facts`)."""
        w = x.width
        if x.lo > -(1 << (w - 1)) or x.hi < (1 << (w - 1)) - 1:
            self._ranges.setdefault(x.bv.get_id(), (x.bv, x.lo, x.hi))

    def range_facts(self, formula: z3.ExprRef) -> list[z3.BoolRef]:
        """The interval facts about the terms of `formula`. They are true of every input (the
        intervals are sound), so adding them proves nothing new; they give Z3 what a bit-level
        search finds hard, such as "a product of two negative numbers is positive", which the
        SymInt intervals know and core_ops relied on when it skipped a comparison."""
        ids = term_ids(formula)
        return [z3t.And(bv >= lo, bv <= hi) for i, (bv, lo, hi) in self._ranges.items() if i in ids]

    # -------------------------------------------------------------- exploration

    def run(self, fn: Callable[[], T], stop_at_error: bool = False) -> list[Path[T]]:
        """The paths of `fn`, depth first: every feasible one (and maybe some infeasible ones,
        see `_possible`). Raises SymbolicError past `max_paths`. `stop_at_error`: the paths up
        to the first that fails, for a caller that gives up on any failure (the kernel and
        host models: a program with one path they cannot follow is not modelled, and an
        unreadable earlier World was followed down every other path before it said so)."""
        paths: list[Path[T]] = []
        prefixes: list[list[bool]] = [[]]
        self._deadline = None if self.budget_s is None else time.perf_counter() + self.budget_s
        while prefixes:
            if len(paths) >= self.max_paths:
                raise SymbolicError(f"more than {self.max_paths} paths")
            self._past_budget(len(paths))
            self._replay, self._trail, self._pc = prefixes.pop(), [], []
            self.symbolic_decisions = 0
            try:
                outcome = fn()
                paths.append(Path(tuple(self._pc), outcome))
            except InfeasiblePath:
                pass
            except (SymbolicError, ArithmeticError, ValueError, TypeError) as e:
                paths.append(Path(tuple(self._pc), None, e))
                if stop_at_error:
                    return paths
            # Open the other side of each new decision, deepest last so that it runs first.
            for i, d in enumerate(self._trail):
                if d.other_side_open:
                    prefixes.append([t.taken for t in self._trail[:i]] + [not d.taken])
        return paths

    def _past_budget(self, paths: int | None = None) -> None:
        if self._deadline is not None and time.perf_counter() > self._deadline:
            done = f" ({paths} paths followed)" if paths is not None else ""
            raise SymbolicError(f"paths past the exploration's time budget of {self.budget_s:g} s{done}")

    def decide(self, cond: z3.BoolRef) -> bool:
        """The branch the current run takes on `cond`, recorded in its path condition."""
        pos = len(self._trail)
        if pos < len(self._replay):
            taken, other_open = self._replay[pos], False
            if self.count_symbolic:
                self._count(z3.simplify(cond))
        else:
            c = z3.simplify(cond)
            self._count(c)
            can_true, can_false = self._possible(cond, c)
            if not (can_true or can_false):
                raise InfeasiblePath("a path whose condition is unsatisfiable")
            taken, other_open = (True, can_false) if can_true else (False, False)
        self._trail.append(_Decision(taken, other_open))
        self._pc.append(cond if taken else z3t.Not(cond))
        return taken

    def _count(self, c: z3.ExprRef) -> None:
        """Count a decision on c (a simplified condition) that is no constant."""
        if not (z3.is_true(c) or z3.is_false(c)):
            self.symbolic_decisions += 1

    def _possible(self, cond: z3.BoolRef, c: z3.ExprRef) -> tuple[bool, bool]:
        """Whether cond (c, simplified) can hold, and whether it can fail, on the current path."""
        if z3.is_true(c):
            return True, False
        if z3.is_false(c):
            return False, True
        neg = z3.simplify(z3.Not(cond))
        for p in self._pc:  # the same test taken before (core_ops calls `signed` repeatedly)
            if p.eq(cond) or p.eq(c):
                return True, False
            if p.eq(neg) or (z3.is_not(p) and (p.arg(0).eq(cond) or p.arg(0).eq(c))):
                return False, True
        return self._sat(cond), self._sat(z3t.Not(cond))

    def _sat(self, extra: z3.BoolRef) -> bool:
        """Satisfiable with the path so far, if Z3 may be asked (`timeout_ms` > 0); a time-out
        counts as possible (that is sound: an impossible path only adds an unsatisfiable
        obligation)."""
        if self.timeout_ms <= 0:
            return True
        goal = z3t.And(*self.assumptions, *self._pc, extra)
        facts = self.range_facts(goal)
        if self._models:
            query = z3.And(goal, *facts)
            for m in reversed(self._models):
                # true under a complete assignment: satisfiable, as the solver would answer
                if z3.is_true(m.eval(query, model_completion=True)):
                    self.known_feasible += 1
                    return True
        self._past_budget()
        self.feasibility_queries += 1
        s = z3.Solver()
        s.set("timeout", self.timeout_ms)
        s.add(goal, *facts)
        t0 = time.perf_counter()
        r = s.check()
        self.z3_s += time.perf_counter() - t0
        if r == z3.sat:
            self._models.append(s.model())
        return r != z3.unsat


# ---------------------------------------------------------------------------- values


@dataclass(frozen=True, eq=False)
class SymBool:
    """A symbolic truth value; using it as a Python bool branches through the Explorer."""

    expr: z3.BoolRef
    ctx: Explorer

    def __bool__(self) -> bool:
        return self.ctx.decide(self.expr)

    def _lift(self, other: object) -> z3.BoolRef | None:
        if isinstance(other, SymBool):
            return other.expr
        if isinstance(other, bool):
            return z3.BoolVal(other)
        return None

    def __eq__(self, other: object) -> SymBool:  # type: ignore[override]
        o = self._lift(other)
        return NotImplemented if o is None else SymBool(cast(z3.BoolRef, self.expr == o), self.ctx)

    def __ne__(self, other: object) -> SymBool:  # type: ignore[override]
        o = self._lift(other)
        return NotImplemented if o is None else SymBool(z3t.Not(self.expr == o), self.ctx)

    def __and__(self, other: object) -> SymBool:
        o = self._lift(other)
        return NotImplemented if o is None else SymBool(z3t.And(self.expr, o), self.ctx)

    def __or__(self, other: object) -> SymBool:
        o = self._lift(other)
        return NotImplemented if o is None else SymBool(z3t.Or(self.expr, o), self.ctx)

    __rand__, __ror__ = __and__, __or__
    __hash__ = object.__hash__

    def __index__(self) -> int:
        raise TypeError("a symbolic truth value has no concrete integer value")

    __int__ = __index__


@dataclass(frozen=True, eq=False)
class SymInt:
    """An exact symbolic integer: `bv` (two's complement) holds it, and lo ≤ it ≤ hi."""

    bv: z3.BitVecRef
    lo: int
    hi: int
    ctx: Explorer
    width: int = field(init=False)  # bv.size(), which z3py computes slowly

    def __post_init__(self) -> None:
        object.__setattr__(self, "width", self.bv.size())
        assert self.lo <= self.hi and self.width >= signed_width(self.lo, self.hi)
        self.ctx.note_range(self)

    def __repr__(self) -> str:
        return f"SymInt[{self.lo}..{self.hi}]"

    __hash__ = object.__hash__  # identity: a World hash-conses literals by value

    # -------------------------------------------------------------- construction

    def _coerce(self, other: object) -> SymInt | None:
        if isinstance(other, SymInt):
            return other
        if isinstance(other, bool):
            return self.ctx.const(int(other))
        if isinstance(other, int):
            return self.ctx.const(other)
        return None

    def _make(self, expr: z3.BitVecRef, lo: int, hi: int, widen: bool = True) -> SymInt | int:
        """The result at the width its interval needs, and for arithmetic (`widen`) at least
        `min_width` (trimming and sign extension are exact: the value fits). Shifts and bitwise
        operations, which core.py's bit2 loop does by the hundred, stay narrow."""
        if lo == hi:
            return lo
        w = max(signed_width(lo, hi), self.ctx.min_width if widen else 1)
        if expr.size() > w:
            expr = z3t.Extract(w - 1, 0, expr)
        elif expr.size() < w:
            expr = z3.SignExt(w - expr.size(), expr)
        return SymInt(expr, lo, hi, self.ctx)

    def _common(self, *xs: SymInt, result: tuple[int, int] | None = None) -> int:
        w = max(max(x.width for x in xs), self.ctx.min_width)
        return max(w, signed_width(*result)) if result is not None else w

    # -------------------------------------------------------------- ring operations

    def __add__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        lo, hi = self.lo + o.lo, self.hi + o.hi
        w = self._common(self, o, result=(lo, hi))
        return self._make(_ext(self.bv, w) + _ext(o.bv, w), lo, hi)

    def __sub__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        lo, hi = self.lo - o.hi, self.hi - o.lo
        w = self._common(self, o, result=(lo, hi))
        return self._make(_ext(self.bv, w) - _ext(o.bv, w), lo, hi)

    def __mul__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        corners = [x * y for x in (self.lo, self.hi) for y in (o.lo, o.hi)]
        lo, hi = min(corners), max(corners)
        w = self._common(self, o, result=(lo, hi))
        return self._make(_ext(self.bv, w) * _ext(o.bv, w), lo, hi)

    def __radd__(self, other: object) -> SymInt | int:
        return self.__add__(other)

    def __rmul__(self, other: object) -> SymInt | int:
        return self.__mul__(other)

    def __rsub__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        return NotImplemented if o is None else o.__sub__(self)

    def __neg__(self) -> SymInt | int:
        w = self._common(self, result=(-self.hi, -self.lo))
        return self._make(-_ext(self.bv, w), -self.hi, -self.lo)

    def __pos__(self) -> SymInt:
        return self

    def __abs__(self) -> SymInt | int:
        if self.lo >= 0:
            return self
        if self.hi <= 0:
            return -self
        hi = max(-self.lo, self.hi)
        w = self._common(self, result=(0, hi))
        x = _ext(self.bv, w)
        return self._make(z3t.If(x < 0, -x, x), 0, hi)

    # -------------------------------------------------------------- division (Python's: floor)

    def _nonzero_divisor(self, d: SymInt) -> None:
        """Python raises on a zero divisor: where it may be zero, the zero side raises."""
        if d.lo <= 0 <= d.hi and bool(SymBool(cast(z3.BoolRef, d.bv == 0), self.ctx)):
            raise ZeroDivisionError("integer division or modulo by zero (symbolic)")

    def __floordiv__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        return NotImplemented if o is None else self._floordiv(o)

    def __rfloordiv__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        return NotImplemented if o is None else o._floordiv(self)

    def __mod__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        return NotImplemented if o is None else self._mod(o)

    def __rmod__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        return NotImplemented if o is None else o._mod(self)

    def _floordiv(self, d: SymInt) -> SymInt | int:
        self._nonzero_divisor(d)
        divisors = [y for y in (d.lo, -1, 1, d.hi) if d.lo <= y <= d.hi and y != 0]
        corners = [x // y for x in (self.lo, self.hi) for y in divisors]
        lo, hi = min(corners), max(corners)
        if d.lo == d.hi and d.lo > 0 and d.lo & (d.lo - 1) == 0:  # by 2^k: arithmetic shift
            k = d.lo.bit_length() - 1
            return self._make(self.bv >> k if k < self.width else _ext(self.bv, k + 1) >> k, lo, hi)
        w = self._common(self, d, result=(lo, hi))
        if self.lo >= 0 and d.lo >= 0:
            return self._make(z3.UDiv(_ext(self.bv, w), _ext(d.bv, w)), lo, hi)
        x, y = _ext(self.bv, w + 1), _ext(d.bv, w + 1)  # + 1: no INT_MIN / -1 overflow
        t, r = x / y, z3.SRem(x, y)  # truncating; floor differs when the signs differ
        return self._make(z3t.If(z3t.And(r != 0, (r < 0) != (y < 0)), t - 1, t), lo, hi)

    def _mod(self, d: SymInt) -> SymInt | int:
        self._nonzero_divisor(d)
        # The remainder has the divisor's sign and a smaller magnitude (0 is no divisor here).
        lo = min(d.lo + 1, 0)
        hi = max(d.hi - 1, 0)
        if self.lo >= 0 and d.lo >= 0:
            hi = min(hi, self.hi)
        if self.lo >= 0 and d.lo > 0 and self.hi < d.lo:
            return self  # already the remainder
        if d.lo == d.hi and d.lo > 0 and d.lo & (d.lo - 1) == 0:  # mod 2^k: the low k bits
            k = d.lo.bit_length() - 1
            if k == 0:
                return 0
            low = z3.Extract(k - 1, 0, _ext(self.bv, max(self.width, k)))
            return self._make(z3.ZeroExt(1, low), lo, hi)
        w = self._common(self, d, result=(lo, hi))
        x, y = _ext(self.bv, w), _ext(d.bv, w)
        if self.lo >= 0 and d.lo >= 0:
            return self._make(z3.URem(x, y), lo, hi)
        return self._make(x % y, lo, hi)  # z3py % is bvsmod: the sign of the divisor, as Python

    def __truediv__(self, other: object) -> SymInt:
        raise TypeError("true division of a symbolic integer")

    __rtruediv__ = __truediv__

    def __pow__(self, other: object) -> SymInt:
        raise TypeError("a power with a symbolic integer")

    __rpow__ = __pow__

    # -------------------------------------------------------------- shifts

    def __lshift__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        return NotImplemented if o is None else self._shift(o, left=True)

    def __rlshift__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        return NotImplemented if o is None else o._shift(self, left=True)

    def __rshift__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        return NotImplemented if o is None else self._shift(o, left=False)

    def __rrshift__(self, other: object) -> SymInt | int:
        o = self._coerce(other)
        return NotImplemented if o is None else o._shift(self, left=False)

    def _shift(self, n: SymInt, left: bool) -> SymInt | int:
        if n.lo < 0 and bool(SymBool(n.bv < 0, self.ctx)):
            raise ValueError("negative shift count (symbolic)")
        n_lo, n_hi = max(n.lo, 0), n.hi
        if left and n_hi > MAX_SYMBOLIC_SHIFT:
            raise SymbolicError(f"a left shift by up to {n_hi} bits")
        corners = [(x << y) if left else (x >> y) for x in (self.lo, self.hi) for y in (n_lo, n_hi)]
        lo, hi = min(corners), max(corners)
        # As narrow as the values allow (a barrel shifter at min_width would only cost).
        w = max(signed_width(self.lo, self.hi), signed_width(n.lo, n.hi), signed_width(lo, hi))
        x, y = _narrow(self, w), _narrow(n, w)
        return self._make(x << y if left else x >> y, lo, hi, widen=False)  # z3's >> is arithmetic: floor

    # -------------------------------------------------------------- bitwise (two's complement)

    def _bitwise(self, other: object, op: Callable[[z3.BitVecRef, z3.BitVecRef], z3.BitVecRef],
                 bounds: Callable[[SymInt, SymInt, int], tuple[int, int]]) -> SymInt | int:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        # Above w bits both are sign copies, and so is the result; w is as narrow as the values
        # allow (the bit tests of core.py's bit2 loop stay a few bits wide).
        w = max(signed_width(self.lo, self.hi), signed_width(o.lo, o.hi))
        lo, hi = bounds(self, o, w)
        return self._make(op(_narrow(self, w), _narrow(o, w)), lo, hi, widen=False)

    def __and__(self, other: object) -> SymInt | int:
        def bounds(a: SymInt, b: SymInt, w: int) -> tuple[int, int]:
            nonneg = [x.hi for x in (a, b) if x.lo >= 0]
            return (0, min(nonneg)) if nonneg else (-(1 << (w - 1)), (1 << (w - 1)) - 1)
        return self._bitwise(other, lambda x, y: x & y, bounds)

    def __or__(self, other: object) -> SymInt | int:
        def bounds(a: SymInt, b: SymInt, w: int) -> tuple[int, int]:
            if a.lo >= 0 and b.lo >= 0:
                return max(a.lo, b.lo), (1 << max(a.hi, b.hi).bit_length()) - 1
            return -(1 << (w - 1)), (1 << (w - 1)) - 1
        return self._bitwise(other, lambda x, y: x | y, bounds)

    def __xor__(self, other: object) -> SymInt | int:
        def bounds(a: SymInt, b: SymInt, w: int) -> tuple[int, int]:
            if a.lo >= 0 and b.lo >= 0:
                return 0, (1 << max(a.hi, b.hi).bit_length()) - 1
            return -(1 << (w - 1)), (1 << (w - 1)) - 1
        return self._bitwise(other, lambda x, y: x ^ y, bounds)

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __invert__(self) -> SymInt | int:
        return self._make(~self.bv, -self.hi - 1, -self.lo - 1, widen=False)

    # -------------------------------------------------------------- comparisons

    def _compare(self, other: object, op: str) -> SymBool | bool:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        a, b = self, o
        decided = {  # what the intervals alone decide: (always true, always false)
            "lt": (a.hi < b.lo, a.lo >= b.hi), "le": (a.hi <= b.lo, a.lo > b.hi),
            "gt": (a.lo > b.hi, a.hi <= b.lo), "ge": (a.lo >= b.hi, a.hi < b.lo),
            "eq": (a.lo == a.hi == b.lo == b.hi, a.hi < b.lo or b.hi < a.lo),
            "ne": (a.hi < b.lo or b.hi < a.lo, a.lo == a.hi == b.lo == b.hi),
        }[op]
        if decided[0]:
            return True
        if decided[1]:
            return False
        w = self._common(a, b)
        x, y = _ext(a.bv, w), _ext(b.bv, w)
        expr = {"lt": lambda: x < y, "le": lambda: x <= y, "gt": lambda: x > y, "ge": lambda: x >= y,
                "eq": lambda: x == y, "ne": lambda: z3.Not(x == y)}[op]()  # z3's < on BV: signed
        return SymBool(expr, self.ctx)

    def __lt__(self, other: object) -> SymBool | bool:
        return self._compare(other, "lt")

    def __le__(self, other: object) -> SymBool | bool:
        return self._compare(other, "le")

    def __gt__(self, other: object) -> SymBool | bool:
        return self._compare(other, "gt")

    def __ge__(self, other: object) -> SymBool | bool:
        return self._compare(other, "ge")

    def __eq__(self, other: object) -> SymBool | bool:  # type: ignore[override]
        return self._compare(other, "eq")

    def __ne__(self, other: object) -> SymBool | bool:  # type: ignore[override]
        return self._compare(other, "ne")

    def __bool__(self) -> bool:
        return bool(self != 0)

    def __index__(self) -> int:
        raise TypeError("a symbolic integer has no concrete value")

    __int__ = __index__

    # -------------------------------------------------------------- back to bit-vectors

    def unsigned_bv(self, width: int) -> tuple[z3.BitVecRef, z3.BoolRef]:
        """The value as a `width`-bit unsigned bit-vector, and the condition that it fits
        (0 ≤ value < 2^width); where it does not fit the bit-vector is meaningless."""
        x = _ext(self.bv, max(self.width, width + 2))  # + 2: 2^width is a positive constant there
        low = z3t.Extract(width - 1, 0, x)
        if self.lo >= 0 and self.hi < (1 << width):
            return low, z3.BoolVal(True)
        return low, z3t.And(x >= 0, x < (1 << width))

