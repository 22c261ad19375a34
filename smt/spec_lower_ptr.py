"""The specification of `buffer.lower_ptr` (PHASES.md: every phase paired with a specification).

What the phase must achieve, stated from the memory model (SEMANTICS.md: arrays are packed,
`mem.lea` offsets a pointer by `i · size(element)`) and from the buffer plugin's meaning (a
`Buf (r, s, T)` is a host block holding the row-major array `«s; T»`), never from the phase's code:

1. Nothing of the buffer layer remains: no `buffer.*` axiom (type or operation) and no
   `gpu.buf_alloc_copy` / `gpu.buf_copy_to_host`.
2. A structural match of the two Worlds in which every node not involving buffers is unchanged
   and every rewritten spot is one of the allowed lowered patterns:
   - `Buf (r, s, T)`  ↦ `mem.Ptr (A, 0)` with `A` the nested array of `s`'s dimensions over `T`;
   - `alloc`          ↦ `mem.malloc (A, 0) (m, n)`, with `n = Π s#j · size(T)` (Z3);
   - `read`           ↦ `mem.load @(T, 0) (m, lea chain)`, `write` ↦ `(mem.store @(T, 0) (m, lea
     chain, v), b)`, where the chain starts at the buffer and, for every index within the
     shape, reaches byte offset `row_major(idx) · size(T)` with every lea index inside its
     `Idx n` (Z3, over symbolic indices);
   - `init` / `lit`   ↦ a malloc as for `alloc` whose block, straight after it, receives the
     array value / the pack `‹s; v›`;
   - `shape (b, i)`   ↦ `s#i`;  `copy` ↦ `mem.store (ld#0, dst, ld#1)` of `ld = mem.load (m, src)`;
   - `gpu.buf_alloc_copy` ↦ `gpu.alloc.block A` + `gpu.copy_to_device.block @A` of the buffer
     (the seed's `alloc_copy.block`), `gpu.buf_copy_to_host` ↦ `gpu.copy_to_host.block @A`.
   Since a `write` returns its own buffer and a `Buf` type becomes a pointer type that may
   already occur, two old nodes may share one new node exactly there (the buffer a write
   returns and the buffer it wrote; types that differ only in `Buf` versus its pointer).
3. Differential execution: the interpreter gives the same result, the same final host heap
   contents and the same warnings before and after (the interpreter gives buffers their
   lowered meaning directly, `verimim.plug.buffer_interp`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import z3
from verimim.phases.base import PhaseResult, Program, walk
from verimim.smt.match import Matcher, Mismatch, Pairs, app_parts
from verimim.smt.names import Namer
from verimim.smt.solver import Outcome, SpecContext, verdict_unsat_means_proved
from verimim.smt import reference
from verimim.smt import z3_typed as z3t
from verimim.smt.differential import compare
from verimim.smt.specs import spec

from verimim.ir.defs import App, Arr, Axiom, BVar, Def, Extract, Lit, MutLam, Pack, Sigma, Tuple, Var, mentions
from verimim.ir.schedule import postorder
from verimim.ir.world import World
from verimim.printer import show

BUFFER_GPU_OPS = ("gpu.buf_alloc_copy", "gpu.buf_copy_to_host")
PTR_COPY = "buffer.ptr_copy"  # what `buffer.copy` becomes: the one `buffer.` operation on pointers
# Operations whose lowering is a tuple: the old World reaches them through extracts, which the
# new World has folded into the tuple's components.
TUPLE_LOWERED = ("buffer.write", "buffer.init", "buffer.lit", "gpu.buf_alloc_copy")
OPS = ("buffer.alloc", "buffer.read", "buffer.write", "buffer.init", "buffer.lit", "buffer.shape",
       "buffer.copy", *BUFFER_GPU_OPS)

# A part of an old value: `(d, (j, k))` is `d#j#k`, which the old World may not hold as a node
# (the new World holds the extracts the lowering made of it).
Ref = tuple[Def, tuple[int, ...]]


class SpecLimit(Exception):
    """A correct lowering this specification cannot judge (reported as `unknown`)."""


@dataclass
class IndexObligation:
    op: App                       # the old read / write
    dims: list[Def]               # the old shape's dimensions
    elem: Def                     # the old element type
    comps: list[Ref]              # the old index, one part per dimension
    leas: list[tuple[Def, Def, Def]]  # (n, element type, index) of each new lea, outermost first


@dataclass
class SizeObligation:
    op: App
    dims: list[Def]
    elem: Def
    size: Def                     # the new malloc's size operand


@dataclass
class Obligations:
    index: list[IndexObligation] = field(default_factory=list)
    size: list[SizeObligation] = field(default_factory=list)


def _annex_app(d: Def, annex: str, depth: int) -> list[Def] | None:
    return app_parts(d, annex, depth)


def _lit(d: Def) -> int | None:
    return d.value if isinstance(d, Lit) else None


def _immutables(d: Def) -> list[Def]:
    """The nodes of d, not looking into mutables nor into axioms' declared types (every buffer
    operation's type mentions `Buf`; that says nothing of the node)."""
    out, stack, seen = [], [d], set()
    while stack:
        x = stack.pop()
        if x.gid in seen or isinstance(x, MutLam):
            continue
        seen.add(x.gid)
        out.append(x)
        if not isinstance(x, Axiom):
            stack.extend(x.ops)
    return out


def _inner(body: Def, w: World) -> Def | None:
    """The body of an array or pack level seen from outside it; None when it depends on the
    index (then it is no array of equal elements)."""
    if mentions(body, 0):
        return None
    return w.shift(body, -1) if body.bvd else body


def _what(d: Def) -> str:
    return d.head.annex if isinstance(d, App) and isinstance(d.head, Axiom) else type(d).__name__


