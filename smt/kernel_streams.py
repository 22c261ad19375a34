"""Host-side races between streams (SEMANTICS.md "Streams"), for all of main's inputs.

main is run symbolically (`kernel_eval.Evaluator`, argc a variable, host loops unrolled, every
branch on argc followed) with a model of what is pending: an `.asyn` operation (on any stream,
the default one too) or a launch on a stream other than the default one stays pending until
`stream_sync` of its stream, a `.block` operation, a default-stream launch or `deinit`. Each operation that may overlap pending work of
another stream becomes a candidate, decided by Z3 afterwards on its host path:

- launch against pending launch: two work-items, one of each kernel (their own paths, ids and
  loaded values; arguments as the host computed them), accessing overlapping global bytes, one
  writing;
- launch against a pending copy (and copy against a pending launch): a work-item's global access
  overlapping the copy's device range, one of them writing;
- copy against pending copy, host access against a pending copy's host buffer: overlapping
  ranges, one writing.

Host memory is modelled by value (`kernel_memory.CellMemory`: the stream handles that
`stream_init` writes and main loads back, also through indices that are not constants). Stream
handles are compared as values: whether an operation's stream is the default one, or the one a
`stream_sync` completes, is decided on each path (the path branches where only its condition
decides it); a race candidate keeps "the streams differ" in its formula, decided by Z3.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import z3

from verimim.diagnostics import Loc
from verimim.ir.defs import App, Def, Lit, MutLam, Sigma
from verimim.ir.schedule import Scopes
from verimim.ir.world import World
from verimim.smt import z3_typed as z3t
from verimim.smt.kernel_eval import (
    CONCRETE_LOOP_BOUND, CUT_STATUSES, DEFAULT_LOOP_BOUND, OBJ_BITS, OFF_BITS, RETURN, Closure, Evaluator, Op, Ptr, Tok, Unsupported,
    as_ptr, lea, number_of, ptr_space, size_of, type_args,
)
from verimim.smt.kernel_host import op_loc
from verimim.smt.kernel_loops import path_facts
from verimim.smt.kernel_memory import CellMemory
from verimim.smt.kernel_model import EXPLORE_BUDGET_S, KernelPaths
from verimim.smt.kernel_queries import WorkItem, model_preferring, run_command, small_argc, work_item
from verimim.smt.symbolic import Explorer, SymbolicError

if TYPE_CHECKING:
    from verimim.interp.observe import Observation

DEFAULT_STREAM = ("stream", z3.BitVecVal(0, 64))
FIRST_OBJ = 0x10000  # argv; the program's allocations follow
ARGV_STRINGS = FIRST_OBJ - 1  # the strings argv points to: one object, none of the program's
STREAM_BYTES = 8  # layout.py: a gpu.Stream handle is pointer-sized
UNBOUNDED = 1 << 40  # bytes: to the end of any object


# ------------------------------------------------------------------ events


@dataclass(frozen=True)
class LaunchOp:
    site: App
    kernel: str
    stream: Any
    args: Any
    sizes: tuple[Any, Any]


@dataclass(frozen=True)
class CopyOp:
    """An asynchronous copy (or free): its ranges on the host (space 0) and the device (space 1)."""

    site: App
    what: str
    stream: Any
    ranges: tuple[tuple[Ptr, int, bool], ...]  # (start, size, writes)


def _known_object(p: Ptr) -> bool:
    """Whether p's object is known (an allocation, argv): a pointer of unknown provenance (loaded
    from memory the model forgot) is any object, so a conflict through it is only possible."""
    return z3.is_bv_value(z3.simplify(p.obj))


def _release(site: App, p: Ptr, what: str) -> "HostAccess":
    """A host free of p's block: a write of every byte of it (verimim.plug.mem_interp.release)."""
    start = Ptr(0, p.obj, z3.BitVecVal(0, OFF_BITS), p.label)
    return HostAccess(site, start, UNBOUNDED, True, exact=_known_object(p), what=what)


@dataclass(frozen=True)
class HostAccess:
    """A host access. Not `exact`: the access stays within `size` bytes from `ptr` but how many
    it makes is not known (a C string function's read), or which object `ptr` points into is
    not known; a conflict found for it is undecided (`unknown`), not a race."""

    site: App
    ptr: Ptr
    size: int
    write: bool
    exact: bool = True
    what: str = ""  # how a message names it ("" : a host load or store)


Event = LaunchOp | CopyOp | HostAccess


@dataclass(frozen=True)
class StreamMisuse:
    """An operation on a stream that `stream_deinit` ended: `E-STREAM` in `run`, which stops there."""

    site: App
    what: str  # the operation, as `run` names it
    ended: App  # the `stream_deinit` that ended the stream


@dataclass(frozen=True)
class Candidate:
    new: Event
    pending: LaunchOp | CopyOp
    streams_differ: z3.BoolRef


@dataclass
class _HostState:
    mem: CellMemory = field(default_factory=CellMemory)
    pending: list[LaunchOp | CopyOp] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    objects: int = 0
    handles: int = 0
    uses_streams: bool = False
    dead: list[tuple[Any, App]] = field(default_factory=list)  # the streams `stream_deinit` ended, and where
    misuse: StreamMisuse | None = None  # the operation on an ended stream that stopped the path
    # the launches issued, each with the path's branch decisions when it is issued
    launches: list[tuple[int, z3.BoolRef, LaunchOp]] = field(default_factory=list)

    def new_obj(self, space: int, d: App, what: str) -> Ptr:
        self.objects += 1
        where = f" at {d.loc}" if d.loc else ""
        return Ptr(space, z3.BitVecVal(FIRST_OBJ + self.objects, OBJ_BITS), z3.BitVecVal(0, OFF_BITS), f"{what}{where}")

    def against_pending(self, new: Event, stream: Any | None) -> None:
        """Candidates of `new` (on `stream`; None: the host) against the pending work of other streams."""
        for p in self.pending:
            differ = z3.BoolVal(True) if stream is None else z3t.Not(_stream_eq(stream, p.stream))
            if not z3.is_false(z3.simplify(differ)):
                self.candidates.append(Candidate(new, p, differ))


