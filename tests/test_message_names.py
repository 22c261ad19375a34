"""Messages name what the user wrote: parameters by their source names (`argc`, not
`main_var#0#1`) and operands by the `let` that bound them (`m4`, not `(gpu.init m0)#2`)."""
from __future__ import annotations

from pathlib import Path

from verimim import driver

PHASE_ERRORS = Path(__file__).resolve().parent / "programs" / "phase_errors"

LAUNCH_TYPE = """plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 2, item_id: Idx 4, (), out: gpu.GlobalPtr «64; I32»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let groups = core.bitcast Nat argc;
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = gpu.alloc.block «64; I32» m1;
    ret (m0, m1, m4) = gpu.launch (groups, 4, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, 0I32);
"""


def messages(path: str) -> list[str]:
    return [d.message for d in driver.check(path, []).diagnostics if d.severity == "error"]


def test_type_mismatch_names_the_let_and_the_parameter(tmp_path: Path) -> None:
    p = tmp_path / "launch_type.mim"
    p.write_text(LAUNCH_TYPE, encoding="utf-8")
    msg, = messages(str(p))
    assert "`Idx groups`" in msg, msg
    assert "main_var" not in msg and "_var#" not in msg, msg


def test_a_parameter_without_a_let_is_printed_by_its_source_name(tmp_path: Path) -> None:
    p = tmp_path / "launch_argc.mim"
    text = LAUNCH_TYPE.replace("    let groups = core.bitcast Nat argc;\n", "").replace("(groups, 4,", "(core.bitcast Nat argc, 4,")
    p.write_text(text, encoding="utf-8")
    msg, = messages(str(p))
    assert "Idx (core.bitcast @I32 Nat argc)" in msg or "Idx (core.bitcast Nat argc)" in msg, msg


def test_phase_error_prints_operands_by_their_let_names() -> None:
    msg, = messages(str(PHASE_ERRORS / "malloc_const_host.mim"))
    assert "(m4, 4)" in msg and "gpu.init" not in msg, msg
    msg, = messages(str(PHASE_ERRORS / "store_const.mim"))
    assert "mem.store @(I32, 4) (m4, " in msg and "mem.lea" not in msg, msg


def test_types_keep_their_written_form() -> None:
    # `let GlobalM = mem.M 1` in the gpu plugin names a type: types are not printed by let names
    msg, = messages(str(PHASE_ERRORS / "mem_crossing_launch_arg.mim"))
    assert "mem.M 1" in msg and "(d, (argc, m1))" in msg, msg


ILL_TYPED = Path(__file__).resolve().parent / "programs" / "ill_typed"


def test_kernel_type_mismatch_names_the_differing_parameter(tmp_path: Path) -> None:
    p = tmp_path / "launch_type.mim"
    p.write_text(LAUNCH_TYPE, encoding="utf-8")
    msg, = messages(str(p))
    assert "they differ in parameter 5 (`group_id`): `Bool` where `Idx groups` is expected" in msg, msg
    msg, = messages(str(ILL_TYPED / "kernel_dyn_smem_with_ff.mim"))
    assert "parameter 7 (`smem`)" in msg, msg


def test_kernel_with_a_missing_parameter_says_how_many() -> None:
    msg, = messages(str(ILL_TYPED / "kernel_no_return.mim"))
    assert "the parameter has 8 elements where 9 are expected" in msg, msg


def test_nested_component_is_named_innermost_first() -> None:
    from verimim.frontend.elab import differing_component
    from verimim.ir.world import World

    w = World()
    i32 = w.idx(w.lit_nat(2**32))
    boolean = w.idx(w.lit_nat(2))
    e = w.cn(w.sigma([w.sigma([i32, w.nat()]), i32]))
    f = w.cn(w.sigma([w.sigma([i32, boolean]), i32]))
    assert differing_component(e, f, w.nat(), boolean) == "element 2 of parameter 1"


def test_race_on_one_statement_says_so_instead_of_repeating_it() -> None:
    path = Path(__file__).resolve().parent / "programs" / "runtime_errors" / "race_global_groups.mim"
    rep = driver.run(str(path), [], [])
    d = next(d for d in rep.diagnostics if d.code == "E-RACE")
    # both work-items run the one store of the kernel
    assert d.related[0].loc == d.loc and "this same statement" in d.related[0].message, d.related


def test_a_note_about_work_inside_a_seed_helper_points_at_the_helper_call() -> None:
    """`gpu.alloc_copy.asyn` is an `anx lam`: the allocation it issues is made by β-reduction
    and had no position, so the race's note named it without one (run and check alike)."""
    path = Path(__file__).resolve().parent / "programs" / "runtime_errors" / "race_with_an_allocation_inside_alloc_copy.mim"
    call = next(i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if "gpu.alloc_copy.asyn (" in line)
    for rep in (driver.run(str(path), [], []), driver.check(str(path), [])):
        races = [d for d in rep.diagnostics if d.code == "E-RACE" and d.severity == "error"]
        assert races, [d.render() for d in rep.diagnostics]
        notes = [r for d in races for r in d.related if "gpu.alloc.asyn" in r.message]
        assert notes and all(r.loc is not None and r.loc.line == call for r in notes), [d.render() for d in races]


def test_a_name_inside_a_nested_parameter_pattern_is_printed_as_written() -> None:
    # `(c: gpu.ConstPtr I32, d: …)` among a kernel's parameters: the store's pointer was shown
    # as `kernel_var#7_9#0_2` (source_name knows the first level of a pattern only)
    msg, = messages(str(PHASE_ERRORS / "store_through_a_const_pointer_kernel_argument.mim"))
    assert "(m4, c, 0I32)" in msg and "_var#" not in msg, msg