def _dims(r: Def, s: Def) -> list[Def] | None:
    """The old shape's dimensions when the rank is a literal and the shape lists them."""
    rank = _lit(r)
    if rank is None:
        return None
    if rank == 1:
        return [s]
    if isinstance(s, Tuple) and len(s.ops) == rank:
        return list(s.ops)
    if isinstance(s, Pack) and _lit(s.shape) == rank and s.body.bvd == 0:
        return [s.body] * rank
    return None


class InLowering(Mismatch):
    """A mismatch inside the lowering of a buffer operation: located at that operation (a bare
    `3` or `tt` has only the location where the literal was first written)."""

    def __init__(self, old: Def, new: Def, why: str, op: Def) -> None:
        super().__init__(old, new, why)
        self.op = op

    def describe(self) -> str:
        where = f" at {self.op.loc}" if self.op.loc else ""
        return (f"the lowering of `{_what(self.op)}`{where} is not the allowed pattern: {self.why}: "
                f"`{show(self.old)[:100]}` became `{show(self.new)[:100]}`")


class LoweringMatcher(Matcher):
    """The Matcher of smt.match with the lowered patterns as its rule, merges allowed only where
    the lowering makes them (see the module doc), and the Z3 obligations of the matched spots."""

    def __init__(self, old: World, new: World) -> None:
        super().__init__(None)
        self.rule = self._rule  # type: ignore[assignment]
        self.old, self.new = old, new
        self.nodes: dict[int, Def] = {}          # old gid → old node (for merge diagnostics)
        self.new_nodes: dict[int, Def] = {}
        self.fresh: dict[tuple[int, str], int] = {}  # (old op, role) → the new node it must be
        self.ob = Obligations()
        self.resolved: set[int] = set()
        self.within: dict[tuple[int, int], Def] = {}  # pair → the lowered spot it lies in
        # Values computed from a `buffer.shape`, judged once everything else is matched (_folded)
        self.deferred: list[tuple[Def, Def, Def | None]] = []
        self._shape_uses: dict[int, bool] = {}

    # ------------------------------------------------------------------ matching

    def run(self, work: Pairs) -> Mismatch | None:
        while work:
            a, b = work.pop()
            within = self.within.get((a.gid, b.gid))
            mm = self._step(a, b, work, within)
            if mm is not None:
                if within is not None and within is not mm.old:
                    return InLowering(mm.old, mm.new, mm.why, within)
                return mm
        return None

    def _step(self, a: Def, b: Def, work: Pairs, within: Def | None) -> Mismatch | None:
        """One pair of the walk: check it, and push the pairs below it."""
        seen = self.pairs.get(a.gid)
        if seen is not None:
            if seen != b.gid:
                return Mismatch(a, b, f"one node became two different nodes (also `{show(self.new_nodes[seen])[:80]}`)")
            return None
        sub = self._rule(a, b)  # first: a wrong lowered pattern says more than a merge
        if isinstance(sub, Mismatch):
            return sub
        prev = self.back.get(b.gid)
        if prev is not None and prev != a.gid and not self._mergeable(a, self.nodes[prev]):
            return Mismatch(a, b, f"two nodes became one (also `{show(self.nodes[prev])[:80]}`)")
        self.pairs[a.gid] = b.gid
        self.back.setdefault(b.gid, a.gid)
        self.nodes[a.gid], self.new_nodes[b.gid] = a, b
        if sub is not None:
            self.rule_hits += 1
            is_op = isinstance(a, App) and isinstance(a.head, Axiom) and a.head.annex in OPS
            self._push(work, sub, a if is_op else within)
            return None
        if isinstance(a, MutLam) or isinstance(b, MutLam):
            if not (isinstance(a, MutLam) and isinstance(b, MutLam)):
                return Mismatch(a, b, "a continuation was replaced")
            if (a.body is None) != (b.body is None):
                return Mismatch(a, b, "a continuation lost or gained its body")
            work.append((a.pi, b.pi))  # a continuation is its own context
            if a.body is not None and b.body is not None:
                work.append((a.body, b.body))
            return None
        if self._uses_shape(a):
            # not a match yet (a parent's translation must not take it on trust): judged later
            del self.pairs[a.gid]
            if self.back.get(b.gid) == a.gid:
                del self.back[b.gid]
            self.deferred.append((a, b, within))
            return None
        return self._descend(a, b, work, within)

    def _descend(self, a: Def, b: Def, work: Pairs, within: Def | None) -> Mismatch | None:
        """The same node on both sides: its operands pair up (a commutative operation's literal
        may have moved first)."""
        if type(a) is not type(b) or a.extra() != b.extra() or len(a.ops) != len(b.ops):
            return Mismatch(a, b, "a node changed")
        swapped = _literal_moved_first(a, b)
        if swapped is not None:
            self._push(work, swapped, within)
            return None
        if not isinstance(a, Axiom):
            self._push(work, list(zip(a.ops, b.ops)), within)
        return None

    def _push(self, work: Pairs, pairs: Pairs, within: Def | None) -> None:
        work.extend(pairs)
        if within is not None:
            for x, y in pairs:
                self.within.setdefault((x.gid, y.gid), within)

    # ------------------------------------------------------------------ folded values

    def _uses_shape(self, d: Def) -> bool:
        """Whether d is computed from a `buffer.shape` (not looking into mutables nor axioms'
        types), memoised per node: the match asks it of every node it reaches."""
        memo = self._shape_uses
        for x in postorder(d, lambda y: y.gid in memo or isinstance(y, MutLam),
                           lambda y: () if isinstance(y, Axiom) else y.ops):
            memo[x.gid] = _annex_app(x, "buffer.shape", 2) is not None or any(
                memo.get(op.gid, False) for op in (() if isinstance(x, Axiom) else x.ops))
        return memo.get(d.gid, False)

    def _folded(self, a: Def, b: Def, within: Def | None) -> Mismatch | None:
        """Once `buffer.shape` is `s#i`, the new World's normalizers may fold and reorder what
        uses it (`core.nat.mul (shape …, shape …)` becomes `6`; `x + shape …` becomes `1 + x`,
        reassociated through a sum): accept exactly the node the new World builds from `a` with
        each shape replaced by `s#i` and every other part by its match — judged after the rest
        of the Worlds is matched, so that those parts have their matches. Else `a` and `b` must
        be the same node, operand by operand."""
        seen = self.pairs.get(a.gid)
        if seen is not None:  # judged already (a value used twice)
            return None if seen == b.gid else Mismatch(a, b, "one node became two different nodes")
        try:
            same = self._translate(a, {}) is b
        except SpecLimit:
            same = False  # a part without a match: the operands are compared one by one
        self.pairs[a.gid] = b.gid
        self.back.setdefault(b.gid, a.gid)
        self.nodes[a.gid], self.new_nodes[b.gid] = a, b
        if same:
            return None
        work: Pairs = []
        mm = self._descend(a, b, work, within)
        return mm if mm is not None else self.run(work)

    def _translate(self, d: Def, memo: dict[int, Def]) -> Def:
        img = self.pairs.get(d.gid)
        if img is not None:
            return self.new_nodes[img]
        hit = memo.get(d.gid)
        if hit is not None:
            return hit
        w = self.new
        if isinstance(d, MutLam):
            raise SpecLimit(f"a folded value at {d.loc} uses a continuation not matched yet")
        if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == "buffer.shape" and d.depth == 2:
            r, s, _t, arg = self._parts(d)
            s2 = self._translate(s, memo)
            out = s2 if _lit(r) == 1 else w.extract(s2, w.extract_n(self._translate(arg, memo), 2, 1))
        elif isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == "buffer.Buf" and d.depth == 1:
            _r, s, t = self._rst(d.arg, d)
            ptr = self.new.annexes.get("mem.Ptr")
            if ptr is None:
                raise SpecLimit("the lowered World has no `mem.Ptr`")
            s2, t2 = self._translate(s, memo), self._translate(t, memo)
            out = w.app(ptr, w.tuple([w.arr(s2, w.shift(t2, 1)), w.lit_nat(0)]))
        elif isinstance(d, App) and isinstance(d.head, Axiom) and (d.head.annex in OPS or d.head.annex == "buffer.Buf"):
            raise SpecLimit(f"a folded value at {d.loc} uses `{d.head.annex}`")
        elif isinstance(d, Axiom):
            out = w.axiom(d.annex, self._translate(d.ops[0], memo))
        elif isinstance(d, Var):
            m = self._translate(d.mut, memo)
            assert isinstance(m, MutLam)
            out = w.var(m)
        elif isinstance(d, BVar):
            out = w.bvar(d.index)
        elif isinstance(d, Lit):
            out = w.lit(self._translate(d.ops[0], memo), d.value)
        else:
            out = d.rebuild(w, tuple(self._translate(op, memo) for op in d.ops))
        memo[d.gid] = out
        return out

    def match_all(self) -> Mismatch | None:
        """Match from the externals, then match the index expressions the Z3 obligations relate
        (which only the obligations tell apart), until nothing new is reached."""
        mm = self.match_worlds(self.old, self.new)
        while mm is None:
            work = self._index_pairs()
            if work:
                mm = self.run(work)
                continue
            if not self.deferred:
                return None
            a, b, within = self.deferred.pop(0)
            mm = self._folded(a, b, within)
        return mm

    def _mergeable(self, a: Def, b: Def) -> bool:
        """Two old nodes may become one new node where the lowering equates them: a buffer and
        the buffer a write of it returns; and nodes equal once each `Buf` is its pointer type
        and each `shape` its `s#i` (the types `[M 0, Buf (1, 4, I32)]` and
        `[M 0, mem.Ptr («4; I32», 0)]`; `buffer.shape (…) (b, 0_1)` and the literal `5`)."""
        if self._buffer_root(a) is self._buffer_root(b):
            return True
        if not any(_annex_app(x, "buffer.Buf", 1) is not None or _annex_app(x, "buffer.shape", 2) is not None
                   for d in (a, b) for x in _immutables(d)):
            return False
        try:
            return self._translate(a, {}) is self._translate(b, {})
        except SpecLimit:
            return False

    def _buffer_root(self, d: Def) -> Def:
        while isinstance(d, Extract) and _lit(d.index) == 1:
            parts = _annex_app(d.tup, "buffer.write", 2)
            if parts is None or not isinstance(parts[1], Tuple):
                break
            d = parts[1].ops[1]
        return d

    # ------------------------------------------------------------------ the rule

    def _rule(self, a: Def, b: Def) -> Pairs | Mismatch | None:
        if isinstance(a, App) and isinstance(a.head, Axiom):
            if a.head.annex == "buffer.Buf" and a.depth == 1:
                return self._buf_type(a, b)
            if a.head.annex in OPS and a.depth == 2:
                return self._op(a, b)
        if isinstance(a, Extract) and isinstance(a.index, Lit):
            tup = a.tup
            if isinstance(tup, App) and isinstance(tup.head, Axiom) and tup.head.annex in OPS and tup.depth == 2:
                if tup.head.annex in TUPLE_LOWERED:
                    return self._component(tup, a.index.value, b, a)
                # A result of an operation lowered to one application: judge the operation first.
                if not (isinstance(b, Extract) and _lit(b.index) == a.index.value):
                    return Mismatch(a, b, f"the result of `{tup.head.annex}` is not taken from its lowering")
                return [(tup, b.tup)]
        if isinstance(a, Sigma) and isinstance(b, Arr) and _lit(b.shape) == len(a.ops) and b.body.bvd <= 1:
            # Fields that became equal once `Buf` is a pointer: the new World made it an array.
            return [(f, b.body) for f in a.ops]
        return None

    def _buf_type(self, a: App, b: Def) -> Pairs | Mismatch:
        ptr = _annex_app(b, "mem.Ptr", 1)
        if ptr is None or not isinstance(ptr[0], Tuple) or len(ptr[0].ops) != 2 or _lit(ptr[0].ops[1]) != 0:
            return Mismatch(a, b, "a buffer type did not become `mem.Ptr («s; T», 0)`")
        r, s, t = self._rst(a.arg, a)
        return self._array(a, r, s, t, ptr[0].ops[0])

    def _rst(self, rst: Def, a: Def) -> tuple[Def, Def, Def]:
        if not (isinstance(rst, Tuple) and len(rst.ops) == 3):
            raise SpecLimit(f"the buffer's (r, s, T) at {a.loc} is not a tuple")
        r, s, t = rst.ops
        return r, s, t

    def _array(self, a: Def, r: Def, s: Def, t: Def, arr: Def) -> Pairs | Mismatch:
        """`arr` must be `«s; T»`: one array level per dimension (none for a dimension of 1)."""
        dims = _dims(r, s)
        if dims is None:
            # A shape known only as a whole: one array level over it.
            body = _inner(arr.body, self.new) if isinstance(arr, Arr) else None
            if not isinstance(arr, Arr) or body is None:
                return Mismatch(a, arr, "the pointee is not the array «s; T»")
            return [(s, arr.shape), (t, body)]
        pairs: Pairs = []
        cur = arr
        for d in dims:
            if _lit(d) == 1:
                continue
            if _lit(d) == 0:
                return pairs if isinstance(cur, Sigma) and not cur.ops else \
                    Mismatch(a, arr, "an empty buffer's pointee is not the unit type")
            body = _inner(cur.body, self.new) if isinstance(cur, Arr) else None
            if not isinstance(cur, Arr) or body is None:
                return Mismatch(a, arr, f"the pointee is not the array «s; T» (no array level for the "
                                        f"dimension `{show(d)}`)")
            pairs.append((d, cur.shape))
            cur = body
        pairs.append((t, cur))
        return pairs

    # ------------------------------------------------------------------ operations

    def _parts(self, a: App) -> tuple[Def, Def, Def, Def]:
        assert isinstance(a.callee, App)
        r, s, t = self._rst(a.callee.arg, a)
        return r, s, t, a.arg

    @staticmethod
    def _ref(arg: Def, k: int, n: int) -> Ref:
        return LoweringMatcher._sub((arg, ()), k, n)

    @staticmethod
    def _sub(ref: Ref, j: int, n: int) -> Ref:
        """Part j of n of `ref`; a tuple of equal parts is a pack (`(k, k)` is `‹2; k›`)."""
        d, path = ref
        if not path and isinstance(d, Tuple) and len(d.ops) == n:
            return d.ops[j], ()
        if not path and isinstance(d, Pack) and _lit(d.shape) == n and d.body.bvd == 0:
            return d.body, ()
        return d, (*path, j)

    def _pair_ref(self, ref: Ref, new: Def, a: Def) -> Pairs | Mismatch:
        """`new` must be the new World's counterpart of the old value `ref`."""
        d, path = ref
        for j in reversed(path):
            if not (isinstance(new, Extract) and _lit(new.index) == j):
                return Mismatch(a, new, f"an operand is not the lowered `{show(d)[:60]}#{j}`")
            new = new.tup
        return [(d, new)]

    def _op(self, a: App, b: Def) -> Pairs | Mismatch:
        annex = _what(a)
        if annex in TUPLE_LOWERED:
            # Used whole: the new World holds the tuple of the lowered components.
            n = 3 if annex == "gpu.buf_alloc_copy" else 2
            if not (isinstance(b, Tuple) and len(b.ops) == n):
                return Mismatch(a, b, f"`{annex}` did not become a tuple of its lowered results")
            pairs: Pairs = []
            for j, c in enumerate(b.ops):
                sub = self._component(a, j, c, a)
                if isinstance(sub, Mismatch):
                    return sub
                pairs += sub
            return pairs
        return getattr(self, "_" + annex.split(".")[1])(a, b)

    def _malloc(self, a: App, s: Def, t: Def, r: Def, mal: Def, m: Ref) -> Pairs | Mismatch:
        """`mal` must be `mem.malloc («s; T», 0) (m, size)` with `size` the array's size."""
        parts = _annex_app(mal, "mem.malloc", 2)
        if parts is None or not isinstance(parts[0], Tuple) or not isinstance(parts[1], Tuple):
            return Mismatch(a, mal, "a buffer's block is not a `mem.malloc`")
        (arr, space), (m2, size) = parts[0].ops, parts[1].ops
        if _lit(space) != 0:
            return Mismatch(a, mal, f"a buffer's block is allocated in address space {show(space)}, not 0")
        key = (a.gid, "malloc")
        first = key not in self.fresh
        if self.fresh.setdefault(key, mal.gid) != mal.gid:
            return Mismatch(a, mal, "the lowered results of one buffer operation use two different blocks")
        pairs = self._array(a, r, s, t, arr)
        if isinstance(pairs, Mismatch):
            return pairs
        dims = _dims(r, s)
        if dims is None:
            raise SpecLimit(f"the size of a buffer of symbolic shape at {a.loc}")
        if first:
            self.ob.size.append(SizeObligation(a, dims, t, size))
        m_pairs = self._pair_ref(m, m2, a)
        return m_pairs if isinstance(m_pairs, Mismatch) else pairs + m_pairs

    def _alloc(self, a: App, b: Def) -> Pairs | Mismatch:
        r, s, t, m = self._parts(a)
        return self._malloc(a, s, t, r, b, (m, ()))

    def _load_store(self, a: App, b: Def, annex: str, arity: int, what: str) -> tuple[Def, list[Def]] | Mismatch:
        parts = _annex_app(b, annex, 2)
        if parts is None or not isinstance(parts[0], Tuple) or len(parts[0].ops) != 2 \
                or not isinstance(parts[1], Tuple) or len(parts[1].ops) != arity:
            return Mismatch(a, b, f"{what} did not become a `{annex}`")
        if _lit(parts[0].ops[1]) != 0:
            return Mismatch(a, b, f"{what} became a `{annex}` outside address space 0")
        return parts[0].ops[0], list(parts[1].ops)

    def _read(self, a: App, b: Def) -> Pairs | Mismatch:
        r, s, t, arg = self._parts(a)
        got = self._load_store(a, b, "mem.load", 2, "`buffer.read`")
        if isinstance(got, Mismatch):
            return got
        t2, (m2, p) = got
        chain = self._chain(a, r, s, t, self._ref(arg, 1, 3), self._ref(arg, 2, 3), p)
        m_pairs = self._pair_ref(self._ref(arg, 0, 3), m2, a)
        for x in (chain, m_pairs):
            if isinstance(x, Mismatch):
                return x
        return [(t, t2), *chain, *m_pairs]  # type: ignore[misc]

    def _store_through_chain(self, w: App, b: Def) -> Pairs | Mismatch:
        r, s, t, arg = self._parts(w)
        got = self._load_store(w, b, "mem.store", 3, "`buffer.write`")
        if isinstance(got, Mismatch):
            return got
        t2, (m2, p, v2) = got
        chain = self._chain(w, r, s, t, self._ref(arg, 1, 4), self._ref(arg, 2, 4), p)
        m_pairs = self._pair_ref(self._ref(arg, 0, 4), m2, w)
        v_pairs = self._pair_ref(self._ref(arg, 3, 4), v2, w)
        for x in (chain, m_pairs, v_pairs):
            if isinstance(x, Mismatch):
                return x
        return [(t, t2), *chain, *m_pairs, *v_pairs]  # type: ignore[misc]

    def _chain(self, a: App, r: Def, s: Def, t: Def, buf: Ref, idx: Ref, p: Def) -> Pairs | Mismatch:
        """`p` must be a lea chain from the buffer reaching the element `idx` (the offset is a
        Z3 obligation); the base and the array levels are matched here."""
        dims = _dims(r, s)
        if dims is None:
            raise SpecLimit(f"an access into a buffer of symbolic rank or shape at {a.loc}")
        leas: list[tuple[Def, Def, Def]] = []
        while (parts := _annex_app(p, "mem.lea", 2)) is not None:
            implicit, arg = parts
            if not (isinstance(implicit, Tuple) and len(implicit.ops) == 3 and isinstance(arg, Tuple)
                    and len(arg.ops) == 2):
                return Mismatch(a, p, "a `mem.lea` of the chain has unexpected operands")
            n, ts, space = implicit.ops
            if _lit(space) != 0:
                return Mismatch(a, p, "a `mem.lea` of the chain is outside address space 0")
            elem = _inner(ts.body, self.new) if isinstance(ts, Pack) and ts.shape is n else None
            if elem is None:
                return Mismatch(a, p, "a `mem.lea` of the chain does not step through an array")
            leas.append((n, elem, arg.ops[1]))
            p = arg.ops[0]
        leas.reverse()
        levels = [d for d in dims if _lit(d) != 1]
        if len(leas) != len(levels):
            return Mismatch(a, p, f"a chain of {len(leas)} `mem.lea` for a buffer of {len(levels)} array levels")
        rank = len(dims)
        comps = [self._sub(idx, j, rank) if rank > 1 else idx for j in range(rank)]
        self.ob.index.append(IndexObligation(a, dims, t, comps, leas))
        base = self._pair_ref(buf, p, a)
        if isinstance(base, Mismatch):
            return base
        return base + [(d, n) for d, (n, _, _) in zip(levels, leas)]

    def _shape(self, a: App, b: Def) -> Pairs | Mismatch:
        r, s, _t, arg = self._parts(a)
        if _lit(r) == 1:
            return [(s, b)]
        i = self._ref(arg, 1, 2)
        dims = _dims(r, s)
        if dims is not None and not i[1] and isinstance(i[0], Lit):
            return [(dims[i[0].value], b)]
        if not isinstance(b, Extract):
            return Mismatch(a, b, "`buffer.shape` did not become `s#i`")
        i_pairs = self._pair_ref(i, b.index, a)
        return i_pairs if isinstance(i_pairs, Mismatch) else [(s, b.tup), *i_pairs]

    def _copy(self, a: App, b: Def) -> Pairs | Mismatch:
        # `buffer.ptr_copy @«s; T» (m, dst, src)`: a copy of the bytes with their shadow (a
        # `mem.load` of the source would fault on a partly written one, where `copy` does not)
        r, s, t, arg = self._parts(a)
        parts = _annex_app(b, PTR_COPY, 2)
        if parts is None or not (isinstance(parts[1], Tuple) and len(parts[1].ops) == 3):
            return Mismatch(a, b, f"`buffer.copy` did not become `{PTR_COPY}` of the whole array")
        arr, (m, dst, src) = parts[0], parts[1].ops
        pairs = self._array(a, r, s, t, arr)
        if isinstance(pairs, Mismatch):
            return pairs
        for k, x in ((0, m), (1, dst), (2, src)):
            sub = self._pair_ref(self._ref(arg, k, 3), x, a)
            if isinstance(sub, Mismatch):
                return sub
            pairs += sub
        return pairs

    def _buf_copy_to_host(self, a: App, b: Def) -> Pairs | Mismatch:
        r, s, t, arg = self._parts(a)
        parts = _annex_app(b, "gpu.copy_to_host.block", 2)
        if parts is None or not (isinstance(parts[1], Tuple) and len(parts[1].ops) == 4):
            return Mismatch(a, b, "`gpu.buf_copy_to_host` did not become `gpu.copy_to_host.block`")
        pairs = self._array(a, r, s, t, parts[0])
        if isinstance(pairs, Mismatch):
            return pairs
        for k, x in enumerate(parts[1].ops):
            sub = self._pair_ref(self._ref(arg, k, 4), x, a)
            if isinstance(sub, Mismatch):
                return sub
            pairs += sub
        return pairs

    # ------------------------------------------------------------------ tuple-lowered components

    def _component(self, op: App, j: int, b: Def, at: Def) -> Pairs | Mismatch:
        annex = _what(op)
        r, s, t, arg = self._parts(op)
        if annex == "buffer.write":
            if j == 0:
                return self._store_through_chain(op, b)
            return self._pair_ref(self._ref(arg, 1, 4), b, at)  # the same buffer
        if annex in ("buffer.init", "buffer.lit"):
            return self._filled(op, annex, j, b, r, s, t, arg)
        return self._alloc_copy(op, j, b, r, s, t, arg)

    def _filled(self, op: App, annex: str, j: int, b: Def, r: Def, s: Def, t: Def, arg: Def) -> Pairs | Mismatch:
        """init / lit: component 1 is the fresh block, component 0 the store that fills it
        straight after the malloc."""
        m = self._ref(arg, 0, 2)
        if j == 1:
            if not (isinstance(b, Extract) and _lit(b.index) == 1):
                return Mismatch(op, b, f"`{annex}` does not yield the block it allocated")
            return self._malloc(op, s, t, r, b.tup, m)
        got = self._load_store(op, b, "mem.store", 3, f"`{annex}`")
        if isinstance(got, Mismatch):
            return got
        arr, (m2, p, v) = got
        if not (isinstance(m2, Extract) and isinstance(p, Extract) and m2.tup is p.tup
                and _lit(m2.index) == 0 and _lit(p.index) == 1):
            return Mismatch(op, b, f"`{annex}` does not store into its fresh block straight after allocating it")
        pairs = self._malloc(op, s, t, r, p.tup, m)
        if isinstance(pairs, Mismatch):
            return pairs
        if arr is not _annex_app(p.tup, "mem.malloc", 2)[0].ops[0]:  # type: ignore[index]
            return Mismatch(op, b, f"`{annex}` stores a value of another type than its block's")
        val = self._ref(arg, 1, 2)
        if annex == "buffer.init":
            sub = self._pair_ref(val, v, op)
        else:
            sub = self._pack(op, r, s, val, v)
        return sub if isinstance(sub, Mismatch) else pairs + sub

    def _pack(self, op: App, r: Def, s: Def, val: Ref, v: Def) -> Pairs | Mismatch:
        """`v` must be `‹s; val›`: one pack level per array level."""
        dims = _dims(r, s)
        if dims is None:
            raise SpecLimit(f"the value of a `buffer.lit` of symbolic shape at {op.loc}")
        pairs: Pairs = []
        for d in dims:
            if _lit(d) == 1:
                continue
            if _lit(d) == 0:
                return pairs
            body = _inner(v.body, self.new) if isinstance(v, Pack) else None
            if not isinstance(v, Pack) or body is None:
                return Mismatch(op, v, f"`buffer.lit` does not fill dimension `{show(d)}` with its value")
            pairs.append((d, v.shape))
            v = body
        sub = self._pair_ref(val, v, op)
        return sub if isinstance(sub, Mismatch) else pairs + sub

    def _alloc_copy(self, op: App, j: int, b: Def, r: Def, s: Def, t: Def, arg: Def) -> Pairs | Mismatch:
        """`gpu.buf_alloc_copy (m0, m1, b)`: `(ctd#0, ctd#1, ab#1)` with `ab = gpu.alloc.block A m1`
        and `ctd = gpu.copy_to_device.block @A (m0, ab#0, b, ab#1)`."""
        if not (isinstance(b, Extract) and _lit(b.index) == (1 if j == 2 else j)):
            return Mismatch(op, b, "`gpu.buf_alloc_copy` did not become an alloc and a copy to the device")
        if j == 2:
            return self._device_alloc(op, b.tup, r, s, t, arg)  # the device block
        ctd = b.tup
        parts = _annex_app(ctd, "gpu.copy_to_device.block", 2)
        if parts is None or not (isinstance(parts[1], Tuple) and len(parts[1].ops) == 4):
            return Mismatch(op, b, "`gpu.buf_alloc_copy` did not become `gpu.copy_to_device.block`")
        if self.fresh.setdefault((op.gid, "ctd"), ctd.gid) != ctd.gid:
            return Mismatch(op, b, "the lowered results of one `gpu.buf_alloc_copy` use two different copies")
        m0, m1_ab, host, dptr = parts[1].ops
        if not (isinstance(m1_ab, Extract) and isinstance(dptr, Extract) and m1_ab.tup is dptr.tup
                and _lit(m1_ab.index) == 0 and _lit(dptr.index) == 1):
            return Mismatch(op, b, "`gpu.buf_alloc_copy` does not copy into the block it allocated, "
                            "straight after allocating it")
        pairs = self._device_alloc(op, dptr.tup, r, s, t, arg)
        if isinstance(pairs, Mismatch):
            return pairs
        if parts[0] is not _annex_app(dptr.tup, "gpu.alloc.block", 2)[0]:  # type: ignore[index]
            return Mismatch(op, b, "`gpu.buf_alloc_copy` copies another type than it allocates")
        for k, x in ((0, m0), (2, host)):
            sub = self._pair_ref(self._ref(arg, k, 3), x, op)
            if isinstance(sub, Mismatch):
                return sub
            pairs += sub
        return pairs

    def _device_alloc(self, op: App, ab: Def, r: Def, s: Def, t: Def, arg: Def) -> Pairs | Mismatch:
        parts = _annex_app(ab, "gpu.alloc.block", 2)
        if parts is None:
            return Mismatch(op, ab, "`gpu.buf_alloc_copy` did not become `gpu.alloc.block`")
        if self.fresh.setdefault((op.gid, "ab"), ab.gid) != ab.gid:
            return Mismatch(op, ab, "`gpu.buf_alloc_copy` yields another device block than the one it filled")
        pairs = self._array(op, r, s, t, parts[0])
        if isinstance(pairs, Mismatch):
            return pairs
        sub = self._pair_ref(self._ref(arg, 1, 3), parts[1], op)
        return sub if isinstance(sub, Mismatch) else pairs + sub

    # ------------------------------------------------------------------ index correspondence

    def _image(self, ref: Ref, new: Def) -> bool:
        """Whether `new` is the counterpart of the old `ref` (by the match so far, else by
        structure): tells which new lea index stands for which old index part."""
        d, path = ref
        for j in reversed(path):
            if not (isinstance(new, Extract) and _lit(new.index) == j):
                return False
            new = new.tup
        return self._same(d, new, {})

    def _same(self, o: Def, n: Def, memo: dict[tuple[int, int], bool]) -> bool:
        img = self.pairs.get(o.gid)
        if img is not None:
            return img == n.gid
        key = (o.gid, n.gid)
        if key in memo:
            return memo[key]
        memo[key] = False
        ok = (not isinstance(o, MutLam) and not isinstance(n, MutLam) and type(o) is type(n)
              and o.extra() == n.extra() and len(o.ops) == len(n.ops)
              and (isinstance(o, Axiom) or all(self._same(x, y, memo) for x, y in zip(o.ops, n.ops))))
        memo[key] = ok
        return ok

    def index_of(self, ob: IndexObligation, k: int) -> int | None:
        """The old index part that the k-th new lea index stands for (None: none)."""
        i = ob.leas[k][2]
        for j, ref in enumerate(ob.comps):
            if not ref[1] and isinstance(ref[0], Lit):
                continue
            if self._image(ref, i):
                return j
        return None

    def _index_pairs(self) -> Pairs:
        work: Pairs = []
        for ob in self.ob.index:
            if id(ob) in self.resolved:
                continue
            self.resolved.add(id(ob))
            for k in range(len(ob.leas)):
                j = self.index_of(ob, k)
                if j is not None:
                    sub = self._pair_ref(ob.comps[j], ob.leas[k][2], ob.op)
                    if not isinstance(sub, Mismatch):
                        work += sub
        return work


