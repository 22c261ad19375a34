"""Memory whose contents the kernel verifier knows: typed cells at concrete offsets.

Used for memory only one thread of control sees while it runs — a work-item's local memory
(space 5) and the host's memory as main runs — so that a value stored and loaded back is the
value stored (a local variable, a stream handle), not an unknown one. A store at an offset that
is not a constant forgets the object (an unknown object: all of it); a load of a cell not
written, or written with another size, is a fresh value of the type. Both are sound: forgetting
only makes more values possible.
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


def concrete(e: z3.BitVecRef) -> int | None:
    s = z3.simplify(e)
    return s.as_long() if z3t.is_bv_value(s) else None


@dataclass
class CellMemory:
    objects: dict[int, dict[int, tuple[int, Any]]] = field(default_factory=dict)
    # What an object holds where nothing was written (by object id): a function of the loaded
    # type (None: any value). Dropped with the object's cells when it is forgotten.
    initial: dict[int, Callable[[Evaluator, Def, str], Any]] = field(default_factory=dict)
    # What a load at a symbolic offset of an object gave (by object, offset term, type), until
    # the next write to that object: the same load again reads the same value (a stream handle
    # loaded twice from `sa[argc & 1]` is one stream, not two unknown ones).
    symbolic: dict[int, dict[tuple[int, int], list[tuple[z3.BitVecRef, Any]]]] = field(default_factory=dict)

    def store(self, p: Ptr, t: Def, v: Any) -> None:
        off = concrete(p.off)
        self._write(p, _cells(t, off, v) if off is not None else None)

    def store_cell(self, p: Ptr, size: int, v: Any) -> None:
        off = concrete(p.off)
        self._write(p, [(off, size, v)] if off is not None else None)

    def forget(self, p: Ptr) -> None:
        self._write(p, None)

    def _write(self, p: Ptr, new: list[tuple[int, int, Any]] | None) -> None:
        obj = concrete(p.obj)
        if obj is None:
            self.objects.clear()
            self.initial.clear()
            self.symbolic.clear()
            return
        self.symbolic.pop(obj, None)
        cells = self.objects.setdefault(obj, {})
        if new is None:
            cells.clear()
            self.initial.pop(obj, None)
            return
        for o, size, x in new:
            for k in [k for k, (s, _) in cells.items() if k < o + size and o < k + s]:
                del cells[k]
            cells[o] = (size, x)

    def load(self, ev: Evaluator, p: Ptr, t: Def, hint: str) -> Any:
        obj, off = concrete(p.obj), concrete(p.off)
        if obj is not None and off is None:
            return self._load_symbolic(ev, obj, p.off, t, hint)
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
            known = self.initial.get(obj) if obj is not None and unwritten else None
            v = known(ev, t, hint) if known is not None else None
            return v if v is not None else ev.fresh(t, hint)

        return build(t, off)

    def _load_symbolic(self, ev: Evaluator, obj: int, off: z3.BitVecRef, t: Def, hint: str) -> Any:
        """A load of a known object at an offset that is no number: any value, the same as an
        earlier load of that offset term and type since the object was last written."""
        seen = self.symbolic.setdefault(obj, {}).setdefault((off.hash(), t.gid), [])
        for term, v in seen:
            if term.eq(off):
                return v
        v = ev.fresh(t, hint)
        seen.append((off, v))
        return v
