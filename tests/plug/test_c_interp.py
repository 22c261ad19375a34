"""Interpreter semantics of C functions (verimim.plug.c_interp): what each prints and returns,
the memory checks on what they read, unsupported formats and functions, declarations that do
not fit C's prototype."""
from __future__ import annotations

import pytest

from tests.plug.c_programs import (
    STR, at_line, ccon, cfun, fault, line_of, load, program, run, string,
)
from verimim.diagnostics import VerimimError
from verimim.ir.defs import Axiom
from verimim.plug.c_lib import c_call


def _call(name: str, args: str, result: str = "r", ret: str = "(mem, r)") -> str:
    return f"    ret {ret} = %c.{name} $ (mem, {args});\n"


def test_atoi_parses_like_glibc() -> None:
    for text, want in [(b"42", 42), (b"  -17xyz", -17), (b"+8", 8), (b"abc", 0), (b"", 0),
                       (b"\t\n 9 9", 9), (b"- 5", 0), (b"2147483648", -2147483648),
                       (b"99999999999999999999", -1), (b"-" + b"9" * 5000, 0), (b"0000000000000000000042", 42)]:
        src = program(cfun("atoi"), string("s", text) + _call("atoi", "s") + "    return (mem, r);\n")
        assert run(src)[0] == want, text


def test_atoi_reads_only_the_number_not_a_terminator() -> None:
    # "12x" without a NUL: atoi stops at `x`, so nothing past the block is read.
    src = program(cfun("atoi"), string("s", b"12x", nul=False) + _call("atoi", "s") + "    return (mem, r);\n")
    assert run(src)[0] == 12


def test_atoi_of_argv() -> None:
    src = program(cfun("atoi"), f"""    let args = %core.bitcast (%mem.Ptr0 «2; {STR}») argv;
    let (mem, s) = %mem.load (mem, %mem.lea (args, 1_2));
    ret (mem, r) = %c.atoi $ (mem, s);
    return (mem, r);
""")
    assert run(src, ["prog", "-123"])[0] == -123


def test_strlen_puts_putchar_results_and_output() -> None:
    body = (string("s", b"hello") + _call("strlen", "s", ret="(mem, n)") + _call("puts", "s", ret="(mem, a)")
            + "    ret (mem, b) = %c.putchar $ (mem, 321I32);\n"
            + "    return (mem, %core.wrap.add 0 (%core.wrap.add 0 (%core.bitcast I32 n, a), b));\n")
    result, out, _ = run(program(cfun("strlen") + cfun("puts") + cfun("putchar"), body))
    assert out == b"hello\nA"  # putchar prints (unsigned char) 321 = 'A'
    assert result == 5 + 6 + 65


def test_lib_c_printers() -> None:
    decls = "".join(cfun(n) for n in ("print_char", "println_char", "print_str", "println_str", "print_i32",
                                      "println_i32", "newline", "print_integer", "print_int_newline",
                                      "print_newline"))
    body = (string("s", b"ab")
            + "    ret mem = %c.print_char $ (mem, 120I8);\n"
            + "    ret mem = %c.println_char $ (mem, 121I8);\n"
            + "    ret mem = %c.print_str $ (mem, s);\n"
            + "    ret mem = %c.println_str $ (mem, s);\n"
            + "    ret mem = %c.print_i32 $ (mem, 4294967295I32);\n"
            + "    ret mem = %c.println_i32 $ (mem, 7I32);\n"
            + "    ret mem = %c.newline $ mem;\n"
            + "    ret mem = %c.print_integer $ (mem, 3I32);\n"
            + "    ret mem = %c.print_int_newline $ (mem, 4I32);\n"
            + "    ret mem = %c.print_newline $ mem;\n"
            + "    return (mem, 0I32);\n")
    assert run(program(decls, body))[1] == b"xy\nabab\n-17\n\n3, 4\n\n"


