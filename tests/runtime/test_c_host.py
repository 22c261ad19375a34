"""C calls in compiled host code (verimim.runtime.c_host): the real C library through llvmlite,
lib.c's helpers in generated IR; the compiled program prints and returns exactly what the
interpreter does (no GPU needed: these programs have no kernels). What cannot be compiled is
refused as the interpreter refuses it, at the declaration."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("llvmlite.binding")

from tests.plug.c_programs import HEADER, MAIN, STR, ccon, cfun, load, program, run, string  # noqa: E402
from verimim.diagnostics import VerimimError  # noqa: E402
from verimim.runtime.hostrt import compile_program, jit, run_jitted  # noqa: E402


def native(src: str, argv: list[str] | None = None) -> tuple[int, bytes]:
    out = bytearray()
    result = run_jitted(jit(compile_program(load(src))), argv or ["prog"], out)
    return result, bytes(out)


def same(src: str, argv: list[str] | None = None) -> tuple[int, bytes]:
    want = run(src, argv)[:2]
    got = native(src, argv)
    assert got == want
    return got


def test_libc_functions() -> None:
    decls = "".join(cfun(n) for n in ("strlen", "puts", "putchar", "atoi", "malloc", "free"))
    body = (string("s", b"  -31 apples")
            + """    ret (mem, n) = %c.strlen $ (mem, s);
    ret (mem, a) = %c.puts $ (mem, s);
    ret (mem, b) = %c.putchar $ (mem, 4294967105I32);
    ret (mem, v) = %c.atoi $ (mem, s);
    ret (mem, p) = %c.malloc $ (mem, 2);
    let q = %core.bitcast (%mem.Ptr0 «2; I8») p;
    let mem = %mem.store (mem, q, (57I8, 0I8));
    ret (mem, w) = %c.atoi $ (mem, p);
    ret mem = %c.free $ (mem, p);
    let r = %core.wrap.add 0 (%core.wrap.add 0 (%core.bitcast I32 n, a), %core.wrap.add 0 (b, v));
    return (mem, %core.wrap.add 0 (r, w));
""")
    assert same(program(decls, body)) == (12 + 13 + 65 - 31 + 9, b"  -31 apples\nA")


def test_lib_c_helpers() -> None:
    names = ("print_char", "println_char", "print_str", "println_str", "print_i32", "println_i32", "newline",
             "print_integer", "print_int_newline", "print_newline", "print_int_vector", "print_int_matrix")
    body = (string("s", b"txt")
            + """    let (mem, a) = %mem.slot («6; I32», 0) (mem, 0);
    let mem = %mem.store (mem, a, (1I32, 4294967294I32, 3I32, 4I32, 5I32, 6I32));
    let v = %core.bitcast (%mem.Ptr0 «⊤:Nat; I32») a;
    ret mem = %c.print_char $ (mem, 200I8);
    ret mem = %c.println_char $ (mem, 66I8);
    ret mem = %c.print_str $ (mem, s);
    ret mem = %c.println_str $ (mem, s);
    ret mem = %c.print_i32 $ (mem, 2147483648I32);
    ret mem = %c.println_i32 $ (mem, 12I32);
    ret mem = %c.newline $ mem;
    ret mem = %c.print_integer $ (mem, 7I32);
    ret mem = %c.print_int_newline $ (mem, 8I32);
    ret mem = %c.print_newline $ mem;
    ret mem = %c.print_int_vector $ (mem, 4I32, v);
    ret mem = %c.print_int_matrix $ (mem, 2I32, 3I32, v);
    ret mem = %c.print_int_matrix $ (mem, 0I32, 3I32, v);
    return (mem, 0I32);