# ============================================================================ Z3


class Terms:
    """Integer terms of Nat / Idx nodes: a literal is its value; an old node and the new node it
    matched are one unknown (so an unchanged index is the same value on both sides)."""

    def __init__(self, m: LoweringMatcher) -> None:
        self.m = m
        self.namer = Namer()

    def old(self, d: Def) -> z3.ArithRef:
        if isinstance(d, Lit):
            return z3.IntVal(d.value)
        img = self.m.pairs.get(d.gid)
        return z3.Int(f"v{img}") if img is not None else z3.Int(f"old{d.gid}[{self.namer.key(d)}]")

    def new(self, d: Def) -> z3.ArithRef:
        if isinstance(d, Lit):
            return z3.IntVal(d.value)
        return z3.Int(f"v{d.gid}")

    def size(self, d: Def) -> z3.ArithRef:
        """A malloc's size operand."""
        if isinstance(d, Lit):
            return z3.IntVal(d.value)
        parts = app_parts(d, "core.trait.size", 1)
        if parts is not None:
            return self.array_size(parts[0])
        return self.new(d)

    def array_size(self, t: Def) -> z3.ArithRef:
        """Arrays are packed: `size «n; E» = n · size E`."""
        lay = reference.abi_layout(t, "x86_64")
        if lay is not None and lay[0] is not None:
            return z3.IntVal(lay[0])
        if isinstance(t, Arr) and t.body.bvd == 0:
            return cast(z3.ArithRef, self.new(t.shape) * self.array_size(t.body))
        return reference.size_term(t, self.namer)


