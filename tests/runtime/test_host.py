"""Host code generation (verimim.runtime.host): every valid corpus program compiles to host LLVM
IR that llvmlite verifies; programs without GPU operations are JIT-compiled and run natively here
(no GPU needed) and must give the interpreter's result; what the host backend cannot compile is
`E-UNSUPPORTED`, named. Runs of programs with kernels are in test_cuda.py (GPU only)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llvmlite.binding")

from verimim.diagnostics import VerimimError  # noqa: E402
from verimim.frontend.loader import load_program, load_text  # noqa: E402
from verimim.interp.machine import Machine, find_main  # noqa: E402
from verimim.runtime.hostrt import compile_program, jit, run_jitted  # noqa: E402

from .conftest import ROOT, program_args  # noqa: E402
from .known_limits import xfail_if_known_limit  # noqa: E402

VALID = sorted((ROOT / "tests" / "programs" / "valid").glob("*.mim"))


def _interp(world, argv: list[str]) -> int:  # type: ignore[no-untyped-def]
    return Machine(world).run_main(find_main(world), argv)


@pytest.mark.parametrize("path", VALID, ids=[p.name for p in VALID])
def test_corpus_compiles_and_host_only_programs_run_natively(path: Path) -> None:
    world, _ = load_program(str(path), [])
    try:
        prog = compile_program(world)
    except VerimimError as e:
        xfail_if_known_limit(e, path)
        raise
    ir = prog.host.llvm_ir
    assert "define i32 @\"verimim_main\"" in ir
    if "gpu.launch" in path.read_text():
        assert prog.device is not None and prog.host.kernels, "a launch compiles to a runtime launch call"
        assert "@\"cuLaunchKernel\"" in ir
    if "verimim_rt_" in ir or "cuLaunchKernel" in ir:
        return  # needs a GPU: test_cuda.py
    argv = [str(path), *program_args(path)]
    assert run_jitted(jit(prog), argv) == _interp(world, argv)


HEADER = "plugin core;\nplugin mem;\n"


def _compile_text(src: str):  # type: ignore[no-untyped-def]
    world, _ = load_text(HEADER + src, "<host-test>")
    return world, compile_program(world)


def test_tail_recursive_function_is_a_loop() -> None:
    # `count` calls itself in tail position with its own return continuation: one block, a loop.
    src = """
fun count (m: mem.M 0, i: Nat, acc: Nat): [mem.M 0, Nat] =
    (done, more)#(core.ncmp.l (i, 1000)) m
    where
        con done (m: mem.M 0) = return (m, acc);
        con more (m: mem.M 0) = count ((m, core.nat.add (i, 1), core.nat.add (acc, i)), return);
    end;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    ret (m0, s) = count $ (m0, 0, 0);
    return (m0, core.bitcast I32 s);
"""
    world, prog = _compile_text(src)
    labels = [ln for ln in prog.host.llvm_ir.splitlines() if ln.startswith("count.")]
    assert labels == ["count.1:"], "one block for `count`, entered again by the tail call"
    assert run_jitted(jit(prog), ["p"]) == _interp(world, ["p"]) == 999 * 1000 // 2


FACT = """
fun fact (m: mem.M 0, n: Nat): [mem.M 0, Nat] =
    (step, base)#(core.ncmp.e (n, 0)) m
    where
        con base (m: mem.M 0) = return (m, 1);
        con step (m: mem.M 0) =
            ret (m, r) = fact $ (m, core.nat.sub (n, 1));
            return (m, core.wrap.add 0 (n, r));
    end;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    ret (m0, f) = fact $ (m0, N);
    return (m0, core.bitcast I32 f);