def _stream_eq(a: Any, b: Any) -> z3.BoolRef:
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) == 2:
        return a[1] == b[1]
    return z3.BoolVal(False)


def _same_stream(ev: Evaluator, a: Any, b: Any) -> bool:
    """Whether a and b are one stream on this path: where their values alone do not decide it
    (a stream loaded at an index only the path's condition fixes: `sa[argc >> 31]` is `sa[0]`
    for every argc ≥ 1), the path branches on it. (Taking such streams as different kept work
    pending after the `stream_sync` that completes it: a false E-RACE.)"""
    eq = _stream_eq(a, b)
    simple = z3.simplify(eq)
    if z3.is_true(simple) or z3.is_false(simple):
        return z3.is_true(simple)
    return ev.explorer.decide(eq)


def _is_default(ev: Evaluator, s: Any) -> bool:
    return _same_stream(ev, s, DEFAULT_STREAM)


# ------------------------------------------------------------------ the host's axioms


def _handlers(st: _HostState) -> dict[str, Op]:
    new_obj = st.new_obj

    against_pending = st.against_pending

    def complete_all() -> None:
        st.pending.clear()

    def live(ev: Evaluator, d: App, s: Any, what: str) -> None:
        """A stream operation on an ended stream is `E-STREAM` in `run`, which stops there: so
        does the path (nothing after it is issued, so nothing after it races), and the path
        records it (`check` reports it). Where the stream's value alone does not decide whether
        it is the ended one, the path branches."""
        if not st.dead or _is_default(ev, s):
            return
        for x, ended in st.dead:
            if ev.explorer.decide(_stream_eq(s, x)):  # (both sides where the values alone do not decide)
                st.misuse = StreamMisuse(d, what, ended)
                ev.stop()

    def init(ev: Evaluator, d: App, a: list[Any]) -> Any:
        return (a[0], Tok(1), Tok(4))

    def deinit(ev: Evaluator, d: App, a: list[Any]) -> Any:
        complete_all()
        return a[0][0]

    def alloc(ev: Evaluator, d: App, a: list[Any]) -> Any:
        _t, sp = type_args(a[0])
        m = a[1][0] if isinstance(a[1], tuple) else a[1]
        return (m, new_obj(number_of(sp) or 0, d, "the allocation"))

    def free(ev: Evaluator, d: App, a: list[Any]) -> Any:
        m, p = a[1]
        p = as_ptr(p, d, "a host free")
        if p.space == 0 and st.pending:
            against_pending(_release(d, p, "`mem.free` of a host buffer"), None)
        return m

    def host_access(ev: Evaluator, d: App, p: Ptr, t: Def, write: bool) -> None:
        if p.space == 0 and st.pending:
            against_pending(HostAccess(d, p, size_of(t, "an access"), write, exact=_known_object(p)), None)

    def load(ev: Evaluator, d: App, a: list[Any]) -> Any:
        (t, _sp), (m, p) = type_args(a[0]), a[1]
        p = as_ptr(p, d, "a host load")
        host_access(ev, d, p, t, False)
        return (m, st.mem.load(ev, p, t, "host"))

    def store(ev: Evaluator, d: App, a: list[Any]) -> Any:
        (t, _sp), (m, p, v) = type_args(a[0]), a[1]
        p = as_ptr(p, d, "a host store")
        host_access(ev, d, p, t, True)
        st.mem.store(p, t, v)
        return m

    def ptr_copy(ev: Evaluator, d: App, a: list[Any]) -> Any:
        # (buffer.lower_ptr's copy: a read of the whole source, a write of the whole target)
        t, (m, dst, src) = a[0], a[1]
        src, dst = as_ptr(src, d, "a host copy"), as_ptr(dst, d, "a host copy")
        host_access(ev, d, src, t, False)
        host_access(ev, d, dst, t, True)
        st.mem.store(dst, t, st.mem.load(ev, src, t, "host"))
        return m

    def gpu_alloc_block(ev: Evaluator, d: App, a: list[Any]) -> Any:
        complete_all()
        return (a[1], new_obj(1, d, "the device allocation"))

    def gpu_alloc_asyn(ev: Evaluator, d: App, a: list[Any]) -> Any:
        m1, s = a[1]
        live(ev, d, s, "gpu.alloc.asyn")
        p = new_obj(1, d, "the device allocation")
        # pending on its stream (the default one too), as a `gpu.free.asyn` is
        st.uses_streams = True
        whole = (Ptr(1, p.obj, z3.BitVecVal(0, OFF_BITS), p.label), UNBOUNDED, True)
        st.pending.append(CopyOp(d, "the allocation by `gpu.alloc.asyn`", s, (whole,)))
        return (m1, p)

    def gpu_free_block(ev: Evaluator, d: App, a: list[Any]) -> Any:
        complete_all()
        return a[1][0]

    def gpu_free_asyn(ev: Evaluator, d: App, a: list[Any]) -> Any:
        m1, p, s = a[1]
        live(ev, d, s, "gpu.free.asyn")
        p = as_ptr(p, d, "gpu.free.asyn")
        st.uses_streams = True
        op = CopyOp(d, "`gpu.free.asyn`", s, ((Ptr(1, p.obj, z3.BitVecVal(0, OFF_BITS), p.label), UNBOUNDED, True),))
        against_pending(op, s)
        st.pending.append(op)
        return m1

    def copy(to_device: bool, asyn: bool) -> Callable[[Evaluator, App, list[Any]], Any]:
        what = f"`gpu.copy_to_{'device' if to_device else 'host'}.{'asyn' if asyn else 'block'}`"

        def run(ev: Evaluator, d: App, a: list[Any]) -> Any:
            t = a[0]
            m0, m1, src, dst = a[1][:4]
            src, dst = as_ptr(src, d, what), as_ptr(dst, d, what)
            size = size_of(t, "a copy")
            if not to_device:  # the host buffer gets the device's bytes: unknown from here on
                st.mem.forget(dst)
            if not asyn:
                complete_all()
                return (m0, m1)
            s = a[1][4]
            live(ev, d, s, f"gpu.copy_to_{'device' if to_device else 'host'}.asyn")
            st.uses_streams = True
            op = CopyOp(d, what, s, ((src, size, False), (dst, size, True)))
            against_pending(op, s)
            st.pending.append(op)  # an `.asyn` copy is pending on any stream, the default one too
            return (m0, m1)
        return run

    def stream_init(ev: Evaluator, d: App, a: list[Any]) -> Any:
        m0, m1, p = a[0]
        p = as_ptr(p, d, "gpu.stream_init")
        st.handles += 1
        st.uses_streams = True
        # SEMANTICS.md: it writes the new handle through its pointer, a host store like any
        # other (a pending copy of that buffer conflicts with it)
        if p.space == 0 and st.pending:
            against_pending(HostAccess(d, p, STREAM_BYTES, True, exact=_known_object(p),
                                       what="the handle `gpu.stream_init` writes"), None)
        st.mem.store_cell(p, STREAM_BYTES, ("stream", z3.BitVecVal(st.handles, 64)))
        return (m0, m1)

    def stream_deinit(ev: Evaluator, d: App, a: list[Any]) -> Any:
        s = a[0][2]
        live(ev, d, s, "gpu.stream_deinit")
        if not _is_default(ev, s):
            st.dead.append((s, d))
        return a[0][:2]

    def stream_sync(ev: Evaluator, d: App, a: list[Any]) -> Any:
        m0, m1, s = a[0]
        live(ev, d, s, "gpu.stream_sync")
        st.pending = [p for p in st.pending if not _same_stream(ev, p.stream, s)]
        return (m0, m1)

    def launch(ev: Evaluator, d: App, a: list[Any]) -> Any:
        _imp, config, kernel, kargs, tail = a
        n_groups, n_items, s = config[0], config[1], config[2]
        mems, cont = tail
        fn = kernel.fn if isinstance(kernel, Closure) else kernel  # (one passed through a parameter)
        name = fn.name if isinstance(fn, MutLam) else "?"
        live(ev, d, s, "gpu.launch")
        op = LaunchOp(d, name or "?", s, kargs, (n_groups, n_items))
        # (by its program point: a launch in an immutable λ's body runs as an opened copy)
        st.launches.append((ev.program_point(d).gid, z3t.And(*path_facts(ev.explorer, decisions_only=True)), op))
        if _is_default(ev, s):
            complete_all()
        else:
            st.uses_streams = True
            against_pending(op, s)
            st.pending.append(op)
        return (cont, mems)

    return {
        "gpu.init": Op(1, init), "gpu.auto_init": Op(1, init), "gpu.deinit": Op(1, deinit),
        "gpu.auto_deinit": Op(1, deinit), "mem.alloc": Op(2, alloc), "mem.malloc": Op(2, alloc),
        "mem.slot": Op(2, alloc), "mem.mslot": Op(2, alloc), "mem.free": Op(2, free), "mem.load": Op(2, load),
        "mem.store": Op(2, store), "mem.lea": Op(2, lea), "buffer.ptr_copy": Op(2, ptr_copy),
        "gpu.alloc.block": Op(2, gpu_alloc_block),
        "gpu.alloc.asyn": Op(2, gpu_alloc_asyn), "gpu.free.block": Op(2, gpu_free_block),
        "gpu.free.asyn": Op(2, gpu_free_asyn),
        "gpu.copy_to_device.block": Op(2, copy(True, False)), "gpu.copy_to_device.asyn": Op(2, copy(True, True)),
        "gpu.copy_to_host.block": Op(2, copy(False, False)), "gpu.copy_to_host.asyn": Op(2, copy(False, True)),
        "gpu.stream_init": Op(1, stream_init), "gpu.stream_deinit": Op(1, stream_deinit),
        "gpu.stream_sync": Op(1, stream_sync), "gpu.launch": Op(5, launch, control=True),
    }


