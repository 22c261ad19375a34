"""Run-time semantics of the `mem` plugin: allocation, slots, loads, stores, `lea`, `free`.

Every access goes through `access`, which checks the address space against who is running
(host code touches only address space 0, kernels never touch it: `E-ADDR-SPACE`), the block
(verimim.interp.memory), races between work-items of a launch, and conflicts with pending
asynchronous GPU work (verimim.plug.gpu_interp).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from verimim.diagnostics import Loc, Related
from verimim.frontend.loader import in_program
from verimim.interp.memory import SPACE_NAMES, Block, Ptr
from verimim.interp.races import Access
from verimim.interp.values import RuntimeFault, Value, bottom_used
from verimim.ir.defs import App, Def, Pack, Tuple
from verimim.layout import field_offsets
from verimim.printer import show

if TYPE_CHECKING:
    from verimim.interp.machine import Machine, Thread


def loc_of(node: App | None) -> Loc | None:
    return node.loc if node is not None else None


def _label(node: App | None, what: str) -> str:
    loc = loc_of(node)
    return f"{what}@{loc.line}:{loc.col}" if loc and loc.line else what


def check_space(th: Thread, p: Ptr, node: App | None, what: str) -> None:
    space = p.block.space
    if not th.device and space != 0:
        raise RuntimeFault("E-ADDR-SPACE", f"host code {what} {SPACE_NAMES.get(space, space)} memory "
                           f"(address space {space}) directly; use gpu.copy_to_host", loc_of(node))
    if th.device and space == 0:
        raise RuntimeFault("E-ADDR-SPACE", f"kernel code {what} host memory (address space 0)", loc_of(node))


def check_owner(th: Thread, p: Ptr, node: App | None, what: str) -> None:
    """Shared memory belongs to one group of one launch, local memory to one work-item
    (SEMANTICS.md, Address spaces): another's pointer, published through memory, is not a way in.
    Called for a block with an owner."""
    b, launch = p.block, th.launch
    assert b.owner is not None
    serial = launch.serial if launch is not None else -1
    mine = (serial, th.group) if b.space == 3 else (serial, th.group, th.item)
    if b.owner == mine:
        return
    whose = f"group {b.owner[1]}" if b.space == 3 else f"work-item {b.owner[2]} of group {b.owner[1]}"
    if b.owner[0] != serial:
        whose += " of another launch"
    raise RuntimeFault("E-ADDR-SPACE", f"work-item {th.item} of group {th.group} {what} the {b.describe()}, which "
                       f"belongs to {whose}: {SPACE_NAMES.get(b.space, b.space)} memory is private to it",
                       loc_of(node), b.allocated_here())


def _defined_pointer(p: Value, what: str, node: App | None) -> None:
    """A pointer operand that is ⊥ (or ⊤ as a run-time value): E-UNINIT, as computing with one is
    (docs/semantics.md), not an internal error when its block is read."""
    if p is None:
        raise bottom_used(f"{what} (its pointer)", loc_of(node))


def access(m: Machine, th: Thread, p: Ptr, size: int, data: bytes | None, node: App | None) -> None:
    """Checks shared by every load and store (data: the bytes written, None for a read)."""
    what = "reads" if data is None else "writes"
    _defined_pointer(p, "`mem.load`" if data is None else "`mem.store`", node)
    check_space(th, p, node, what)
    if data is not None and th.device and p.block.space == 4:
        raise RuntimeFault("E-ADDR-SPACE", "a kernel stores into constant memory (address space 4)", loc_of(node))
    m.memory.check(p, size, loc_of(node), "reading" if data is None else "writing")
    if p.block.owner is not None and th.device:
        check_owner(th, p, node, what)
    if th.device and th.launch is not None and p.block.space in (1, 3):
        launch = th.launch
        launch.tracker.access(p.block.id, p.block.label, p.offset, data, size,
                              Access(th.item, th.group, launch.epochs[th.group], data is not None, loc_of(node)))
        launch.touch(p.block, p.offset, size, data is not None, loc_of(node))
    if not th.device:
        from verimim.plug import gpu_interp

        gpu_interp.host_access(m, p.block, p.offset, size, data is not None, loc_of(node))


def load(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (t, _a), (mem, p) = args
    size = m.memory.layout(t, loc_of(node)).size
    access(m, th, p, size, None, node)
    try:
        raw = m.memory.read_bytes(p, size, loc_of(node), m.memory.value_mask(t))
    except RuntimeFault as e:
        if e.code != "E-UNINIT" or not th.device or th.launch is None:
            raise
        # In a kernel, reading bytes that another work-item writes only later is a race, which
        # the other item's write will report; the read is an error only if no race shows up.
        th.launch.defer(e, th.item, th.group)
        raw = bytes(p.block.data[p.offset:p.offset + size])
    reader = (th.launch.serial, th.group, th.item) if th.device and th.launch is not None else ()
    return (mem, m.memory.decode(t, raw, loc_of(node), at=p, reader=reader))


def store(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (t, _a), (mem, p, v) = args
    targets: dict[int, tuple[Block, ...]] = {}
    data, pointers = m.memory.encode_marked(t, v, loc_of(node), targets)
    access(m, th, p, len(data), data, node)
    m.memory.write_bytes(p, data, loc_of(node), pointers, m.memory.value_mask(t), targets)
    return mem


def _space(a: Value, node: App | None) -> int:
    if isinstance(a, int):
        return a
    raise RuntimeFault("E-UNSUPPORTED", f"an address space that is not a literal: {a!r}", loc_of(node))


def alloc(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (t, a), mem = args
    size = m.memory.layout(t, loc_of(node)).size
    _device_heap(m, th, _space(a, node), node, "allocates")
    block = m.memory.alloc(_space(a, node), size, "heap", loc_of(node), _label(node, "alloc"))
    _note_site(th, block)
    return (mem, Ptr(block, 0))


def malloc(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (t, a), (mem, size) = args
    _device_heap(m, th, _space(a, node), node, "allocates")
    block = m.memory.alloc(_space(a, node), size, "heap", loc_of(node), _label(node, "malloc"))
    _note_site(th, block)
    return (mem, Ptr(block, 0))


def _note_site(th: Thread, block: Block) -> None:
    """A heap block made by a shipped plugin's own code: the program's call of the plugin's
    function it happened in (Block.site), the innermost such. None where the function was
    entered by a tail call, which keeps its caller's activation: that caller is the program's
    own function, not the one that allocates."""
    if block.loc is None or in_program(block.loc):
        return
    for act in reversed(th.calls):
        if in_program(act.site) and act.defined is not None and not in_program(act.defined):
            block.site, block.via = act.site, act.name
            return


def _slot(m: Machine, th: Thread, t: Def, space: int, size: int, slot_id: int, node: App | None) -> Ptr:
    launch = th.launch if th.device else None
    if launch is not None and space == 3:
        # A static shared slot: one block per group, per slot operation and id, for the launch.
        key = (th.group, node.gid if node is not None else 0, slot_id)
        block = launch.static_slots.get(key)
        if block is None:
            block = m.memory.alloc(3, size, "static", loc_of(node), _label(node, "shared slot"))
            block.owner = (launch.serial, th.group)
            launch.place(block, ("shared slot", key[1], slot_id))
            launch.static_slots[key] = block
            launch.blocks.append(block)
        return Ptr(block, 0)
    block = m.memory.alloc(space, size, "stack", loc_of(node), _label(node, "slot"))
    if th.calls:
        th.calls[-1].blocks.append(block)  # it lives until its function returns
    if launch is not None and space == 5:
        block.owner = (launch.serial, th.group, th.item)
        # the n-th run of this slot by the work-item: the same address in every work-item
        site = (node.gid if node is not None else 0, slot_id)
        n = launch.slot_runs.get((th.group, th.item, *site), 0)
        launch.slot_runs[(th.group, th.item, *site)] = n + 1
        launch.place(block, ("local slot", *site, n))
        launch.blocks.append(block)
    return Ptr(block, 0)


def slot(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (t, a), (mem, slot_id) = args
    size = m.memory.layout(t, loc_of(node)).size
    return (mem, _slot(m, th, t, _space(a, node), size, slot_id, node))


def mslot(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (t, a), (mem, size, slot_id) = args
    return (mem, _slot(m, th, t, _space(a, node), size, slot_id, node))


def _device_heap(m: Machine, th: Thread, space: int, node: App | None, what: str) -> None:
    """Host code may allocate and free global memory with `mem.malloc`/`mem.free` in address
    space 1 (what `gpu.host_malloc2gpualloc_repl` turns into `gpu.alloc`/`gpu.free`): inside a
    GPU session, like those."""
    if th.device or space == 0:
        return
    if space != 1:
        raise RuntimeFault("E-ADDR-SPACE", f"host code {what} in address space {space} "
                           f"({SPACE_NAMES.get(space, space)} memory)", loc_of(node))
    from verimim.plug import gpu_interp

    gpu_interp.need_session(m, node, f"mem.{what.split()[0]}")


def release(m: Machine, th: Thread, p: Ptr, node: App | None, who: str) -> None:
    """A host free of a host block ends it under any asynchronous copy still pending on it
    (SEMANTICS.md, Streams: a conflicting host access is E-RACE): it conflicts as a write of
    every byte. A free that is not of a live block's start is the memory's error, not this."""
    if th.device or p.block.space != 0 or p.offset != 0 or not p.block.live:
        return
    from verimim.plug import gpu_interp

    gpu_interp.host_access(m, p.block, 0, p.block.size, True, loc_of(node), who)


def free(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (_t, _a), (mem, p) = args
    _defined_pointer(p, "`mem.free`", node)
    if not isinstance(p, Ptr):
        raise RuntimeFault("E-BAD-FREE", f"freeing {p!r}, which is not a pointer", loc_of(node))
    _device_heap(m, th, p.block.space, node, "frees")
    if th.device and p.block.space == 0:
        check_space(th, p, node, "frees")
    release(m, th, p, node, "`mem.free` of a host buffer")
    m.memory.free(p, loc_of(node))
    return mem


def remem(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    return args[1]


def lea(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    (n, ts, _a), (p, i) = args
    ts = m.static(ts)
    loc = loc_of(node)
    _defined_pointer(p, "`mem.lea`", node)
    if not isinstance(p, Ptr):
        raise RuntimeFault("E-OOB", f"`mem.lea` of a pointer that points nowhere ({p!r})", loc)
    if isinstance(n, int) and i >= n:
        raise RuntimeFault("E-OOB", f"`mem.lea` index {i} outside `Idx {n}`", loc)
    if isinstance(ts, Pack):
        elem = ts.body
        esz = m.memory.layout(elem, loc).size
        off, size = i * esz, esz
    elif isinstance(ts, Tuple):
        from verimim.ir.defs import Sigma

        sig = m.world.sigma(m.world.shift(f, 1) for f in ts.ops)
        if not isinstance(sig, Sigma):
            raise RuntimeFault("E-UNSUPPORTED", f"`mem.lea` into `{show(sig)}`", loc)
        offs = field_offsets(sig, m.memory.target)
        if offs is None:
            raise RuntimeFault("E-UNSUPPORTED", f"`mem.lea` into `{show(sig)}`", loc)
        off, size = offs[i], m.memory.layout(m.world.shift(sig.ops[i], -1), loc).size
    else:
        # Ts of arity one: the pointer itself (`«1; T»` is T).
        return p
    new = Ptr(p.block, p.offset + off)
    if p.block.kind == "null":
        raise RuntimeFault("E-OOB", f"`mem.lea` to element {i} of a null pointer", loc)
    # (a freed block keeps its size: a lea far outside it is E-OOB here, even where no access
    # through it follows to report the use after free)
    if new.offset < 0 or new.offset + size > p.block.size:
        raise RuntimeFault("E-OOB", f"`mem.lea` to element {i} leaves the {p.block.describe()} "
                           f"(bytes {new.offset}..{new.offset + size - 1})", loc,
                           p.block.allocated_here())
    return new


def make_argv(m: Machine, args: list[str]) -> Ptr:
    """C's argv in host memory: NUL-terminated strings and a NULL-terminated pointer array."""
    ptrs = []
    for k, a in enumerate(args):
        raw = os.fsencode(a) + b"\0"  # the bytes given: a non-UTF-8 argument arrives surrogate-escaped
        b = m.memory.alloc(0, len(raw), "argv", None, f"argv[{k}]")
        m.memory.write_bytes(Ptr(b, 0), raw, None)
        ptrs.append(b)
    arr = m.memory.alloc(0, 8 * (len(args) + 1), "argv", None, "argv")
    from verimim.interp.memory import ADDR_SHIFT

    for k, b in enumerate(ptrs):
        m.memory.write_bytes(Ptr(arr, 8 * k), (b.id << ADDR_SHIFT).to_bytes(8, "little"), None, (0,))
    m.memory.write_bytes(Ptr(arr, 8 * len(args)), bytes(8), None)
    return Ptr(arr, 0)


def at_exit(m: Machine, main: object) -> None:
    for b in m.memory.live_heap():
        if b.site is None:
            m.warn("W-LEAK", f"the {b.describe()} is still allocated when main returns", b.loc)
            continue
        m.warn("W-LEAK", f"the {b.describe()} is still allocated when main returns: `{b.via}`, a shipped "
               f"plugin's function called here, allocates it and does not free it", b.site,
               (Related("allocated here, in the plugin's code", b.loc),))


def register(m: Machine) -> None:
    r = m.register
    r("mem.load", 2, load)
    r("mem.store", 2, store)
    r("mem.alloc", 2, alloc)
    r("mem.malloc", 2, malloc)
    r("mem.slot", 2, slot)
    r("mem.mslot", 2, mslot)
    r("mem.free", 2, free)
    r("mem.remem", 2, remem)
    r("mem.lea", 2, lea)

