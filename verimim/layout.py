"""Data layout of Mim types on the targets (SEMANTICS.md): sizes and alignments in bytes.

`Bool` and `Idx n` take the smallest of i1/i8/i16/i32/i64 that holds n - 1 (i1 in one byte),
`Nat` is an i64, pointers and `gpu.Stream` handles are 8 bytes, memory tokens take none,
sigmas are laid out as C structs and arrays are packed. NVPTX64 and x86-64 agree on all of
these, so one table serves both.
"""
from __future__ import annotations

from dataclasses import dataclass

from verimim.ir.defs import App, Arr, Axiom, Def, IdxT, Lit, NatT, Pi, Sigma, Tuple


@dataclass(frozen=True)
class Layout:
    size: int
    align: int


@dataclass(frozen=True)
class Target:
    name: str
    pointer_size: int = 8


NVPTX64 = Target("nvptx64")
X86_64 = Target("x86-64")


def int_bytes(n: int) -> int | None:
    """Bytes of the integer that holds `Idx n`."""
    if n <= 2**8:
        return 1
    if n <= 2**16:
        return 2
    if n <= 2**32:
        return 4
    if n <= 2**64:
        return 8
    return None


def _align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def layout_of(t: Def, target: Target) -> Layout | None:
    """The layout of a closed, fully known type; None when it has none (or is not known)."""
    if isinstance(t, NatT):
        return Layout(8, 8)
    if isinstance(t, IdxT):
        if not isinstance(t.size, Lit):
            return None
        b = int_bytes(t.size.value)
        return Layout(b, b) if b else None
    if isinstance(t, Axiom) and t.annex == "gpu.Stream":
        return Layout(target.pointer_size, target.pointer_size)
    if isinstance(t, Pi):
        # a function or continuation value is lowered to a function pointer (upstream's
        # normalize_trait: `Pi` → 8)
        return Layout(target.pointer_size, target.pointer_size)
    if isinstance(t, App) and isinstance(t.head, Axiom):
        if t.head.annex in ("mem.Ptr", "buffer.Buf"):  # a buffer is a pointer to its array
            return Layout(target.pointer_size, target.pointer_size)
        if t.head.annex == "mem.M":
            return Layout(0, 1)
        return None
    if isinstance(t, Sigma):
        if t.dependent:
            return None
        offset, align = 0, 1
        for f in t.ops:
            lay = layout_of(f, target)
            if lay is None:
                return None
            offset = _align_up(offset, lay.align) + lay.size
            align = max(align, lay.align)
        return Layout(_align_up(offset, align), align)
    if isinstance(t, Arr):
        if not isinstance(t.shape, Lit) or t.body.bvd:
            return None
        lay = layout_of(t.body, target)
        if lay is None:
            return None
        return Layout(t.shape.value * lay.size, lay.align)
    return None


def value_mask(t: Def, target: Target) -> bytes | None:
    """Which bytes of t's layout hold its value (1) and which are padding (0): None when every
    byte does (or t has no layout). A load reads the value, as in C, not the padding: bytes a
    struct's fields never cover need not have been written."""
    if isinstance(t, Sigma):
        offsets, lay = field_offsets(t, target), layout_of(t, target)
        if offsets is None or lay is None:
            return None
        out = bytearray(lay.size)
        for f, off in zip(t.ops, offsets):
            field = layout_of(f, target)
            if field is None:
                return None
            out[off:off + field.size] = value_mask(f, target) or b"\x01" * field.size
        return None if all(out) else bytes(out)
    if isinstance(t, Arr) and isinstance(t.shape, Lit):
        elem = value_mask(t.body, target)
        return None if elem is None else elem * t.shape.value
    return None


def field_offsets(t: Sigma, target: Target) -> list[int] | None:
    offsets: list[int] = []
    offset = 0
    for f in t.ops:
        lay = layout_of(f, target)
        if lay is None:
            return None
        offset = _align_up(offset, lay.align)
        offsets.append(offset)
        offset += lay.size
    return offsets


def ptr_space(t: Def) -> int | None:
    """The address space of a pointer type `mem.Ptr (T, a)` with a literal a, else None."""
    if isinstance(t, App) and isinstance(t.head, Axiom) and t.head.annex == "mem.Ptr" \
            and isinstance(t.arg, Tuple) and len(t.arg.ops) == 2 and isinstance(t.arg.ops[1], Lit):
        return t.arg.ops[1].value
    return None