def _c_memory(st: _HostState) -> Callable[[Evaluator, App, str, list[Ptr]], Ptr | None]:
    """What a C function does to the host model. Every one verimim knows (`c_lib.PROTOS`) at
    most reads through its pointer arguments (`printf` has no `%n`, verimim.plug.c_format) or
    releases one (`free`, like `mem.free` a write of every byte of the block): so a read
    conflicts only with pending work that writes host memory it reads. How many
    bytes it reads is not known here: each pointer argument is a read of unknown extent from
    where it points (a conflict with it is undecided, `unknown`), and the first byte a string
    function reads is an exact read (a conflict with it is a race). A returned pointer
    (`malloc`) is a new object."""
    from verimim.plug.c_lib import PROTOS, CPtr

    def run(ev: Evaluator, d: App, name: str, pointers: list[Ptr]) -> Ptr | None:
        host = [p for p in pointers if p.space == 0]
        what = f"the call of the C function `{name}`"
        proto = PROTOS.get(name)
        if host and proto is not None and proto.reads_first_byte and host[0] is pointers[0]:
            st.against_pending(HostAccess(d, host[0], 1, False, exact=_known_object(host[0]), what=what), None)
        if host and proto is not None and proto.frees_first and host[0] is pointers[0]:
            st.against_pending(_release(d, host[0], what), None)
        for p in host:
            st.against_pending(HostAccess(d, p, UNBOUNDED, False, exact=False, what=what), None)
        if proto is not None and isinstance(proto.ret, CPtr):
            return st.new_obj(0, d, f"the memory `{name}` returns")
        return None
    return run