"""


@pytest.mark.parametrize("n", [5, 3000])
def test_non_tail_recursion_compiles_with_continuations_known_at_run_time(n: int) -> None:
    # `fact` passes a new return continuation (capturing n) on every call: a genuine recursion.
    # Its continuations become heap records and the compiled program runs it to any depth
    # (verimim.runtime.cps_dyn); the interpreter gives the same result.
    src = FACT.replace("N)", f"{n})").replace("core.wrap.add 0 (n, r)", "core.nat.add (n, r)")
    world, _ = load_text(HEADER + src, "<host-test>")
    prog = compile_program(world)
    assert "fact" in prog.host.llvm_ir and ".dyn:" in prog.host.llvm_ir  # a trampoline
    assert run_jitted(jit(prog), ["p"]) == _interp(world, ["p"]) == n * (n + 1) // 2 + 1  # base case: 1


def test_recursion_through_run_time_continuations_matches_the_interpreter_on_a_pullback_chain() -> None:
    # upstream's clos_bind shape: each call hands the next one a pull-back closure that prints
    # and then calls the previous pull-back; output and result as on the interpreter.
    src = """
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    rec_ (m0, 0, done, fin)
    where
        con done (m: mem.M 0, k: Cn [mem.M 0, Nat]) = k (m, 0);
        con fin (m: mem.M 0, acc: Nat) = return (m, core.bitcast I32 acc);
    end;

con rec_ (m: mem.M 0, i: Nat, last: Cn [mem.M 0, Cn [mem.M 0, Nat]], k: Cn [mem.M 0, Nat]) =
    (stop, more)#(core.ncmp.l (i, 10)) m
    where
        con stop (m: mem.M 0) = last (m, k);
        con more (m: mem.M 0) = rec_ (m, core.nat.add (i, 1), pb, k)
        where
            con pb (m: mem.M 0, k2: Cn [mem.M 0, Nat]) = last (m, after)
            where
                con after (m: mem.M 0, acc: Nat) = k2 (m, core.nat.add (core.nat.mul (acc, 10), i));
            end;
        end;
    end;
"""
    world, _ = load_text(HEADER + src, "<host-test>")
    want = _interp(world, ["p"])
    assert want == 123456789
    assert run_jitted(jit(compile_program(world)), ["p"]) == want


def test_cli_compile_writes_host_ll_and_device_ptx(tmp_path: Path) -> None:
    src = ROOT / "verimim" / "data" / "demo.mim"
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "verimim.cli", "compile", str(src), "-o", str(out), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert obj["ok"] and obj["outputs"] == {"host": f"{out}.ll", "device": f"{out}.ptx"}
    ll = Path(f"{out}.ll").read_text()
    ptx = Path(f"{out}.ptx").read_text()
    assert "define i32 @\"verimim_main\"" in ll and "cuLaunchKernel" in ll
    assert ".entry" in ptx and ".target sm_90" in ptx
    # `-o NAME.ll` (or `.ptx`) names the pair: NAME.ll and NAME.ptx, not NAME.ll.ll
    proc = subprocess.run([sys.executable, "-m", "verimim.cli", "compile", str(src), "-o", str(tmp_path / "b.ll"),
                           "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0 and json.loads(proc.stdout)["outputs"] == {
        "host": str(tmp_path / "b.ll"), "device": str(tmp_path / "b.ptx")}, proc.stdout
    assert not (tmp_path / "b.ll.ll").exists()


def test_cli_compile_reports_unsupported_with_exit_1(tmp_path: Path) -> None:
    src = tmp_path / "unknown_c.mim"
    src.write_text(HEADER + """
ccon dont_know [mem.M 0, Cn [mem.M 0, Bool]];

fun extern main (m0: mem.M 0): [mem.M 0, I32] =
    dont_know (m0, k)
    where
        con k (m: mem.M 0, b: Bool) = return (m, 0I32);
    end;
""")
    proc = subprocess.run([sys.executable, "-m", "verimim.cli", "compile", str(src), "-o", str(tmp_path / "o"),
                           "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 1
    diag = json.loads(proc.stdout)["diagnostics"][0]
    assert diag["code"] == "E-UNSUPPORTED" and "`dont_know`" in diag["message"] and diag["line"] == 4


def test_curried_continuation_with_a_type_parameter_is_specialised_by_its_call() -> None:
    # `seq {A: *} (n) (body) (exit) (acc)` applied at «2; Nat»: the type argument is used only in
    # types (no closure captures it), and the inlined application resolves them (host code of the
    # source World: emit_host directly).
    from verimim.runtime.host import emit_host
    from verimim.runtime.hostrt import CompiledProgram

    src = """
