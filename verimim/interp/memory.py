"""Byte-level memory of the reference interpreter (SEMANTICS.md "Values and memory").

Every allocation is a `Block` in one address space with its own bytes and a per-byte
"initialised" shadow that copies carry along. Values are encoded with the target data layout
(verimim.layout); a pointer stored in memory is an 8-byte address `block address << 40 | offset`,
the block's address being its id, except that every instance of one allocation in a per-group or
per-work-item address space (a kernel's shared and local blocks: SEMANTICS.md, one instance per
group, one per work-item) has the address of the first: on a GPU the same slot is at the same
address in each instance of the space, and two work-items' pointers to their own are the same 8
bytes. A stored pointer into such a block keeps, in a shadow (`Block.targets`), the instances
whose pointer stored those bytes there, so that a load gives back the one it came from: the
reader's own where the reader stored it too (the same bytes written by several work-items are
one value: a benign race, whatever their order), else the last one stored.
Every access is checked: a freed block (`E-USE-AFTER-FREE`), bytes outside the block
(`E-OOB`), bytes never written (`E-UNINIT`).
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from verimim.diagnostics import Loc, Related
from verimim.interp.values import Address, RuntimeFault, Stream, Token, Value
from verimim.ir.defs import App, Arr, Axiom, Def, IdxT, Lit, NatT, Pi, Sigma
from verimim.layout import Layout, Target, X86_64, field_offsets, layout_of, ptr_space, value_mask
from verimim.printer import show

ADDR_SHIFT = 40

SPACE_NAMES = {0: "host", 1: "global", 3: "shared", 4: "constant", 5: "local"}

_block_ids = itertools.count(1)
# The largest block the reference interpreter makes: it keeps two bytes per byte (the data and
# whether it was written) in its own memory.
MAX_BLOCK_BYTES = 1 << 30


@dataclass(eq=False)
class Block:
    space: int
    size: int
    kind: str  # "heap", "stack", "static", "shared", "dynshared", "argv"
    loc: Loc | None
    label: str
    data: bytearray = field(init=False)
    init: bytearray = field(init=False)
    live: bool = True
    freed_at: Loc | None = None
    id: int = field(default_factory=lambda: next(_block_ids))
    # Who may access it: a launch's shared block (launch, group), a local block (launch, group,
    # item); None: anyone its address space allows (mem_interp.access checks it).
    owner: tuple[int, ...] | None = None
    ended: str | None = None  # why a block that is not freed stopped living ("`f` returned")
    # where stored pointers start (a shadow, like `init`, that copies carry): an 8-byte integer
    # there is an address, elsewhere a number, whatever its bits (verimim.interp.observe)
    pointers: set[int] | None = None
    # the blocks a pointer stored at an offset may point into, where its address does not say
    # which (a kernel's shared or local block: every instance has the first one's address): the
    # instances whose pointer stored these bytes there, the last one last; a shadow kept with
    # `pointers`
    targets: dict[int, tuple["Block", ...]] | None = None
    # For a block a shipped plugin's own code makes (`gpu.with_streams`' stream array): the call
    # in the program that made it, and the called function's name — where a note about the
    # block can point the user, who cannot change the plugin's code.
    site: Loc | None = None
    via: str | None = None
    # the address it is stored as (`address_of`): its id, or that of the first instance of the
    # same allocation in another group or work-item (gpu_interp.LaunchState.place)
    addr: int = -1

    def __post_init__(self) -> None:
        self.data = bytearray(self.size)
        self.init = bytearray(self.size)
        if self.addr < 0:
            self.addr = self.id

    def allocated_here(self) -> tuple[Related, ...]:
        """The note that shows where the block was made; none for one the program did not make
        (argv: a note without a place says nothing)."""
        return (Related("allocated here", self.loc),) if self.loc is not None else ()

    def describe(self) -> str:
        return f"{self.kind} block `{self.label}` of {self.size} bytes in the {SPACE_NAMES.get(self.space, self.space)} address space"


@dataclass(frozen=True)
class Ptr:
    block: Block
    offset: int

    @property
    def space(self) -> int:
        return self.block.space

    def __repr__(self) -> str:
        return f"<ptr {self.block.label}+{self.offset}>"


def address_of(p: Ptr) -> int:
    """A pointer's address: how it is stored in memory and what it casts to as an integer."""
    return (p.block.addr << ADDR_SHIFT) + p.offset


