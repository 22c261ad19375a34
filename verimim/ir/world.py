"""`World`: the one factory of every IR node, with hash-consing and MimIR's normal forms.

Every constructor normalizes before it hash-conses, so a node, once built, is in normal form:
arity-1 and arity-0 collapses, a sigma of equal types is an array, a tuple of equal values is a
pack, literal extracts, β-reduction of immutable lambdas, and axiom normalizers (registered by
annex name) on fully applied axioms. The locally nameless operations (`open`, `shift`,
`abstract`) and metavariable resolution (`zonk`) live here too, since they rebuild through the
same normalizing constructors.
"""
from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from verimim.diagnostics import Loc, VerimimError
from verimim.ir.defs import (
    App, Arr, Axiom, Bot, BVar, Def, Extract, Hole, IdxT, Inject, Insert, Join, Lam, Lit, Match, MutLam,
    NatT, Pack, Param, Pi, Sigma, Top, Tuple, TypeU, Univ, Var, mentions,
)

# A dependent array or pack with a literal shape up to this size is expanded into a sigma / tuple
# (as MimIR does), so that its elements normalize one by one.
EXPAND_LIMIT = 256

Normalizer = Callable[["World", App], "Def | None"]


class IRError(VerimimError):
    """An ill-formed node was requested: a bug in verimim (or an unchecked frontend path)."""

    def __init__(self, message: str, loc: Loc | None = None) -> None:
        super().__init__("E-INTERNAL", message, loc)


def _structural_key(d: Def, depth: int = 0) -> str:
    """An order of terms that depends on their structure only (not on when they were made):
    a union's members are sorted by it, so a program and its dump build the same union."""
    if depth > 32:
        return "…"
    head = f"{type(d).__name__}{d.extra()!r}"
    if isinstance(d, (Param, MutLam)):
        return f"{head}:{d.name}"
    if isinstance(d, Var):
        return f"{head}:{d.mut.name}"
    return head + "(" + ",".join(_structural_key(op, depth + 1) for op in d.ops) + ")"


@dataclass(frozen=True)
class RuleDef:
    """A rewrite rule: its meta variables' type and names, its sides (and guard) over them as
    BVar 0 (the meta variables' value)."""

    name: str
    norm: bool
    meta_type: Def
    meta_names: tuple[str | None, ...]
    lhs: Def
    rhs: Def
    guard: Def | None


_world_serials = itertools.count(1)
_Kept = TypeVar("_Kept")

# (node id, binders crossed) → result: the memo of the locally nameless operations (World.open, …)
_BinderMemo = dict[tuple[int, int], "Def"]


