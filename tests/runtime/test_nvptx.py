"""The NVPTX backend: kernels of corpus programs compile to LLVM IR that llvmlite verifies and to
PTX for sm_90 (no GPU needed)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

llvm = pytest.importorskip("llvmlite.binding")

from verimim.diagnostics import VerimimError  # noqa: E402
from verimim.ir.defs import App, Axiom, Lit, Tuple  # noqa: E402
from verimim.phases.base import walk  # noqa: E402
from verimim.runtime.nvptx import DeviceModule, compile_device, compile_device_module  # noqa: E402
from verimim.frontend.loader import load_program  # noqa: E402
from verimim.runtime.hostrt import compile_program  # noqa: E402
from verimim.runtime.pipeline import device_world_of  # noqa: E402

from .conftest import kernel_programs  # noqa: E402
from .known_limits import xfail_if_known_limit  # noqa: E402

PROGRAMS = kernel_programs()


def _uses(world, annex: str) -> list[App]:
    return [d for d in walk(world) if isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == annex]


def _uses_shared(world) -> bool:
    for a in _uses(world, "mem.slot") + _uses(world, "mem.mslot"):
        imp = a.args()[0]
        if isinstance(imp, Tuple) and isinstance(imp.ops[1], Lit) and imp.ops[1].value == 3:
            return True
    return False


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_compiles_to_ptx(path: Path) -> None:
    _host, dev = device_world_of(str(path))
    if dev is None:  # (the program's own pipeline may leave the split out: a named limit)
        try:
            compile_program(load_program(str(path), [])[0])
        except VerimimError as e:
            xfail_if_known_limit(e, path)
            raise
    assert dev is not None, "the program launches a kernel, so split_apply makes a device World"
    try:
        dm = compile_device_module(dev, "sm_90")
    except VerimimError as e:
        xfail_if_known_limit(e, path)
        raise
    mod = llvm.parse_assembly(dm.llvm_ir)
    mod.verify()
    assert "ptx_kernel" in dm.llvm_ir
    assert ".target sm_90" in dm.ptx
    for name in dev.externals:
        assert f".entry {name}(" in dm.ptx
    if _uses(dev, "gpu.sync_work_items"):
        assert "bar.sync" in dm.ptx or "barrier.sync" in dm.ptx
    dyn = any(k.dyn_smem for k in dm.kernels.values())
    if dyn or _uses_shared(dev):
        assert "addrspace(3)" in dm.llvm_ir
        # the optimizer may drop shared memory whose values nobody reads (kernel_no_args.mim,
        # split_device_types.mim)
        ptx0 = dm.ptx if ".shared" in dm.ptx else compile_device_module(dev, "sm_90", opt=0).ptx
        assert ".shared" in ptx0
        if dyn:
            assert ".extern .shared" in ptx0


def test_compile_device_returns_ir_and_ptx() -> None:
    path = next(p for p in PROGRAMS if p.name == "row_sums.mim") if any(
        p.name == "row_sums.mim" for p in PROGRAMS) else PROGRAMS[0]
    _host, dev = device_world_of(str(path))
    ir_text, ptx = compile_device(dev)
    assert "define ptx_kernel void" in ir_text
    assert ".visible .entry" in ptx


def test_sm_selectable() -> None:
    _host, dev = device_world_of(str(PROGRAMS[0]))
    _ir, ptx = compile_device(dev, sm="sm_80")
    assert ".target sm_80" in ptx


def test_loops_become_phis_and_back_edges() -> None:
    path = next(p for p in PROGRAMS if p.name == "shared_reduce_barrier.mim")
    _host, dev = device_world_of(str(path))
    dm = compile_device_module(dev, opt=0)
    assert "phi" in dm.llvm_ir
    assert "br i1" in dm.llvm_ir
    assert "llvm.nvvm.barrier" in dm.llvm_ir
    assert "addrspace(3)" in dm.llvm_ir


VEC_KERNEL = """
plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 2, item_id: Idx 4, (),
            (inp: gpu.GlobalPtr «8; «4; I32»», out: gpu.GlobalPtr «8; «4; I32»»),
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let k = core.bitcast (Idx 8) (core.nat.add (core.nat.mul (core.bitcast Nat group_id, 4), core.bitcast Nat item_id));
    let (m1, v) = mem.load (m1, mem.lea (inp, k));
    let m1 = mem.store (m1, mem.lea (out, k), ‹j: 4; core.wrap.add 0 (v#j, v#j)›);
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0): [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, a) = gpu.alloc.block «8; «4; I32»» m1;
    let (m1, b) = gpu.alloc.block «8; «4; I32»» m1;
    ret (m0, m1, m4) = gpu.launch (2, 4, gpu.default_stream, ff, ()) kernel (a, b) $ (m0, m1, m4);
    let m1 = gpu.free.block (m1, a);
    let m1 = gpu.free.block (m1, b);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, 0I32);