def _index_formula(ob: IndexObligation, m: LoweringMatcher, terms: Terms,
                   tag: str) -> tuple[z3.BoolRef, z3.BoolRef, dict[str, object]]:
    """(the index is inside the shape, the chain reaches its element through in-range leas, the
    terms a counterexample shows)."""
    xs: list[z3.ArithRef] = []
    for j, (d, path) in enumerate(ob.comps):
        if not path and isinstance(d, Lit):
            xs.append(z3.IntVal(d.value))
        else:  # one unknown per old value: `(k, k)` indexes the diagonal
            first = next(i for i, ref in enumerate(ob.comps) if ref[0] is d and ref[1] == path)
            xs.append(z3.Int(f"{tag}.idx{first}"))
    dims = [terms.old(d) for d in ob.dims]
    inside = z3t.And(*[z3t.And(0 <= x, x < n) for x, n in zip(xs, dims)], *[n >= 0 for n in dims])
    linear: z3.ArithRef = z3.IntVal(0)
    for x, n in zip(xs, dims):
        linear = cast(z3.ArithRef, linear * n + x)
    want = linear * reference.size_term(ob.elem, terms.namer)
    got: z3.ArithRef = z3.IntVal(0)
    in_range = []
    for k, (n, elem, i) in enumerate(ob.leas):
        part = m.index_of(ob, k)
        term = terms.new(i) if part is None else xs[part]
        got = cast(z3.ArithRef, got + term * terms.array_size(elem))
        in_range.append(z3.And(0 <= term, term < terms.new(n)))
    ok = z3t.And(want == got, *in_range)
    return inside, ok, {"index": xs, "offset before": want, "offset after": got}