class World:
    def __init__(self) -> None:
        # Which World made a node (`Def.home`): a program split in two has a host and a device
        # World whose nodes meet in one interpreter, which must build from each in its own World.
        self.serial = next(_world_serials)
        self._table: dict[tuple[Any, ...], Def] = {}
        self.annexes: dict[str, Def] = {}
        self.annex_docs: dict[str, str] = {}
        self.normalizers: dict[str, tuple[int, Normalizer]] = {}
        self.muts: list[MutLam] = []
        self.externals: dict[str, MutLam] = {}
        self.origin: World | None = None  # the World a phase rebuilt this one from
        # Analyses of this World that its users share (the nesting of its mutables, compiled
        # interpreter code, the walk from its externals), by the analysis' name: kept here, so
        # that they are dropped with the World, in the same collection. A table beside it keyed
        # by the World weakly held their nodes through the collection that freed the World, and
        # those waited for a full one.
        self.kept: dict[str, Any] = {}
        # how this World gets an annex of `origin` it does not hold yet (set by the Rewriter)
        self.import_annex: Callable[[str], Def] | None = None
        # Folds by the normalizers while the program was built (the front end turns this on):
        # application gid → (the application as written, what it was normalized to). `check`
        # proves each of them (smt/spec_normalize.py).
        self.folds: dict[int, tuple[App, Def]] | None = None
        # Where the node being built comes from (a Rewriter sets it to the old node's place): a
        # folded application, which nothing else places, is reported there.
        self.site: Loc | None = None
        # The program's own pipeline definitions (`_compile`, …), by name (verimim.phases.program_pipeline).
        self.pipeline_defs: dict[str, Def] = {}
        self.pipeline_locs: dict[str, Loc] = {}  # … and where each is declared
        # C functions declared with `ccon`/`cfun`: C name → the axiom `c.<name>` standing for it.
        self.c_functions: dict[str, Axiom] = {}
        # `rec N = e` whose e mentions N (a recursive type): the constant → its definition.
        self.rec_defs: dict[Def, Def] = {}
        # `rule N p : lhs => rhs` of a program: its axiom → the rule (printed back by `dump`).
        self.rule_defs: dict[Def, RuleDef] = {}
        self._levels: dict[int, int] = {}  # World.level of closed nodes, by gid
        self._lam_muts: dict[int, MutLam] = {}  # World.lam_as_mut, by the λ's gid
        self._univ = self._hashcons(Univ, (), ())
        self._nat = self._hashcons(NatT, (), ())

    def keep(self, name: str, make: Callable[[], _Kept]) -> _Kept:
        """The analysis `name` of this World (World.kept), made on first use."""
        hit = self.kept.get(name)
        if hit is None:
            hit = self.kept[name] = make()
        return hit

    # ------------------------------------------------------------------ hash-consing

    def _hashcons(self, cls: type[Def], ops: tuple[Def, ...], extra: tuple[Any, ...],
                  make: Callable[[], Def] | None = None) -> Def:
        key = (cls, extra, *map(id, ops))
        hit = self._table.get(key)
        if hit is not None:
            return hit
        node = make() if make is not None else cls(ops)
        node.home = self.serial
        self._table[key] = node
        return node

    @property
    def num_nodes(self) -> int:
        return len(self._table)

    # ------------------------------------------------------------------ base types and literals

    def univ(self) -> Def:
        return self._univ

    def type_u(self, level: int) -> Def:
        return self._hashcons(TypeU, (), (level,), lambda: TypeU(level))

    def star(self) -> Def:
        return self.type_u(0)

    def nat(self) -> Def:
        return self._nat

    def idx(self, size: Def) -> Def:
        return self._hashcons(IdxT, (size,), ())

    def idx_n(self, n: int) -> Def:
        return self.idx(self.lit_nat(n))

    def bool_t(self) -> Def:
        return self.idx_n(2)

    def lit(self, type_: Def, value: int) -> Def:
        return self._hashcons(Lit, (type_,), (value,), lambda: Lit(type_, value))

    def lit_nat(self, value: int) -> Def:
        return self.lit(self._nat, value)

    def lit_idx(self, n: int, value: int) -> Def:
        return self.lit(self.idx_n(n), value)

    def lit_bool(self, value: bool) -> Def:
        return self.lit_idx(2, int(value))

    def top(self, type_: Def) -> Def:
        return self._hashcons(Top, (type_,), ())

    def bot(self, type_: Def) -> Def:
        return self._hashcons(Bot, (type_,), ())

    def axiom(self, annex: str, type_: Def) -> Axiom:
        node = self._hashcons(Axiom, (type_,), (annex,), lambda: Axiom(annex, type_))
        assert isinstance(node, Axiom)
        return node

    # ------------------------------------------------------------------ binders

    def pi(self, dom: Def, codom: Def, implicit: bool = False,
           names: tuple[str | None, ...] | None = None) -> Pi:
        node = self._hashcons(Pi, (dom, codom), (implicit,), lambda: Pi(dom, codom, implicit))
        assert isinstance(node, Pi)
        node.set_names(names)
        return node

    def cn(self, dom: Def) -> Pi:
        return self.pi(dom, self.bot(self.star()))

    def is_cn(self, d: Def) -> bool:
        return isinstance(d, Pi) and isinstance(d.codom, Bot) and d.codom.ops[0] is self.star()

    def sigma(self, fields: Iterable[Def], names: tuple[str | None, ...] | None = None) -> Def:
        fields = tuple(fields)
        if len(fields) == 1:
            return self.shift(fields[0], -1)
        if len(fields) >= 2 and all(f is fields[0] for f in fields) and not mentions(fields[0], 0):
            arr = self.arr(self.lit_nat(len(fields)), fields[0])
            if isinstance(arr, Arr) and names and arr.field_names is None and any(names):
                arr.field_names = names  # `[lo: Nat, hi: Nat]`: `x#hi` still names a field
            return arr
        node = self._hashcons(Sigma, fields, (), lambda: Sigma(fields))
        assert isinstance(node, Sigma)
        node.set_names(names)
        return node

    def unit_t(self) -> Def:
        return self.sigma(())

    def arr(self, shape: Def, body: Def, index_name: str | None = None) -> Def:
        dims = self._dims(shape)
        if dims is not None and not mentions(body, 0):
            # A multi-dimensional shape: «(a, b); T» is «a; «b; T»».
            inner = self.shift(body, -1)
            for dim in reversed(dims):
                inner = self.arr(dim, self.shift(inner, 1))
            return inner
        n = shape.value if isinstance(shape, Lit) else None
        if n == 0:
            return self.unit_t()
        if n == 1:
            return self.open(body, self.lit_idx(1, 0))
        if n is not None and n <= EXPAND_LIMIT and mentions(body, 0):
            fields = [self.shift(self.open(body, self.lit_idx(n, j)), 1) for j in range(n)]
            return self.sigma(fields)
        node = self._hashcons(Arr, (shape, body), (), lambda: Arr(shape, body))
        assert isinstance(node, Arr)
        if node.index_name is None:
            node.index_name = index_name
        return node

    def _dims(self, shape: Def) -> tuple[Def, ...] | None:
        """The dimensions of a multi-dimensional shape `(a, b)` (also when it became `‹2; a›`)."""
        if isinstance(shape, Tuple):
            return shape.ops
        if isinstance(shape, Pack) and isinstance(shape.shape, Lit) and shape.body.bvd == 0:
            return (shape.body,) * shape.shape.value
        return None

    def tuple(self, elems: Iterable[Def]) -> Def:
        elems = tuple(elems)
        if len(elems) == 1:
            return elems[0]
        if len(elems) >= 2 and all(e is elems[0] for e in elems):
            return self.pack(self.lit_nat(len(elems)), self.shift(elems[0], 1))
        return self._hashcons(Tuple, elems, ())

    def unit(self) -> Def:
        return self.tuple(())

    def pack(self, shape: Def, body: Def, index_name: str | None = None) -> Def:
        dims = self._dims(shape)
        if dims is not None and not mentions(body, 0):
            inner = self.shift(body, -1)
            for dim in reversed(dims):
                inner = self.pack(dim, self.shift(inner, 1))
            return inner
        n = shape.value if isinstance(shape, Lit) else None
        if n == 0:
            return self.unit()
        if n == 1:
            return self.open(body, self.lit_idx(1, 0))
        if n is not None and n <= EXPAND_LIMIT and mentions(body, 0):
            return self.tuple(self.open(body, self.lit_idx(n, j)) for j in range(n))
        node = self._hashcons(Pack, (shape, body), (), lambda: Pack(shape, body))
        assert isinstance(node, Pack)
        if node.index_name is None:
            node.index_name = index_name
        return node

    def lam(self, pi: Pi, body: Def, name: str | None = None) -> Lam:
        node = self._hashcons(Lam, (pi, body), ())
        assert isinstance(node, Lam)
        if node.name is None:
            node.name = name
        return node

    def bvar(self, index: int) -> Def:
        return self._hashcons(BVar, (), (index,), lambda: BVar(index))

    def var(self, mut: MutLam) -> Var:
        node = self._hashcons(Var, (mut,), ())
        assert isinstance(node, Var)
        return node

    # ------------------------------------------------------------------ mutables

    def mut_lam(self, pi: Pi, name: str, kind: str) -> MutLam:
        m = MutLam(pi, name, kind)
        m.home = self.serial
        self.muts.append(m)
        return m

    def lam_as_mut(self, lam: Lam) -> MutLam:
        """An immutable λ as an equivalent mutable, its body opened with the mutable's variable:
        for the interpreter and the back ends, which run bodies of mutables. Made once per λ,
        and not in `muts`: it is no part of the program (phases and specs never see it)."""
        hit = self._lam_muts.get(lam.gid)
        if hit is not None:
            return hit
        m = MutLam(lam.pi, lam.name or "lm", "con" if self.is_cn(lam.pi) else "lam")
        m.home = self.serial
        m.body = self.open(lam.body, self.var(m))
        m.loc = lam.loc
        self._lam_muts[lam.gid] = m
        return m

    def param(self, type_: Def, name: str | None = None) -> Param:
        return Param(type_, name)

    def hole(self, type_: Def | None, hint: str) -> Hole:
        return Hole(type_, hint)

    # ------------------------------------------------------------------ eliminations

    def extract(self, tup: Def, index: Def) -> Def:
        if isinstance(index, Tuple):
            # A multi-index (upstream's `World::extract`): `a#(i, j)` is `a#i#j`, as a shape
            # `«(r, c); T»` is the array `«r; «c; T»»`.
            for i in index.ops:
                tup = self.extract(tup, i)
            return tup
        if isinstance(index, Pack) and isinstance(index.shape, Lit) and index.shape.value <= EXPAND_LIMIT:
            n = index.shape.value
            for j in range(n):
                tup = self.extract(tup, self.open(index.body, self.lit_idx(n, j)))
            return tup
        if _stated_range(index) == 1:
            return tup
        if isinstance(tup, Pack):
            dims = self._dims(tup.shape)
            if dims is not None and len(dims) >= 2 and isinstance(self._type_or_none(index), IdxT):
                return self._row(tup, dims, index)
            return self.open(tup.body, index)
        if isinstance(index, Lit):
            if isinstance(tup, Tuple):
                if index.value >= len(tup.ops):
                    if _stated_range(index) is not None:  # (the checker refuses it)
                        raise IRError(f"index {index.value} out of range for a tuple of {len(tup.ops)}")
                    # an index of unknown range (`core.idx_unsafe 9`, of type `Idx ⊤`): it is
                    # checked when it runs (E-OOB)
                    return self._hashcons(Extract, (tup, index), ())
                return tup.ops[index.value]
            if isinstance(tup, Insert) and isinstance(tup.ops[1], Lit):
                if tup.ops[1] is index:
                    return tup.ops[2]
                return self.extract(tup.ops[0], index)
        return self._hashcons(Extract, (tup, index), ())

    def _row(self, pack: Pack, dims: tuple[Def, ...], index: Def) -> Def:
        """`‹i: (a, b, …); e›#j` for one index j of the first dimension: the pack over the other
        dimensions `‹k: (b, …); e[i := (j, k…)]›` (its body's index is the whole tuple of indices,
        so opening it with j alone gave e of a wrong index: `‹i: (2, 3); i›#1_2` was `tt`)."""
        rest = dims[1:]
        k = self.bvar(0)  # the new pack's index; the old body is put under it, its own index opened
        parts = [k] if len(rest) == 1 else [self.extract(k, self.lit_idx(len(rest), j)) for j in range(len(rest))]
        body = self.open(self.shift(pack.body, 1, cutoff=1), self.tuple([self.shift(index, 1), *parts]))
        return self.pack(rest[0] if len(rest) == 1 else self.tuple(rest), body)

    def _type_or_none(self, d: Def) -> Def | None:
        try:
            return self.type_of(d)
        except IRError:  # (a node whose type is not known yet: no row)
            return None

    def extract_n(self, tup: Def, n: int, i: int) -> Def:
        """`tup # i` for a tuple of arity n."""
        return self.extract(tup, self.lit_idx(n, i))

    def insert(self, tup: Def, index: Def, value: Def) -> Def:
        if _stated_range(index) == 1:
            return value  # `«1; T» = T`: inserting into a value of one element is that element
        if isinstance(tup, Tuple) and isinstance(index, Lit) and index.value < len(tup.ops):
            elems = list(tup.ops)
            elems[index.value] = value
            return self.tuple(elems)
        if isinstance(tup, Pack) and isinstance(index, Lit) and isinstance(tup.shape, Lit) \
                and tup.shape.value <= EXPAND_LIMIT:
            n = tup.shape.value
            elems = [self.open(tup.body, self.lit_idx(n, j)) for j in range(n)]
            elems[index.value] = value
            return self.tuple(elems)
        return self._hashcons(Insert, (tup, index, value), ())

    def app(self, callee: Def, arg: Def) -> Def:
        if isinstance(callee, Lam):
            return self.open(callee.body, arg)
        node = self._hashcons(App, (callee, arg), ())
        assert isinstance(node, App)
        head = node.head
        if isinstance(head, Axiom) and not node.has_hole and node.closed:
            entry = self.normalizers.get(head.annex)
            if entry is not None and entry[0] == node.depth:
                res = entry[1](self, node)
                if res is not None:
                    if self.folds is not None and res is not node:
                        if node.loc is None:
                            node.loc = self.site
                        self.folds.setdefault(node.gid, (node, res))
                    return res
        return node

    def apps(self, callee: Def, *args: Def) -> Def:
        for a in args:
            callee = self.app(callee, a)
        return callee

    # ------------------------------------------------------------------ locally nameless operations

    # Each operation recurses through a method with its memo passed along, not a nested function:
    # a nested function that calls itself is a reference cycle, left with its memo to the
    # cyclic collector after every call (these run tens of thousands of times per program).

    def open(self, body: Def, value: Def) -> Def:
        """Instantiate the binder whose body is `body` with `value`."""
        if body.bvd == 0:
            return body
        return self._open(body, value, 0, {})

    def _open(self, d: Def, value: Def, depth: int, memo: _BinderMemo) -> Def:
        if d.bvd <= depth:
            return d
        if isinstance(d, BVar):
            if d.index == depth:
                return self.shift(value, depth)
            return self.bvar(d.index - 1)  # d.index > depth: a binder further out
        key = (d.gid, depth)
        hit = memo.get(key)
        if hit is not None:
            return hit
        binders = d.binder_ops
        ops = tuple([self._open(op, value, depth + 1 if i in binders else depth, memo)
                     for i, op in enumerate(d.ops)])
        res = d if all(a is b for a, b in zip(ops, d.ops)) else d.rebuild(self, ops)
        if res.loc is None:
            res.loc = d.loc  # the instance of a body's operation is where the body wrote it
        memo[key] = res
        return res

    def shift(self, d: Def, amount: int, cutoff: int = 0) -> Def:
        """Add `amount` to every BVar index ≥ cutoff (BVars dangling out of `d`)."""
        if amount == 0 or d.bvd <= cutoff:
            return d
        return self._shift(d, amount, cutoff, {})

    def _shift(self, d: Def, amount: int, c: int, memo: _BinderMemo) -> Def:
        if d.bvd <= c:
            return d
        if isinstance(d, BVar):
            if d.index + amount < 0:
                raise IRError("a bound variable escapes its binder")
            return self.bvar(d.index + amount)
        key = (d.gid, c)
        hit = memo.get(key)
        if hit is not None:
            return hit
        binders = d.binder_ops
        ops = tuple([self._shift(op, amount, c + 1 if i in binders else c, memo) for i, op in enumerate(d.ops)])
        res = d if all(a is b for a, b in zip(ops, d.ops)) else d.rebuild(self, ops)
        memo[key] = res
        return res

    def abstract(self, d: Def, param: Param, repl: Def | None = None) -> Def:
        """Replace the free `param` by `repl` (default BVar(0)), seen from one binder outside `d`:
        under k further binders the replacement is shifted by k."""
        if not d.has_param:
            return d
        r = self.bvar(0) if repl is None else repl
        return self._abstract(d, param, r, 0, {})

    def _abstract(self, d: Def, param: Param, r: Def, depth: int, memo: _BinderMemo) -> Def:
        if not d.has_param:
            return d
        if d is param:
            return self.shift(r, depth)
        key = (d.gid, depth)
        hit = memo.get(key)
        if hit is not None:
            return hit
        ops = tuple(self._abstract(op, param, r, depth + 1 if i in d.binder_ops else depth, memo)
                    for i, op in enumerate(d.ops))
        res = d if all(a is b for a, b in zip(ops, d.ops)) else d.rebuild(self, ops)
        memo[key] = res
        return res

    def zonk(self, d: Def) -> Def:
        """Replace solved holes by their values, re-normalizing on the way."""
        if not d.has_hole:
            return d
        return self._zonk(d, {})

    def _zonk(self, d: Def, memo: dict[int, Def]) -> Def:
        if not d.has_hole:
            return d
        if isinstance(d, Hole):
            if d.value is None:
                return d
            v = self._zonk(d.value, memo)
            d.value = v  # path compression
            return v
        hit = memo.get(d.gid)
        if hit is not None:
            return hit
        ops = tuple(self._zonk(op, memo) for op in d.ops)
        res = d if all(a is b for a, b in zip(ops, d.ops)) else d.rebuild(self, ops)
        memo[d.gid] = res
        return res

    # ------------------------------------------------------------------ types

    def type_of(self, d: Def) -> Def:
        """The type of a locally closed node."""
        t = d._type
        if t is not None:
            return t
        t = self._infer(d)
        d._type = t
        return t

    def _infer(self, d: Def) -> Def:
        if isinstance(d, (Univ,)):
            return d
        if isinstance(d, TypeU):
            return self.type_u(d.level + 1)
        if isinstance(d, (NatT, IdxT)):
            return self.star()
        if isinstance(d, (Lit, Top, Bot, Axiom)):
            return d.ops[0]
        if isinstance(d, (Pi, Sigma, Arr)):
            return self.type_u(self.level(d))
        if isinstance(d, Join):
            return self.type_u(max(self.level(m) for m in d.ops))
        if isinstance(d, Inject):
            return d.ops[1]
        if isinstance(d, Match):
            arm_t = self.zonk(self.type_of(d.ops[1]))
            if not isinstance(arm_t, Pi):
                raise IRError("a match arm that is not a function")
            return self.shift(arm_t.codom, -1)
        if isinstance(d, Tuple):
            return self.sigma(self.type_of(e) for e in d.ops)
        if isinstance(d, Pack):
            p = self.param(self.index_type(d.shape), d.index_name)
            body_t = self.type_of(self.open(d.body, p))
            return self.arr(d.shape, self.abstract(body_t, p), index_name=d.index_name)
        if isinstance(d, Extract):
            return self.extract_type(self.zonk(self.type_of(d.tup)), d.tup, d.index)
        if isinstance(d, Insert):
            return self.type_of(d.ops[0])
        if isinstance(d, App):
            ct = self.unfold(self.zonk(self.type_of(d.callee)))
            if not isinstance(ct, Pi):
                raise IRError(f"applying a non-function of type {ct!r}")
            return self.open(ct.codom, d.arg)
        if isinstance(d, Lam):
            return d.pi
        if isinstance(d, Var):
            return d.mut.pi.dom
        if isinstance(d, BVar):
            raise IRError("the type of an open term was asked for")
        raise IRError(f"no type for {type(d).__name__}")

    # ------------------------------------------------------------------ unions

    def join(self, members: Iterable[Def]) -> Def:
        """`T1 ∪ T2 ∪ …`: nested unions flattened, duplicates dropped, members ordered by
        identity (a union is a set); a union of one type is that type."""
        flat: list[Def] = []
        for m in members:
            flat.extend(m.ops if isinstance(m, Join) else (m,))
        unique = sorted({m.gid: m for m in flat}.values(), key=_structural_key)
        if len(unique) == 1:
            return unique[0]
        return self._hashcons(Join, builtins.tuple(unique), ())

    def inject(self, value: Def, union: Def) -> Def:
        return self._hashcons(Inject, (value, union), ())

    def match(self, scrutinee: Def, arms: Iterable[Def]) -> Def:
        """A match on a known injection is the matching arm applied to the injected value."""
        arms = builtins.tuple(arms)
        if scrutinee.bvd == 0 and not scrutinee.has_hole:
            # A scrutinee that is no longer of a union type (`t#i` once i became a literal):
            # the arm for its type.
            st = self.zonk(self.type_of(scrutinee))
            if not isinstance(st, Join):
                for arm in arms:
                    if isinstance(arm, Lam) and arm.pi.dom is st:
                        return self.app(arm, scrutinee)
        if isinstance(scrutinee, Inject) and isinstance(scrutinee.ops[1], Join):
            members = scrutinee.ops[1].ops
            vt = self.type_of(scrutinee.value)
            if vt in members and len(arms) == len(members):
                return self.app(arms[members.index(vt)], scrutinee.value)
        return self._hashcons(Match, (scrutinee, *arms), ())

    def unfold(self, t: Def) -> Def:
        """A recursive definition (`rec N = … N …`) replaced by its body, as often as it heads
        `t`: where the structure of a type is needed (applying a value of that type)."""
        seen = 0
        while t in self.rec_defs and seen < 64:
            t = self.rec_defs[t]
            seen += 1
        return t

    def extract_type(self, tup_t: Def, tup: Def, index: Def) -> Def:
        tup_t = self.unfold(tup_t)
        if isinstance(tup_t, Sigma):
            if not isinstance(index, Lit):
                if tup_t.dependent:
                    raise IRError("a dependent sigma indexed by a non-literal")
                # As upstream: a heterogeneous tuple at a run-time index is one of its types.
                return self.join(self.shift(f, -1) for f in tup_t.ops)
            if index.value >= len(tup_t.ops):  # (the elaborator reports a written one, E-TYPE)
                raise IRError(f"index {index.value} past the {len(tup_t.ops)} elements of a sigma")
            return self.open(tup_t.ops[index.value], tup)
        if isinstance(tup_t, Arr):
            return self.open(tup_t.body, index)
        # arity 1: x#0_1 is x
        return tup_t

    def level(self, t: Def) -> int:
        """The universe level of the type `t` (0 for `*`-types). Remembered per closed node,
        and a body that does not use its binder is not opened: a chain of n arrows costs O(n)."""
        if t.closed and not t.has_hole:
            hit = self._levels.get(t.gid)
            if hit is None:
                hit = self._levels[t.gid] = self._level(t)
            return hit
        return self._level(t)

    def _under_binder(self, body: Def, binder_type: Def) -> int:
        if body.bvd == 0:
            return self.level(body)
        return self.level(self.open(body, self.param(binder_type)))

    def _level(self, t: Def) -> int:
        if isinstance(t, (NatT, IdxT)):
            return 0
        if isinstance(t, TypeU):
            return t.level + 1
        if isinstance(t, Pi):
            return max(self.level(t.dom), self._under_binder(t.codom, t.dom))
        if isinstance(t, Sigma):
            if not t.ops:
                return 0
            return max(self._under_binder(f, t) for f in t.ops)
        if isinstance(t, Arr):
            return self._under_binder(t.body, self.index_type(t.shape))
        if isinstance(t, Bot) or isinstance(t, Top):
            tt = t.ops[0]
            return tt.level if isinstance(tt, TypeU) else 0
        tt = self.zonk(self.type_of(t))
        if isinstance(tt, TypeU):
            return tt.level
        return 0

    def index_type(self, shape: Def) -> Def:
        """The type of the indices of an array of this shape: `Idx n` for a Nat shape, the
        multi-index `«i: r; Idx s#i»` for a shape `s: «r; Nat»`."""
        st = self.zonk(self.type_of(shape)) if shape.bvd == 0 else self._nat
        if st is self._nat or isinstance(st, Hole):
            return self.idx(shape)
        r = self.arity(st)
        assert r is not None
        return self.arr(r, self.idx(self.extract(self.shift(shape, 1), self.bvar(0))))

    def arity(self, t: Def) -> Def:
        """The number of elements of values of type `t` (a literal or symbolic Nat)."""
        if isinstance(t, Sigma):
            return self.lit_nat(len(t.ops))
        if isinstance(t, Arr):
            return t.shape
        return self.lit_nat(1)

    # ------------------------------------------------------------------ annexes

    def register_annex(self, name: str, value: Def, doc: str | None = None) -> None:
        self.annexes[name] = value
        if doc:
            self.annex_docs[name] = doc

    def annex(self, name: str) -> Def:
        hit = self.annexes.get(name)
        if hit is not None:
            return hit
        if self.import_annex is not None:
            # A World a phase rebuilt holds only the annexes the program reached; a normalizer
            # may make one it did not (`x - c` ↦ `x + (-c)` needs `core.wrap.add`).
            return self.import_annex(name)
        raise KeyError(name)

    def find_annex(self, name: str) -> builtins.tuple[World, Def] | None:
        """An annex of this World or of the Worlds it was rebuilt from (phases copy only what
        the program reaches)."""
        w: World | None = self
        while w is not None:
            hit = w.annexes.get(name)
            if hit is not None:
                return w, hit
            w = w.origin
        return None

    def register_normalizer(self, annex: str, arity: int, fn: Normalizer) -> None:
        self.normalizers[annex] = (arity, fn)


def _stated_range(index: Def) -> int | None:
    """n for a literal index of type `Idx n` with a literal n; None for any other (a variable, or
    a literal of `Idx ⊤` made by `core.idx_unsafe`, whose range is checked when it runs)."""
    if isinstance(index, Lit) and isinstance(index.ops[0], IdxT) and isinstance(index.ops[0].size, Lit):
        return index.ops[0].size.value
    return None