con seq {A: *} (n: Nat) (body: [Cn A] → Cn A) (exit: Cn A) (acc: A) =
    head (0, acc)
    where
        con head (i: Nat, acc: A) =
            (f, t)#(core.ncmp.l (i, n)) ()
            where
                con t () = body continue acc
                where
                    con continue (acc: A) = head (core.nat.add (i, 1), acc);
                end
                con f () = exit acc;
            end;
    end;

fun extern main (argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): I32 =
    seq 12 body exit (0, 1)
    where
        con body (yield: Cn [Nat, Nat]) (a b: Nat) = yield (b, core.nat.add (a, b));
        con exit (a _: Nat) = return (core.bitcast I32 a);
    end;
"""
    world, _ = load_text(HEADER + src, "<host-test>")
    assert _interp(world, ["p"]) == 144
    assert run_jitted(jit(CompiledProgram(emit_host(world, {}), None)), ["p"]) == 144


def test_run_time_closures_that_capture_each_other_are_unsupported_and_named() -> None:
    # pb and q refer to each other and `more` names both (passing q as `alt`), so neither is
    # made by the other's activations; they leave through records: no finite record.
    src = """
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    rec_ (m0, 0, done, done, fin)
    where
        con done (m: mem.M 0, k: Cn [mem.M 0, Nat]) = k (m, 0);
        con fin (m: mem.M 0, acc: Nat) = return (m, core.bitcast I32 acc);
    end;

con rec_ (m: mem.M 0, i: Nat, last: Cn [mem.M 0, Cn [mem.M 0, Nat]], alt: Cn [mem.M 0, Cn [mem.M 0, Nat]],
          k: Cn [mem.M 0, Nat]) =
    (stop, more)#(core.ncmp.l (i, 3)) m
    where
        con stop (m: mem.M 0) = last (m, k);
        con more (m: mem.M 0) = rec_ (m, core.nat.add (i, 1), pb, q, k)
        where
            con pb (m: mem.M 0, k2: Cn [mem.M 0, Nat]) = q (m, kp)
            where
                con kp (m: mem.M 0, acc: Nat) = k2 (m, core.nat.add (acc, i));
            end;
            con q (m: mem.M 0, k2: Cn [mem.M 0, Nat]) = pb (m, kq)
            where
                con kq (m: mem.M 0, acc: Nat) = k2 (m, core.nat.add (acc, i));
            end;
        end;
    end;