def _z3_obligations(res: PhaseResult, ctx: SpecContext, matchers: list[LoweringMatcher]) -> Outcome | None:
    checks: list[tuple[App, z3.BoolRef, z3.BoolRef, dict[str, object]]] = []
    for mi, m in enumerate(matchers):
        terms = Terms(m)
        for k, ob in enumerate(m.ob.index):
            inside, ok, show_terms = _index_formula(ob, m, terms, f"w{mi}.op{k}")
            checks.append((ob.op, inside, ok, show_terms))
        for k, so in enumerate(m.ob.size):
            dims = [terms.old(d) for d in so.dims]
            want = reference.size_term(so.elem, terms.namer)
            for n in dims:
                want = want * n
            got = terms.size(so.size)
            checks.append((so.op, z3t.And(*[n >= 0 for n in dims]), cast(z3.BoolRef, want == got),
                           {"bytes wanted": want, "bytes allocated": got}))
    if not checks:
        return None
    s = ctx.solver()
    s.add(z3.Or(*[z3.And(inside, z3.Not(ok)) for _, inside, ok, _ in checks]))
    status, model = verdict_unsat_means_proved(ctx, s, f"{res.name}: {len(checks)} lowered buffer operations")
    if status == "unknown":
        return Outcome("unknown", f"Z3 gave no answer within {ctx.timeout_ms} ms")
    if status == "refuted":
        assert model is not None
        for op, inside, ok, shown in checks:
            if z3.is_true(model.eval(z3.And(inside, z3.Not(ok)), model_completion=True)):
                values = {k: _eval(model, v) for k, v in shown.items()}
                where = str(op.loc) if op.loc else "?"
                what = _what(op)
                return Outcome("refuted", f"the lowered `{what}` at {where} is not equivalent: "
                               + ", ".join(f"{k} {v}" for k, v in values.items()),
                               {"operation": what, "location": where, **values, "model": str(model)})
        return Outcome("refuted", "a lowered buffer operation is not equivalent", {"model": str(model)})
    return Outcome("proved", f"{len(checks)}")