def test_print_int_vector_and_matrix_read_checked_ints() -> None:
    decls = cfun("print_int_vector") + cfun("print_int_matrix")
    body = """    let (mem, a) = %mem.slot («4; I32», 0) (mem, 0);
    let mem = %mem.store (mem, a, (1I32, 4294967294I32, 3I32, 4I32));
    let v = %core.bitcast (%mem.Ptr0 «⊤:Nat; I32») a;
    ret mem = %c.print_int_vector $ (mem, 3I32, v);
    ret mem = %c.print_int_matrix $ (mem, 2I32, 2I32, v);
    return (mem, 0I32);
"""
    assert run(program(decls, body))[1] == b"1, -2, 3, \n1, -2, \n3, 4, \n"
    over = body.replace("(mem, 3I32, v)", "(mem, 5I32, v)")
    e, _ = fault(program(decls, over))
    assert e.code == "E-OOB" and at_line(e.loc) == line_of(program(decls, over), "print_int_vector $")


def test_print_int_vector_of_unwritten_ints_is_uninit() -> None:
    decls = cfun("print_int_vector")
    body = """    let (mem, a) = %mem.slot («2; I32», 0) (mem, 0);
    let v = %core.bitcast (%mem.Ptr0 «⊤:Nat; I32») a;
    ret mem = %c.print_int_vector $ (mem, 2I32, v);
    return (mem, 0I32);
"""
    assert fault(program(decls, body))[0].code == "E-UNINIT"


# ------------------------------------------------------------------ strings are checked


def test_string_without_nul_is_out_of_bounds_at_the_call() -> None:
    for name in ("strlen", "puts", "print_str", "atoi"):
        text = b"abc" if name != "atoi" else b"123"
        src = program(cfun(name), string("s", text, nul=False)
                      + f"    ret {'(mem, r)' if name in ('strlen', 'puts', 'atoi') else 'mem'} = %c.{name} $ (mem, s);\n"
                      + "    return (mem, 0I32);\n")
        e, out = fault(src)
        assert e.code == "E-OOB", name
        assert at_line(e.loc) == line_of(src, f"%c.{name} $"), name
        assert "NUL" in e.message and out == b""


def test_string_with_unwritten_bytes_is_uninit() -> None:
    src = program(cfun("puts"), """    let (mem, b) = %mem.slot («4; I8», 0) (mem, 0);
    let mem = %mem.store (mem, %mem.lea (b, 0_4), 104I8);
    let s = %core.bitcast (%mem.Ptr0 «⊤:Nat; I8») b;
    ret (mem, r) = %c.puts $ (mem, s);
    return (mem, r);
""")
    e, _ = fault(src)
    assert e.code == "E-UNINIT" and "byte 1" in e.message


def test_string_after_free_is_use_after_free() -> None:
    src = program(cfun("puts") + cfun("free"), string("s", b"hi", heap=True) + """    ret mem = %c.free $ (mem, s);
    ret (mem, r) = %c.puts $ (mem, s);
    return (mem, r);
""")
    assert fault(src)[0].code == "E-USE-AFTER-FREE"


def test_malloc_free_go_through_the_heap() -> None:
    body = """    ret (mem, p) = %c.malloc $ (mem, 3);
    let b = %core.bitcast (%mem.Ptr0 «3; I8») p;
    let mem = %mem.store (mem, b, (111I8, 107I8, 0I8));
    ret (mem, r) = %c.puts $ (mem, p);
    ret mem = %c.free $ (mem, p);
    return (mem, r);
"""
    decls = cfun("malloc") + cfun("puts") + cfun("free")
    result, out, m = run(program(decls, body))
    assert (result, out, m.warnings) == (3, b"ok\n", [])
    leak = body.replace("    ret mem = %c.free $ (mem, p);\n", "")
    _, _, m = run(program(decls, leak))
    assert [w.code for w in m.warnings] == ["W-LEAK"]
    twice = body.replace("    ret mem = %c.free $ (mem, p);\n", "    ret mem = %c.free $ (mem, p);\n" * 2)
    assert fault(program(decls, twice))[0].code == "E-DOUBLE-FREE"
    stack = program(decls, string("s", b"x") + "    ret mem = %c.free $ (mem, s);\n    return (mem, 0I32);\n")
    assert fault(stack)[0].code == "E-BAD-FREE"