def _argv_cell(ev: Evaluator, t: Def, hint: str) -> Any:
    """A pointer argv holds (where the program wrote none) points into argv's strings."""
    if ptr_space(t) == 0:
        return Ptr(0, z3.BitVecVal(ARGV_STRINGS, OBJ_BITS), ev.fresh_bv(OFF_BITS, "argv_string"), "argv's strings")
    return None


@dataclass(frozen=True)
class HostPath:
    condition: z3.BoolRef
    candidates: tuple[Candidate, ...]
    status: str
    cut_at: str
    # (launch node, the decisions before it, what it launches with)
    launches: tuple[tuple[int, z3.BoolRef, LaunchOp], ...] = ()
    fresh: frozenset[str] = frozenset()  # the names of the unknown values the path made (memory)
    misuse: StreamMisuse | None = None  # the path stopped at an operation on an ended stream


@dataclass
class HostRun:
    paths: list[HostPath]
    uses_streams: bool
    argc: z3.BitVecRef

    def launch_reach(self) -> dict[int, z3.BoolRef] | None:
        """When each launch (by node) is issued: the disjunction of the branch decisions that
        lead to it on main's paths; a launch on no path is never issued (`False`, absent here).
        None where a path was cut by the loop bound: a launch past the cut would be missed."""
        if any(p.status in CUT_STATUSES for p in self.paths):
            return None
        conds: dict[int, list[z3.BoolRef]] = {}
        for p in self.paths:
            for gid, cond, _op in p.launches:
                conds.setdefault(gid, []).append(cond)
        return {gid: z3t.Or(*cs) for gid, cs in conds.items()}

    def launch_values(self, gid: int) -> list[tuple[z3.BoolRef, Any, tuple[Any, Any]]] | None:
        """Every time main issues the launch (by node) on one of its paths: the decisions before
        it, its arguments and its sizes as the path computes them. None where a path was cut (a
        launch past the cut would be missed) or main never issues it."""
        if any(p.status in CUT_STATUSES for p in self.paths):
            return None
        out = [(cond, op.args, op.sizes) for p in self.paths for g, cond, op in p.launches if g == gid]
        return out or None


def host_concrete_bound(loop_bound: int) -> int:
    """The host model's bound for a loop its path fixes (Evaluator.concrete_bound)."""
    return max(CONCRETE_LOOP_BOUND, loop_bound)


def host_paths(host: World, timeout_ms: int, loop_bound: int = DEFAULT_LOOP_BOUND) -> HostRun:
    main = host.externals.get("main")
    if not isinstance(main, MutLam) or main.body is None:
        raise Unsupported("a program without main")
    argc = z3.BitVec("argc", 32)
    explorer = Explorer(assumptions=[argc >= 1], timeout_ms=timeout_ms, max_paths=128, count_symbolic=True,
                        budget_s=EXPLORE_BUDGET_S)
    scopes = Scopes(host)
    uses = [False]

    def one() -> tuple[tuple[Candidate, ...], str, str, tuple[tuple[int, z3.BoolRef, LaunchOp], ...], frozenset[str],
                       StreamMisuse | None]:
        st = _HostState()
        st.mem.initial[FIRST_OBJ] = _argv_cell
        ev = Evaluator(explorer, scopes, _handlers(st), values={"gpu.default_stream": DEFAULT_STREAM},
                       loop_bound=loop_bound, concrete_bound=host_concrete_bound(loop_bound),
                       c_memory=_c_memory(st), world=host)
        # main's parameter is (its arguments, its return continuation), as the interpreter calls it.
        # (`con main (m0, argc, argv, return)` takes them flat).
        dom = main.pi.dom
        argv = Ptr(0, z3.BitVecVal(FIRST_OBJ, OBJ_BITS), z3.BitVecVal(0, OFF_BITS), "argv")
        if isinstance(dom, Sigma) and len(dom.ops) == 4:
            arg: Any = (Tok(0), argc, argv, RETURN)
        else:
            args_t = dom.ops[0] if isinstance(dom, Sigma) and len(dom.ops) == 2 else None
            with_args = isinstance(args_t, Sigma) and len(args_t.ops) == 3
            arg = ((Tok(0), argc, argv) if with_args else Tok(0), RETURN)
        status = ev.run(main, arg)
        uses[0] = uses[0] or st.uses_streams
        return (tuple(st.candidates), status, ev.cut_at, tuple(st.launches), frozenset(str(v) for v in ev.fresh_vars),
                st.misuse)

    try:
        raw = explorer.run(one, stop_at_error=True)
    except SymbolicError as e:
        raise Unsupported(f"main with {e}") from None
    out = []
    for p in raw:
        if p.error is not None:
            raise Unsupported(f"{type(p.error).__name__}: {p.error}")
        assert p.outcome is not None
        cands, status, cut, launches, fresh, misuse = p.outcome
        out.append(HostPath(p.condition(), cands, status, cut, launches, fresh, misuse))
    return HostRun(out, uses[0], argc)


# ------------------------------------------------------------------ conflicts as formulas


