"""Data layout (verimim.layout): which bytes of a type hold its value, and which are padding."""
from __future__ import annotations

from verimim.ir.world import World
from verimim.layout import X86_64, layout_of, value_mask


def test_struct_padding_is_not_value() -> None:
    w = World()
    i8, i32 = w.idx_n(2**8), w.idx_n(2**32)
    s = w.sigma([i8, i32])
    lay = layout_of(s, X86_64)
    assert lay is not None and lay.size == 8
    assert value_mask(s, X86_64) == b"\x01\x00\x00\x00\x01\x01\x01\x01"
    # an array of them repeats the mask; a nested struct keeps its own padding inside
    assert value_mask(w.arr(w.lit_nat(2), s), X86_64) == b"\x01\x00\x00\x00\x01\x01\x01\x01" * 2
    outer = w.sigma([s, i8])
    assert value_mask(outer, X86_64) == b"\x01\x00\x00\x00\x01\x01\x01\x01\x01\x00\x00\x00"


def test_types_without_padding_have_no_mask() -> None:
    w = World()
    i32 = w.idx_n(2**32)
    for t in (i32, w.nat(), w.sigma([i32, i32]), w.arr(w.lit_nat(3), w.idx_n(2**8)), w.sigma([w.idx_n(2**8)] * 3)):
        assert value_mask(t, X86_64) is None


def test_a_function_type_has_a_function_pointers_layout() -> None:
    # upstream's normalize_trait: a Pi is lowered to a function pointer (size and align 8)
    w = World()
    i32 = w.idx_n(2 ** 32)
    fn = w.pi(i32, i32)
    assert layout_of(fn, X86_64) is not None and (layout_of(fn, X86_64).size, layout_of(fn, X86_64).align) == (8, 8)
    cn = w.cn(w.sigma([i32, w.cn(i32)]))
    lay = layout_of(w.sigma([i32, cn]), X86_64)
    assert lay is not None and lay.size == 16