def test_malloc_beyond_what_the_interpreter_holds_is_unsupported() -> None:
    src = program(cfun("malloc"), "    ret (mem, p) = %c.malloc $ (mem, 18446744073709551615);\n    return (mem, 0I32);\n")
    e, _ = fault(src)
    assert e.code == "E-UNSUPPORTED" and "18446744073709551615 bytes" in e.message


# ------------------------------------------------------------------ printf


def _printf(fmt: bytes, args: list[tuple[str, str]]) -> str:
    """A program calling printf(fmt, args…) (args: (Mim type, value)) and returning its result."""
    decl = cfun("printf", f"[%mem.M 0, {STR}{''.join(', ' + t for t, _ in args)}] → [%mem.M 0, I32]")
    call = "    ret (mem, r) = %c.printf $ (mem, f" + "".join(f", {v}" for _, v in args) + ");\n"
    return program(decl, string("f", fmt) + call + "    return (mem, r);\n")


def test_printf_integers_strings_chars() -> None:
    src = _printf(b"[%d|%5i|%-4u|%x|%#X|%o|%c|%%|%05d|%+d|% d|%.3d|%ld]",
                  [("I32", "4294967254I32"), ("I32", "42I32"), ("I32", "7I32"), ("I32", "255I32"),
                   ("I32", "255I32"), ("I32", "8I32"), ("I32", "65I32"), ("I32", "4294967295I32"),
                   ("I32", "5I32"), ("I32", "5I32"), ("I32", "9I32"), ("I64", "18446744073709551615I64")])
    result, out, _ = run(src)
    assert out == b"[-42|   42|7   |ff|0XFF|10|A|%|-0001|+5| 5|009|-1]"
    assert result == len(out)


def test_printf_strings_with_width_and_precision() -> None:
    decl = cfun("printf", f"[%mem.M 0, {STR}, {STR}, {STR}, {STR}] → [%mem.M 0, I32]")

    def body(fmt: bytes) -> str:
        return (string("f", fmt) + string("s", b"abc") + string("t", b"xyz", nul=False)
                + "    ret (mem, r) = %c.printf $ (mem, f, s, s, t);\n    return (mem, r);\n")
    # `%.2s` reads only two bytes of t, which has no NUL at all: fine.
    _, out, _ = run(program(decl, body(b"<%6s|%-4s|%.2s>")))
    assert out == b"<   abc|abc |xy>"
    e, _ = fault(program(decl, body(b"<%6s|%-4s|%.4s>")))
    assert e.code == "E-OOB"


def test_printf_narrow_arguments_are_promoted_signed() -> None:
    _, out, _ = run(_printf(b"%d %u %hhu %c", [("I8", "200I8"), ("I8", "200I8"), ("I8", "200I8"), ("I8", "66I8")]))
    assert out == b"-56 4294967240 200 B"


@pytest.mark.parametrize("fmt", [b"%f", b"%p", b"%n", b"%e", b"%05s", b"%#d", b"%Lf", b"%"])
def test_printf_format_it_cannot_model_is_unsupported(fmt: bytes) -> None:
    src = _printf(b"x=" + fmt, [("I32", "1I32")])
    e, out = fault(src)
    assert e.code == "E-UNSUPPORTED"
    assert at_line(e.loc) == line_of(src, "%c.printf $")
    assert out == b""  # nothing printed: never part of an answer