"""


def test_vector_accesses(tmp_path: Path) -> None:
    f = tmp_path / "vec.mim"
    f.write_text(VEC_KERNEL)
    _host, dev = device_world_of(str(f))
    dm = compile_device_module(dev)
    assert "ld.global.v4" in dm.ptx and "st.global.v4" in dm.ptx
    # without the alignment assumption on parameters: element-wise accesses
    dm1 = compile_device_module(dev, param_align=1)
    assert "ld.global.v4" not in dm1.ptx


BIG_IDX = """
plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 4, (), out: gpu.GlobalPtr «4; Idx 5000000000»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let x = core.bitcast (Idx 5000000000) item_id;
    let m1 = mem.store (m1, mem.lea (out, item_id), core.wrap.add 0 (x, x));
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0): [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = gpu.alloc.block «4; Idx 5000000000» m1;
    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let m1 = gpu.free.block (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, 0I32);
"""

FUN_CALL = """
plugin core;
plugin mem;
plugin gpu;

fun step (m1: gpu.GlobalM, p: gpu.GlobalPtr I32): gpu.GlobalM =
    let (m1, v) = mem.load (m1, p);
    let m1 = mem.store (m1, p, core.wrap.add 0 (v, 1I32));
    return m1;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 4, (), out: gpu.GlobalPtr «4; I32»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    ret m1 = step $ (m1, mem.lea (out, item_id));
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0): [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = gpu.alloc.block «4; I32» m1;
    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let m1 = gpu.free.block (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, 0I32);
"""


REC_CALL = FUN_CALL.replace("""fun step (m1: gpu.GlobalM, p: gpu.GlobalPtr I32): gpu.GlobalM =
    let (m1, v) = mem.load (m1, p);
    let m1 = mem.store (m1, p, core.wrap.add 0 (v, 1I32));
    return m1;""", """fun step (m1: gpu.GlobalM, p: gpu.GlobalPtr I32): gpu.GlobalM =
    let (m1, v) = mem.load (m1, p);
    (stop, again)#(core.icmp.ul (v, 3I32)) m1
    where
        con stop (m1: gpu.GlobalM) = return m1;
        con again (m1: gpu.GlobalM) =
            let m1 = mem.store (m1, p, core.wrap.add 0 (v, 1I32));
            ret m1 = step $ (m1, p);
            return m1;
    end;""")


def _compiled_without_lam_spec(tmp_path: Path, text: str) -> DeviceModule:
    """The device module of `text`, its IR verified, compiled without compile.lam_spec (which
    would inline `step` before the code generator sees it)."""
    from verimim.frontend.loader import load_program
    from verimim.phases.pipeline import default_pipeline
    from verimim.phases.program_pipeline import PipelineSpec
    from verimim.phases.runner import run_pipeline

    f = tmp_path / "k.mim"
    f.write_text(text)
    world, _ = load_program(str(f), [])
    spec = PipelineSpec(main=[p for p in default_pipeline() if p != "compile.lam_spec"])
    dev = run_pipeline(world, verify=False, pipeline=spec).program.device
    assert dev is not None
    dm = compile_device_module(dev, "sm_90")
    llvm.parse_assembly(dm.llvm_ir).verify()
    return dm


def test_function_calls_in_a_kernel_are_inlined(tmp_path: Path) -> None:
    """A `fun` called from a kernel (direct style) is instantiated for its return continuation."""
    dm = _compiled_without_lam_spec(tmp_path, FUN_CALL)
    assert dm.llvm_ir.count("define ") == 1 and "step.1:" in dm.llvm_ir
    assert ".entry kernel" in dm.ptx


def test_unsupported_is_a_diagnostic(tmp_path: Path) -> None:
    f = tmp_path / "k.mim"
    f.write_text(BIG_IDX)
    _host, dev = device_world_of(str(f))
    with pytest.raises(VerimimError) as ei:
        compile_device(dev)
    assert ei.value.code == "E-UNSUPPORTED"
    assert "modulo 5000000000" in ei.value.message


def test_a_genuine_recursion_in_a_kernel_takes_its_continuations_from_device_heap_records(tmp_path: Path) -> None:
    """`step` calls itself with a new return continuation each time (not a loop): it was
    E-UNSUPPORTED on the device. Its continuations are now records the work-item mallocs
    (a PTX system call) and a tag switch enters (runtime.cps_dyn, as on the host); a null
    record traps. The GPU runs are tests/runtime/test_cuda.py's, on the corpus programs with a
    recursion in a kernel (valid/kernel_recursive_sum_returns.mim, …)."""
    dm = _compiled_without_lam_spec(tmp_path, REC_CALL)
    assert "call ptr @\"malloc\"(i64" in dm.llvm_ir and "call void @\"llvm.trap\"()" in dm.llvm_ir
    assert "switch i64" in dm.llvm_ir  # the return into a continuation known at run time
    assert ".extern .func  (.param .b64 func_retval0) malloc" in dm.ptx and "trap;" in dm.ptx


def test_a_record_holds_a_shared_pointer_as_one() -> None:
    """A recursion's return continuation captures a pointer into the shared space: its record
    slot is stored and loaded as `ptr addrspace(3)`. Loaded as a generic pointer, the shared
    address was read as a generic one (CUDA_ERROR_ILLEGAL_ADDRESS, or another cell)."""
    path = Path(__file__).resolve().parents[1] / "programs" / "valid" / "kernel_recursion_through_a_shared_pointer.mim"
    _host, dev = device_world_of(str(path))
    ir = compile_device_module(dev, "sm_90").llvm_ir
    assert "call ptr @\"malloc\"" in ir
    assert "store ptr addrspace(3)" in ir and "load ptr addrspace(3), ptr" in ir


def test_a_continuation_chosen_at_run_time_is_a_device_heap_record() -> None:
    """`(after, adjust)#(i == item)` passed on a loop's back edge (it was E-UNSUPPORTED on the
    device: "choosing between continuations … by a run-time index"): both candidates become
    records, a `select` picks the pointer, and `fin`'s jump to k switches on the record's tag.
    The GPU run is test_cuda.py's, on the corpus program (EXPECT 186)."""
    path = Path(__file__).resolve().parents[1] / "programs" / "valid" / \
        "kernel_loop_carrying_a_continuation_chosen_at_run_time.mim"
    _host, dev = device_world_of(str(path))
    ir = compile_device_module(dev, "sm_90").llvm_ir
    assert "call ptr @\"malloc\"" in ir and "switch i64" in ir
    assert re.search(r"= select\s+i1 %\S+, ptr %\S+, ptr %", ir)  # the chosen record
    assert "after.dyn:" in ir and "adjust.dyn:" in ir  # a trampoline per candidate


