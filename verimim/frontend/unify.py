"""First-order unification with metavariables (`Hole`s), no backtracking.

Definitional equality is identity after normalization (nodes are hash-consed and locally
nameless), so unification only has to walk both terms in step and solve holes. On failure it
returns the innermost pair of differing types, which the diagnostics point at.

LANGUAGE.md's arity rule: unifying `«i: ?n; ?Ts#i»` with a type X solves `?n` to the arity of X
and `?Ts` to X's element types.
"""
from __future__ import annotations

from collections.abc import Callable

from verimim.frontend.typelevel import unfold_fully, unfold_lam_app
from verimim.ir.defs import (
    App, Arr, Axiom, BVar, Def, Extract, Hole, IdxT, Lit, MutLam, NatT, Pack, Pi, Sigma, Top, Tuple, TypeU,
)
from verimim.ir.world import EXPAND_LIMIT, World

Mismatch = tuple[Def, Def]

# Unfoldings of type-level `lam` applications one Unifier may do: a recursion that does not
# terminate (on a non-literal argument, unfolded in both operands) ends in a mismatch.
UNFOLD_FUEL = 10_000
# Unfoldings nested in one comparison: each step of a recursion that grows its argument
# (`PtrN (n + 1, Ptr0 T)`) first tries to unfold the whole, larger term (typelevel.unfold_fully),
# so a recursion that does not end costs more with every step; the fuel alone took minutes.
MAX_UNFOLD_NESTING = 256


