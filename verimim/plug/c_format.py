"""C's `printf` formats, as glibc prints them, for the interpreter (verimim.plug.c_interp).

Modelled: the flags `-+ 0#`, a field width and a precision (digits or `*`), the length
modifiers `hh h l ll z j t`, and the conversions `d i u o x X c s %`. Anything else (`%f`, `%p`,
`%n`, `%ls`, …) is `FormatError` with code `E-UNSUPPORTED`: the interpreter never prints what the
real C library might not. An argument that does not fit its conversion (a pointer for `%d`, an
`I32` for `%ld`, too few arguments) is undefined behaviour in C and `E-TYPE` here.

Arguments reach printf after C's default argument promotions: an integer narrower than `int` is
sign-extended to 32 bits (compiled code does the same, verimim.runtime.host), so `%u` of an `I8`
holding 200 prints 4294967240, as C does for a `signed char`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from verimim.plug.c_lib import Leaf, signed

FLAGS = b"-+ 0#"
LENGTHS = {b"hh": 8, b"h": 16, b"l": 64, b"ll": 64, b"z": 64, b"j": 64, b"t": 64, b"": 32}
INT_CONVS = "diuoxX"
MAX_FIELD = 1 << 20  # widths and precisions beyond this are refused, not printed into memory


def _field(digits: bytes) -> int:
    """A width or precision written in digits; one of more digits than MAX_FIELD has is above
    it whatever they are (and is not converted: Python refuses integers of over 4300 digits)."""
    return MAX_FIELD + 1 if len(digits.lstrip(b"0")) > len(str(MAX_FIELD)) else int(digits)


class FormatError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Spec:
    """One conversion specification: `%[flags][width][.precision][length]conv`."""

    flags: bytes
    width: int | None
    precision: int | None
    length: bytes
    conv: str


def promote(leaf: Leaf, value: int) -> tuple[int, int]:
    """A variadic integer argument after the default promotions: (bits, value mod 2^bits)."""
    if leaf.bits < 32:
        v = value % (1 << leaf.bits)
        if leaf.bits >= 8 and v >> (leaf.bits - 1):
            v -= 1 << leaf.bits
        return 32, v % (1 << 32)
    return leaf.bits, value % (1 << leaf.bits)


class _Args:
    def __init__(self, args: list[tuple[Leaf, object]]) -> None:
        self.args = args
        self.i = 0

    def next(self, what: str) -> tuple[Leaf, object]:
        if self.i >= len(self.args):
            raise FormatError("E-TYPE", f"the format needs an argument for {what}, but the call passes "
                              f"only {len(self.args)} after the format")
        a = self.args[self.i]
        self.i += 1
        return a

    def integer(self, what: str, bits: int) -> int:
        leaf, v = self.next(what)
        n = self.i + 1  # printf's own argument number (the format is argument 1)
        if leaf.kind != "int" or not isinstance(v, int):
            raise FormatError("E-TYPE", f"{what} expects an integer, argument {n} is {leaf}")
        pbits, pv = promote(leaf, v)
        if pbits != bits:
            raise FormatError("E-TYPE", f"{what} expects a {bits}-bit integer, argument {n} is {leaf}")
        return pv


def parse(fmt: bytes, i: int) -> tuple[Spec, int]:
    """The specification starting after the `%` at fmt[i-1]; returns it and the next index."""
    start = i
    flags = b""
    while i < len(fmt) and fmt[i] in FLAGS:
        flags += fmt[i:i + 1]
        i += 1
    width: int | None = None
    if i < len(fmt) and fmt[i:i + 1] == b"*":
        width, i = -1, i + 1  # taken from the arguments
    else:
        j = i
        while i < len(fmt) and fmt[i:i + 1].isdigit():
            i += 1
        width = _field(fmt[j:i]) if i > j else None
    precision: int | None = None
    if fmt[i:i + 1] == b".":
        i += 1
        if fmt[i:i + 1] == b"*":
            precision, i = -1, i + 1
        else:
            j = i
            while i < len(fmt) and fmt[i:i + 1].isdigit():
                i += 1
            precision = _field(fmt[j:i] or b"0")
    length = b""
    for cand in (b"hh", b"ll", b"h", b"l", b"z", b"j", b"t"):
        if fmt.startswith(cand, i):
            length, i = cand, i + len(cand)
            break
    if i >= len(fmt):
        raise FormatError("E-UNSUPPORTED", f"the format ends inside the conversion `%{_text(fmt[start:])}`")
    conv = chr(fmt[i])
    i += 1
    spec = Spec(flags, width, precision, length, conv)
    if conv == "%" and (flags or width is not None or precision is not None or length):
        raise FormatError("E-UNSUPPORTED", f"the conversion `%{_text(fmt[start:i])}`")
    # Flags C leaves undefined for a conversion (`%05s`, `%#d`) are not guessed at either.
    if conv not in "diuoxXcs%" or (conv in "cs" and (length or flags.strip(b"-"))) \
            or (conv in "diu" and b"#" in flags):
        raise FormatError("E-UNSUPPORTED", f"the printf conversion `%{_text(fmt[start:i])}` (verimim models "
                          f"%d %i %u %o %x %X %c %s %% with flags, width, precision and hh/h/l/ll/z/j/t)")
    return spec, i


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _pad(body: bytes, spec: Spec, width: int | None, left: bool, zero_at: int | None = None) -> bytes:
    """body padded to width: on the right with `-`, with zeros after `zero_at` bytes of sign and
    prefix with `0`, else with spaces on the left."""
    if width is None or len(body) >= width:
        return body
    fill = width - len(body)
    if left:
        return body + b" " * fill
    if zero_at is not None:
        return body[:zero_at] + b"0" * fill + body[zero_at:]
    return b" " * fill + body


def format_int(spec: Spec, value: int, bits: int, width: int | None, left: bool,
               precision: int | None) -> bytes:
    conv, flags = spec.conv, spec.flags
    cbits = LENGTHS[spec.length]
    value %= 1 << cbits if cbits < bits else 1 << bits
    sign = b""
    if conv in "di":
        v = signed(value, min(cbits, bits))
        if v < 0:
            sign, v = b"-", -v
        elif b"+" in flags:
            sign = b"+"
        elif b" " in flags:
            sign = b" "
    else:
        v = value
    base = {"o": 8, "x": 16, "X": 16}.get(conv, 10)
    digits = b"" if precision == 0 and v == 0 else _digits(v, base, conv == "X")
    if precision is not None and len(digits) < precision:
        digits = b"0" * (precision - len(digits)) + digits
    prefix = b""
    if b"#" in flags:
        if conv == "o" and not digits.startswith(b"0"):
            digits = b"0" + digits
        elif conv in "xX" and v != 0:
            prefix = b"0x" if conv == "x" else b"0X"
    body = sign + prefix + digits
    zero = len(sign + prefix) if b"0" in flags and not left and precision is None else None
    return _pad(body, spec, width, left, zero)


def _digits(v: int, base: int, upper: bool) -> bytes:
    if v == 0:
        return b"0"
    out = []
    while v:
        v, d = divmod(v, base)
        out.append("0123456789abcdef"[d])
    s = "".join(reversed(out))
    return (s.upper() if upper else s).encode()


def render(fmt: bytes, args: list[tuple[Leaf, object]], read_string: Callable[[object, int | None, str], bytes]) -> bytes:
    """What `printf(fmt, args…)` prints. `read_string(ptr, limit, what)` reads a C string with
    the interpreter's checks (at most `limit` bytes: `%.Ns` need not be NUL-terminated)."""
    out = bytearray()
    a = _Args(args)
    i = 0
    while i < len(fmt):
        j = fmt.find(b"%", i)
        if j < 0:
            out += fmt[i:]
            break
        out += fmt[i:j]
        spec, i = parse(fmt, j + 1)
        what = f"`%{_text(fmt[j + 1:i])}`"
        if spec.conv == "%":
            out += b"%"
            continue
        width, left = spec.width, b"-" in spec.flags
        if width == -1:
            w = signed(a.integer(f"the `*` width of {what}", 32), 32)
            width, left = abs(w), left or w < 0
        precision = spec.precision
        if precision == -1:
            p = signed(a.integer(f"the `*` precision of {what}", 32), 32)
            precision = p if p >= 0 else None  # a negative precision is taken as omitted
        if max(width or 0, precision or 0) > MAX_FIELD:
            raise FormatError("E-UNSUPPORTED", f"{what} with a field of more than {MAX_FIELD} bytes")
        if spec.conv in INT_CONVS:
            bits = 64 if LENGTHS[spec.length] == 64 else 32
            out += format_int(spec, a.integer(what, bits), bits, width, left, precision)
        elif spec.conv == "c":
            out += _pad(bytes([a.integer(what, 32) & 0xFF]), spec, width, left)
        else:  # "s"
            leaf, ptr = a.next(what)
            if leaf.kind != "ptr":
                raise FormatError("E-TYPE", f"{what} expects a string pointer, argument {a.i + 1} is {leaf}")
            out += _pad(read_string(ptr, precision, what), spec, width, left)
    return bytes(out)
