"""The device side of the kernel verifier: one generic work-item of a kernel, path by path.

A kernel is run by `kernel_eval.Evaluator` with its group and item ids, its arguments and every
value it loads as Z3 variables. What a path records is what race and divergence checking needs
(`kernel_queries`): its condition, the accesses to global (1) and shared (3) memory — object,
byte offset, size, stored value, and the *epoch* (how many barriers the memory token passed
before it) — and the sequence of barriers it reached. Local memory (5) is private to a
work-item and constant memory (4) is read-only in kernels, so neither can race.

Objects: a static shared slot (`mem.slot`/`mem.mslot` in space 3) is one object per group,
named by its node and its id (as the interpreter keys it), the same on every path: a work-item
whose path allocates other slots first still gets the same block. Any other slot is a new block
each time it runs, as in the interpreter (a stack block: each activation of a recursive helper
has its own); the k-th run of a slot operation is one object on every path. The dynamic shared
block is one more; a pointer argument points into an object given by a variable (`obj_<arg>`,
tied to the host's allocation by `kernel_host`); a pointer loaded from memory points anywhere
(fresh variables), which is sound.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import z3

from verimim.diagnostics import Loc
from verimim.ir.defs import App, Arr, Axiom, Def, IdxT, Lit, MutLam, Pack, Sigma, Tuple
from verimim.ir.schedule import Scopes
from verimim.printer import show
from verimim.smt import bv
from verimim.smt import z3_typed as z3t
from verimim.smt.kernel_loops import LoopSummaries, path_facts
from verimim.smt.kernel_memory import CellMemory, concrete, value_bytes
from verimim.smt.kernel_eval import (
    OBJ_BITS, OFF_BITS, DEFAULT_LOOP_BOUND, Evaluator, Op, Ptr, RETURN, Tok, Unsupported, as_ptr, int_width, lea,
    leaves, loc_of, number_of, size_of, type_args,
)
from verimim.smt.symbolic import Explorer, SymbolicError

DYN_SHARED_OBJ = 1
FIRST_SLOT_OBJ = 2
MAX_PATHS = 256
# Seconds one kernel's exploration may take: past it, the kernel is not modelled (`unknown`,
# where a run may still show a defect) instead of `check` running for minutes.
EXPLORE_BUDGET_S = 20.0


@dataclass(frozen=True)
class Access:
    site: App
    write: bool
    space: int
    obj: z3.BitVecRef
    off: z3.BitVecRef
    size: int
    value: tuple[z3.ExprRef, ...]  # the stored value's leaves (empty for a read)
    epoch: int
    label: str
    # The path's condition when the access happens: paths that share a prefix share its
    # accesses, so a query pairs each access once, not once per path through it.
    cond: z3.BoolRef = z3.BoolVal(True)
    loaded: tuple[z3.ExprRef, ...] = ()  # a read's value (the fresh variables it gave the path)
    # A write's bytes (kernel_memory.value_bytes: what a benign race compares); None: not known
    data: tuple[Any, ...] | None = None

    @property
    def loc(self) -> Loc | None:
        return loc_of(self.site)


@dataclass(frozen=True)
class Barrier:
    site: Def  # the program's node (Evaluator.program_point)

    @property
    def loc(self) -> Loc | None:
        return loc_of(self.site)


@dataclass(frozen=True)
class KPath:
    condition: z3.BoolRef
    accesses: tuple[Access, ...]
    barriers: tuple[Barrier, ...]
    # "done" | "ub" (stops at undefined behaviour) | "bound" (cut by the unrolling bound) |
    # "loop" (one iteration of a summarized loop, ended at its back edge)
    status: str
    cut_at: str
    fresh: tuple[z3.ExprRef, ...]  # the path's memory values and loaded pointers (per work-item)
    end: Loc | None = None  # where a path that returned returns
    cut_gid: int | None = None  # the mutable whose entries past the bound cut the path ("bound")


@dataclass
class KernelInputs:
    """The symbolic inputs of one work-item, shared by its paths."""

    group: z3.BitVecRef
    item: z3.BitVecRef
    group_size: int  # the Idx size of the kernel's group_id type
    item_size: int
    args: Any  # the structured argument value (BVs, Ptrs, tuples)
    arg_names: list[str]
    arg_vars: list[z3.BitVecRef]  # the variables the arguments consist of (shared by all work-items)
    dyn_shared: bool


@dataclass
class KernelPaths:
    kernel: MutLam
    inputs: KernelInputs
    paths: list[KPath]
    bound: int
    feasibility_queries: int = 0
    invariants: dict[str, str] = field(default_factory=dict)  # summarized loop → its invariant

    def accesses(self) -> list[Access]:
        """Every access of every path, each once (equal site, epoch, condition and address)."""
        seen: dict[tuple[int, ...], Access] = {}
        for p in self.paths:
            for a in p.accesses:
                key = (a.site.gid, a.epoch, a.cond.get_id(), a.off.get_id(), a.obj.get_id(), int(a.write))
                seen.setdefault(key, a)
        return list(seen.values())


@dataclass
class _Trace:
    accesses: list[Access] = field(default_factory=list)
    barriers: list[Barrier] = field(default_factory=list)
    local: CellMemory = field(default_factory=CellMemory)  # the work-item's private memory (space 5)
    # the barriers the work-item has passed when an access runs: an access runs when it is
    # demanded, as in the interpreter, which may be after barriers its own token never passed
    # (a load whose token is dropped, its value used after the next barrier)
    passed: int = 0
    local_writes: int = 0  # stores to the work-item's private memory (a loop summary must see them)
    slot_runs: dict[tuple[int, int | None], int] = field(default_factory=dict)  # runs of each stack slot


def _space_of_type(t: Def) -> int | None:
    if isinstance(t, App) and isinstance(t.head, Axiom) and t.head.annex == "mem.Ptr":
        sp = t.arg.ops[1] if isinstance(t.arg, Tuple) else None
        return sp.value if isinstance(sp, Lit) else None
    return None


def _idx_size(t: Def, what: str) -> int:
    if isinstance(t, IdxT) and isinstance(t.size, Lit):
        return t.size.value
    raise Unsupported(f"a kernel whose {what} has type `{show(t)}`")


def kernel_inputs(kernel: MutLam) -> KernelInputs:
    dom = kernel.pi.dom
    if not isinstance(dom, Sigma) or len(dom.ops) != 9:
        raise Unsupported(f"a kernel `{kernel.name}` without the nine parameters of gpu.launch")
    names = list(kernel.param_names or ()) + [None] * 9
    gsize, isize = _idx_size(dom.ops[4], "group_id"), _idx_size(dom.ops[5], "item_id")
    g = z3.BitVec("group", max(1, (gsize - 1).bit_length()))
    i = z3.BitVec("item", max(1, (isize - 1).bit_length()))
    arg_vars: list[z3.BitVecRef] = []
    arg_names: list[str] = []

    def make(t: Def, name: str) -> Any:
        sp = _space_of_type(t)
        if sp is not None:
            obj, off = z3.BitVec(f"obj_{name}", OBJ_BITS), z3.BitVec(f"off_{name}", OFF_BITS)
            arg_vars.extend([obj, off])
            arg_names.extend([f"obj_{name}", f"off_{name}"])
            return Ptr(sp, obj, off, f"`{name}`")
        w = int_width(t)
        if w is not None:
            v = z3.BitVec(name, w)
            arg_vars.append(v)
            arg_names.append(name)
            return v
        if isinstance(t, Sigma):
            sub = t.names or ()
            return tuple(make(f, (sub[k] if k < len(sub) else None) or f"{name}_{k}") for k, f in enumerate(t.ops))
        if isinstance(t, Arr) and isinstance(t.shape, Lit) and t.body.closed and t.shape.value <= 64:
            return tuple(make(t.body, f"{name}_{k}") for k in range(t.shape.value))
        raise Unsupported(f"a kernel argument of type `{show(t)}`")

    args = make(dom.ops[7], names[7] or "arg")
    dyn = _space_of_type(dom.ops[6]) == 3
    return KernelInputs(g, i, gsize, isize, args, arg_names, arg_vars, dyn)


def _ranges(inp: KernelInputs) -> list[z3.BoolRef]:
    out = []
    for v, n in ((inp.group, inp.group_size), (inp.item, inp.item_size)):
        if (1 << v.size()) > n:
            out.append(z3.ULT(v, n))
    return out


# ------------------------------------------------------------------ the device's axioms


def _record(ev: Evaluator, tr: _Trace, d: App, tok: Any, p: Ptr, t: Def, value: Any, loaded: Any = None) -> None:
    if p.space not in (1, 3):
        return  # local memory is private, constant memory read-only
    epoch = max(tok.epoch if isinstance(tok, Tok) else 0, tr.passed)
    pc = path_facts(ev.explorer, decisions_only=True)
    tr.accesses.append(Access(d, value is not None, p.space, p.obj, p.off, size_of(t, "an access"),
                              tuple(leaves(value)) if value is not None else (), epoch, p.label,
                              z3t.And(*pc) if pc else z3.BoolVal(True),
                              tuple(leaves(loaded)) if loaded is not None else (),
                              value_bytes(t, value) if value is not None else None))


# A slot object's name: its node, its id, and which run of it on the path (0 for a static shared
# slot, one block per group however often it runs).
SlotKey = tuple[int, int | None, int]


def _slot_key(tr: _Trace, d: App, number: int | None, space: int) -> SlotKey:
    """The object a run of a slot operation allocates: a static shared slot's is the same each
    time (interp: one block per group, slot operation and id); any other's is new each time (a
    stack block: a recursive helper's activations have one each), counted along the path."""
    if space == 3:
        return (d.gid, number, 0)
    run = tr.slot_runs.get((d.gid, number), 0)
    tr.slot_runs[(d.gid, number)] = run + 1
    return (d.gid, number, run)