@pytest.mark.parametrize("fmt,args", [
    (b"%ld", [("I32", "1I32")]),       # C's UB: a 32-bit value for a long
    (b"%d", [("I64", "1I64")]),
    (b"%d %d", [("I32", "1I32")]),     # too few arguments
    (b"%s", [("I32", "1I32")]),
])
def test_printf_arguments_that_do_not_fit_their_conversion(fmt: bytes, args: list[tuple[str, str]]) -> None:
    assert fault(_printf(fmt, args))[0].code == "E-TYPE"


# ------------------------------------------------------------------ declarations


def test_unknown_c_function_is_unsupported_at_its_declaration() -> None:
    src = program(ccon("dont_know", "%mem.M 0, Cn [%mem.M 0, Bool]"),
                  "    %c.dont_know (mem, k)\n    where\n        con k (mem: %mem.M 0, b: Bool) = return (mem, 0I32);\n    end;\n")
    e, _ = fault(src)
    assert e.code == "E-UNSUPPORTED" and "`dont_know`" in e.message
    assert at_line(e.loc) == line_of(src, "axm %c.dont_know")
    assert [r.loc.line for r in e.related if r.loc] == [line_of(src, "%c.dont_know (mem")]


def test_unknown_c_function_declared_but_never_called_runs() -> None:
    src = program(ccon("dont_know", "%mem.M 0, Cn [%mem.M 0, Bool]"), "    return (mem, 7I32);\n")
    assert run(src)[0] == 7


@pytest.mark.parametrize("name,type_,args", [
    ("atoi", "[%mem.M 0, I32] → [%mem.M 0, I32]", "1I32"),            # an int where C takes char*
    ("putchar", f"[%mem.M 0, {STR}] → [%mem.M 0, I32]", "s"),        # a pointer where C takes int
    ("print_i32", "[%mem.M 0, I64] → %mem.M 0", "1I64"),             # wider than int
    ("strlen", f"[%mem.M 0, {STR}, I32] → [%mem.M 0, Nat]", "s, 1I32"),  # one argument too many
    ("print_i32", "[%mem.M 0, I32] → [%mem.M 0, I32]", "1I32"),      # a result from a void function
])
def test_declaration_that_does_not_fit_the_prototype_is_a_type_error(name: str, type_: str, args: str) -> None:
    ret = "(mem, r)" if type_.split(" → ")[1].startswith("[") else "mem"
    src = program(cfun(name, type_), string("s", b"1")
                  + f"    ret {ret} = %c.{name} $ (mem, {args});\n    return (mem, 0I32);\n")
    e, _ = fault(src)
    assert e.code == "E-TYPE", e.message
    assert at_line(e.loc) == line_of(src, f"axm %c.{name}")


def test_pointer_into_device_memory_does_not_fit() -> None:
    world = load(program(cfun("free", "[%mem.M 0, %mem.Ptr («⊤:Nat; I8», 1)] → %mem.M 0"), "    return (mem, 0I32);\n"))
    ax = world.annex("c.free")
    assert isinstance(ax, Axiom)
    with pytest.raises(VerimimError) as e:
        c_call(ax)
    assert e.value.code == "E-TYPE" and "address space 1" in e.value.message and ax.loc is not None


def test_continuation_style_declaration() -> None:
    # `ccon atoi [mem, char*, Cn [mem, I32]]`, as upstream declares it.
    src = program(ccon("atoi", f"%mem.M 0, {STR}, Cn [%mem.M 0, I32]"),
                  string("s", b"31") + "    %c.atoi (mem, s, k)\n    where\n"
                  "        con k (mem: %mem.M 0, v: I32) = return (mem, v);\n    end;\n")
    assert run(src)[0] == 31


def test_narrow_result_is_truncated_to_the_declared_width() -> None:
    # upstream declares strlen's result as I32 (C: size_t): the low bits.
    src = program(cfun("strlen", f"[%mem.M 0, {STR}] → [%mem.M 0, I32]"),
                  string("s", b"abcd") + "    ret (mem, n) = %c.strlen $ (mem, s);\n    return (mem, n);\n")
    assert run(src)[0] == 4
