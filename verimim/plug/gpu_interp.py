"""Run-time semantics of the `gpu` plugin (SEMANTICS.md "The GPU").

The session (`init`…`deinit`), device memory, streams and launches. Work on a stream is done
when it is issued, in issue order; what SEMANTICS.md calls pending (`.asyn` operations, on any
stream the default one included, and launches on a non-default stream, until `stream_sync` of
their stream, a `.block` operation or `deinit`; also until a default-stream launch, which
SEMANTICS.md groups with `.block` operations and CUDA's legacy default stream makes wait for
every stream: docs/kernels.md) is
remembered as byte ranges per stream, so that a host access or work on another stream that
conflicts with it is reported as `E-RACE` — the result of a program without such conflicts does
not depend on when pending work really runs.

A launch runs each group's work-items as threads that switch only at barriers
(`sync_work_items`), in an order drawn from the schedule seed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verimim.diagnostics import LAUNCHED_HERE, Loc, Related, ordinal
from verimim.interp.compile import SUSPEND
from verimim.interp.memory import Block, Ptr
from verimim.interp.races import RaceTracker
from verimim.interp.values import Closure, KernelReturn, RuntimeFault, Stream, Token, Value
from verimim.ir.defs import App
from verimim.plug.gpu_host_ops import HOST_OPERATIONS, in_kernel_message
from verimim.plug.mem_interp import _label, access, check_space, loc_of

if TYPE_CHECKING:
    from verimim.interp.machine import Machine, Thread

DEFAULT_STREAM = 0


@dataclass
class Pending:
    block: Block
    lo: int
    hi: int
    write: bool
    loc: Loc | None
    what: str


@dataclass
class GpuState:
    open: bool = False
    opened_at: Loc | None = None
    live_streams: set[int] = field(default_factory=lambda: {DEFAULT_STREAM})
    dead_streams: dict[int, Loc | None] = field(default_factory=dict)
    next_handle: int = 1
    pending: dict[int, list[Pending]] = field(default_factory=dict)
    launches: int = 0


def state(m: Machine) -> GpuState:
    st = m.state.get("gpu")
    if st is None:
        st = m.state["gpu"] = GpuState()
    return st


def need_session(m: Machine, node: App | None, what: str) -> GpuState:
    st = state(m)
    if not st.open:
        raise RuntimeFault("E-GPU-SESSION", f"`{what}` outside a GPU session (before `gpu.init` or "
                           f"after `gpu.deinit`)", loc_of(node))
    return st


def need_stream(m: Machine, s: Value, node: App | None, what: str) -> int:
    st = state(m)
    h = s.handle if isinstance(s, Stream) else -1
    if h not in st.live_streams:
        where = st.dead_streams.get(h)
        related = (Related("deinitialised here", where),) if where else ()
        state_txt = "already deinitialised" if h in st.dead_streams else "not initialised"
        raise RuntimeFault("E-STREAM", f"`{what}` on a stream that is {state_txt}", loc_of(node), related)
    return h


# ------------------------------------------------------------------ pending asynchronous work


def _overlap(p: Pending, block: Block, lo: int, hi: int, write: bool) -> bool:
    return p.block is block and p.lo < hi and lo < p.hi and (write or p.write)


def conflict(m: Machine, block: Block, lo: int, hi: int, write: bool, stream: int | None,
             loc: Loc | None, who: str) -> None:
    """E-RACE if the access conflicts with pending work on another stream (any stream when
    `stream` is None: the host)."""
    for s, ops in state(m).pending.items():
        if s == stream:
            continue
        for p in ops:
            if _overlap(p, block, lo, hi, write):
                raise RuntimeFault("E-RACE", f"{who} conflicts with {p.what} still pending on {stream_name(s)} "
                                   f"(no `gpu.stream_sync` in between)", loc, (Related(p.what, p.loc),))


def stream_name(h: int) -> str:
    """A stream as a program knows it: by the `gpu.stream_init` that made it, counted as they ran
    (the handle counts them from 1; "stream 1" read as the program's `ss#1`, the second; and
    `gpu.with_streams` makes its streams with a `gpu.stream_init` the program does not show)."""
    if h == DEFAULT_STREAM:
        return "the default stream"
    return f"the stream made by the {ordinal(h)} `gpu.stream_init` to run (`gpu.with_streams` makes its streams so)"


def record(m: Machine, stream: int, block: Block, lo: int, hi: int, write: bool, loc: Loc | None, what: str) -> None:
    state(m).pending.setdefault(stream, []).append(Pending(block, lo, hi, write, loc, what))


def complete_all(m: Machine) -> None:
    state(m).pending.clear()


def host_access(m: Machine, block: Block, off: int, size: int, write: bool, loc: Loc | None,
                who: str = "a host access") -> None:
    if state(m).pending:
        conflict(m, block, off, off + size, write, None, loc, who)


# ------------------------------------------------------------------ session and streams


def init(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    st = state(m)
    if st.open:
        raise RuntimeFault("E-GPU-SESSION", "a nested `gpu.init`: a GPU session is already open",
                           loc_of(node), (Related("opened here", st.opened_at),))
    st.open, st.opened_at = True, loc_of(node)
    return (args[0], Token(1), Token(4))


def deinit(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    st = need_session(m, node, "gpu.deinit")
    complete_all(m)
    st.open = False
    return args[0][0]


def stream_init(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    st = need_session(m, node, "gpu.stream_init")
    m0, m1, p = args[0]
    h = st.next_handle
    st.next_handle += 1
    st.live_streams.add(h)
    data = h.to_bytes(8, "little")
    access(m, th, p, 8, data, node)
    m.memory.write_bytes(p, data, loc_of(node))
    return (m0, m1)


def stream_deinit(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    need_session(m, node, "gpu.stream_deinit")
    m0, m1, s = args[0]
    h = need_stream(m, s, node, "gpu.stream_deinit")
    st = state(m)
    if h != DEFAULT_STREAM:
        st.live_streams.discard(h)
        st.dead_streams[h] = loc_of(node)
    return (m0, m1)


def stream_sync(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    need_session(m, node, "gpu.stream_sync")
    m0, m1, s = args[0]
    h = need_stream(m, s, node, "gpu.stream_sync")
    state(m).pending.pop(h, None)
    return (m0, m1)


# ------------------------------------------------------------------ device memory


def _device_ptr(m: Machine, p: Value, node: App | None, what: str) -> Ptr:
    if not isinstance(p, Ptr) or p.block.space != 1:
        raise RuntimeFault("E-ADDR-SPACE", f"`{what}` needs a pointer into global memory", loc_of(node))
    return p


def alloc_block(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    need_session(m, node, "gpu.alloc.block")
    complete_all(m)
    t, m1 = args
    size = m.memory.layout(t, loc_of(node)).size
    return (m1, Ptr(m.memory.alloc(1, size, "heap", loc_of(node), _label(node, "gpu.alloc")), 0))


def alloc_asyn(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    need_session(m, node, "gpu.alloc.asyn")
    t, (m1, s) = args
    h = need_stream(m, s, node, "gpu.alloc.asyn")
    size = m.memory.layout(t, loc_of(node)).size
    block = m.memory.alloc(1, size, "heap", loc_of(node), _label(node, "gpu.alloc"))
    # stream-ordered, as cuMemAllocAsync: work on another stream (or the host) may use the
    # block only after a sync, as it may not use one `gpu.free.asyn` frees (SEMANTICS.md)
    record(m, h, block, 0, size, True, loc_of(node), "the allocation by `gpu.alloc.asyn`")
    return (m1, Ptr(block, 0))


def free_block(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    need_session(m, node, "gpu.free.block")
    complete_all(m)
    _t, (m1, p) = args
    m.memory.free(_device_ptr(m, p, node, "gpu.free.block"), loc_of(node))
    return m1


def free_asyn(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    need_session(m, node, "gpu.free.asyn")
    _t, (m1, p, s) = args
    h = need_stream(m, s, node, "gpu.free.asyn")
    p = _device_ptr(m, p, node, "gpu.free.asyn")
    conflict(m, p.block, 0, p.block.size, True, h, loc_of(node), "`gpu.free.asyn`")
    m.memory.free(p, loc_of(node))
    return m1


def _copy(m: Machine, th: Thread, t: Value, src: Ptr, dst: Ptr, node: App | None, stream: int | None,
          what: str) -> None:
    loc = loc_of(node)
    size = m.memory.layout(t, loc).size
    if stream is None:
        complete_all(m)
    else:
        conflict(m, src.block, src.offset, src.offset + size, False, stream, loc, f"`{what}`")
        conflict(m, dst.block, dst.offset, dst.offset + size, True, stream, loc, f"`{what}`")
    m.memory.check(src, size, loc, "copying from")
    m.memory.check(dst, size, loc, "copying to")
    m.memory.copy(dst, src, size, loc)
    if stream is not None:
        record(m, stream, src.block, src.offset, src.offset + size, False, loc, f"`{what}` reading its source")
        record(m, stream, dst.block, dst.offset, dst.offset + size, True, loc, f"`{what}` writing its target")


def _to_device(asyn: bool):  # type: ignore[no-untyped-def]
    what = f"gpu.copy_to_device.{'asyn' if asyn else 'block'}"

    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        need_session(m, node, what)
        t, rest = args
        m0, m1, hp, dp = rest[:4]
        stream = need_stream(m, rest[4], node, what) if asyn else None
        check_space(th, hp, node, "copies from")
        _copy(m, th, t, hp, _device_ptr(m, dp, node, what), node, stream, what)
        return (m0, m1)
    return run


def _to_host(asyn: bool):  # type: ignore[no-untyped-def]
    what = f"gpu.copy_to_host.{'asyn' if asyn else 'block'}"

    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        need_session(m, node, what)
        t, rest = args
        m0, m1, dp, hp = rest[:4]
        stream = need_stream(m, rest[4], node, what) if asyn else None
        check_space(th, hp, node, "copies to")
        _copy(m, th, t, _device_ptr(m, dp, node, what), hp, node, stream, what)
        return (m0, m1)
    return run


# ------------------------------------------------------------------ launches and barriers


@dataclass
class LaunchState:
    machine: Machine
    stream: int
    tracker: RaceTracker = field(default_factory=RaceTracker)
    epochs: dict[int, int] = field(default_factory=dict)
    static_slots: dict[tuple[int, int, int], Block] = field(default_factory=dict)
    node: App | None = None
    serial: int = 0  # which launch of the program (owners of its shared and local blocks)
    # its shared blocks and its work-items' local ones: they end with it
    blocks: list[Block] = field(default_factory=list)
    deferred: RuntimeFault | None = None
    # The address of each allocation of the kernel in every group (shared blocks) or work-item
    # (local slots): its first instance's (verimim.interp.memory.address_of). SEMANTICS.md gives
    # each group its instance of shared memory and each work-item its instance of local memory;
    # one slot is at one address in each, as on a GPU (where every work-item's pointer to its
    # own local slot is the same 8 bytes). By allocation, and the instances by (address, owner).
    addresses: dict[tuple[object, ...], int] = field(default_factory=dict)
    instances: dict[tuple[int, tuple[int, ...]], Block] = field(default_factory=dict)
    slot_runs: dict[tuple[int, ...], int] = field(default_factory=dict)  # local slots made, by item and slot
    # how a pending access of this launch is named (one kernel statement may run on two streams)
    access_name: str = field(init=False)

    def __post_init__(self) -> None:
        at = self.node.loc if self.node is not None else None
        self.access_name = (f"an access of the kernel launched at {at.line}:{at.col}" if at is not None and at.line
                            else "a kernel access")

    def place(self, block: Block, allocation: tuple[object, ...]) -> None:
        """Give a shared or local block (its owner set) the address of its allocation's first
        instance."""
        assert block.owner is not None
        block.addr = self.addresses.setdefault(allocation, block.addr)
        self.instances[(block.addr, block.owner)] = block

    def instance(self, block: Block, group: int, item: int) -> Block:
        """The instance of block's allocation that work-item `item` of `group` has (an address
        made into a pointer names the work-item's own: inttoptr)."""
        if block.owner is None or block.owner[0] != self.serial:
            return block
        owner = (self.serial, group) if len(block.owner) == 2 else (self.serial, group, item)
        return self.instances.get((block.addr, owner), block)

    def defer(self, fault: RuntimeFault, item: int, group: int) -> None:
        if self.deferred is None:
            self.deferred = _in_work_item(fault, item, group)

    def touch(self, block: Block, off: int, size: int, write: bool, loc: Loc | None) -> None:
        """A global-memory access of a work-item: check it against other streams' pending work and
        remember it if this launch is itself pending."""
        if block.space != 1:
            return
        m = self.machine
        if state(m).pending:
            conflict(m, block, off, off + size, write, self.stream, loc, self.access_name)
        if self.stream != DEFAULT_STREAM:  # a default-stream launch completes before the host goes on
            record(m, self.stream, block, off, off + size, write, loc, self.access_name)