"""
    world, _ = load_text(HEADER + src, "<host-test>")
    with pytest.raises(VerimimError) as e:  # compiling only: the program itself never ends
        compile_program(world)
    assert e.value.code == "E-UNSUPPORTED" and "capture each other" in str(e.value)


CARRIED = """
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    loop (m0, 0, argc, after)
    where
        con after (m: mem.M 0, r: I32) = (small, big)#(core.icmp.ug (r, 100I32)) m
        where
            con small (m: mem.M 0) = return (m, core.wrap.add 0 (r, core.wrap.mul 0 (argc, 1000I32)));
            con big (m: mem.M 0) = return (m, core.wrap.sub 0 (core.wrap.mul 0 (argc, 1000I32), r));
        end;
        con adjust (m: mem.M 0, r: I32) = after (m, core.wrap.add 0 (r, 7I32));
        con loop (m: mem.M 0, i: Nat, acc: I32, k: Cn [mem.M 0, I32]) =
            (fin, body)#(core.ncmp.l (i, 5)) m
            where
                con fin (m: mem.M 0) = k (m, acc);
                con body (m: mem.M 0) =
                    loop (m, core.nat.add (i, 1), core.wrap.add 0 (core.wrap.mul 0 (acc, 3I32), core.bitcast I32 i),
                          (after, adjust)#(core.ncmp.e (i, core.bitcast Nat argc)));
            end;
    end;
"""


def test_a_loop_carrying_a_continuation_chosen_at_run_time_runs_natively() -> None:
    # `(after, adjust)#(i == argc)` is a value of type Cn passed on every back edge: each
    # candidate is a record, the index picks one, and `fin` jumps through its tag (cps_dyn).
    # `after` is entered from a record: the continuations it makes (`small`, `big`) come from
    # there, and what both take from outside (argc·1000) is in the record. Only the last back
    # edge (i = 4) decides: argc = 4 leaves through `adjust`.
    world, prog = _compile_text(CARRIED)
    assert ".dyn:" in prog.host.llvm_ir
    jitted = jit(prog)
    for args in ([], ["a"], ["a", "b", "c"], ["a", "b", "c", "d"]):
        assert run_jitted(jitted, ["p", *args]) == _interp(world, ["p", *args])
    # argc = 4: acc = 4·3⁵ + 0·3⁴ + 1·3³ + 2·3² + 3·3 + 4 = 1030, +7 by adjust; > 100: big
    assert _interp(world, ["p", "a", "b", "c"]) == 4000 - 1037


def test_a_record_carries_what_the_continuations_nested_in_it_share() -> None:
    # (fuzz, --target gpu, seed 610) a kernel loop carrying `(after, adjust)#c`: inside the
    # record `after`, `exit`'s two arms share `group_id_1`, which `exit` computes once; the record
    # carried what `after` itself computes once only, and the device code said E-UNSUPPORTED
    # ("a parameter of `kernel1` used outside it").
    path = Path(__file__).resolve().parents[1] / "programs" / "fuzz_found" / \
        "record_carries_what_its_nested_continuations_share.mim"
    world, _ = load_program(str(path), [])
    prog = compile_program(world)
    assert prog.device is not None and "kernel1" in prog.device.kernels
    assert ".entry kernel1" in prog.device.ptx
    assert _interp(world, [str(path)]) == 80


def test_a_run_time_closure_that_the_continuation_it_makes_names_back_runs_natively() -> None:
    # pb (passed to rec_ as `last`, so entered from a record) makes `go`, which jumps to q, which
    # names pb again: q is made by pb's activations (every way to q passes through pb), so pb's
    # record holds only i, and q reaches pb as the record pb was entered with.
    src = """
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    rec_ (m0, 0, done, fin)
    where
        con done (m: mem.M 0, n: Nat, k: Cn [mem.M 0, Nat]) = k (m, 0);
        con fin (m: mem.M 0, acc: Nat) = return (m, core.bitcast I32 acc);
    end;

con rec_ (m: mem.M 0, i: Nat, last: Cn [mem.M 0, Nat, Cn [mem.M 0, Nat]], k: Cn [mem.M 0, Nat]) =
    (stop, more)#(core.ncmp.l (i, 3)) m
    where
        con stop (m: mem.M 0) = last (m, 0, k);
        con more (m: mem.M 0) = rec_ (m, core.nat.add (i, 1), pb, k)
        where
            con pb (m: mem.M 0, n: Nat, k2: Cn [mem.M 0, Nat]) =
                (exit, go)#(core.ncmp.l (n, 2)) m
                where
                    con go (m: mem.M 0) = q (m, n, kp)
                    where
                        con kp (m: mem.M 0, acc: Nat) = k2 (m, core.nat.add (acc, i));
                    end;
                    con exit (m: mem.M 0) = k2 (m, core.nat.mul (n, 100));
                end;
            con q (m: mem.M 0, n: Nat, k2: Cn [mem.M 0, Nat]) = pb (m, core.nat.add (n, 1), kq)
            where
                con kq (m: mem.M 0, acc: Nat) = k2 (m, core.nat.add (acc, core.nat.mul (i, 10)));
            end;
        end;
    end;
"""
    world, prog = _compile_text(src)
    # the pb made at i = 2 runs: 200 at n = 2, then i and 10·i added twice on the way back
    assert _interp(world, ["p"]) == 244
    assert run_jitted(jit(prog), ["p"]) == 244


def test_an_aggregate_too_large_to_keep_as_values_is_unsupported_before_it_is_built() -> None:
    """The backend keeps an aggregate as one LLVM value per element: a pack of 10^8 bytes used
    all memory (a 2^32-element one was killed). It is refused, named, at once."""
    world, _ = load_text("""plugin core;
plugin mem;
fun extern main (m: mem.M 0, argc: I32, argv: mem.Ptr0 (mem.Ptr0 I8)): [mem.M 0, I32] =
    let (m, p) = mem.alloc («100000000; I8», 0) m;
    let m = mem.store (m, p, ‹100000000; 0I8›);
    let m = mem.free (m, p);
    return (m, 0I32);
""", "big.mim")
    with pytest.raises(VerimimError) as e:
        compile_program(world)
    assert e.value.code == "E-UNSUPPORTED" and "100000000 elements" in e.value.message


@pytest.mark.parametrize("index", ["1", "(core.bitcast Nat (core.wrap.sub 0 (argc, 1I32)))"])
def test_index_of_unknown_length_compiles_as_a_nat(index: str) -> None:
    # `Idx ⊤:Nat` (declared in core.mim: `core.idx_unsafe`'s result) was a type the backend could
    # not compile; it is a Nat's i64, as the interpreter holds it unbounded. `core.idx_unsafe` of
    # a literal folds; of a Nat computed at run time it is an operation, which the backend
    # refused (E-UNSUPPORTED) until the fuzzer generated it (argv[argc - 1]).
    world, _ = load_text("plugin core;\nplugin mem;\nfun extern main (m: mem.M 0, argc: I32, argv: mem.Ptr0 "
                         "(mem.Ptr0 I8)): [mem.M 0, I32] =\n"
                         "    let a = core.bitcast (mem.Ptr0 «⊤:Nat; mem.Ptr0 I8») argv;\n"
                         f"    let (m, s) = mem.load (m, mem.lea (a, core.idx_unsafe {index}));\n"
                         "    let (m, c) = mem.load (m, s);\n    return (m, core.conv.u 4294967296 c);\n", "user.mim")
    argv = ["user.mim", "hello"]
    assert run_jitted(jit(compile_program(world)), argv) == _interp(world, argv) == ord("h")


@pytest.mark.parametrize("body, at", [
    # an array type of unknown length, as a value: the ⊥ of that type is the place
    ("let (m, q) = mem.alloc («4; I8», 0) m;\n"
     "    let m = mem.store (m, core.bitcast (mem.Ptr0 «⊤:Nat; I8») q, ⊥:«⊤:Nat; I8»);\n"
     "    let m = mem.free (m, q);\n    return (m, 0I32);", (5, 50)),
    # `core.trait.size` is made by mem.alloc2malloc_repl: the alloc it rewrote is the place
    ("let (m, p) = mem.alloc («⊤:Nat; I32», 0) m;\n    let m = mem.free (m, p);\n    return (m, 0I32);",
     (4, 18)),
])
def test_what_the_backend_cannot_compile_is_placed_in_the_program(body: str, at: tuple[int, int]) -> None:
    from verimim.phases.runner import run_pipeline
    from verimim.driver import run_with_big_stack

    world, _ = load_text("plugin core;\nplugin mem;\nfun extern main (m: mem.M 0, argc: I32, argv: mem.Ptr0 "
                         "(mem.Ptr0 I8)): [mem.M 0, I32] =\n    " + body + "\n", "user.mim")
    run = run_with_big_stack(lambda: run_pipeline(world, verify=False))
    with pytest.raises(VerimimError) as e:
        run_with_big_stack(lambda: compile_program(run.program.host))
    assert e.value.code == "E-UNSUPPORTED" and e.value.loc is not None
    assert (e.value.loc.file, e.value.loc.line, e.value.loc.col) == ("user.mim", *at), e.value.message


def test_a_function_stored_in_memory_is_unsupported_not_an_internal_error() -> None:
    """`compile` stopped on an AssertionError (E-INTERNAL) for a `Fn` value stored and loaded."""
    from verimim.driver import run_with_big_stack
    from verimim.phases.runner import run_pipeline

    world, _ = load_text("plugin core;\nplugin mem;\nfun dbl (x: I32): I32 = return (core.wrap.mul 0 (x, 2I32));\n"
                         "fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 (mem.Ptr0 I8)): [mem.M 0, I32] =\n"
                         "    let (m0, cell) = mem.alloc (Fn I32 → I32, 0) m0;\n"
                         "    let m0 = mem.store (m0, cell, dbl);\n    let (m0, f) = mem.load (m0, cell);\n"
                         "    let m0 = mem.free (m0, cell);\n    ret v = f $ 4I32;\n    return (m0, v);\n", "user.mim")
    run = run_with_big_stack(lambda: run_pipeline(world, verify=False))
    with pytest.raises(VerimimError) as e:
        run_with_big_stack(lambda: compile_program(run.program.host))
    assert e.value.code == "E-UNSUPPORTED" and "as data" in e.value.message, e.value.message


def test_a_c_function_chosen_at_run_time_is_refused_as_host_code() -> None:
    # (the message said "in a kernel" for host code: the operation compiler's place was fixed)
    src = """cfun print_i32 [mem.M 0, I32]: mem.M 0;
cfun println_i32 [mem.M 0, I32]: mem.M 0;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let f = (print_i32, println_i32)#(core.icmp.e (argc, 2I32));
    ret m0 = f $ (m0, 7I32);
    return (m0, 0I32);
"""
    world, _ = load_text(HEADER + src, "<host-test>")
    with pytest.raises(VerimimError) as e:
        compile_program(world)
    assert e.value.code == "E-UNSUPPORTED" and "`c.print_i32` on the host" in e.value.message, e.value.message


@pytest.mark.parametrize("body, args, want", [
    # a padding byte of «2; [I8, I32]» written through a byte view: the copy carries it (a load and
    # store of the value dropped it: the compiled program read garbage, the interpreter 77)
    ("let (m, s) = mem.alloc («2; [I8, I32]», 0) m;\n    let (m, d) = mem.alloc («2; [I8, I32]», 0) m;\n"
     "    let m = mem.store (m, mem.lea (core.bitcast (mem.Ptr0 «16; I8») s, 1_16), 77I8);\n"
     "    let m = buffer.ptr_copy @«2; [I8, I32]» (m, d, s);\n"
     "    let (m, v) = mem.load (m, mem.lea (core.bitcast (mem.Ptr0 «16; I8») d, 1_16));\n"
     "    let m = mem.free (m, s);\n    let m = mem.free (m, d);\n    return (m, core.conv.u 4294967296 v);",
     [], 77),
    # a buffer of argc + 2 cells copied (its size known at run time only: it did not compile)
    ("let n = core.nat.add (core.bitcast Nat argc, 2);\n    let (m, b) = buffer.alloc (1, n, I32) m;\n"
     "    let (m, b) = buffer.write (1, n, I32) (m, b, core.bitcast (Idx n) 1, 41I32);\n"
     "    let (m, c) = buffer.alloc (1, n, I32) m;\n    let m = buffer.copy (1, n, I32) (m, c, b);\n"
     "    let (m, x) = buffer.read (1, n, I32) (m, c, core.bitcast (Idx n) 1);\n"
     "    return (m, core.wrap.add 0 (x, argc));", ["a", "b"], 44),
])
def test_a_buffer_copy_moves_the_bytes(body: str, args: list[str], want: int) -> None:
    from verimim.phases.runner import run_pipeline
    from verimim.driver import run_with_big_stack

    world, _ = load_text("plugin core;\nplugin mem;\nplugin buffer;\nfun extern main (m: mem.M 0, argc: I32, argv: "
                         "mem.Ptr0 (mem.Ptr0 I8)): [mem.M 0, I32] =\n    " + body + "\n", "user.mim")
    host = run_with_big_stack(lambda: run_pipeline(world, verify=False)).program.host
    argv = ["user.mim", *args]
    prog = run_with_big_stack(lambda: compile_program(host))
    assert "llvm.memmove" in prog.host.llvm_ir and prog.host.llvm_ir.count("store") < 20, "one move, not a store per cell"
    assert run_jitted(jit(prog), argv) == _interp(world, argv) == want


def test_a_nat_literal_a_target_cannot_hold_is_refused_by_name() -> None:
    # LLVM cut 2^64 to 0 without a word: `n < 2^64` was false natively, true in the interpreter.
    src = ("fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =\n"
           "    return (m0, core.conv.u 4294967296 (core.ncmp.l (core.bitcast Nat argc, 18446744073709551616)));\n")
    with pytest.raises(VerimimError) as info:
        _compile_text(src)
    assert info.value.code == "E-UNSUPPORTED" and "18446744073709551616" in info.value.message


def test_bitwise_operations_on_idx_1_give_its_one_value() -> None:
    # `Idx 1` holds 0 only; its i1 container's other value came out of nor/nand/nxor natively.
    src = ("fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =\n"
           "    let x = core.conv.u 1 argc;\n    let y = core.conv.u 1 (core.wrap.mul 0 (argc, 3I32));\n"
           "    return (m0, core.conv.u 4294967296 (core.bit2.nor 0 (x, y)));\n")
    world, prog = _compile_text(src)
    for argv in (["p"], ["p", "x"]):
        assert run_jitted(jit(prog), argv) == _interp(world, argv) == 0


def test_a_load_through_a_pointer_cast_from_a_byte_promises_no_alignment() -> None:
    """An I64 loaded at byte argc of a byte array: memory is bytes (SEMANTICS.md), the interpreter
    loads it anywhere. The load promised LLVM the I64's `align 8`, and LLVM folded the address's
    low bits (`bitcast I64 p & 7`) to 0: 0 natively, argc in the interpreter."""
    world, prog = _compile_text("""
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    let (m0, buf) = mem.malloc («16; I8», 0) (m0, 16);
    let m0 = mem.store (m0, buf, ‹16; 0I8›);
    let p = core.bitcast (mem.Ptr0 I64) (mem.lea (buf, core.conv.u 16 argc));
    let (m0, v) = mem.load (m0, p);
    let m0 = mem.store (m0, p, core.wrap.add 0 (v, 1I64));
    let (m0, w) = mem.load (m0, p);
    let low = core.bit2.and_ 0 (core.bitcast I64 p, 7I64);
    let m0 = mem.free (m0, buf);
    return (m0, core.conv.u 4294967296 (core.wrap.add 0 (low, w)));
""")
    jitted = jit(prog)
    for argv in (["p"], ["p", "a", "b"], ["p"] * 8):
        assert run_jitted(jitted, argv) == _interp(world, argv) == (len(argv) % 8) + 1, argv


def test_wrap_arithmetic_modulo_a_power_of_two_past_2_32_and_signed_arithmetic_up_to_2_63() -> None:
    """`Idx 2^33` is held in an i64: its wrap operations wrap there (2^33 divides 2^64) and are
    masked; signed operations read an upper-half value v of `Idx s` as v - s, an i64 up to
    s = 2^63. Both were E-UNSUPPORTED past 2^32."""
    world, prog = _compile_text("""
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    let x = core.conv.u 8589934592 argc;
    let a = core.wrap.add 0 (x, 8589934591:(Idx 8589934592));
    let b = core.wrap.mul 0 (a, 4294967297:(Idx 8589934592));
    let c = core.wrap.sub 0 (3:(Idx 8589934592), b);
    let d = core.wrap.shl 0 (c, core.conv.u 8589934592 argc);
    let n = core.conv.s 1099511627779 (core.wrap.sub 0 (1I32, argc));
    let q = core.div.sdiv @1099511627779 (m0, (n, 7:(Idx 1099511627779)));
    let lt = core.icmp.sl @1099511627779 (n, 5:(Idx 1099511627779));
    let r = core.wrap.add 0 (core.conv.u 4294967296 d, core.conv.u 4294967296 (core.shr.a @1099511627779 (n, 1:(Idx 1099511627779))));
    let r = core.wrap.add 0 (r, core.wrap.add 0 (core.conv.u 4294967296 q#1_2, core.conv.u 4294967296 lt));
    return (q#0_2, r);
""")
    jitted = jit(prog)
    for argv in (["p"], ["p", "a"], ["p"] * 9, ["p"] * 20):
        assert run_jitted(jitted, argv) == _interp(world, argv), argv