def _bind(kp: KernelPaths, k: int, args: Any, sizes: tuple[Any, Any]) -> tuple[WorkItem, list[z3.BoolRef]]:
    """Work-item k of a launch with the host's argument values substituted for the kernel's."""
    w = work_item(kp, k, kp.paths)
    pairs = list(w.subst)

    def walk(kv: Any, hv: Any) -> None:
        if isinstance(kv, Ptr) and isinstance(hv, Ptr):
            pairs.extend([(kv.obj, hv.obj), (kv.off, hv.off)])
        elif isinstance(kv, tuple) and isinstance(hv, tuple) and len(kv) == len(hv):
            for x, y in zip(kv, hv):
                walk(x, y)
        elif isinstance(kv, z3.BitVecRef) and isinstance(hv, z3.BitVecRef) and kv.sort() == hv.sort():
            pairs.append((kv, hv))

    walk(kp.inputs.args, args)
    w = WorkItem(w.group, w.item, tuple(pairs))
    facts: list[z3.BoolRef] = []
    for v, size, n in ((w.group, kp.inputs.group_size, sizes[0]), (w.item, kp.inputs.item_size, sizes[1])):
        if (1 << v.size()) > size:
            facts.append(z3.ULT(v, size))
        if isinstance(n, z3.BitVecRef) and n.size() >= v.size():
            facts.append(z3.ULT(z3.ZeroExt(n.size() - v.size(), v), n))
    return w, facts


def _ranges_overlap(p: Ptr, ps: int, q: Ptr, qs: int) -> z3.BoolRef:
    return z3t.And(p.space == q.space, p.obj == q.obj, z3.ULT(p.off, q.off + qs), z3.ULT(q.off, p.off + ps))


def _launch_ranges(kp: KernelPaths, w: WorkItem, other: Callable[[Ptr, int, bool], z3.BoolRef]) -> z3.BoolRef:
    terms = [z3t.And(w(a.cond), other(Ptr(1, w(a.obj), w(a.off), a.label), a.size, a.write))
             for a in kp.accesses() if a.space == 1]
    return z3t.Or(*terms) if terms else z3.BoolVal(False)


def conflict_formula(c: Candidate, kernels: dict[str, KernelPaths]) -> z3.BoolRef:
    """When candidate c is a real race (besides the host path's condition and the streams differing)."""
    new, old = c.new, c.pending

    def ranges_of(e: Event) -> list[tuple[Ptr, int, bool]]:
        if isinstance(e, CopyOp):
            return list(e.ranges)
        if isinstance(e, HostAccess):
            return [(e.ptr, e.size, e.write)]
        return []

    if isinstance(new, LaunchOp) and isinstance(old, LaunchOp):
        kn, ko = kernels[new.kernel], kernels[old.kernel]
        w1, f1 = _bind(kn, 1, new.args, new.sizes)
        w2, f2 = _bind(ko, 2, old.args, old.sizes)
        terms = [z3t.And(w1(a.cond), w2(b.cond), _ranges_overlap(Ptr(1, w1(a.obj), w1(a.off), ""), a.size,
                                                                 Ptr(1, w2(b.obj), w2(b.off), ""), b.size))
                 for a in kn.accesses() for b in ko.accesses()
                 if a.space == 1 and b.space == 1 and (a.write or b.write)]
        return z3t.And(*f1, *f2, z3t.Or(*terms)) if terms else z3.BoolVal(False)
    launch = new if isinstance(new, LaunchOp) else old if isinstance(old, LaunchOp) else None
    plain = old if launch is new else new
    if launch is not None:
        kp = kernels[launch.kernel]
        w, f = _bind(kp, 1, launch.args, launch.sizes)
        rs = ranges_of(plain)
        body = _launch_ranges(kp, w, lambda p, s, wr: z3t.Or(*[_ranges_overlap(p, s, q, qs) for q, qs, qw in rs
                                                                 if wr or qw] or [z3.BoolVal(False)]))
        return z3t.And(*f, body)
    pairs = [_ranges_overlap(p, ps, q, qs) for p, ps, pw in ranges_of(new) for q, qs, qw in ranges_of(old) if pw or qw]
    return z3t.Or(*pairs) if pairs else z3.BoolVal(False)


def site_loc(e: Event) -> Loc | None:
    """Where the program writes the operation (kernel_host.op_loc)."""
    return op_loc(e.site)


def _op_json(e: Event) -> dict[str, Any]:
    loc = site_loc(e)
    return {"operation": _describe(e), "line": loc.line if loc else None, "col": loc.col if loc else None}


# ------------------------------------------------------------------ verdicts


def _describe(e: Event) -> str:
    if isinstance(e, LaunchOp):
        return f"the launch of `{e.kernel}`"
    if isinstance(e, CopyOp):
        return e.what
    return e.what or f"a host {'store' if e.write else 'load'}"


