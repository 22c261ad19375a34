"""Computing with ⊥ (or ⊤ as a run-time value) is E-UNINIT wherever the program does it
(docs/semantics.md): passed to a C function, used as the pointer of a load, store, lea or free,
called, cast from a pointer. Each of these was an internal error (a Python TypeError or
AttributeError, exit 3), E-OOB ("points nowhere"), E-BAD-FREE or E-UNSUPPORTED; and the native
back end crashed compiling a load or store through ⊥ (a probe's programs)."""
from __future__ import annotations

import pytest

from tests.plug.c_programs import cfun, fault, line_of, load, program

SLOT = "    let (mem, p) = %mem.slot («4; I32», 0) (mem, 0);\n"

CASES = {
    "printed by a C function": (cfun("putchar"), "    ret (mem, c) = %c.putchar $ (mem, ⊥:I32);\n"
                                "    return (mem, c);\n", "ret (mem, c)"),
    "a C function's size": (cfun("malloc"), "    ret (mem, q) = %c.malloc $ (mem, ⊥:Nat);\n"
                            "    return (mem, 0I32);\n", "ret (mem, q)"),
    "the pointer of a load": ("", "    let (mem, v) = %mem.load (mem, ⊥:(%mem.Ptr0 I32));\n    return (mem, v);\n",
                              "%mem.load"),
    "the pointer of a load (⊤)": ("", "    let (mem, v) = %mem.load (mem, ⊤:(%mem.Ptr0 I32));\n"
                                  "    return (mem, v);\n", "%mem.load"),
    "the pointer of a store": ("", "    let mem = %mem.store (mem, ⊥:(%mem.Ptr0 I32), argc);\n"
                               "    return (mem, 0I32);\n", "%mem.store"),
    "the pointer of a lea": ("", SLOT + "    let q = %mem.lea (⊥:(%mem.Ptr0 «4; I32»), 1_4);\n"
                             "    let (mem, v) = %mem.load (mem, q);\n    return (mem, v);\n", "%mem.lea"),
    "the pointer of a free": ("", "    let mem = %mem.free (mem, ⊥:(%mem.Ptr0 I32));\n    return (mem, 0I32);\n",
                              "%mem.free"),
    "a pointer cast to an integer": ("", "    return (mem, %core.bitcast I32 (%core.bitcast Nat (⊥:(%mem.Ptr0 I32))));\n",
                                     "%core.bitcast Nat"),
    "the function called": ("", "    let f = ⊥:(Fn I32 → I32);\n    ret r = f $ argc;\n    return (mem, r);\n",
                            "ret r = f"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_computing_with_an_undefined_value_is_e_uninit(name: str) -> None:
    decls, body, at = CASES[name]
    src = program(decls, body)
    e, _ = fault(src)
    assert e.code == "E-UNINIT", (e.code, e.message)
    assert "undefined value" in e.message
    assert e.loc is not None and e.loc.line == line_of(src, at), (e.loc, at)


@pytest.mark.parametrize("name", ["the pointer of a load", "the pointer of a load (⊤)", "the pointer of a store",
                                  "the pointer of a lea", "the pointer of a free"])
def test_the_back_end_compiles_an_undefined_pointer(name: str) -> None:
    # (an undefined value natively: LLVM's `undef`, a P like every pointer; it was a raw constant,
    # and the load read its `.v`: AttributeError, E-INTERNAL)
    pytest.importorskip("llvmlite.binding")
    from verimim.runtime.hostrt import compile_program

    decls, body, _ = CASES[name]
    compiled = compile_program(load(program(decls, body)))
    assert "undef" in compiled.host.llvm_ir