def test_runtime_imports_without_z3(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU machine has no z3: the runtime and the interpreter must not need it."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['z3'] = None\n"
            "import verimim.runtime.nvptx, verimim.runtime.cuda, verimim.runtime.backend\n"
            "import verimim.runtime.pipeline, verimim.interp.machine\n"
            "from verimim.runtime.cuda import device_available; device_available()\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_compile_of_a_program_without_kernels_writes_a_ptx_module(tmp_path: Path) -> None:
    # (it wrote a comment alone, which ptxas refuses: "Missing .version directive")
    import shutil
    import subprocess

    from verimim import driver

    prog = tmp_path / "host_only.mim"
    prog.write_text("plugin core;\nplugin mem;\n"
                    "fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)"
                    ": [mem.M 0, I32] =\n    return (m0, core.wrap.add 0 (argc, 1I32));\n")
    rep = driver.compile_to(str(prog), [], str(tmp_path / "out"), sm="sm_80")
    assert rep.exit_code == 0 and rep.data["kernels"] == [], rep.diagnostics
    ptx = (tmp_path / "out.ptx").read_text()
    assert re.search(r"^\.version \d+\.\d+$", ptx, re.M) and re.search(r"^\.target sm_80$", ptx, re.M)
    assert ".address_size 64" in ptx and ".entry" not in ptx
    if shutil.which("ptxas"):  # (where the CUDA toolkit is installed)
        subprocess.run(["ptxas", "-arch=sm_80", str(tmp_path / "out.ptx"), "-o", str(tmp_path / "out.cubin")],
                       check=True, capture_output=True)