def check_streams(program: Any, ctx: Any, file: str, kernels: dict[str, KernelPaths],
                  entries: dict[int, dict[str, Any]], diags: list[Any], loop_bound: int,
                  earlier: list[World] | None = None, main_run: "HostRun | str | None" = None,
                  runs: "dict[int, Observation] | None" = None,
                  summaries: "dict[str, KernelPaths | None] | None" = None) -> None:
    """Races between streams: an `E-RACE` per conflicting pair found, recorded in the launch's
    `kernels` entry; where main cannot be modelled and it uses streams, the entries say `unknown`.

    The host the pipeline produced is checked, and so is the earliest of the `earlier` hosts
    (the program before the phases, first to last) the model can read: a phase may add
    synchronisation (host_malloc2gpualloc turns a `mem.malloc` of device memory, which waits
    for nothing, into `gpu.alloc.block`, which waits for every stream), and a race of the
    program that the lowering hides is still the program's race, as `run` finds it. (The first
    World is often not readable yet: `gpu.with_streams` before specialisation.) There only
    host accesses and copies are decided: its launches carry the arguments they had before
    split_apply, which the device World's kernels need not take.

    A conflict Z3 finds only for values the model does not know (what a host buffer holds after
    a copy back from the device, what a pointer to an unknown object may have overwritten)
    stands where a run of the program shows it (`runs`: the runs made so far, by argc), else it
    is undecided (`unknown`), as the kernels' refutations are (smt.kernel_confirm).

    A kernel's unrolled paths (`kernels`) may be cut (a loop past the bound): what they show of
    its accesses is then only some of them. No conflict there is a proof only where the kernel's
    paths with loops summarized by their invariants (`summaries`, which cover every iteration)
    show none either; else the pair is decided up to the bound (`bounded`)."""
    t0 = __import__("time").perf_counter()
    runs = {} if runs is None else runs

    def confirm(c: Candidate, argc: int) -> int | None:
        return _shown_by_run(program, c, argc, runs)

    said: set[tuple[Any, Any]] = set()  # the pairs (by location) decided or reported
    by_gid: Callable[[Event], dict[str, Any] | None] = lambda op: entries.get(op.site.gid)
    run = main_run if main_run is not None else host_run(program.host, ctx, loop_bound)
    if isinstance(run, str):
        if mentions_streams(program.host):
            for entry in entries.values():
                if entry["races"] != "refuted":
                    entry["races"] = "unknown"
                entry["detail"] += f"; streams: the host code is not modelled ({run})"
            if not entries:
                _stream_note(diags, f"the host code is not modelled: {run}", None)
        return
    _decide(run, ctx, file, kernels, entries, by_gid, diags, said, confirm, summaries=summaries or {})
    _report_misuses(run, program, ctx, file, diags, runs)
    if any(p.status in CUT_STATUSES for p in run.paths) and (run.uses_streams or mentions_streams(program.host)):
        # (a path cut before its first stream operation still may have streams past the cut)
        recursion = any(p.status == "recursion" for p in run.paths)
        cut = f"host loops and recursive calls unrolled up to {loop_bound} entries per path " \
            f"(up to {host_concrete_bound(loop_bound)} where the path decides nothing on an unknown value " \
            f"between them)" + \
            ("; host paths cut where a recursion returns into an activation the model does not resume"
             if recursion else "")
        for entry in entries.values():
            if entry["races"] == "proved":
                entry["races"] = "bounded"
                entry["detail"] += f"; streams: {cut}"
        if not entries:
            _stream_note(diags, f"{cut}: what follows the cut is not decided", None, "bounded")
    before = next((r for w in (earlier or []) if mentions_streams(w)
                   and not isinstance(r := host_run(w, ctx, loop_bound), str)), None)
    if before is not None:  # no launch is decided there: no entry to find for one
        _decide(before, ctx, file, kernels, entries, lambda op: None, diags, said, confirm, host_only=True,
                summaries=summaries or {})
        _report_misuses(before, program, ctx, file, diags, runs)
    dt = __import__("time").perf_counter() - t0
    for entry in entries.values():
        entry["time_s"] = round(entry["time_s"] + dt / max(len(entries), 1), 4)


def host_run(host: World, ctx: Any, loop_bound: int) -> HostRun | str:
    """main's paths (`host_paths`), or why it is not modelled."""
    try:
        return host_paths(host, min(ctx.timeout_ms, 2_000), loop_bound)
    except (Unsupported, z3.Z3Exception) as e:
        return str(e)


def _pair_key(c: Candidate) -> tuple[Any, Any]:
    """A candidate's pair of operations by their source locations (the same in every World a
    phase makes) and what they are (the operations a seed helper issues share its call's
    position: `gpu.alloc_copy.asyn` allocates and copies), else by node."""
    def key(op: Event) -> Any:
        loc = site_loc(op)
        return (loc.line, loc.col, _describe(op)) if loc and loc.line else op.site.gid
    return (key(c.new), key(c.pending))