class Memory:
    def __init__(self, target: Target = X86_64) -> None:
        self.target = target
        self.blocks: dict[int, Block] = {}
        self._layouts: dict[int, Layout | None] = {}
        self._masks: dict[int, bytes | None] = {}
        self._null: dict[int, Block] = {}
        # Function values stored in memory (a `Cn`/`Fn` is 8 bytes, a code address on a target):
        # each is stored as an address into a block of no bytes, one per value.
        self._code: Block | None = None
        self._code_at: dict[int, Value] = {}  # address → the function value (kept alive: ids stay unique)
        self._code_of: dict[int, int] = {}  # id of the function value → its address

    # ------------------------------------------------------------------ blocks

    def alloc(self, space: int, size: int, kind: str, loc: Loc | None, label: str) -> Block:
        if size > MAX_BLOCK_BYTES:
            # The reference interpreter holds each block's bytes (and which are written) in
            # memory: past this it stops with a diagnostic rather than the host's MemoryError.
            beyond = " (more than any 64-bit target can address)" if size >= 2**64 else ""
            raise RuntimeFault("E-UNSUPPORTED", f"the {kind} block `{label}` of {size} bytes{beyond}: the "
                               f"reference interpreter holds blocks of at most {MAX_BLOCK_BYTES >> 20} MiB", loc)
        b = Block(space, size, kind, loc, label)
        self.blocks[b.id] = b
        return b

    def pointer_at(self, addr: int, space: int, what: str, loc: Loc | None) -> Ptr:
        """The pointer whose address is addr (`address_of`'s inverse; 0 is NULL of the space)."""
        if addr == 0:
            return Ptr(self.null_block(space), 0)
        b = self.blocks.get(addr >> ADDR_SHIFT)
        if b is None:
            raise RuntimeFault("E-OOB", f"{what} {addr:#x} points to no allocation", loc)
        return Ptr(b, addr & ((1 << ADDR_SHIFT) - 1))

    def code_address(self, fn: Value) -> int:
        """The address a function value is stored as (the same for the same value)."""
        hit = self._code_of.get(id(fn))
        if hit is not None:
            return hit
        if self._code is None:
            self._code = self.alloc(0, 0, "code", None, "the program's code")
        addr = address_of(Ptr(self._code, len(self._code_at) + 1))
        self._code_at[addr] = fn
        self._code_of[id(fn)] = addr
        return addr

    def null_block(self, space: int) -> Block:
        """The block a null pointer of an address space points into: id 0 (so the pointer is
        stored as address 0), no bytes (every access through it is E-OOB), never in `blocks`."""
        hit = self._null.get(space)
        if hit is None:
            hit = self._null[space] = Block(space, 0, "null", None, "NULL", id=0)
        return hit

    def free(self, p: Ptr, loc: Loc | None) -> None:
        b = p.block
        if b.kind == "null":
            return  # C's free(NULL) does nothing
        if b.kind != "heap":
            raise RuntimeFault("E-BAD-FREE", f"freeing the {b.describe()}: only heap blocks "
                               f"(mem.malloc/mem.alloc/gpu.alloc) can be freed", loc,
                               b.allocated_here())
        if not b.live:
            raise RuntimeFault("E-DOUBLE-FREE", f"{b.describe()} is freed twice", loc,
                               (Related("freed first here", b.freed_at), *b.allocated_here()))
        if p.offset != 0:
            raise RuntimeFault("E-BAD-FREE", f"freeing an interior pointer (offset {p.offset}) of "
                               f"the {b.describe()}", loc, b.allocated_here())
        b.live = False
        b.freed_at = loc

    def end(self, b: Block, loc: Loc | None, reason: str) -> None:
        """A block that is not freed stops living: a slot when its function returns, a launch's
        shared and local blocks when the launch is over. Its bytes go (an access is
        E-USE-AFTER-FREE, checked before any byte is read)."""
        b.live = False
        b.freed_at = loc
        b.ended = reason
        b.data = b.init = bytearray()

    def live_heap(self) -> list[Block]:
        return [b for b in self.blocks.values() if b.live and b.kind == "heap"]

    # ------------------------------------------------------------------ layout

    def layout(self, t: Def, loc: Loc | None) -> Layout:
        if t.gid in self._layouts:
            hit = self._layouts[t.gid]
        else:
            hit = layout_of(t, self.target)
            self._layouts[t.gid] = hit
        if hit is None:
            raise RuntimeFault("E-UNSUPPORTED", f"the type `{show(t)}` has no memory layout "
                               f"(its size is not known)", loc)
        return hit

    # ------------------------------------------------------------------ checked access

    def check(self, p: Ptr, size: int, loc: Loc | None, what: str) -> None:
        b = p.block
        if b.kind == "null":
            raise RuntimeFault("E-OOB", f"{what} through a null pointer", loc)
        if not b.live:
            if b.ended is not None:
                raise RuntimeFault("E-USE-AFTER-FREE", f"{what} the {b.describe()} after it ended: {b.ended}",
                                   loc, (Related("it ended here", b.freed_at), *b.allocated_here()))
            raise RuntimeFault("E-USE-AFTER-FREE", f"{what} the {b.describe()} after it was freed", loc,
                               (Related("freed here", b.freed_at), *b.allocated_here()))
        if p.offset < 0 or p.offset + size > b.size:
            raise RuntimeFault("E-OOB", f"{what} bytes {p.offset}..{p.offset + size - 1} of the "
                               f"{b.describe()}", loc, b.allocated_here())

    def value_mask(self, t: Def) -> bytes | None:
        """verimim.layout.value_mask, once per type: which bytes a load of t must find written."""
        if t.gid not in self._masks:
            self._masks[t.gid] = value_mask(t, self.target)
        return self._masks[t.gid]

    def read_bytes(self, p: Ptr, size: int, loc: Loc | None, mask: bytes | None = None) -> bytes:
        """The bytes at p, every one written before (only those `mask` marks, when given: a
        struct's padding need not be)."""
        self.check(p, size, loc, "reading")
        b = p.block
        lo, hi = p.offset, p.offset + size
        init = b.init[lo:hi]
        first = None if all(init) else next((lo + k for k, i in enumerate(init) if not i and (mask is None or mask[k])),
                                            None)
        if first is not None:
            # ("never written" was wrong where a copy brought an unwritten byte over a written one)
            raise RuntimeFault("E-UNINIT", f"loading byte {first} of the {b.describe()}, which holds no "
                               f"written value", loc, b.allocated_here())
        return bytes(b.data[lo:hi])

    def write_bytes(self, p: Ptr, data: bytes, loc: Loc | None, pointers: tuple[int, ...] = (),
                    mask: bytes | None = None, targets: dict[int, tuple[Block, ...]] | None = None) -> None:
        """Write data at p; `pointers`: where in data a stored pointer starts (encode_marked);
        `mask`: the bytes that hold the value (value_mask): a store of a struct leaves its
        padding uninitialised, as LLVM's does (a load of it is `E-UNINIT`, not a 0); `targets`:
        the blocks of those pointers whose address does not name them (encode_marked)."""
        self.check(p, len(data), loc, "writing")
        b = p.block
        lo = p.offset
        if targets and b.targets:
            # the same bytes again, from another instance: a pointer of either
            targets = {k: _joined(b.targets.get(lo + k, ()), x) if b.data[lo + k:lo + k + 8] == data[k:k + 8] else x
                       for k, x in targets.items()}
        b.data[lo:lo + len(data)] = data
        b.init[lo:lo + len(data)] = mask if mask is not None else b"\x01" * len(data)
        _remark(b, lo, lo + len(data), pointers, targets)

    def copy(self, dst: Ptr, src: Ptr, size: int, loc: Loc | None) -> None:
        """Copy bytes with their initialisation and pointer shadows (copying uninitialised
        bytes is fine)."""
        self.check(src, size, loc, "copying from")
        self.check(dst, size, loc, "copying to")
        s, d = src.block, dst.block
        d.data[dst.offset:dst.offset + size] = s.data[src.offset:src.offset + size]
        d.init[dst.offset:dst.offset + size] = s.init[src.offset:src.offset + size]
        moved = [k - src.offset for k in s.pointers if src.offset <= k <= src.offset + size - 8] if s.pointers else []
        targets = {k: s.targets[src.offset + k] for k in moved if src.offset + k in s.targets} if s.targets else None
        _remark(d, dst.offset, dst.offset + size, moved, targets)

    # ------------------------------------------------------------------ encoding

    def encode(self, t: Def, v: Value, loc: Loc | None) -> bytes:
        return self.encode_marked(t, v, loc)[0]

    def encode_marked(self, t: Def, v: Value, loc: Loc | None,
                      targets: dict[int, tuple[Block, ...]] | None = None) -> tuple[bytes, tuple[int, ...]]:
        """v's bytes, and where in them a pointer starts (for write_bytes); `targets`, when
        given, gets the block of each pointer whose address does not name it (a kernel's shared
        or local block), by where it starts."""
        lay = self.layout(t, loc)
        out = bytearray(lay.size)
        pointers: list[int] = []
        self._encode_into(out, 0, t, v, loc, pointers, targets)
        return bytes(out), tuple(pointers)

    def _encode_into(self, out: bytearray, off: int, t: Def, v: Value, loc: Loc | None,
                     pointers: list[int], targets: dict[int, tuple[Block, ...]] | None = None) -> None:
        if isinstance(t, (IdxT, NatT)):
            n = self.layout(t, loc).size
            if isinstance(t, NatT) and int(v) >= 1 << (8 * n):
                # (a Nat is unbounded in the interpreter and 8 bytes in memory, as on a target:
                # cutting it there would give a value neither meaning has)
                raise RuntimeFault("E-UNSUPPORTED", f"a `Nat` of {int(v)} (2^64 or more) stored in memory: its "
                                   f"{n} bytes hold less than 2^64", loc)
            out[off:off + n] = (int(v) % (1 << (8 * n))).to_bytes(n, "little")
            if isinstance(v, Address) and v and n == 8:
                pointers.append(off)  # a pointer's address as an integer, stored unchanged
            return
        if isinstance(t, Axiom) and t.annex == "gpu.Stream":
            out[off:off + 8] = (v.handle if isinstance(v, Stream) else 0).to_bytes(8, "little")
            return
        if isinstance(t, App) and isinstance(t.head, Axiom):
            if t.head.annex in ("mem.Ptr", "buffer.Buf"):
                addr = address_of(v) if isinstance(v, Ptr) else 0
                out[off:off + 8] = addr.to_bytes(8, "little")
                if addr:
                    pointers.append(off)
                    if targets is not None and v.block.owner is not None:
                        targets[off] = (v.block,)
                return
            if t.head.annex == "mem.M":
                return
        if isinstance(t, Pi):
            n = self.target.pointer_size
            out[off:off + n] = self.code_address(v).to_bytes(n, "little")
            # an address like a pointer's (into the code block): marked, so that what observes
            # the heap names it, not the block id, which differs from run to run
            pointers.append(off)
            return
        if isinstance(t, Sigma):
            offs = field_offsets(t, self.target)
            assert offs is not None
            for f, o, x in zip(t.ops, offs, v):
                self._encode_into(out, off + o, f, x, loc, pointers, targets)
            return
        if isinstance(t, Arr) and isinstance(t.shape, Lit):
            elem = t.body
            esz = self.layout(elem, loc).size
            for i in range(t.shape.value):
                self._encode_into(out, off + i * esz, elem, v[i], loc, pointers, targets)
            return
        raise RuntimeFault("E-UNSUPPORTED", f"cannot store a value of type `{show(t)}`", loc)

    def decode(self, t: Def, data: bytes, loc: Loc | None, off: int = 0, at: Ptr | None = None,
               reader: tuple[int, ...] = ()) -> Value:
        """The value of type t in data from off; `at`: where data was read, by `reader` (launch,
        group, item): a stored pointer into a kernel's shared or local block is the instance its
        shadow names, the reader's own among several."""
        if isinstance(t, IdxT):
            n = self.layout(t, loc).size
            v = int.from_bytes(data[off:off + n], "little")
            if isinstance(t.size, Lit) and v >= t.size.value:
                raise RuntimeFault("E-OOB", f"the loaded value {v} is not a value of `{show(t)}`", loc)
            return v
        if isinstance(t, NatT):
            return int.from_bytes(data[off:off + 8], "little")
        if isinstance(t, Axiom) and t.annex == "gpu.Stream":
            return Stream(int.from_bytes(data[off:off + 8], "little"))
        if isinstance(t, App) and isinstance(t.head, Axiom):
            if t.head.annex in ("mem.Ptr", "buffer.Buf"):
                addr = int.from_bytes(data[off:off + 8], "little")
                cands = at.block.targets.get(at.offset + off, ()) if at is not None and at.block.targets else ()
                if cands and addr >> ADDR_SHIFT == cands[-1].addr:
                    own = [b for b in cands if b.owner == reader[:len(b.owner or ())]]
                    return Ptr(own[0] if own else cands[-1], addr & ((1 << ADDR_SHIFT) - 1))
                # loading NULL (argv[argc]) is defined
                return self.pointer_at(addr, ptr_space(t) or 0, "the loaded pointer", loc)
            if t.head.annex == "mem.M":
                space = t.arg.value if isinstance(t.arg, Lit) else 0
                return Token(space)
        if isinstance(t, Pi):
            addr = int.from_bytes(data[off:off + self.target.pointer_size], "little")
            fn = self._code_at.get(addr)
            if fn is None:
                raise RuntimeFault("E-OOB", f"the loaded value {addr:#x} is no function the program stored", loc)
            return fn
        if isinstance(t, Sigma):
            offs = field_offsets(t, self.target)
            assert offs is not None
            return tuple(self.decode(f, data, loc, off + o, at, reader) for f, o in zip(t.ops, offs))
        if isinstance(t, Arr) and isinstance(t.shape, Lit):
            esz = self.layout(t.body, loc).size
            return tuple(self.decode(t.body, data, loc, off + i * esz, at, reader) for i in range(t.shape.value))
        raise RuntimeFault("E-UNSUPPORTED", f"cannot load a value of type `{show(t)}`", loc)


def _joined(old: tuple[Block, ...], new: tuple[Block, ...]) -> tuple[Block, ...]:
    """The instances a pointer stored again with the same bytes may be from, the new last."""
    return tuple(b for b in old if b not in new) + new


def _remark(b: Block, lo: int, hi: int, starts: Sequence[int],
            targets: dict[int, tuple[Block, ...]] | None = None) -> None:
    """Bytes lo..hi-1 of b were overwritten: no stored pointer overlapping them is one any more,
    and a pointer now starts at lo + k for each k of `starts` (into `targets[k]`, where given)."""
    if b.pointers:
        if hi - lo < 64:
            b.pointers.difference_update(range(lo - 7, hi))
        else:
            b.pointers.difference_update([k for k in b.pointers if lo - 7 <= k < hi])
    if b.targets:
        for k in [k for k in b.targets if lo - 7 <= k < hi]:
            del b.targets[k]
    if starts:
        if b.pointers is None:
            b.pointers = set()
        b.pointers.update(lo + k for k in starts)
    if targets:
        if b.targets is None:
            b.targets = {}
        b.targets.update((lo + k, x) for k, x in targets.items())