""")
    _, out = same(program("".join(cfun(n) for n in names), body))
    assert out == b"\xc8B\ntxttxt\n-2147483648" + b"12\n\n7, 8\n\n1, -2, 3, 4, \n1, -2, 3, \n4, 5, 6, \n"


@pytest.mark.parametrize("fmt,args", [
    (b"[%d|%5i|%-4u|%x|%#X|%o|%c|%%]\n", [("I32", "4294967254I32"), ("I32", "42I32"), ("I32", "7I32"),
                                           ("I32", "255I32"), ("I32", "255I32"), ("I32", "8I32"), ("I32", "65I32")]),
    (b"%05d %+d % d %.3d %ld %llx %zu\n", [("I32", "4294967295I32"), ("I32", "5I32"), ("I32", "5I32"),
                                            ("I32", "9I32"), ("I64", "18446744073709551615I64"),
                                            ("I64", "255I64"), ("Nat", "77")]),
    (b"%d %u %hhu %hd %c|%s|%8s|%-3.2s|\n", [("I8", "200I8"), ("I8", "200I8"), ("I8", "200I8"), ("I16", "65535I16"),
                                              ("I8", "67I8"), (STR, "s"), (STR, "s"), (STR, "s")]),
    (b"%*d|%-*d|%.*d\n", [("I32", "6I32"), ("I32", "42I32"), ("I32", "4I32"), ("I32", "1I32"), ("I32", "3I32"),
                          ("I32", "5I32")]),
    (b"%d\n", [("Bool", "tt")]),
])
def test_printf_compiled_prints_what_the_interpreter_prints(fmt: bytes, args: list[tuple[str, str]]) -> None:
    decl = cfun("printf", f"[%mem.M 0, {STR}{''.join(', ' + t for t, _ in args)}] → [%mem.M 0, I32]")
    body = (string("f", fmt) + string("s", b"word")
            + "    ret (mem, r) = %c.printf $ (mem, f" + "".join(f", {v}" for _, v in args) + ");\n"
            + "    return (mem, r);\n")
    result, out = same(program(decl, body))
    assert result == len(out) > 0


def test_continuation_style_declarations_as_upstream_writes_them() -> None:
    src = HEADER + f"""ccon atoi [%mem.M 0, %mem.Ptr («⊤:Nat; I8», 0), Cn [%mem.M 0, I32]];
ccon println_i32 [mem: %mem.M 0, val: I32, return : Cn [%mem.M 0]];
cfun print_str [%mem.M 0, {STR}]: %mem.M 0;
""" + MAIN + """    let args = %core.bitcast (%mem.Ptr0 «3; %mem.Ptr0 «⊤:Nat; I8»») argv;
    let (mem, a) = %mem.load (mem, %mem.lea (args, 1_3));
    let (mem, b) = %mem.load (mem, %mem.lea (args, 2_3));
    ret mem = print_str $ (mem, a);
    atoi (mem, a, ka)
    where
        con ka (mem: %mem.M 0, x: I32) = atoi (mem, b, kb)
        where
            con kb (mem: %mem.M 0, y: I32) = println_i32 (mem, %core.bit2.and_ 0 (x, y), done)
            where
                con done (mem: %mem.M 0) = return (mem, %core.bit2.and_ 0 (x, y));
            end
        end
    end;
"""
    assert same(src, ["prog", "7", "5"]) == (5, b"75\n")


def test_time_and_print_time_diff() -> None:
    void = "%mem.Ptr («⊤:Nat; []», 0)"
    decls = (ccon("time", f"%mem.M 0, Cn [%mem.M 0, {void}]")
             + ccon("print_time_diff", f"%mem.M 0, {void}, {void}, Cn %mem.M 0") + cfun("free", f"[%mem.M 0, {void}] → %mem.M 0"))
    body = """    %c.time (mem, k1)
    where
        con k1 (mem: %mem.M 0, t1: %mem.Ptr («⊤:Nat; []», 0)) = %c.time (mem, k2)
        where
            con k2 (mem: %mem.M 0, t2: %mem.Ptr («⊤:Nat; []», 0)) = %c.print_time_diff (mem, t1, t2, k3)
            where
                con k3 (mem: %mem.M 0) =
                    ret mem = %c.free $ (mem, t1);
                    ret mem = %c.free $ (mem, t2);
                    return (mem, 0I32);
            end
        end
    end;