def _decide(run: HostRun, ctx: Any, file: str, kernels: dict[str, KernelPaths], entries: dict[int, dict[str, Any]],
            entry_of: Callable[[Event], dict[str, Any] | None], diags: list[Any], said: set[tuple[Any, Any]],
            confirm: Callable[[Candidate, int], int | None], host_only: bool = False,
            summaries: "dict[str, KernelPaths | None] | None" = None) -> None:
    """Each candidate of the host's paths decided by Z3: an E-RACE, undecided, or excluded.
    A conflict that rests on values the model does not know is an E-RACE only where `confirm`
    (a run) shows it, with the run's argc. `host_only`: only host accesses and copies (a World
    before split_apply launches kernels with the arguments they had then, which the device
    World's kernels need not take)."""
    from verimim.diagnostics import Diagnostic, Related
    from verimim.smt.kernel_model import int_value, signed

    told: set[tuple[tuple[Any, Any], str]] = set()  # undecided pairs, said once

    def tell(key: tuple[Any, Any], c: Candidate, why: str) -> None:
        if (key, why) not in told:
            told.add((key, why))
            _undecided(entries, c, why, entry_of, diags)

    def _report_race(c: Candidate, argc: int, key: tuple[Any, Any]) -> None:
        said.add(key)
        # The host is no stream: its access conflicts with work pending on the work's stream.
        where = "on its stream" if isinstance(c.new, HostAccess) else "on another stream"
        msg = (f"{_describe(c.new)} conflicts with {_describe(c.pending)}, still pending {where} "
               f"(no `gpu.stream_sync` in between)")
        diags.append(Diagnostic("E-RACE", msg, site_loc(c.new), "error",
                                (Related(f"{_describe(c.pending)}, pending", site_loc(c.pending)),)))
        cex = {"streams": [_op_json(op) for op in (c.new, c.pending)],
               "main_inputs": {"argc": argc},
               "run": run_command(file, argc)}
        for hit in _entries_of(c, entry_of):
            hit["races"] = "refuted"
            hit["counterexample"] = hit["counterexample"] or cex
            hit["detail"] += f"; streams: {msg}"

    for path in run.paths:
        for c in path.candidates:
            key = _pair_key(c)
            if key in said:
                continue
            names = [e.kernel for e in (c.new, c.pending) if isinstance(e, LaunchOp)]
            if host_only and names:
                continue
            unmodelled = [n for n in names if n not in kernels]
            if unmodelled:
                # That kernel is `unknown` already; a run may still show the pair racing (its
                # confirming runs look for faults in the kernel, not at the other operation).
                shown = confirm(c, 1)
                if shown is not None:
                    _report_race(c, shown, key)
                else:
                    tell(key, c, f"{_describe(c.new)} at {site_loc(c.new)} against {_describe(c.pending)} at "
                         f"{site_loc(c.pending)}: not decided (`{unmodelled[0]}` is not modelled), and no run "
                         f"shows a conflict")
                continue
            s = ctx.solver()
            conflict = conflict_formula(c, kernels)
            s.add(run.argc >= 1, path.condition, c.streams_differ, conflict)
            r = ctx.check(s, f"streams: {_describe(c.new)} at {site_loc(c.new)} against {_describe(c.pending)}")
            if r == z3.unsat:
                cut = _cut_kernels(names, kernels, summaries or {}, run, path, c, ctx)
                if not cut:
                    continue
                # Past the cut the kernel may still conflict: a run may show it (else `bounded`).
                shown = confirm(c, 1)
                if shown is None:
                    _bounded_pair(entries, c, f"{_describe(c.new)} at {site_loc(c.new)} against "
                                  f"{_describe(c.pending)} at {site_loc(c.pending)}: decided over the unrolled "
                                  f"paths of {', '.join(f'`{n}`' for n in cut)} only (loops cut at the bound), "
                                  f"and no run shows a conflict", entry_of, diags)
                    continue
                _report_race(c, shown, key)
                continue
            if r != z3.sat or (isinstance(c.new, HostAccess) and not c.new.exact):
                why = ("the solver gave no answer" if r != z3.sat else
                       f"{_describe(c.new)} at {site_loc(c.new)} may access what {_describe(c.pending)} at "
                       f"{site_loc(c.pending)} accesses (how many bytes it reads, or which object it "
                       f"reaches, is not known statically)")
                tell(key, c, why)
                continue
            model = model_preferring(ctx, s, small_argc(run.argc), "streams")
            argc = signed(int_value(model, run.argc), 32)
            if _rests_on_unknowns([path.condition, c.streams_differ, conflict], path.fresh, c, kernels):
                shown = confirm(c, argc)
                if shown is None:
                    why = (f"{_describe(c.new)} at {site_loc(c.new)} may conflict with {_describe(c.pending)} at "
                           f"{site_loc(c.pending)} for memory contents the host model does not track (a buffer "
                           f"copied back from the device, an object a store through an unknown pointer may "
                           f"have changed), and no run shows it: not refuted, not proved")
                    tell(key, c, why)
                    continue
                argc = shown
            _report_race(c, argc, key)


def _report_misuses(run: HostRun, program: Any, ctx: Any, file: str, diags: list[Any],
                    runs: "dict[int, Observation]") -> None:
    """An `E-STREAM` for each operation on an ended stream that a path of main reaches, once per
    place, as `run` reports it. The path stops there, so its condition says when it is reached;
    a run (the model's argc, then 1 and 2) must show it there, as it shows a race that rests on
    values the model does not know: a stream operation is rare, and a wrong E-STREAM would
    blame a valid program. Not shown, a note says it is not decided."""
    from verimim.diagnostics import Diagnostic, Related
    from verimim.smt.kernel_confirm import chain_keys
    from verimim.smt.kernel_model import int_value, signed

    for path in run.paths:
        m = path.misuse
        if m is None:
            continue
        loc = op_loc(m.site)
        if any(d.code == "E-STREAM" and d.loc == loc for d in diags):
            continue
        s = ctx.solver()
        s.add(run.argc >= 1, path.condition)
        what = f"`{m.what}` on a stream that is already deinitialised"
        if ctx.check(s, f"streams: {what} at {loc}") != z3.sat:
            continue  # (no input reaches it, or the solver gave no answer: nothing shown)
        model_argc = signed(int_value(model_preferring(ctx, s, small_argc(run.argc), "streams"), run.argc), 32)
        argc = _first_run_showing(program, "E-STREAM", chain_keys(m.site), model_argc, runs)
        if argc is None:  # (a note of its own: it is no verdict on races between streams)
            diags.append(Diagnostic("E-STREAM", f"{what} is possible for the host model (argc = {model_argc}), "
                                    f"and no run shows it: not reported", loc, "note"))
            continue
        related = [Related("deinitialised here", op_loc(m.ended))]
        command = run_command(file, argc)
        if command is not None:
            related.append(Related(f"reached when argc = {argc}: `{command}`", None))
        diags.append(Diagnostic("E-STREAM", what, loc, "error", tuple(related)))