def _eval(model: z3.ModelRef, v: object) -> object:
    if isinstance(v, list):
        return [_eval(model, x) for x in v]
    r = model.eval(v, model_completion=True)  # type: ignore[arg-type]
    return r.as_long() if z3t.is_int_value(r) else str(r)


# ============================================================================ the specification


def _remaining(p: Program) -> Axiom | None:
    for w in p.worlds():
        for d in walk(w):
            if isinstance(d, Axiom) and d.annex != PTR_COPY and (
                    d.annex.startswith("buffer.") or d.annex in BUFFER_GPU_OPS):
                return d
    return None


def _where(d: Def, p: Program) -> str:
    """Where a leftover buffer axiom is used (the axiom itself has no location)."""
    for w in p.worlds():
        for x in walk(w):
            if isinstance(x, App) and x.head is d and x.loc:
                return str(x.loc)
    return "?"


@spec("buffer.lower_ptr")
def spec_lower_ptr(res: PhaseResult, ctx: SpecContext) -> Outcome:
    left = _remaining(res.after)
    if left is not None:
        where = _where(left, res.after)
        return Outcome("refuted", f"`{left.annex}` remains after lowering (at {where})",
                       {"operation": left.annex, "location": where})
    matchers = []
    try:
        for old, new in zip(res.before.worlds(), res.after.worlds()):
            if old is new:
                continue
            m = LoweringMatcher(old, new)
            mm = m.match_all()
            if mm is not None:
                at = mm.op if isinstance(mm, InLowering) else mm.old
                return Outcome("refuted", mm.describe(), {"location": str(at.loc) if at.loc else "?",
                                                          "before": show(mm.old)[:300], "after": show(mm.new)[:300]})
            matchers.append(m)
    except SpecLimit as e:
        return Outcome("unknown", f"the specification cannot judge this lowering: {e}")
    z3_out = _z3_obligations(res, ctx, matchers)
    if z3_out is not None and z3_out.status != "proved":
        return z3_out
    # Buffers become memory operations: the effects differ by design, so the runs are compared
    # by result, warnings and the final host heap.
    diff, _ = compare(res, (["prog"],), effects=False)
    if diff is not None:
        return diff
    n = sum(len(m.ob.index) + len(m.ob.size) for m in matchers)
    hits = sum(m.rule_hits for m in matchers)
    return Outcome("proved", f"no buffer left; {hits} lowered spots match the allowed patterns, all else "
                   f"unchanged; {n} offset/size conditions proved; same execution before and after")