"""
    src = program(decls, body)
    for result, out in (run(src)[:2], native(src)):
        assert result == 0 and re.fullmatch(rb"real\t\d+\.\d{6} \n", out), out


def test_unknown_c_function_is_unsupported_at_its_declaration_when_compiling() -> None:
    src = program(ccon("dont_know", "%mem.M 0, Cn [%mem.M 0, Bool]"),
                  "    %c.dont_know (mem, k)\n    where\n        con k (mem: %mem.M 0, b: Bool) = return (mem, 0I32);\n    end;\n")
    with pytest.raises(VerimimError) as e:
        compile_program(load(src))
    assert e.value.code == "E-UNSUPPORTED" and "`dont_know`" in e.value.message
    assert e.value.loc is not None and e.value.loc.line == 3


def test_misfit_declaration_is_a_type_error_when_compiling() -> None:
    src = program(cfun("print_i32", "[%mem.M 0, I64] → %mem.M 0"),
                  "    ret mem = %c.print_i32 $ (mem, 1I64);\n    return (mem, 0I32);\n")
    with pytest.raises(VerimimError) as e:
        compile_program(load(src))
    assert e.value.code == "E-TYPE" and e.value.loc is not None and e.value.loc.line == 3


def test_compiled_output_does_not_reach_this_process_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    src = program(cfun("puts"), string("s", b"captured") + "    ret (mem, r) = %c.puts $ (mem, s);\n    return (mem, r);\n")
    assert native(src) == (9, b"captured\n")
    assert "captured" not in capfd.readouterr().out


KERNEL_WRITES = """con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 4, (), out: %mem.Ptr («4; I32», 1),
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let v = %core.wrap.mul 0 (%core.bitcast I32 item_id, 4294967293I32);
    let m1 = %mem.store (m1, %mem.lea (out, item_id), v);
    return (m1, m3, m4, m5);
"""

GPU_MAIN = """    let (mem, m1, m4) = %gpu.init mem;
    let (mem, h) = %mem.slot («4; I32», 0) (mem, 0);
    let mem = %mem.store (mem, h, (0I32, 0I32, 0I32, 0I32));
    let (mem, m1, d) = %gpu.alloc_copy.block (mem, m1, h);
    ret (mem, m1, m4) = %gpu.launch (1, 4, %gpu.default_stream, ff, ()) kernel d $ (mem, m1, m4);
    let (mem, m1) = %gpu.copy_to_host.block (mem, m1, d, h);
    let m1 = %gpu.free.block (m1, d);
    let mem = %gpu.deinit (mem, m1, m4);
    ret mem = %c.print_int_vector $ (mem, 4I32, %core.bitcast (%mem.Ptr0 «⊤:Nat; I32») h);
    let (mem, x) = %mem.load (mem, %mem.lea (h, 3_4));
    return (mem, x);
"""


def _gpu_program() -> str:
    return "plugin gpu;\n" + program(cfun("print_int_vector") + KERNEL_WRITES, GPU_MAIN)


def test_c_call_in_a_kernel_is_unsupported() -> None:
    decl = cfun("print_i32", "[%mem.M 1, I32] → %mem.M 1")
    kernel = KERNEL_WRITES.replace("    return (m1, m3, m4, m5);",
                                   "    ret m1 = %c.print_i32 $ (m1, v);\n    return (m1, m3, m4, m5);")
    src = "plugin gpu;\n" + program(decl + kernel, GPU_MAIN.replace("    ret mem = %c.print_int_vector $ (mem, 4I32, "
                                                                 "%core.bitcast (%mem.Ptr0 «⊤:Nat; I32») h);\n", ""))
    world = load(src)
    from verimim.interp.machine import Machine, find_main
    from verimim.interp.values import RuntimeFault

    with pytest.raises(RuntimeFault) as e:
        Machine(world).run_main(find_main(world), ["p"])
    assert e.value.code == "E-UNSUPPORTED" and "`print_i32` in a kernel" in e.value.message
    with pytest.raises(VerimimError) as e2:
        compile_program(load(src))
    assert e2.value.code == "E-UNSUPPORTED" and "`print_i32` in a kernel" in e2.value.message


def test_host_prints_what_a_kernel_computed_compiles() -> None:
    prog = compile_program(load(_gpu_program()))
    assert '@"cuLaunchKernel"' in prog.host.llvm_ir and "verimim_c_print_int_vector" in prog.host.llvm_ir


def test_host_prints_what_a_kernel_computed_on_the_gpu() -> None:
    from verimim.runtime.cuda import device_available

    if not device_available():
        pytest.skip("no CUDA device (cuda-python, driver or GPU missing)")
    src = _gpu_program()
    assert same(src) == (-9, b"0, -3, -6, -9, \n")