def _rests_on_unknowns(terms: list[z3.ExprRef], host_fresh: frozenset[str], c: Candidate,
                       kernels: dict[str, KernelPaths]) -> bool:
    """Whether the conflict's formula mentions a value the models do not know: one the host's
    path made (a load of memory it does not track) or a kernel's path did (a value loaded from
    global memory), renamed per work-item (`name@k`)."""
    fresh = set(host_fresh)
    for op in (c.new, c.pending):
        if isinstance(op, LaunchOp) and op.kernel in kernels:
            fresh |= {str(v) for p in kernels[op.kernel].paths for v in p.fresh}
    if not fresh:
        return False
    return any(str(v).split("@")[0] in fresh for t in terms for v in z3t.free_vars(t))


def _shown_by_run(program: Any, c: Candidate, argc: int, runs: "dict[int, Observation]") -> int | None:
    """The argc of the first run (the counterexample's, then 1 and 2; schedule 0) that stops
    with E-RACE at one of the candidate's operations (a launch: any application of its chain,
    which a kernel's fault names as where it was launched), else None."""
    from verimim.smt.kernel_confirm import chain_keys

    return _first_run_showing(program, "E-RACE", chain_keys(c.new.site) | chain_keys(c.pending.site), argc, runs)


def _first_run_showing(program: Any, code: str, sites: set[tuple[int | None, int | None]], argc: int,
                       runs: "dict[int, Observation]") -> int | None:
    """The argc of the first run (`argc`, then 1 and 2; schedule 0) that stops with `code` at one
    of `sites` (places, as kernel_confirm.chain_keys gives them: the fault's or a related note's),
    else None."""
    from verimim.smt.kernel_confirm import candidate_argcs, run_with

    for n in candidate_argcs(argc):
        seen = run_with(program, n, runs)
        fault = seen.fault
        if seen.code != code or fault is None:
            continue
        locs = [getattr(fault, "loc", None), *(r.loc for r in getattr(fault, "related", ()))]
        if any(loc is not None and (loc.line, loc.col) in sites for loc in locs):
            return n
    return None


def _is_cut(kp: KernelPaths) -> bool:
    return any(p.status in CUT_STATUSES for p in kp.paths)


def _cut_kernels(names: list[str], kernels: dict[str, KernelPaths], summaries: "dict[str, KernelPaths | None]",
                 run: HostRun, path: Any, c: Candidate, ctx: Any) -> list[str]:
    """The kernels of a candidate with no conflict on their unrolled paths whose paths were cut
    and whose summaries (every iteration) do not exclude the conflict either ([]: excluded)."""
    cut = sorted({n for n in names if _is_cut(kernels[n])})
    if not cut:
        return []
    whole = dict(kernels)
    for n in cut:
        summary = summaries.get(n)
        if summary is None or _is_cut(summary):
            return cut
        whole[n] = summary
    s = ctx.solver()
    s.add(run.argc >= 1, path.condition, c.streams_differ, conflict_formula(c, whole))
    return [] if ctx.check(s, f"streams (loop invariants): {_describe(c.new)} against {_describe(c.pending)}") \
        == z3.unsat else cut


def _bounded_pair(entries: dict[int, dict[str, Any]], c: Candidate, why: str,
                  entry_of: Callable[[Event], dict[str, Any] | None], diags: list[Any]) -> None:
    """Candidate c excluded only up to the kernels' unrolling bound: each launch it involves
    that was `proved` is `bounded`, the detail says where (launch-less candidates have none)."""
    for op in (c.new, c.pending):
        entry = entry_of(op) if isinstance(op, LaunchOp) else None
        if entry is None:
            continue
        if entry["races"] == "proved":
            entry["races"] = "bounded"
        if why not in entry["detail"]:
            entry["detail"] += f"; streams: {why}"


def _entries_of(c: Candidate, entry_of: Callable[[Event], dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The verdict entries of the launches a candidate pair involves, each once: two launches of
    one kernel on two streams are one entry, whose detail says the conflict once."""
    hits = [entry_of(op) for op in (c.new, c.pending) if isinstance(op, LaunchOp)]
    return list({id(h): h for h in hits if h is not None}.values())


def _undecided(entries: dict[int, dict[str, Any]], c: Candidate, why: str,
               entry_of: Callable[[Event], dict[str, Any] | None], diags: list[Any]) -> None:
    """Candidate c neither refuted nor excluded: every launch it involves, and where it involves
    none (a host access against a pending copy) every launch, is `unknown` unless refuted. A
    program that launches nothing has no verdict entry to say so: a note says it instead."""
    hits = _entries_of(c, entry_of)
    if not hits and not entries:
        pair = f"{_describe(c.new)} against {_describe(c.pending)}"
        _stream_note(diags, why if _describe(c.new) in why else f"{pair}: {why}", site_loc(c.new))
        return
    for entry in hits or list(entries.values()):
        if entry["races"] != "refuted":
            entry["races"] = "unknown"
            entry["detail"] += f"; streams: {why}"


def _stream_note(diags: list[Any], why: str, loc: Any, status: str = "unknown") -> None:
    """An unsettled verdict on races between streams in a program without launches (so without
    `kernels` entries): a note, never an error — `unknown` is not a race found, and not a proof; nor is
    `bounded` (host paths cut: decided up to the cut only)."""
    from verimim.diagnostics import Diagnostic
    from verimim.verdicts import stream_note

    settled = "not proved" if status == "unknown" else "proved up to there only"
    note = Diagnostic("E-RACE", stream_note(status, settled, why), loc, "note")
    if note not in diags:  # the earlier host may leave the same pair undecided
        diags.append(note)


def mentions_streams(host: World) -> bool:
    """Whether the host uses streams: an `.asyn` operation, a stream of its own, `with_streams`."""
    from verimim.ir.defs import Axiom
    from verimim.phases.base import walk

    return any(isinstance(d, Axiom) and (d.annex.endswith(".asyn") or d.annex in ("gpu.stream_init", "gpu.with_streams"))
               for d in walk(host))