class LaunchTooLarge(RuntimeFault):
    """A launch with more work-items than `Machine.max_work_items` (E-FUEL), refused up front."""

    def __init__(self, n_groups: int, n_items: int, limit: int, loc: Loc | None) -> None:
        self.size = f"{n_groups} × {n_items} = {n_groups * n_items} work-items"
        self.limit = limit
        from verimim.interp.machine import DEFAULT_MAX_WORK_ITEMS

        # (the default is what the interpreter runs in about a minute; a limit given is the user's)
        why = "about a minute" if limit == DEFAULT_MAX_WORK_ITEMS else "--max-work-items"
        super().__init__("E-FUEL", f"this launch has {self.size}, more than the interpreter runs ({limit}, "
                         f"{why}; raise it with --max-work-items) — run it on a GPU with --target gpu", loc)


def launch(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    from verimim.interp.machine import Thread as MThread

    loc = loc_of(node)
    _implicit, config, kernel, kargs, mems = args
    n_groups, n_items, s, dyn_flag, mt = config
    need_session(m, node, "gpu.launch")
    h = need_stream(m, s, node, "gpu.launch")
    if th.device:
        raise RuntimeFault("E-UNSUPPORTED", "a kernel launching a kernel", loc)
    if not isinstance(kernel, Closure):
        raise RuntimeFault("E-UNSUPPORTED", f"launching {kernel!r}, not a continuation", loc)
    if n_groups * n_items > m.max_work_items:
        # Refused before any work-item runs: the interpreter's cost grows with the work-items
        # (time and memory), and such a launch would run for many minutes before any answer.
        raise LaunchTooLarge(n_groups, n_items, m.max_work_items, loc)
    if h == DEFAULT_STREAM:
        complete_all(m)
    st = state(m)
    st.launches += 1
    ls = LaunchState(m, h, node=node, serial=st.launches)
    groups = list(range(n_groups))
    if m.seed:
        m.rng.shuffle(groups)
    for g in groups:
        ls.epochs[g] = 0
        smem: Value = ()
        if dyn_flag:
            size = m.memory.layout(mt, loc).size
            block = m.memory.alloc(3, size, "dynshared", loc, f"dynamic shared memory of group {g}")
            block.owner = (ls.serial, g)
            ls.place(block, ("dynamic shared memory",))
            ls.blocks.append(block)
            smem = Ptr(block, 0)
        threads = []
        for i in range(n_items):
            t = MThread(f"group {g} item {i}", device=True, group=g, item=i, launch=ls)
            t.halt = KernelReturn()  # (a direct-style call in the kernel may jump to it: Escape)
            t.next = (kernel, (Token(1), Token(3), Token(4), Token(5), g, i, smem, kargs, t.halt))
            threads.append(t)
        try:
            run_group(m, ls, g, threads)
        except RuntimeFault as e:
            if ls.deferred is not None and e.code != "E-RACE":
                raise launched_here(ls.deferred, loc) from None  # the uninitialised read came first
            launched_here(e, loc)
            raise
    if ls.deferred is not None:
        raise launched_here(ls.deferred, loc)
    for b in ls.blocks:
        if b.live:
            m.memory.end(b, loc, "the launch that made it is over")
    if ls.tracker.benign is not None:
        msg, bloc, related = ls.tracker.benign
        m.warn("W-BENIGN-RACE", msg, bloc, related)
    return mems


def launched_here(e: RuntimeFault, loc: Loc | None) -> RuntimeFault:
    """A fault inside a kernel, with the launch it happened in as a note (a kernel launched twice
    faults in one of the launches; `check` names its launch the same way)."""
    if loc is not None and not any(r.message == LAUNCHED_HERE for r in e.related):
        e.related = (*e.related, Related(LAUNCHED_HERE, loc))
    return e


def run_group(m: Machine, ls: LaunchState, g: int, threads: list[Thread]) -> None:
    live = threads
    while live:
        order = list(live)
        if m.seed:
            m.rng.shuffle(order)
        waiting: list[Thread] = []
        finished: list[Thread] = []
        for t in order:
            try:
                stopped = m.run_thread(t)
            except RuntimeFault as e:
                raise _in_work_item(e, t.item, g) from None
            (waiting if stopped == "barrier" else finished).append(t)
        if not waiting:
            return
        w = min(waiting, key=lambda t: t.item)
        if finished:
            f = min(finished, key=lambda t: t.item)
            raise RuntimeFault("E-BARRIER-DIVERGENCE", f"work-item {f.item} of group {g} returns while "
                               f"work-item {w.item} waits at a barrier", w.barrier_node.loc if w.barrier_node else None,
                               (Related(f"work-item {f.item} returns here without reaching it",
                                        f.end.loc if f.end is not None else None),))
        nodes = {t.barrier_node.gid for t in waiting if t.barrier_node is not None}
        if len(nodes) > 1:
            other = next(t for t in waiting if t.barrier_node is not w.barrier_node)
            raise RuntimeFault("E-BARRIER-DIVERGENCE", f"work-items of group {g} wait at different "
                               f"barriers: item {w.item} here, item {other.item} elsewhere",
                               w.barrier_node.loc if w.barrier_node else None,
                               (Related(f"work-item {other.item} waits here",
                                        other.barrier_node.loc if other.barrier_node else None),))
        ls.epochs[g] += 1
        live = waiting


def _in_work_item(e: RuntimeFault, item: int, group: int) -> RuntimeFault:
    """A work-item's fault, saying which one (an out-of-bounds index of one work-item of many
    named none); a message that names work-items already is kept, and so is E-FUEL (the whole
    run's budget: the work-item that used its last step is no more at fault than any other)."""
    if "work-item" in e.message or e.code == "E-FUEL":
        return e
    e.message = f"{e.message} (in work-item {item} of group {group})"
    e.args = (e.message,)
    return e


def sync_work_items(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    if not th.device:
        raise RuntimeFault("E-UNSUPPORTED", "`gpu.sync_work_items` outside a kernel", loc_of(node))
    th.barrier_node = node
    th.barrier_result = args[0]
    return SUSPEND


def at_exit(m: Machine, main: object) -> None:
    st = state(m)
    if st.open:
        raise RuntimeFault("E-GPU-SESSION", "main returns with the GPU session still open (missing "
                           "`gpu.deinit`)", st.opened_at)


def _on_the_host(annex: str, fn: Any) -> Any:
    def run(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
        if th.device:
            raise RuntimeFault("E-UNSUPPORTED", in_kernel_message(annex), loc_of(node))
        return fn(m, th, args, node)
    return run


def register(m: Machine) -> None:
    def r(annex: str, arity: int, fn: Any) -> None:
        # a host operation stops a work-item (a launch in a kernel says so itself)
        guarded = annex in HOST_OPERATIONS and annex != "gpu.launch"
        m.register(annex, arity, _on_the_host(annex, fn) if guarded else fn)
    r("gpu.init", 1, init)
    r("gpu.auto_init", 1, init)
    r("gpu.deinit", 1, deinit)
    r("gpu.auto_deinit", 1, deinit)
    r("gpu.stream_init", 1, stream_init)
    r("gpu.stream_deinit", 1, stream_deinit)
    r("gpu.stream_sync", 1, stream_sync)
    r("gpu.alloc.block", 2, alloc_block)
    r("gpu.alloc.asyn", 2, alloc_asyn)
    r("gpu.free.block", 2, free_block)
    r("gpu.free.asyn", 2, free_asyn)
    r("gpu.copy_to_device.block", 2, _to_device(False))
    r("gpu.copy_to_device.asyn", 2, _to_device(True))
    r("gpu.copy_to_host.block", 2, _to_host(False))
    r("gpu.copy_to_host.asyn", 2, _to_host(True))
    r("gpu.launch", 5, launch)
    r("gpu.sync_work_items", 1, sync_work_items)
    m.register_value("gpu.default_stream", Stream(DEFAULT_STREAM))