def _handlers(tr: _Trace, slots: dict[SlotKey, int]) -> dict[str, Op]:
    """The device's axioms, recording into `tr`; `slots` numbers the slot objects for every path
    of the kernel alike."""
    def load(ev: Evaluator, d: App, a: list[Any]) -> Any:
        (t, _sp), (m, p) = type_args(a[0]), a[1]
        p = as_ptr(p, d, "a load")
        if p.space == 5:
            _record(ev, tr, d, m, p, t, None)
            return (m, tr.local.load(ev, p, t, "local"))
        v = ev.fresh(t, "mem")
        _record(ev, tr, d, m, p, t, None, v)
        return (m, v)

    def store(ev: Evaluator, d: App, a: list[Any]) -> Any:
        (t, _sp), (m, p, v) = type_args(a[0]), a[1]
        p = as_ptr(p, d, "a store")
        _record(ev, tr, d, m, p, t, v)
        if p.space == 5:
            tr.local.store(p, t, v)
            tr.local_writes += 1
        return m

    def slot(ev: Evaluator, d: App, a: list[Any]) -> Any:
        _t, sp = type_args(a[0])
        m, slot_id = a[1][0], a[1][-1]  # (m, id) of mem.slot, (m, size, id) of mem.mslot
        space = number_of(sp)
        space = -1 if space is None else space
        # (one number on every path: a literal, or a term Z3 folds to one)
        number = slot_id if isinstance(slot_id, int) else \
            concrete(slot_id) if isinstance(slot_id, z3.BitVecRef) else None
        if space == 3 and number is None:
            # one block per id the work-items give it: which ones share one is not modelled
            raise Unsupported(f"a shared `mem.slot` whose id is not a constant at {loc_of(d) or show(d)[:40]}")
        key = _slot_key(tr, d, number, space)
        if key not in slots:
            slots[key] = FIRST_SLOT_OBJ + len(slots)
        # (a private slot, space 5, is an object of the work-item's own: no access to it is recorded)
        obj = z3.BitVecVal(slots[key], OBJ_BITS)
        return (m, Ptr(space, obj, z3.BitVecVal(0, OFF_BITS), f"the slot at {loc_of(d) or show(d)[:40]}"))

    def sync(ev: Evaluator, d: App, a: list[Any]) -> Any:
        m1, m3 = a[0]
        epoch = max(x.epoch for x in (m1, m3) if isinstance(x, Tok)) + 1
        tr.passed = max(tr.passed, epoch)
        tr.barriers.append(Barrier(ev.program_point(d)))
        return (Tok(1, epoch), Tok(3, epoch))

    return {"mem.load": Op(2, load), "mem.store": Op(2, store), "mem.slot": Op(2, slot),
            "mem.mslot": Op(2, slot), "mem.lea": Op(2, lea), "gpu.sync_work_items": Op(1, sync)}