# Operations whose normal form puts a literal operand first (verimim.plug.core_rules): an operand
# that becomes a literal only after lowering (a `buffer.shape`) moves to the front.
COMMUTATIVE = frozenset({"core.wrap.add", "core.wrap.mul", "core.nat.add", "core.nat.mul",
                         "core.bit2.and_", "core.bit2.or_", "core.bit2.xor_", "core.icmp.e", "core.icmp.ne"})


def _literal_moved_first(a: Def, b: Def) -> list[tuple[Def, Def]] | None:
    """The operand pairs of `op (x, y)` and `op (c, z)` matched crosswise (x with z, y with c),
    for a commutative op where the new first operand is a literal and the old one is not."""
    if not (isinstance(a, App) and isinstance(b, App) and isinstance(a.head, Axiom)
            and a.head.annex in COMMUTATIVE and isinstance(b.head, Axiom) and b.head.annex == a.head.annex
            and a.depth == b.depth):
        return None
    x, y = a.arg, b.arg
    if not (isinstance(x, Tuple) and isinstance(y, Tuple) and len(x.ops) == 2 == len(y.ops)):
        return None
    if not isinstance(y.ops[0], Lit) or isinstance(x.ops[0], Lit):
        return None
    return [(a.callee, b.callee), (x.ops[0], y.ops[1]), (x.ops[1], y.ops[0])]