class Unifier:
    def __init__(self, world: World) -> None:
        self.world = world
        self.trail: list[Hole] = []  # every hole solved, in order, so a failed attempt can be undone
        self.fuel = UNFOLD_FUEL  # type-level function applications unfolded (verimim.frontend.typelevel)
        self.unfolding = 0  # unfoldings nested in the comparison under way
        self.cut: Def | None = None  # the application whose unfolding MAX_UNFOLD_NESTING cut
        # > 0 while checking the type of a tentative solution: no arity is guessed there
        self.tentative = 0
        # Elaborates a mutable's body that is still pending (set by the elaborator).
        self.force_body: Callable[[MutLam], None] | None = None

    def undo(self, mark: int) -> None:
        """Forget the solutions found since `len(trail)` was `mark`."""
        while len(self.trail) > mark:
            self.trail.pop().value = None

    def unify(self, expected: Def, found: Def) -> Mismatch | None:
        """None on success, else the innermost differing (expected, found) pair."""
        w = self.world
        a = w.zonk(expected)
        b = w.zonk(found)
        if a is b:
            return None
        if isinstance(a, Hole) and a.value is None:
            return None if self._solve(a, b) else (a, b)
        if isinstance(b, Hole) and b.value is None:
            return None if self._solve(b, a) else (a, b)
        if isinstance(a, Top) or isinstance(b, Top):
            # Upstream's checker: `⊤` is assignable to and from anything (`Idx ⊤:Nat` accepts
            # an `I32` index; `«⊤:Nat; I8»` is an array of unknown length).
            return None
        if self._expand_arity(a) or self._expand_arity(b):
            return self.unify(a, b)
        if self._arity_rule(a, b) or self._arity_rule(b, a):
            return self.unify(a, b)
        if self._constant_arity_rule(a, b) or self._constant_arity_rule(b, a):
            return self.unify(a, b)
        if self._expand_hole(a) or self._expand_hole(b):
            return self.unify(a, b)
        if isinstance(a, Sigma) and isinstance(b, Arr):
            return self._sigma_arr(a, b, flipped=False)
        if isinstance(a, Arr) and isinstance(b, Sigma):
            return self._sigma_arr(b, a, flipped=True)
        if isinstance(a, Tuple) and isinstance(b, Pack) or isinstance(a, Pack) and isinstance(b, Tuple):
            return self._tuple_pack(a, b)
        if isinstance(a, Tuple) != isinstance(b, Tuple):
            eta = self._eta(a, b) if isinstance(a, Tuple) else self._eta(b, a, flipped=True)
            if eta is not None:
                return eta[0]
        if (a in w.rec_defs) != (b in w.rec_defs) and self.fuel > 0:
            # a recursive type (`rec A = [I32, Ptr0 B]`) is its definition where the other
            # side is a structure: the tuple `(x, p)` is an `A`
            self.fuel -= 1
            return None if self.unify(w.unfold(a), w.unfold(b)) is None else (a, b)
        if _lam_app(a) or _lam_app(b):
            same_head = isinstance(a, App) and isinstance(b, App) and a.callee is b.callee
            unfolded = None if same_head else self._unfold(a, b)
            if unfolded is not None:
                return unfolded[0]
        nat = self._nat_commuted(a, b)
        if nat is not None:
            return nat[0]
        if type(a) is not type(b) or a.extra() != b.extra() or len(a.ops) != len(b.ops):
            return (a, b)
        if isinstance(a, (BVar,)):
            return (a, b)
        if a.mutable:
            return (a, b)
        for x, y in zip(a.ops, b.ops):
            sub = self.unify(x, y)
            if sub is not None:
                return self._blame(a, b, sub)
        return None

    def _unfold(self, a: Def, b: Def) -> tuple[Mismatch | None] | None:
        """Compare again after unfolding a type-level function application on either side
        (bounded: `fuel` unfoldings per Unifier): (the comparison's result,), or None when
        neither side unfolds."""
        if self.fuel <= 0:
            return None
        for x, y, flipped in ((a, b, False), (b, a, True)):
            if _lam_app(x) and x.callee.body is None and self.force_body is not None:  # type: ignore[attr-defined]
                self.force_body(x.callee)  # type: ignore[attr-defined]
            if unfold_lam_app(self.world, x) is None:
                continue
            if self.unfolding >= MAX_UNFOLD_NESTING:
                self.cut = self.cut or x
                return None
            step = unfold_fully(self.world, x) or unfold_lam_app(self.world, x)
            assert step is not None
            self.fuel -= 1
            self.unfolding += 1
            try:
                res = self.unify(y, step) if flipped else self.unify(step, y)
            finally:
                self.unfolding -= 1
            return (res if res is None else (a, b),)
        return None

    def _eta(self, tup: Def, other: Def, flipped: bool = False) -> tuple[Mismatch | None] | None:
        """Tuples' η rule (upstream's `World::tuple`: `(t#0, …, t#(n-1))` is `t`): a tuple
        against a value that is no tuple compares element by element with that value's
        extracts, where the value has the tuple's arity (`mem.Ptr X` is `mem.Ptr (X#0, X#1)`).
        None where the rule does not apply."""
        w = self.world
        assert isinstance(tup, Tuple)
        n = len(tup.ops)
        if n < 2 or isinstance(other, (Hole, Pack, Lit, Top)) or other.bvd or other.has_hole:
            return None
        t = w.zonk(w.type_of(other))
        if not (isinstance(t, (Sigma, Arr)) and w.arity(t) is w.lit_nat(n)):
            return None
        for j, x in enumerate(tup.ops):
            y = w.extract(other, w.lit_idx(n, j))
            sub = self.unify(y, x) if flipped else self.unify(x, y)
            if sub is not None:
                return ((other, tup) if flipped else (tup, other),)
        return (None,)

    def _nat_commuted(self, a: Def, b: Def) -> tuple[Mismatch | None] | None:
        """Upstream's `core.nat` normalizer orders a commutative operation's operands and turns
        `x + x` into `2 · x`, so `«n + m; T»` is `«m + n; T»` there. Here (the order of operands
        is no World-independent fact: a phase's World numbers its nodes anew) unification tries
        both orders of `core.nat.add`/`mul`, and `x + x` against `2 · y`. None where neither
        side is such an operation (or the operands match in order: the generic walk decides)."""
        pa, pb = _nat_operands(self.world, a), _nat_operands(self.world, b)
        if pa is None or pb is None:
            return None
        (op_a, (x1, y1)), (op_b, (x2, y2)) = pa, pb
        if op_a == op_b:
            mark = len(self.trail)
            if self.unify(x1, x2) is None and self.unify(y1, y2) is None:
                return (None,)
            self.undo(mark)
            if self.unify(x1, y2) is None and self.unify(y1, x2) is None:  # (both commute)
                return (None,)
            self.undo(mark)
            return ((a, b),)
        double = [(x, y) for (op, (x, y)) in (pa, pb) if op == "add" and x is y]
        twice = [y for (op, (x, y)) in (pa, pb) if op == "mul" and isinstance(x, Lit) and x.value == 2]
        if double and twice:
            return (None if self.unify(double[0][0], twice[0]) is None else (a, b),)
        return None

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _blame(a: Def, b: Def, sub: Mismatch) -> Mismatch:
        """Point at the smallest differing pair that is still a meaningful type or value:
        a literal inside `mem.M 0` vs `mem.M 1` is better shown as the whole `mem.M` type."""
        x, y = sub
        if isinstance(x, (Lit, BVar, TypeU)) or isinstance(y, (Lit, BVar, TypeU)):
            return (a, b)
        if isinstance(a, App) and isinstance(b, App) and (x is a.arg or y is b.arg):
            return (a, b)  # `mem.Ptr (I32, 0)` reads better than its argument tuple
        return sub

    def _occurs(self, h: Hole, d: Def) -> bool:
        if not d.has_hole:
            return False
        if d is h:
            return True
        seen: set[int] = set()
        stack = [d]
        while stack:
            x = stack.pop()
            if x is h:
                return True
            if not x.has_hole or x.gid in seen:
                continue
            seen.add(x.gid)
            if isinstance(x, Hole):
                if x.value is not None:
                    stack.append(x.value)
                continue
            stack.extend(x.ops)
        return False

    def _solve(self, h: Hole, v: Def) -> bool:
        if v.bvd != 0 or self._occurs(h, v):
            return False
        if h._type is not None:
            try:
                vt = self.world.type_of(v)
            except Exception:  # an ill-formed candidate never solves a hole
                return False
            h.value = v  # tentatively, so that the type's own holes may mention it
            self.trail.append(h)
            self.tentative += 1
            try:
                fits = self.unify(h._type, vt) is None
            finally:
                self.tentative -= 1
            if not fits and isinstance(self.world.zonk(h._type), TypeU) and isinstance(self.world.zonk(vt), TypeU):
                # Upstream's checker solves a hole without comparing universe levels
                # (Checker::alpha_: `h1->set(d2)`): an implicit `{T: *}` takes a type as its
                # argument (`core.select (c, I32, I8)`, upstream's own `tuple.typecat`). An
                # explicit argument keeps its level check.
                fits = True
            if not fits:
                h.value = None
                return False
            return True
        h.value = v
        self.trail.append(h)
        return True

    def _expand_arity(self, d: Def) -> bool:
        """`d = «i: ?h#j; ?g#k#i»` with ?h (or ?g) a hole of a literal arity, an implicit argument
        of several components (`{nis nps: Nat}`): expand it to a tuple of holes, so that the arity
        rules below see `«i: ?n; ?Ts#i»` (`btensor.map_reduce_post`'s `«i: nis; Tis#i»`, as
        `btensor.map_reduce`'s, whose `{nis: Nat}` is a hole of its own)."""
        if not isinstance(d, Arr):
            return False
        grew = isinstance(d.shape, Extract) and self._expand_hole(d.shape)
        body = d.body
        if isinstance(body, Extract) and isinstance(body.index, BVar) and body.index.index == 0:
            grew = self._expand_hole(body.tup) or grew
        return grew

    def _arity_rule(self, a: Def, b: Def) -> bool:
        """`a = «i: ?n; ?Ts#i»` against a non-hole `b`: solve ?n and ?Ts from b's shape."""
        if not isinstance(a, Arr):
            return False
        n, body = a.shape, a.body
        if not (isinstance(n, Hole) and n.value is None):
            return False
        if not (isinstance(body, Extract) and isinstance(body.index, BVar) and body.index.index == 0):
            return False
        ts = body.tup
        if not (isinstance(ts, Hole) and ts.value is None):
            return False
        if isinstance(b, Hole) or b.bvd != 0:
            return False
        w = self.world
        if isinstance(b, Arr):
            n_val, ts_val = b.shape, w.pack(b.shape, b.body)
        elif isinstance(b, Sigma):
            if b.dependent:
                return False
            n_val = w.lit_nat(len(b.ops))
            ts_val = w.tuple(w.shift(f, -1) for f in b.ops)
        else:
            n_val, ts_val = w.lit_nat(1), b
        n.value = n_val
        self.trail.append(n)
        if not self._solve(ts, ts_val):
            n.value = None
            return False
        return True

    def _constant_arity_rule(self, a: Def, b: Def) -> bool:
        """`a = «?n; T»` against `[]`: ?n is 0, the only arity whose array is `[]` (`«0; T» = []`;
        `compile.phases ff ()`). Against a type that is no array, sigma or tuple of types in any
        normal form (`Nat`, `Idx k`, a function type, an axiom's type such as `mem.Ptr (I32, 0)`)
        ?n is 1, the arity of such a type (LANGUAGE.md): `«1; T» = T` is the only way the two
        are equal (btensor's `subs: «?Ris; Nat»` with one input takes `(0)`, a Nat). Against an
        array or sigma the arity is left to other arguments: `«1; T» = T` makes n = 1 one answer
        among others (`«2; «4; I32»»` is also `«(2, 4); I32»`)."""
        if not isinstance(a, Arr):
            return False
        n = a.shape
        if not (isinstance(n, Hole) and n.value is None):
            return False
        if isinstance(b, Sigma) and not b.ops:
            arity = 0
        elif _never_an_array(b) and not self.tentative:
            # Not for the type of a tentative solution: there the candidate itself may be one
            # answer among others (`?s := 2` from `«?s; ?T»` against `«2; «4; I32»»`, whose
            # `s: «?r; Nat»` would then fix r = 1 where a later `buffer.Buf (2, (2, 4), I32)`
            # says r = 2, s = (2, 4)); such a candidate is refused and the later argument decides.
            arity = 1
        else:
            return False
        n.value = self.world.lit_nat(arity)
        self.trail.append(n)
        return True

    def _expand_hole(self, d: Def) -> bool:
        """`?h#i` with ?h of a literal arity: solve ?h to a tuple of fresh holes, so its elements
        can be solved one by one."""
        if not (isinstance(d, Extract) and isinstance(d.tup, Hole) and d.tup.value is None):
            return False
        h = d.tup
        w = self.world
        t = w.zonk(h._type) if h._type is not None else None
        if isinstance(t, Arr) and isinstance(t.shape, Lit):
            n = t.shape.value
            holes = [w.hole(w.open(t.body, w.lit_idx(n, j)), f"{h.hint}#{j}") for j in range(n)]
        elif isinstance(t, Sigma):
            n = len(t.ops)
            holes = [w.hole(None, f"{h.hint}#{j}") for j in range(n)]
            tup = w.tuple(holes)
            for j, hj in enumerate(holes):
                hj._type = w.open(t.ops[j], tup)
        else:
            return False
        h.value = w.tuple(holes)
        self.trail.append(h)
        return True

    def _sigma_arr(self, s: Sigma, arr: Arr, flipped: bool) -> Mismatch | None:
        w = self.world
        n = arr.shape
        if not isinstance(n, Lit) or n.value != len(s.ops):
            return (arr, s) if flipped else (s, arr)
        for j, f in enumerate(s.ops):
            elem = w.shift(w.open(arr.body, w.lit_idx(n.value, j)), 1)
            sub = self.unify(elem, f) if flipped else self.unify(f, elem)
            if sub is not None:
                return self._blame(arr, s, sub) if flipped else self._blame(s, arr, sub)
        return None

    def _tuple_pack(self, a: Def, b: Def) -> Mismatch | None:
        w = self.world
        tup, pack = (a, b) if isinstance(a, Tuple) else (b, a)
        assert isinstance(pack, Pack)
        if not isinstance(pack.shape, Lit) or pack.shape.value != len(tup.ops):
            return (a, b)
        n = pack.shape.value
        for j, e in enumerate(tup.ops):
            elem = w.open(pack.body, w.lit_idx(n, j))
            sub = self.unify(e, elem) if tup is a else self.unify(elem, e)
            if sub is not None:
                return sub
        return None