def _scratch_handlers() -> tuple[dict[str, Op], Callable[[], bool]]:
    """Handlers recording into a trace of their own (a loop body's exploration), and whether
    that trace reached a barrier or wrote the work-item's local memory (either keeps the loop
    from being summarized)."""
    tr = _Trace()
    return _handlers(tr, {}), lambda: bool(tr.barriers) or tr.local_writes > 0


def explore_kernel(kernel: MutLam, timeout_ms: int, loop_bound: int = DEFAULT_LOOP_BOUND,
                   summarize_loops: bool = False, world: Any = None,
                   summarize_only: frozenset[int] | None = None,
                   assume: Callable[[KernelInputs], list[z3.BoolRef]] | None = None) -> KernelPaths:
    """Every path of one generic work-item of `kernel` (Unsupported for what it cannot model);
    with `summarize_loops`, loops run as "any iteration" under inferred invariants (with
    `summarize_only`, the loops headed by those mutables; the others are unrolled). `assume`:
    what one launch says about the work-item's ids and arguments — only the paths of that
    launch (a loop whose trip count the host bounds ends where the host's values make it)."""
    inp = kernel_inputs(kernel)
    explorer = Explorer(assumptions=_ranges(inp) + (assume(inp) if assume is not None else []),
                        timeout_ms=timeout_ms, max_paths=MAX_PATHS, budget_s=EXPLORE_BUDGET_S)
    scopes = Scopes(world)
    loops = LoopSummaries(_scratch_handlers, timeout_ms, only=summarize_only) if summarize_loops else None
    slots: dict[SlotKey, int] = {}  # one numbering for every path

    def one() -> KPath:
        tr = _Trace()
        ev = Evaluator(explorer, scopes, _handlers(tr, slots), loop_bound=loop_bound, loops=loops, world=world)
        smem: Any = Ptr(3, z3.BitVecVal(DYN_SHARED_OBJ, OBJ_BITS), z3.BitVecVal(0, OFF_BITS),
                        "the dynamic shared block") if inp.dyn_shared else ()
        arg = (Tok(1), Tok(3), Tok(4), Tok(5), inp.group, inp.item, smem, inp.args, RETURN)
        status = ev.run(kernel, arg)
        return KPath(z3.BoolVal(True), tuple(tr.accesses), tuple(tr.barriers), status, ev.cut_at,
                     tuple(ev.fresh_vars), ev.end_loc, ev.cut_gid)

    try:
        raw = explorer.run(one, stop_at_error=True)
    except SymbolicError as e:
        raise Unsupported(f"a kernel with {e}") from None
    paths = []
    for p in raw:
        if p.error is not None:
            raise Unsupported(f"{type(p.error).__name__}: {p.error}")
        assert p.outcome is not None
        o = p.outcome
        paths.append(KPath(p.condition(), o.accesses, o.barriers, o.status, o.cut_at, o.fresh, o.end, o.cut_gid))
    return KernelPaths(kernel, inp, paths, loop_bound, explorer.feasibility_queries,
                       dict(loops.notes) if loops is not None else {})


def int_value(model: z3.ModelRef, e: z3.ExprRef) -> int:
    v = model.eval(e, model_completion=True)
    return v.as_long() if z3t.is_bv_value(v) else 0


def signed(v: int, bits: int) -> int:
    return v - (1 << bits) if bits > 1 and v >= (1 << (bits - 1)) else v


__all__ = ["Access", "Barrier", "KPath", "KernelInputs", "KernelPaths", "explore_kernel", "bv"]
