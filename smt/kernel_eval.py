"""Symbolic execution of a continuation graph (a kernel's or main's), one path at a time.

The kernel verifier (`kernel_verify`) runs a kernel for ONE generic work-item whose ids,
arguments and loaded memory values are Z3 variables; every run follows one path of the CPS
graph, the `Explorer` of `smt.symbolic` choosing the side of each branch whose condition is
symbolic (and re-running for the other side). Integer operations get their meaning from
`smt.bv` (the independent bit-vector semantics the normalizer proofs use), so the kernel
verifier and the phase proofs agree on what `core` means.

Evaluation is demand-driven like the interpreter's (`interp/compile.py`): a body's jump is
evaluated operands first, so effects run in the order their memory tokens impose. A node is
computed once per activation of the mutables it depends on (`Scopes.deps`): entering a
continuation forgets exactly the nodes that depend on its parameter or on one nested in it,
which is what re-entering a loop header means.

`frames` holds one activation per mutable, the latest. A continuation passed to another
activation (an argument of a jump: the return continuation of a call) becomes a `Closure` that
names the activations whose parameters it uses; one that a later entry replaces (a recursive
call that returns, `ret r = f $ …` inside f) is kept, with what it computed and the state of
its loops, and jumping to the closure resumes it (`_resume`), as the interpreter's closure
holds its creator's frame.

What a model (device or host) adds are the axioms outside `core`: `handlers` maps an annex to a
function of the evaluator, the application and its evaluated arguments. An application of an
axiom that has no handler is `Unsupported`, named: the verifier then says `unknown`, never
`proved`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast

import z3

from verimim.diagnostics import Loc
from verimim.ir.defs import App, Arr, Axiom, Bot, Def, Extract, IdxT, Lam, Lit, MutLam, NatT, Pack, Param, Sigma, Top, Tuple, Var
from verimim.ir.analysis import is_var_path
from verimim.ir.schedule import Scopes, schedule
from verimim.ir.world import World
from verimim.layout import NVPTX64, layout_of, ptr_space
from verimim.printer import show
from verimim.smt import bv
from verimim.smt import z3_typed as z3t
from verimim.smt.symbolic import Explorer

DEFAULT_LOOP_BOUND = 16  # entries of one continuation per activation before the path is cut
MAX_STEPS = 4_096  # continuation entries on one path in all (nested loops multiply)
# Entries of one continuation per activation where the path decides nothing on an unknown value
# between them (a loop counting to a literal: one path however long), for a model that allows
# them (Evaluator.concrete_bound; the host model's): such a loop is followed to its end.
CONCRETE_LOOP_BOUND = 256


def _significant_bits(e: z3.BitVecRef, depth: int = 8) -> int:
    """An upper bound on the bits e's unsigned value needs, read off its shape (a literal, a
    zero-extension, sums, products, choices); its width where the shape does not say."""
    if z3.is_bv_value(e):
        return cast(z3.BitVecNumRef, e).as_long().bit_length()
    if depth == 0 or not z3.is_app(e):
        return e.size()
    kind, kids = e.decl().kind(), e.children()
    if kind == z3.Z3_OP_ZERO_EXT:
        return min(e.size(), _significant_bits(cast(z3.BitVecRef, kids[0]), depth - 1))
    if kind == z3.Z3_OP_ITE:
        return min(e.size(), max(_significant_bits(cast(z3.BitVecRef, k), depth - 1) for k in kids[1:]))
    if kind == z3.Z3_OP_EXTRACT:
        hi, lo = (cast(int, p) for p in e.params())
        return min(hi - lo + 1, max(0, _significant_bits(cast(z3.BitVecRef, kids[0]), depth - 1) - lo))
    if kind == z3.Z3_OP_CONCAT:  # (the high part first: leading zeros cost nothing)
        bits = 0
        for k in kids:
            part = cast(z3.BitVecRef, k)
            bits = bits + part.size() if bits else _significant_bits(part, depth - 1)
        return min(e.size(), bits)
    bits = [_significant_bits(cast(z3.BitVecRef, k), depth - 1) for k in kids]
    if kind == z3.Z3_OP_BADD:
        return min(e.size(), max(bits) + len(bits) - 1)
    if kind == z3.Z3_OP_BMUL:
        return min(e.size(), sum(bits))
    if kind in (z3.Z3_OP_BAND, z3.Z3_OP_BUDIV, z3.Z3_OP_BUDIV_I, z3.Z3_OP_BLSHR):
        return min(bits) if kind == z3.Z3_OP_BAND else bits[0]
    return e.size()


class Unsupported(Exception):
    """A construct the symbolic model does not encode (named in the message)."""


class LoopReentry(Exception):
    """A summarized loop header entered again from outside the loop: the summary does not
    cover that activation, so the summarized exploration is given up (unrolling stands)."""


# The statuses of a path cut before its end: a loop or a recursion past the unrolling bound, a
# recursive call the model does not follow (`Evaluator._resume`). A proof over such paths holds
# up to the cut only (`bounded`).
CUT_STATUSES = frozenset({"bound", "recursion"})


class _Stop(Exception):
    """Ends the current path early: `why` is "ub" (undefined behaviour: the run stops there, as
    the interpreter's would) or "bound" (a loop entered more often than the unrolling bound)."""

    def __init__(self, why: str, where: str = "") -> None:
        super().__init__(why)
        self.why = why
        self.where = where


@dataclass(frozen=True)
class Tok:
    """A memory token of address space `space`; `epoch` counts the barriers before it."""

    space: int
    epoch: int = 0


@dataclass(frozen=True)
class Ptr:
    """A pointer: the object it points into (a 32-bit id term) and a 64-bit byte offset."""

    space: int
    obj: z3.BitVecRef
    off: z3.BitVecRef
    label: str  # what the object is, for messages


@dataclass(frozen=True)
class Return:
    """The return continuation of the graph's entry (the kernel's `return`, main's)."""


RETURN = Return()
OBJ_BITS = 32
OFF_BITS = 64


@dataclass(frozen=True)
class Closure:
    """A continuation (or an immutable lambda) as a value another activation received: `acts`
    are the activations of the mutables whose parameters it uses (`Scopes.deps`), by serial
    number, as they were when it was passed. Jumping to it resumes them (`Evaluator._resume`)."""

    fn: MutLam | Lam
    acts: tuple[tuple[MutLam, int], ...]


@dataclass
class _Kept:
    """An activation a closure captured, for when a later entry of its mutable has replaced it:
    its parameter, the memo entries computed in it (each with the serials of every activation
    it depends on, `_tag`), and the loop-entry state of the mutables nested in it."""

    frame: Any
    memo: dict[int, tuple[Def, Any, tuple[tuple[int, int], ...]]] = field(default_factory=dict)
    entries: dict[int, int] = field(default_factory=dict)
    abstracted: frozenset[int] = frozenset()


@dataclass
class Activations:
    """Which activation of each mutable `Evaluator.frames` holds (a serial number, 0: none that
    can be resumed), and the activations closures captured (`_Kept`, by serial)."""

    current: dict[int, int] = field(default_factory=dict)
    kept: dict[int, _Kept] = field(default_factory=dict)
    count: int = 0

    def copy(self) -> Activations:
        """An independent copy (a loop body's exploration runs on from this path's state)."""
        kept = {s: _Kept(k.frame, dict(k.memo), dict(k.entries), k.abstracted) for s, k in self.kept.items()}
        return Activations(dict(self.current), kept, self.count)


def loc_of(d: Def | None) -> Loc | None:
    return d.loc if d is not None and d.loc is not None else None


def int_width(t: Def) -> int | None:
    """Bits of the bit-vector `smt.bv` holds a value of type t in (None: not an integer type).
    An `Idx ⊤:Nat` (an index into an array of unknown length, `core.idx_unsafe`'s) is held as
    its Nat, as the interpreter and the code generators hold it."""
    if _is_unsafe_index(t):
        return bv.NAT_BITS
    try:
        it = bv.int_type(t)
    except bv.NoSemantics:
        return None
    return bv.NAT_BITS if it is None else it.width


MAX_PACK_ELEMENTS = 4096  # an index-dependent pack the models expand element by element


def _index_count(d: Pack) -> int | None:
    """The length of `‹j: n; f j›` with a literal n up to MAX_PACK_ELEMENTS, else None."""
    n = d.shape.value if isinstance(d.shape, Lit) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n <= MAX_PACK_ELEMENTS else None


def _is_unsafe_index(t: Def) -> bool:
    return isinstance(t, IdxT) and isinstance(t.size, Top)


def size_of(t: Def, what: str) -> int:
    lay = layout_of(t, NVPTX64)
    if lay is None:
        raise Unsupported(f"{what} of a type without a known layout: `{show(t)}`")
    return lay.size


def field_offset(fields: tuple[Def, ...], k: int) -> int:
    """The C-struct offset of field k (layout.py's rule: each field aligned to its own alignment)."""
    off = 0
    for j, f in enumerate(fields):
        lay = layout_of(f, NVPTX64)
        if lay is None:
            raise Unsupported(f"a field without a known layout: `{show(f)}`")
        off = (off + lay.align - 1) // lay.align * lay.align
        if j == k:
            return off
        off += lay.size
    raise Unsupported("a field index past the end of a sigma")


def leaves(v: Any) -> list[z3.ExprRef]:
    """The Z3 terms a value consists of (a stored value, compared byte for byte by its leaves)."""
    if isinstance(v, tuple):
        return [x for e in v for x in leaves(e)]
    if isinstance(v, Ptr):
        return [v.obj, v.off]
    if isinstance(v, z3.ExprRef):
        return [v]
    return []


def as_ptr(v: Any, d: App, what: str) -> Ptr:
    if not isinstance(v, Ptr):
        raise Unsupported(f"{what} through a value that is not a known pointer: `{show(d)[:80]}`")
    return v


def type_args(v: Any) -> tuple[Any, ...]:
    """The components of an operation's first, type-level argument (`(T, a)` of `mem.load`,
    `(n, Ts, a)` of `mem.lea`): the IR tuple's operands, or, in a function generic in T (before
    lam_spec gives T), the components its activation computed — the type parameter's value (an
    IR type) and numbers as ints. (A handler read `.ops` of the latter, a Python tuple, and
    `check` stopped with E-INTERNAL on a generic helper's `mem.alloc (T, 0)`.)"""
    if isinstance(v, Def):
        return tuple(v.ops)
    if isinstance(v, tuple):
        return tuple(x.as_long() if isinstance(x, z3.BitVecNumRef) else x for x in v)
    raise Unsupported(f"a type argument the model holds as `{v!r:.60}`")


def number_of(x: Any) -> int | None:
    """A component of `type_args` that is a known number (an address space, a count)."""
    if isinstance(x, Lit) and isinstance(x.value, int):
        return x.value
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _lea_shape(ts: Any) -> tuple[Def | None, tuple[Def, ...] | None]:
    """What `mem.lea`'s Ts indexes: an array's element type, or a sigma's field types. Ts as a
    generic activation computed it is a Python tuple of types: n copies of one are an array."""
    if isinstance(ts, Pack):
        return ts.ops[1], None
    if isinstance(ts, Tuple):
        return None, ts.ops
    if isinstance(ts, tuple) and ts and all(isinstance(x, Def) for x in ts):
        return (ts[0], None) if len(ts) > 1 and all(x is ts[0] for x in ts) else (None, ts)
    return None, None


def lea(ev: Evaluator, d: App, a: list[Any]) -> Any:
    """`mem.lea @(n, Ts, a) (p, i)`: element i of an array (i · size) or field i of a sigma."""
    _n, ts, _sp = type_args(a[0])
    p, i = a[1]
    p = as_ptr(p, d, "an address computation")
    if not isinstance(i, z3.BitVecRef):
        raise Unsupported(f"an index that is not an integer: `{show(d)[:80]}`")
    elem_t, fields = _lea_shape(ts)
    if elem_t is not None:
        elem = size_of(elem_t, "an element")
        wide = z3.ZeroExt(OFF_BITS - i.size(), i) if i.size() < OFF_BITS else z3t.Extract(OFF_BITS - 1, 0, i)
        return Ptr(p.space, p.obj, p.off + wide * elem, p.label)
    if fields is not None:
        k = z3.simplify(i)
        if not z3t.is_bv_value(k):
            raise Unsupported("a field of a sigma chosen by a symbolic index")
        return Ptr(p.space, p.obj, p.off + field_offset(fields, k.as_long()), p.label)
    if number_of(_n) == 1:  # «1; T» is T itself: its only index is 0
        return Ptr(p.space, p.obj, p.off, p.label)
    raise Unsupported(f"an address computation into `{show(ts)[:60] if isinstance(ts, Def) else ts}`")


class _LazyEnv(dict):  # type: ignore[type-arg]
    """The `env` handed to `bv.encode_app`: every operand is looked up here, so it is evaluated
    by the evaluator (memoized, with effects) instead of being re-encoded recursively."""

    def __init__(self, ev: Evaluator) -> None:
        super().__init__()
        self.ev = ev

    def __contains__(self, d: object) -> bool:
        return True

    def __getitem__(self, d: Def) -> Any:
        return self.ev.eval(d)


@dataclass(frozen=True)
class Op:
    """A model's meaning of one axiom applied to `depth` curried arguments. A `control` op is
    the jump of a body (host `gpu.launch`) and returns the next (callee, argument)."""

    depth: int
    fn: Callable[["Evaluator", App, list[Any]], Any]
    control: bool = False


# What every model means by these: `mem.remem` only renames a memory token (mem.mim).
COMMON_OPS: dict[str, Op] = {"mem.remem": Op(2, lambda ev, d, a: a[1])}

# What a C function that takes or returns a pointer does to a model (`Evaluator.c_memory`):
# called with the call, the function's name and the pointers among its arguments; it returns
# the pointer the function returns (or None where it returns none), or raises Unsupported.
CMemory = Callable[["Evaluator", App, str, list["Ptr"]], "Ptr | None"]


@dataclass
class Evaluator:
    """One run (one path) of a graph. `handlers` give the model's axioms; an axiom handler may
    return `Jump(callee, arg)` when it is a control operation (host `gpu.launch`)."""

    explorer: Explorer
    scopes: Scopes
    handlers: dict[str, Op]
    values: dict[str, Any] = field(default_factory=dict)  # value axioms (gpu.default_stream)
    loop_bound: int = DEFAULT_LOOP_BOUND
    # With a concrete bound (≥ loop_bound), an entry that follows the continuation's previous one
    # on the path without any decision on an unknown value in between (Explorer.
    # symbolic_decisions, which the explorer counts with `count_symbolic`) counts loop_bound /
    # concrete_bound of an entry: a loop the path fixes runs up to concrete_bound entries, one
    # that branches on unknowns up to loop_bound.
    concrete_bound: int | None = None
    memo: dict[int, tuple[Def, Any]] = field(default_factory=dict)
    frames: dict[int, Any] = field(default_factory=dict)  # by mutable: its current activation's parameter
    acts: Activations = field(default_factory=Activations)  # which activations `frames` holds, and kept ones
    entries: dict[int, int] = field(default_factory=dict)
    fresh_vars: list[z3.ExprRef] = field(default_factory=list)
    cut_at: str = ""  # the continuation whose unrolling bound cut the path
    cut_gid: int | None = None  # … its id, where the bound cut it
    # Loop summaries (`kernel_loops.LoopSummaries`): a loop header's first entry runs "any
    # iteration" under an inductive invariant; re-entering it ends the path ("loop").
    loops: Any = None
    abstracted: set[int] = field(default_factory=set)
    stop_at: int | None = None  # exploring a loop body: the header whose re-entry ends the path
    backedge: Any = None  # … and the parameter it was re-entered with
    steps: int = 0
    world: Any = None  # the World, to open immutable lambdas jumped to (None: not modelled)
    params: dict[int, Any] = field(default_factory=dict)  # placeholders of opened lambdas
    # The node of a lambda's body that an opened copy stands for: a barrier inside a `lam` is one
    # barrier operation however often, and with whatever argument, the lambda is entered.
    origin: dict[int, Def] = field(default_factory=dict)
    end_loc: Any = None  # a path that returned: the jump to the kernel's return continuation
    c_memory: CMemory | None = None  # None: a C function that reads or writes memory is not modelled
    _counter: int = 0
    _decisions_at_entry: dict[int, int] = field(default_factory=dict)  # by mutable (concrete_bound)

    # -------------------------------------------------------------- fresh values

    def fresh_bv(self, bits: int, hint: str) -> z3.BitVecRef:
        self._counter += 1
        v = z3.BitVec(f"{hint}!{self._counter}", bits)
        self.fresh_vars.append(v)
        return v

    def fresh(self, t: Def, hint: str) -> Any:
        """An unknown value of type t (memory contents: any value of the type)."""
        w = int_width(t)
        if w is not None:
            v = self.fresh_bv(w, hint)
            it = bv.int_type(t)
            if it is not None and not it.pow2:
                self.assume(z3.ULT(v, it.s))
            return v
        if isinstance(t, Sigma):
            return tuple(self.fresh(f, hint) for f in t.ops)
        if isinstance(t, Arr) and isinstance(t.shape, Lit) and t.body.closed and t.shape.value <= 4096:
            return tuple(self.fresh(t.body, hint) for _ in range(t.shape.value))
        space = ptr_space(t)
        if space is not None:
            return Ptr(space, self.fresh_bv(OBJ_BITS, hint + "_obj"),
                       self.fresh_bv(OFF_BITS, hint + "_off"), f"an object a loaded pointer ({hint}) points to")
        if isinstance(t, Axiom) and t.annex == "gpu.Stream":
            return ("stream", self.fresh_bv(64, hint))
        raise Unsupported(f"an unknown value of type `{show(t)}`")

    def stop(self) -> NoReturn:
        """End the path here: the run stops at undefined behaviour the caller found."""
        raise _Stop("ub")

    def assume(self, cond: z3.BoolRef) -> None:
        """Restrict the path to `cond`; where it may fail, the failing side is a path that
        stops (undefined behaviour)."""
        if not self.explorer.decide(cond):
            raise _Stop("ub")

    # -------------------------------------------------------------- running

    def run(self, entry: MutLam, arg: Any) -> str:
        """Run from `entry` bound to `arg` until the graph returns; "done", or why it stopped."""
        callee: Any = entry
        came_from: MutLam | None = None
        jumped: Def | None = None  # the last body run: where a path that returns, returns
        try:
            while True:
                if isinstance(callee, Return):
                    self.end_loc = jumped.loc if jumped is not None else None
                    return "done"
                if isinstance(callee, Closure):
                    self._resume(callee)
                    callee = callee.fn
                if isinstance(callee, Lam) and self.world is not None:
                    # An immutable lambda (not recursive): its body opened with a placeholder
                    # for its parameter, which stands for the argument's value.
                    p = Param(callee.pi.dom, "lam")
                    self.params[p.gid] = arg
                    jumped = callee.body
                    opened = self.world.open(callee.body, p)
                    self._remember_origins(callee.body, opened)
                    callee, arg = self.jump(opened)
                    continue
                if not isinstance(callee, MutLam) or callee.body is None:
                    raise Unsupported(f"a jump to `{callee if not isinstance(callee, MutLam) else callee.name}`, "
                                      f"which has no body here")
                self.enter(callee, arg, came_from)
                came_from = callee
                jumped = callee.body
                # what two or more of the continuations this activation makes take from outside:
                # computed here, before the jump's operands, as the interpreter and the code
                # generators do (verimim.ir.schedule.Scopes.shared_needs); computed on demand in
                # the first continuation that ran, a store before a barrier ran after it
                for x in self.scopes.shared_needs(callee, _is_leaf):
                    self.eval(x)
                callee, arg = self.jump(callee.body)
        except _Stop as s:
            self.cut_at = s.where
            return s.why

    def _remember_origins(self, body: Def, opened: Def) -> None:
        """Pair the opened body's nodes with the lambda body's, in lockstep (they differ only
        where the parameter was), as far as their shapes agree; nested mutables are not opened."""
        todo, seen = [(body, opened)], set()
        while todo:
            a, b = todo.pop()
            if a.gid in seen or a is b or isinstance(a, MutLam):
                continue
            seen.add(a.gid)
            self.origin[b.gid] = self.origin.get(a.gid, a)
            if type(a) is type(b) and len(a.ops) == len(b.ops):
                todo.extend(zip(a.ops, b.ops))

    def program_point(self, d: Def) -> Def:
        """The node of the program `d` is (itself, or what an opened lambda body copied)."""
        return self.origin.get(d.gid, d)

    def enter(self, m: MutLam, arg: Any, came_from: MutLam | None = None) -> None:
        local = self.scopes.local_muts(m)
        # A back edge comes from inside the loop (a continuation nested in its header); any
        # other entry starts a new activation of m.
        back = came_from is not None and came_from in local
        first = self.entries.get(m.gid, 0) == 0
        arg = self._close(arg)
        if self._in_summarized(local) and self._returns_into(arg, local):
            # Exploring a loop body for its summary, a call that returns into the activation of
            # the loop it leaves (recursion): another activation of the loop would stop the path
            # at its back edge, before the summarized one's. Cut: no summary (kernel_loops).
            raise _Stop("recursion", m.name or "?")
        if self.stop_at is not None and m.gid != self.stop_at and self.loops is not None \
                and self.loops.left_loop(self, m, arg):
            raise _Stop("exit", m.name or "?")  # no back edge follows (LoopSummaries.left_loop)
        if self.stop_at == m.gid and not first:
            if not back:
                raise LoopReentry(m.name or "?")
            self.backedge = arg
            raise _Stop("backedge", m.name or "?")
        if m.gid in self.abstracted:
            if not back:  # a second activation the summary does not cover: no summary at all
                raise LoopReentry(m.name or "?")
            raise _Stop("loop", m.name or "?")
        if self.loops is not None and first and m.gid != self.stop_at and self.loops.is_header(m, self.scopes):
            h = self.loops.summarize(self, m, arg)
            if h is not None:
                arg = h
                self.abstracted.add(m.gid)
        weight, limit = self._entry_weight(m)
        n = self.entries.get(m.gid, 0) + weight
        self.steps += 1
        # (a recursive call counts as an entry too: the depth of a recursion is bounded as a loop's)
        if n > limit or self.steps > MAX_STEPS:
            self.cut_gid = m.gid
            raise _Stop("bound", m.name or "?")
        self.entries[m.gid] = n
        self._activate(m, arg)

    def _entry_weight(self, m: MutLam) -> tuple[int, int]:
        """(what this entry of m adds to its count, the count past which the path is cut)."""
        if self.concrete_bound is None:
            return 1, self.loop_bound
        decided = self.explorer.symbolic_decisions
        # (in units of 1 / (loop_bound · concrete_bound): a first entry counts as a fixed one, so
        # both limits are exact, loop_bound entries with decisions between them, concrete_bound
        # without)
        fixed = self.entries.get(m.gid, 0) == 0 or self._decisions_at_entry.get(m.gid) == decided
        self._decisions_at_entry[m.gid] = decided
        return (self.loop_bound if fixed else self.concrete_bound), self.loop_bound * self.concrete_bound

    # -------------------------------------------------------------- activations

    def _activate(self, m: MutLam, arg: Any, loops: bool = True) -> None:
        """Make `arg` the parameter of a new activation of m. The activations of m and of the
        mutables nested in it end: what they computed is forgotten (kept where a closure
        captured them) and, with `loops`, the loops nested in m start anew (their bound is per
        activation)."""
        local = self.scopes.local_muts(m)
        # (A curried application activates its outer lambda in the middle of a body, which may
        # be the inner continuation's own: that activation goes on.)
        self._leave(local, local if loops else frozenset({m}))
        if loops:
            self._restart_loops(m)
        self.acts.count += 1
        self.acts.current[m.gid] = self.acts.count
        self.frames[m.gid] = arg

    def _restart_loops(self, m: MutLam) -> None:
        """The loops nested in m start anew: no entries counted, no summary in force."""
        for x in self.scopes.local_muts(m):
            if x is not m:
                self.entries.pop(x.gid, None)
                self.abstracted.discard(x.gid)

    def _leave(self, local: frozenset[MutLam], ended: frozenset[MutLam]) -> None:
        """Forget what the current activations of `local` computed, and end those of `ended`:
        an activation a closure captured keeps the memo entries computed in it and, when it
        ends, the state of its loops (an ended one's serial is 0: it is no longer current)."""
        cur, kept = self.acts.current, self.acts.kept
        for x in ended:
            k = kept.get(cur.get(x.gid, 0))
            if k is not None:
                inner = [y.gid for y in self.scopes.local_muts(x) if y is not x]
                k.entries = {g: self.entries[g] for g in inner if g in self.entries}
                k.abstracted = frozenset(g for g in inner if g in self.abstracted)
        for gid, (d, v) in list(self.memo.items()):
            deps = self.scopes.deps(d)
            if deps.isdisjoint(local):
                continue
            del self.memo[gid]
            if kept:
                tag = self._tag(deps)
                for _, s in tag:
                    if s in kept:
                        kept[s].memo[gid] = (d, v, tag)
        for x in ended:
            cur[x.gid] = 0

    def _tag(self, muts: frozenset[MutLam]) -> tuple[tuple[int, int], ...]:
        """The activations a value computed from the parameters of `muts` was computed in."""
        return tuple((x.gid, self.acts.current.get(x.gid, 0)) for x in muts)

    def _close(self, v: Any) -> Any:
        """`v` (an argument passed to another activation) with each continuation or lambda in
        it that uses parameters of enclosing activations made a `Closure` of those."""
        if isinstance(v, tuple):
            out = tuple(self._close(x) for x in v)
            return v if all(a is b for a, b in zip(out, v)) else out
        if not isinstance(v, (MutLam, Lam)):
            return v
        muts = self.scopes.deps(v)
        if not muts:
            return v
        acts = tuple(sorted(self._tag(muts)))
        by_gid = {x.gid: x for x in muts}
        for gid, s in acts:
            if s and s not in self.acts.kept:
                self.acts.kept[s] = _Kept(self.frames[gid])
        return Closure(v, tuple((by_gid[gid], s) for gid, s in acts))

    def _in_summarized(self, local: frozenset[MutLam]) -> bool:
        """Whether a loop body is being explored for its summary and its header is in `local`."""
        return self.stop_at is not None and any(x.gid == self.stop_at for x in local)

    def _returns_into(self, arg: Any, local: frozenset[MutLam]) -> bool:
        """Whether a jump with `arg` may return into a current activation of one of `local`: a
        closure in it resumes one, or resumes another activation whose parameter holds one
        (a return continuation, through a mutual recursion), and so on."""
        cur, kept = self.acts.current, self.acts.kept
        todo, seen = [arg], set()
        while todo:
            v = todo.pop()
            if isinstance(v, tuple):
                todo.extend(v)
                continue
            for x, s in v.acts if isinstance(v, Closure) else ():
                if s == 0 or s in seen:
                    continue
                seen.add(s)
                if cur.get(x.gid, 0) == s and x in local:
                    return True
                todo.append(self.frames[x.gid] if cur.get(x.gid, 0) == s else kept[s].frame)
        return False

    def _resume(self, c: Closure) -> None:
        """Jumping to a closure: the activations it captured become current again, where later
        entries replaced them (a recursive call returning to its caller), with what they had
        computed and the state of their loops. An activation nobody kept cannot be resumed, nor,
        while a loop body is explored for its summary, one around the loop (the summarized
        activation would be left for one it does not cover): the path is cut ("recursion")."""
        cur = self.acts.current
        changed = [(x, s) for x, s in c.acts if cur.get(x.gid, 0) != s]
        if not changed:
            return
        kept = self.acts.kept
        local: frozenset[MutLam] = frozenset().union(*(self.scopes.local_muts(x) for x, _ in changed))
        if any(s not in kept for _, s in changed) or self._in_summarized(local):
            raise _Stop("recursion", c.fn.name or "?")
        self._leave(local, local)
        # The captured activations `_leave` ended, outer ones first: a nested activation's loop
        # state is its own, not the copy its creator's holds. (Serial 0: none to resume.)
        resumed = sorted((p for p in c.acts if p[0] in local and p[1] != 0),
                         key=lambda p: -len(self.scopes.local_muts(p[0])))
        for x, s in resumed:
            k = kept[s]  # (`_close` kept every activation a closure names)
            cur[x.gid] = s
            self.frames[x.gid] = k.frame
            self._restart_loops(x)
            self.entries.update(k.entries)
            self.abstracted |= k.abstracted
        self._recall([kept[s] for _, s in resumed])

    def _recall(self, resumed: list[_Kept]) -> None:
        """Back into the memo: what resumed activations computed, where every activation it
        was computed in is current again (an effect runs once, a loaded value stays the one
        loaded: recomputing them would run the effect again, in the wrong activation)."""
        cur = self.acts.current
        for k in resumed:
            for gid, (d, v, tag) in k.memo.items():
                if gid not in self.memo and all(cur.get(g, 0) == t for g, t in tag):
                    self.memo[gid] = (d, v)

    def jump(self, body: Def) -> tuple[Any, Any]:
        if not isinstance(body, App):
            raise Unsupported(f"a body that is not a jump: `{show(body)}`")
        head = body.head
        if isinstance(head, Axiom) and head.annex.startswith("c.") and body.depth == 1:
            return self._c_call(head, body)
        op = self.handlers.get(head.annex) if isinstance(head, Axiom) else None
        if op is not None and op.control and body.depth == op.depth:
            out = op.fn(self, body, [self._arg(a) for a in body.args()])
            assert isinstance(out, tuple) and len(out) == 2
            return out
        callee = self.eval(body.callee)
        return callee, self.eval(body.arg)

    def _arg(self, a: Def) -> Any:
        """An operand of an axiom: types stay IR nodes (the handler reads them), values are evaluated."""
        return self._type_value(a) if _is_type_level(a) else self.eval(a)

    def _type_value(self, t: Def) -> Def:
        """A type-level node with the values the current activations give the parameters it
        mentions, as the interpreter reads it (Machine.substitute): `«n; gpu.Stream»` inside
        `gpu.with_streams (2, f)` before lam_spec makes n a literal is `«2; gpu.Stream»`. A
        parameter whose value here is not one literal (a symbolic Nat) is not modelled."""
        if self.world is None or not self.scopes.deps(t):
            return t
        world, memo = self.world, {}

        def go(x: Def) -> Def:
            hit = memo.get(x.gid)
            if hit is not None:
                return hit
            if isinstance(x, MutLam) or x.bvd != 0 or not self.scopes.deps(x):
                res = x
            elif is_var_path(x):
                res = self._reified(x, world)
            else:
                res = x.rebuild(world, tuple(go(op) for op in x.ops))
            memo[x.gid] = res
            return res

        return go(t)

    def _reified(self, x: Def, world: World) -> Def:
        """The value of a parameter (or a component of one) as an IR node, for a type."""
        v = self.eval(x)
        if isinstance(v, Def):
            return v
        if isinstance(v, z3.BitVecRef) and not z3.is_bv_value(v):
            v = z3.simplify(v)  # (a constant built by operations on literals)
        if isinstance(v, z3.BitVecRef) and z3.is_bv_value(v):
            t = world.type_of(x)
            if isinstance(t, NatT) or (isinstance(t, IdxT) and isinstance(t.size, Lit)):
                return world.lit(t, cast(z3.BitVecNumRef, v).as_long())
        raise Unsupported(f"a type that depends on a value the model does not hold as one literal: "
                          f"`{show(x)[:60]}`")

    # -------------------------------------------------------------- values

    def eval(self, d: Def) -> Any:
        hit = self.memo.get(d.gid)
        if hit is not None:
            return hit[1]
        # The one body schedule (verimim.ir.schedule), as the interpreter and the code generators
        # run a body: operands first, left to right; what a node evaluates only on demand
        # (`_core`'s operands, a curried call) it asks `eval` for while it is computed.
        for x in schedule([d], lambda x: x.gid in self.memo, self._eager_operands):
            self.memo[x.gid] = (x, self._compute(x))
        return self.memo[d.gid][1]

    def _eager_operands(self, d: Def) -> list[Def]:
        """The operands `_compute` evaluates before anything else, in its order."""
        if isinstance(d, Tuple):
            return list(d.ops)
        if isinstance(d, Extract):
            return [d.tup] if isinstance(d.index, Lit) else [d.tup, d.index]
        if isinstance(d, Pack) and isinstance(d.shape, Lit) and d.body.closed:
            return [d.body]
        if isinstance(d, App) and isinstance(d.head, Axiom):
            op = self.handlers.get(d.head.annex) or COMMON_OPS.get(d.head.annex)
            if op is not None and not op.control and d.depth == op.depth:
                return [a for a in d.args() if not _is_type_level(a)]
        return []

    def _compute(self, d: Def) -> Any:
        if isinstance(d, Lit):
            if int_width(d.ops[0]) is None:
                raise Unsupported(f"a literal of type `{show(d.ops[0])}`")
            if _is_unsafe_index(d.ops[0]) and isinstance(d.value, int):
                return z3.BitVecVal(d.value, bv.NAT_BITS)
            return bv.literal(d).value
        if isinstance(d, Var):
            if d.mut.gid not in self.frames:
                raise Unsupported(f"the parameter of `{d.mut.name}` used outside its activation")
            return self.frames[d.mut.gid]
        if isinstance(d, (MutLam, Lam)):
            return d
        if isinstance(d, Bot):
            return self._bottom(d)
        if isinstance(d, Param) and d.gid in self.params:
            return self.params[d.gid]
        if isinstance(d, Tuple):
            return tuple(self.eval(x) for x in d.ops)
        if isinstance(d, Pack) and isinstance(d.shape, Lit) and d.body.closed:
            body = self.eval(d.body)
            return tuple(body for _ in range(d.shape.value))
        if isinstance(d, Pack) and self.world is not None and (n := _index_count(d)) is not None:
            # `‹j: n; f j›` (an array initialised from its indices): element j is the World's
            # extract at the literal j, which opens the body there
            return tuple(self.eval(self.world.extract(d, self.world.lit_idx(n, j))) for j in range(n))
        if isinstance(d, Extract):
            return self._extract(d)
        if isinstance(d, App) and isinstance(d.head, Axiom):
            annex = d.head.annex
            if annex.startswith("core.") and annex not in self.handlers:
                return self._core(d, annex)
            op = self.handlers.get(annex) or COMMON_OPS.get(annex)
            if op is None or op.control or d.depth != op.depth:
                raise Unsupported(f"the operation `{annex}`")
            return op.fn(self, d, [self._arg(a) for a in d.args()])
        if isinstance(d, App) and not isinstance(d.head, Axiom):
            curried = self._curried(d)
            if curried is not None:
                return curried
        if isinstance(d, Axiom):
            if d.annex in self.values:
                return self.values[d.annex]
            raise Unsupported(f"the value `{d.annex}`")
        if _is_type_level(d):
            return self._type_value(d)
        raise Unsupported(f"`{show(d)[:80]}`")

    def _bottom(self, d: Bot) -> Any:
        """`⊥:(mem.M k)` is the dummy memory a lowering passes where the callee's memory
        parameter is never used for an access (btensor's reducer on the device): a token of
        space k. Any other ⊥ is an undefined value, which the model does not hold."""
        t = d.ops[0] if d.ops else None
        if isinstance(t, App) and isinstance(t.head, Axiom) and t.head.annex == "mem.M" and isinstance(t.arg, Lit):
            return Tok(t.arg.value)
        raise Unsupported(f"`{show(d)[:80]}`")

    def _c_call(self, ax: Axiom, body: App) -> tuple[Any, Any]:
        """A call of a C function: what it returns is any value of its type and the path
        continues. One that takes no pointer (`putchar`, `println_i32`, …) touches no memory; one
        that reads or writes through a pointer (`printf`, `atoi`, `malloc`) is what the model's
        `c_memory` says, and not modelled without it."""
        from verimim.plug.c_lib import CPtr, PROTOS, c_name, split_cn

        name = c_name(ax) or ax.annex
        proto = PROTOS.get(name)
        parts = split_cn(ax.ops[0])
        touches = proto is not None and (isinstance(proto.ret, CPtr) or proto.variadic
                                         or any(isinstance(p, CPtr) for p in proto.params))
        if proto is None or parts is None or (touches and self.c_memory is None):
            raise Unsupported(f"the C function `{name}` (it reads or writes memory)")
        arg = self.eval(body.arg)
        flat: list[Any] = []
        stack = [arg]
        while stack:
            x = stack.pop()
            if isinstance(x, tuple):
                stack.extend(reversed(x))
            else:
                flat.append(x)
        toks = [x for x in flat if isinstance(x, Tok)]
        if not isinstance(arg, tuple) or not toks:
            raise Unsupported(f"the call of the C function `{name}`")
        returned = None
        if touches:
            assert self.c_memory is not None
            returned = self.c_memory(self, body, name, [x for x in flat[:-1] if isinstance(x, Ptr)])
        return arg[-1], self._c_result(parts[1], toks[0], name, returned)

    def _c_result(self, t: Def, tok: Tok, name: str, returned: Ptr | None = None) -> Any:
        if isinstance(t, App) and isinstance(t.head, Axiom) and t.head.annex == "mem.M":
            return tok
        if isinstance(t, Sigma):
            return tuple(self._c_result(f, tok, name, returned) for f in t.ops)
        if returned is not None and ptr_space(t) is not None:
            return returned
        return self.fresh(t, f"{name}_result")

    def _curried(self, d: App) -> MutLam | None:
        """`join c` of a curried continuation `con join (c: T) (…)`: the outer `lam`'s whole
        body is the inner continuation, so the application is that continuation with the outer
        parameter bound to c (a new activation of the outer: values computed from its previous
        parameter are forgotten)."""
        f = self.eval(d.callee)
        if isinstance(f, Closure) and not any(self.acts.current.get(x.gid, 0) != s for x, s in f.acts):
            f = f.fn  # (a closure of activations still current: resuming them changes nothing)
        if not isinstance(f, MutLam) or not isinstance(f.body, MutLam) or isinstance(f.pi.codom, Bot):
            return None
        self._activate(f, self._close(self.eval(d.arg)), loops=False)
        return f.body

    def _core(self, d: App, annex: str) -> Any:
        if annex in ("core.trait.size", "core.trait.align"):
            return self._trait(d, annex)
        if annex == "core.idx_unsafe":  # the Nat, as an index of unknown range (int_width)
            return self.eval(d.arg)
        if annex == "core.bitcast" and d.depth == 3:
            moved = self._pointer_cast(d)
            if moved is not None:
                return moved
        try:
            enc = bv.encode_app(annex, [self._type_value(a) if _is_type_level(a) else a for a in d.args()],
                                _LazyEnv(self))
        except bv.NoSemantics as e:
            raise Unsupported(str(e)) from None
        except AssertionError:  # smt.bv's shape checks: an operand that is no integer here
            raise Unsupported(f"`{annex}` on operands the model does not hold as integers") from None
        ub = z3t.simplify(enc.ub)
        if not z3.is_false(ub):
            self.assume(z3t.Not(ub))
        if annex in ("core.nat.add", "core.nat.mul"):
            return self._nat_beyond(annex, enc.value, d)
        return enc.value

    def _nat_beyond(self, annex: str, exact: Any, d: App) -> Any:
        """A Nat sum or product where it may pass the bits smt.bv holds a Nat in (exact for one
        operation on operands below 2^64): there it is an unknown value of the path, as a
        value loaded from memory the model does not track. The interpreter's Nat has no bound:
        the model's wrapped value ((2^33·argc)^4 = 0) made a race look impossible."""
        pair = self.eval(d.args()[-1])
        if not (isinstance(exact, z3.BitVecRef) and isinstance(pair, tuple) and len(pair) == 2):
            return exact
        a, b = pair
        if not (isinstance(a, z3.BitVecRef) and isinstance(b, z3.BitVecRef)):
            return exact
        ka, kb = _significant_bits(a), _significant_bits(b)
        if (max(ka, kb) + 1 if annex == "core.nat.add" else ka + kb) <= exact.size():
            return exact  # (an index's Nat, a literal: it fits whatever the operands are)
        fits = z3.BVAddNoOverflow(a, b, False) if annex == "core.nat.add" else z3.BVMulNoOverflow(a, b, False)
        fits = z3t.simplify(cast(z3.BoolRef, fits))
        if z3.is_true(fits):
            return exact
        return z3t.If(fits, exact, self.fresh_bv(exact.size(), "nat_beyond_the_model"))

    def _trait(self, d: App, annex: str) -> z3.BitVecRef:
        """The size or alignment of the type an activation holds (`core.trait.size T` in a
        function generic in T, before lam_spec gives T; the normalizers fold those of known
        types): the layout's, the model's one (NVPTX64, whose sizes are the host's too)."""
        t = self.eval(d.arg)
        lay = layout_of(t, NVPTX64) if isinstance(t, Def) and t.closed and not t.has_param else None
        if lay is None:
            raise Unsupported(f"`{annex}` of a type without a known layout: `{show(d.arg)[:60]}`")
        return z3.BitVecVal(lay.size if annex == "core.trait.size" else lay.align, bv.NAT_BITS)

    def _pointer_cast(self, d: App) -> Ptr | None:
        """`core.bitcast` of a pointer to a pointer type of the same address space (a C
        string's `«⊤:Nat; I8»` view of an array): the same address."""
        _source, target, x = d.args()  # core.mim: {S: *} → [D: *] → S → D
        space = ptr_space(target)
        if space is None:
            return None
        p = self.eval(x)
        return p if isinstance(p, Ptr) and p.space == space else None

    def _extract(self, d: Extract) -> Any:
        tup = self.eval(d.tup)
        if isinstance(d.index, Lit):
            if not isinstance(tup, tuple) or not 0 <= d.index.value < len(tup):
                raise Unsupported(f"an extract the model's value has no element for: `{show(d)[:80]}`")
            return tup[d.index.value]
        idx = self.eval(d.index)
        if not isinstance(tup, tuple) or not isinstance(idx, z3.BitVecRef):
            raise Unsupported(f"an extract with index `{show(d.index)[:60]}`")
        elems = list(tup)
        if all(isinstance(e, z3.BitVecRef) for e in elems) and len({e.size() for e in elems}) == 1:
            out = elems[-1]
            for k in range(len(elems) - 2, -1, -1):
                out = z3.If(idx == k, elems[k], out)
            self.assume(z3.ULT(idx, len(elems)) if (1 << idx.size()) > len(elems) else z3.BoolVal(True))
            return out
        # Continuations (a branch) or structured values: one path per possible index.
        for k in range(len(elems) - 1):
            if self.explorer.decide(cast(z3.BoolRef, idx == k)):
                return elems[k]
        self.assume(cast(z3.BoolRef, idx == len(elems) - 1))
        return elems[-1]


def _is_leaf(d: Def) -> bool:
    """What no activation computes: a literal, an axiom, a type."""
    return isinstance(d, (Lit, Axiom)) or _is_type_level(d)


def _is_type_level(d: Def) -> bool:
    """Types and tuples of types (implicit arguments), which handlers read as IR."""
    if isinstance(d, (NatT, IdxT, Sigma, Arr)):
        return True
    if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex in ("mem.Ptr", "mem.M"):
        return True
    if isinstance(d, Axiom) and d.annex == "gpu.Stream":
        return True
    if isinstance(d, Pack) and _is_type_level(d.body):  # a tuple of types (‹n; gpu.Stream›)
        return True
    # (n, Ts, a) of `mem.lea`: sizes are literals or, for an array of unknown size, ⊤:Nat.
    if isinstance(d, (Tuple, Pack)) and d.ops and all(_is_type_level(x) or isinstance(x, (Lit, Top)) for x in d.ops) \
            and any(_is_type_level(x) for x in d.ops):
        return True
    from verimim.ir.defs import Pi, TypeU, Univ
    return isinstance(d, (Pi, TypeU, Univ))
