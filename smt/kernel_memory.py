"""Memory whose contents the kernel verifier knows: typed cells at concrete offsets.

Used for memory only one thread of control sees while it runs — a work-item's local memory
(space 5) and the host's memory as main runs — so that a value stored and loaded back is the
value stored (a local variable, a stream handle), not an unknown one. An object written only at
constant offsets is a map of cells. Once written at an offset that is not a constant, an object
keeps the log of its writes (offset term, size, value) over its unknown first contents: a load
is the last write at an equal offset (`If(off = o₂, x₂, If(off = o₁, x₁, …))`), any value where a
write at another offset or of another size may overlap, else the object's first contents there — one unknown value
per offset, the same for equal offsets however written. A store through a pointer to an unknown
object forgets every object. All of this is sound: where it does not know, it allows any value.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import z3

from verimim.ir.defs import Arr, Def, Lit, Sigma
from verimim.smt import z3_typed as z3t
from verimim.smt.kernel_eval import Evaluator, Ptr, field_offset, size_of


def _cells(t: Def, off: int, value: Any) -> list[tuple[int, int, Any]]:
    """The scalar cells (offset, size, value) a value of type t occupies from `off`."""
    if isinstance(t, Arr) and isinstance(t.shape, Lit) and isinstance(value, tuple):
        elem = size_of(t.body, "an element")
        return [c for k, v in enumerate(value) for c in _cells(t.body, off + k * elem, v)]
    if isinstance(t, Sigma) and isinstance(value, tuple):
        return [c for k, (f, v) in enumerate(zip(t.ops, value)) for c in _cells(f, off + field_offset(t.ops, k), v)]
    return [(off, size_of(t, "a stored value"), value)]


def value_bytes(t: Def, value: Any) -> tuple[Any, ...] | None:
    """The bytes a store of `value` (type t) writes, as the interpreter encodes them: an 8-bit
    term each (little-endian, an integer zero-extended to its cell, padding 0 — interp.memory
    writes zeros there), a pointer's k-th byte as `(pointer, k)`. None where a cell's value has
    no such encoding here (an aggregate held whole, a value wider than its cell)."""
    out: list[Any] = [z3.BitVecVal(0, 8)] * size_of(t, "a stored value")
    for off, size, x in _cells(t, 0, value):
        if isinstance(x, Ptr):
            out[off:off + size] = [(x, k) for k in range(size)]
            continue
        if isinstance(x, z3.BoolRef):
            x = z3.If(x, z3.BitVecVal(1, 8 * size), z3.BitVecVal(0, 8 * size))
        if not isinstance(x, z3.BitVecRef) or x.size() > 8 * size:
            return None
        if x.size() < 8 * size:
            x = z3.ZeroExt(8 * size - x.size(), x)
        out[off:off + size] = [z3t.Extract(8 * k + 7, 8 * k, x) for k in range(size)]
    return tuple(out)


def concrete(e: z3.BitVecRef) -> int | None:
    s = z3.simplify(e)
    return s.as_long() if z3t.is_bv_value(s) else None


@dataclass
class CellMemory:
    objects: dict[int, dict[int, tuple[int, Any]]] = field(default_factory=dict)
    # What an object holds where nothing was written (by object id): a function of the loaded
    # type (None: any value). Dropped with the object's cells when it is forgotten.
    initial: dict[int, Callable[[Evaluator, Def, str], Any]] = field(default_factory=dict)
    # The objects written at an offset that is no constant: every write since, in order
    # (offset term, size, value), over their first contents (`objects` then holds none of them).
    logs: dict[int, list[tuple[z3.BitVecRef, int, Any]]] = field(default_factory=dict)
    # An object's unknown first contents as loads read them: (offset term, type id, value).
    first: dict[int, list[tuple[z3.BitVecRef, int, Any]]] = field(default_factory=dict)

    def store(self, p: Ptr, t: Def, v: Any) -> None:
        self._write(p, _cells(t, 0, v))

    def store_cell(self, p: Ptr, size: int, v: Any) -> None:
        self._write(p, [(0, size, v)])

    def forget(self, p: Ptr) -> None:
        self._write(p, None)

    def _write(self, p: Ptr, new: list[tuple[int, int, Any]] | None) -> None:
        """Write `new` (cells at offsets relative to p) through p; None: p's object is unknown
        from here on."""
        obj = concrete(p.obj)
        if obj is None:
            self.objects.clear()
            self.initial.clear()
            self.logs.clear()
            self.first.clear()
            return
        cells = self.objects.setdefault(obj, {})
        if new is None:
            cells.clear()
            self.initial.pop(obj, None)
            self.logs.pop(obj, None)
            self.first.pop(obj, None)
            return
        off = concrete(p.off)
        if off is None and obj not in self.logs:
            # (what was written at constants, first; what nobody wrote stays the first contents,
            # less what `initial` knew of it)
            self.logs[obj] = [(z3.BitVecVal(k, p.off.size()), s, x) for k, (s, x) in sorted(cells.items())]
            cells.clear()
            self.initial.pop(obj, None)
        log = self.logs.get(obj)
        if log is not None:
            log.extend((p.off + o, size, x) for o, size, x in new)
            return
        assert off is not None
        for o, size, x in new:
            o += off
            for k in [k for k, (s, _) in cells.items() if k < o + size and o < k + s]:
                del cells[k]
            cells[o] = (size, x)

    def load(self, ev: Evaluator, p: Ptr, t: Def, hint: str) -> Any:
        obj, off = concrete(p.obj), concrete(p.off)
        if obj is not None and (off is None or obj in self.logs):
            return self._load_at(ev, obj, p.off, t, hint)
        cells = self.objects.get(obj, {}) if obj is not None else {}

        def build(t: Def, o: int | None) -> Any:
            if o is not None and isinstance(t, Arr) and isinstance(t.shape, Lit) and t.body.closed:
                elem = size_of(t.body, "an element")
                return tuple(build(t.body, o + k * elem) for k in range(t.shape.value))
            if o is not None and isinstance(t, Sigma):
                return tuple(build(f, o + field_offset(t.ops, k)) for k, f in enumerate(t.ops))
            size = size_of(t, "a loaded value")
            hit = cells.get(o) if o is not None else None
            if hit is not None and hit[0] == size:
                return hit[1]
            unwritten = o is not None and not any(k < o + size and o < k + s for k, (s, _) in cells.items())
            if not unwritten or obj is None:
                return ev.fresh(t, hint)
            known = self.initial.get(obj)
            v = known(ev, t, hint) if known is not None else None
            return v if v is not None else self._first(ev, obj, z3.BitVecVal(o, p.off.size()), t, hint)

        return build(t, off)

    def _load_at(self, ev: Evaluator, obj: int, off: z3.BitVecRef, t: Def, hint: str) -> Any:
        """A load of a known object at an offset that is no constant, or of an object written
        at one (its log). An aggregate: any value."""
        if isinstance(t, (Arr, Sigma)):
            return ev.fresh(t, hint)
        size = size_of(t, "a loaded value")
        log = self.logs.get(obj)
        writes = log if log is not None else \
            [(z3.BitVecVal(k, off.size()), s, x) for k, (s, x) in sorted(self.objects.get(obj, {}).items())]
        v = self._first(ev, obj, off, t, hint)
        for o, s, x in writes:
            overlap = z3t.And(z3.ULT(off, o + s), z3.ULT(o, off + size))
            if z3.is_false(z3.simplify(overlap)):
                continue
            # a write of the same size at the same offset is the value; any other overlap (of
            # another size, or of this size a few bytes off) leaves any value
            partly = _select(overlap, ev.fresh(t, hint), v)
            v = _select(off == o, x, partly) if s == size else partly
        return v

    def _first(self, ev: Evaluator, obj: int, off: z3.BitVecRef, t: Def, hint: str) -> Any:
        """The object's first contents at `off` as a value of type t: one value per offset and
        type, the same for offset terms that are equal."""
        seen = self.first.setdefault(obj, [])
        for term, gid, v in seen:
            if gid == t.gid and term.eq(off):
                return v
        v = ev.fresh(t, hint)
        for term, gid, earlier in seen:
            if gid == t.gid:
                v = _select(off == term, earlier, v)
        seen.append((off, t.gid, v))
        return v


def _select(cond: z3.BoolRef | bool, a: Any, b: Any) -> Any:
    """`If(cond, a, b)` for values of the models (bit-vectors, pointers, tagged tuples such as
    stream handles); b where their shapes differ (b is any value: sound, only less exact)."""
    if isinstance(a, z3.ExprRef) and isinstance(b, z3.ExprRef):
        return z3.If(cond, a, b) if a.sort() == b.sort() else b
    if isinstance(a, Ptr) and isinstance(b, Ptr):
        if a.space != b.space:
            return b
        return Ptr(a.space, _select(cond, a.obj, b.obj), _select(cond, a.off, b.off), b.label)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        parts = [_select(cond, x, y) if isinstance(x, (z3.ExprRef, Ptr, tuple)) else (y if x == y else None)
                 for x, y in zip(a, b)]
        return b if any(p is None for p in parts) else tuple(parts)
    return b