def _lam_app(d: Def) -> bool:
    return isinstance(d, App) and isinstance(d.callee, MutLam) and d.callee.kind == "lam"


def is_type_of_one_value(world: World, t: Def) -> Def | None:
    """The only value of `t` when it has exactly one (`[]` → `()`, `Idx 1` → `0_1`, and tuples
    and arrays of such: `«3; []»` → `((), (), ())`), else None."""
    t = world.zonk(t)
    if isinstance(t, Sigma) and not t.ops:
        return world.unit()
    if isinstance(t, IdxT) and isinstance(t.size, Lit) and t.size.value == 1:
        return world.lit_idx(1, 0)
    if isinstance(t, Sigma) and not t.dependent:
        elems = [is_type_of_one_value(world, f) for f in t.ops]
        return None if any(e is None for e in elems) else world.tuple([e for e in elems if e is not None])
    if isinstance(t, Arr) and isinstance(t.shape, Lit) and t.body.bvd == 0 and 0 < t.shape.value <= EXPAND_LIMIT:
        elem = is_type_of_one_value(world, t.body)
        return None if elem is None else world.pack(t.shape, world.shift(elem, 1))
    return None


def _never_an_array(t: Def) -> bool:
    """A closed type that no unfolding or solution turns into an array or a sigma: `Nat`, `Idx k`,
    a function type, a universe (`*`: a single type passed for `«?n; *»`, as upstream's
    `tuple.typecat T Us`), an axiom, or an axiom applied (`mem.Ptr (I32, 0)`, `gpu.GlobalM`)."""
    if t.has_hole or t.bvd != 0:
        return False
    if isinstance(t, (NatT, IdxT, Pi, Axiom, TypeU)):
        return True
    return isinstance(t, App) and isinstance(t.head, Axiom)


def _nat_operands(w: World, d: Def) -> tuple[str, tuple[Def, Def]] | None:
    """`core.nat.add (x, y)` as ("add", (x, y)), likewise `mul` (`x + x` is `core.nat.add ‹2; x›`);
    None for anything else."""
    if not (isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex in ("core.nat.add", "core.nat.mul")):
        return None
    if not isinstance(d.arg, (Tuple, Pack)) or d.arg.bvd:
        return None
    return d.head.annex.rsplit(".", 1)[1], (w.extract_n(d.arg, 2, 0), w.extract_n(d.arg, 2, 1))
