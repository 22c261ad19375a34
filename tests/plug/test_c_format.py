"""The interpreter's printf (verimim.plug.c_format) against the C library's own snprintf, on
generated formats and arguments: every format it models prints byte for byte what libc prints."""
from __future__ import annotations

import ctypes
import ctypes.util

from hypothesis import given, settings, strategies as st

from verimim.plug.c_format import FormatError, render
from verimim.plug.c_lib import Leaf

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None)


def _c_snprintf(fmt: bytes, args: list[tuple[Leaf, object]]) -> bytes:
    cargs: list[object] = []
    for leaf, v in args:
        if leaf.kind == "ptr":
            cargs.append(ctypes.c_char_p(v))  # type: ignore[arg-type]
        elif leaf.bits == 64:
            cargs.append(ctypes.c_uint64(v))  # type: ignore[arg-type]
        else:
            # after the default promotions: an int (narrower values sign-extended, as c_format does)
            x = v % (1 << leaf.bits)  # type: ignore[operator]
            if leaf.bits >= 8 and x >> (leaf.bits - 1):
                x -= 1 << leaf.bits
            cargs.append(ctypes.c_int32(x))
    buf = ctypes.create_string_buffer(4096)
    n = _libc.snprintf(buf, ctypes.c_size_t(4096), fmt, *cargs)
    return buf.raw[:n]


def _read(p: object, limit: int | None, what: str) -> bytes:
    assert isinstance(p, bytes)
    return p if limit is None else p[:limit]


flags = st.text(alphabet="-+ 0#", max_size=3)
width = st.one_of(st.just(""), st.integers(1, 12).map(str))
prec = st.one_of(st.just(""), st.integers(0, 8).map(lambda n: f".{n}"))
int_conv = st.sampled_from("diuoxX")
length = st.sampled_from(["", "hh", "h", "l", "ll", "z"])


@st.composite
def int_spec(draw: st.DrawFn) -> tuple[bytes, tuple[Leaf, object]]:
    conv, ln = draw(int_conv), draw(length)
    fl = draw(flags)
    if conv in "diu":
        fl = fl.replace("#", "")
    bits = 64 if ln in ("l", "ll", "z") else draw(st.sampled_from([8, 16, 32]))
    value = draw(st.integers(0, (1 << bits) - 1))
    return f"%{fl}{draw(width)}{draw(prec)}{ln}{conv}".encode(), (Leaf("int", bits), value)


@st.composite
def str_spec(draw: st.DrawFn) -> tuple[bytes, tuple[Leaf, object]]:
    conv = draw(st.sampled_from("sc"))
    fl = draw(st.sampled_from(["", "-"]))
    if conv == "c":
        return f"%{fl}{draw(width)}c".encode(), (Leaf("int", 32), draw(st.integers(1, 255)))
    s = draw(st.binary(max_size=10).map(lambda b: b.replace(b"\0", b"a")))
    return f"%{fl}{draw(width)}{draw(prec)}s".encode(), (Leaf("ptr"), s)


literal = st.binary(max_size=6).map(lambda b: b.replace(b"%", b"%%").replace(b"\0", b"."))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(literal, st.one_of(int_spec(), str_spec())), max_size=4), literal)
def test_render_matches_libc(parts: list[tuple[bytes, tuple[bytes, tuple[Leaf, object]]]], tail: bytes) -> None:
    fmt = b"".join(lit + spec for lit, (spec, _) in parts) + tail
    args = [a for _, (_, a) in parts]
    assert render(fmt, args, _read) == _c_snprintf(fmt, args), fmt


def test_star_width_and_precision_match_libc() -> None:
    i32 = Leaf("int", 32)
    for fmt, args in [(b"%*d|", [(i32, 6), (i32, 42)]), (b"%-*d|", [(i32, 4), (i32, 1)]),
                      (b"%*d|", [(i32, 2**32 - 5), (i32, 7)]), (b"%.*d|", [(i32, 4), (i32, 3)]),
                      (b"%.*s|", [(i32, 2), (Leaf("ptr"), b"hello")])]:
        assert render(fmt, args, _read) == _c_snprintf(fmt, args), fmt


def test_huge_fields_are_refused() -> None:
    i32 = Leaf("int", 32)
    for fmt, args in [(b"%999999999d", [(i32, 1)]), (b"%*d", [(i32, 2**31 - 1), (i32, 1)]),
                      (b"%.99999999d", [(i32, 1)]),
                      # more digits than Python converts to an int (4300): was E-INTERNAL
                      (b"%0" + b"1" * 5000 + b"d", [(i32, 1)]), (b"%." + b"1" * 5000 + b"d", [(i32, 1)])]:
        try:
            render(fmt, args, _read)
        except FormatError as e:
            assert e.code == "E-UNSUPPORTED", fmt
        else:
            raise AssertionError(fmt)


def test_unmodelled_conversions_are_refused() -> None:
    for fmt in (b"%f", b"%g", b"%p", b"%n", b"%a", b"%ls", b"%lc", b"%05s", b"%+s", b"%#i", b"%5%", b"%q", b"%"):
        try:
            render(fmt, [(Leaf("int", 32), 1)], _read)
        except FormatError as e:
            assert e.code == "E-UNSUPPORTED", fmt
        else:
            raise AssertionError(fmt)


def test_leading_zeros_of_a_field_are_no_digits_of_its_size() -> None:
    i32 = Leaf("int", 32)
    assert render(b"%.00000000000003d", [(i32, 7)], _read) == _c_snprintf(b"%.00000000000003d", [(i32, 7)])


def test_a_64_bit_argument_is_named_by_its_type() -> None:
    try:
        render(b"%d", [(Leaf("int", 64), 1)], _read)
    except FormatError as e:
        assert "I64" in e.message and "Nat" not in e.message, e.message
    else:
        raise AssertionError("%d of an I64")
    assert str(Leaf("int", 64, nat=True)) == "Nat"
