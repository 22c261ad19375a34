"""Pipelines written in Mim (verimim.phases.program_pipeline): a program's `_compile`, its
`host_specific_phases` / `device_specific_phases`, and the same from a `--pipeline` file."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SHARED
from verimim.diagnostics import Loc, VerimimError
from verimim.frontend.loader import load_text
from verimim.phases.program_pipeline import Fixpoint, load_pipeline_file, spec_from_definitions
from verimim.phases.runner import run_pipeline

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
plugin core;
plugin mem;
plugin gpu;
import compile;

PIPELINE

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 2, smem: [], data: gpu.GlobalPtr I32,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let (m1, m3) = gpu.sync_work_items (m1, m3);
    let (m1, m3) = gpu.sync_work_items (m1, m3);
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0): [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = gpu.alloc.block I32 m1;
    ret (m0, m1, m4) = gpu.launch (1, 2, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let m1 = gpu.free.block (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, 7I32);
"""


def _ran(pipeline_text: str, **kw) -> list[tuple[str, str | None]]:  # type: ignore[no-untyped-def]
    world, _ = load_text(PROGRAM.replace("PIPELINE", pipeline_text), "<pipeline>")
    run = run_pipeline(world, verify=False, **kw)
    assert not run.stopped, run.diagnostics
    return [(p["name"], p.get("side")) for p in run.phases]


def test_default_pipeline_without_definitions() -> None:
    ran = _ran("")
    assert [n for n, _ in ran][:5] == ["gpu.lower_btensor_map_reduce", "mem.alloc2malloc_repl",
                                       "gpu.check_addr_spaces_repl", "gpu.mem_checks", "compile.cleanup"]
    assert ("gpu.remove_double_syncs", "device") in ran


def test_program_compile_replaces_the_pipeline_in_its_order() -> None:
    ran = _ran('lam _compile (): compile.Phase = compile.phases ff '
               '(gpu.check_addr_spaces_repl, mem.alloc2malloc_repl, gpu.split_apply);')
    assert ran == [("gpu.check_addr_spaces_repl", None), ("mem.alloc2malloc_repl", None),
                   ("gpu.split_apply", None), ("gpu.host_malloc2gpualloc_repl", "host"),
                   ("gpu.remove_double_syncs", "device"), ("buffer.lower_ptr", "host")]


def test_named_resolves_late_and_elides_what_is_not_loaded() -> None:
    ran = _ran('lam _compile (): compile.Phase = compile.phases ff (compile.named "gpu.mem_checks", '
               'compile.named "nosuch.phase", compile.cond "nosuch" gpu.split_apply, '
               'compile.cond "gpu" compile.cleanup);')
    assert ran == [("gpu.mem_checks", None), ("compile.cleanup", None), ("buffer.lower_ptr", "host")]


def test_sub_pipelines_from_the_program_and_from_the_command_line() -> None:
    sub = 'lam device_specific_phases (): compile.Phase = compile.null;\n' \
          'lam host_specific_phases (): compile.Phase = compile.phases ff (compile.cleanup, compile.cleanup);'
    ran = _ran(sub)
    assert [r for r in ran if r[1]] == [("compile.cleanup", "host"), ("compile.cleanup", "host"),
                                        ("buffer.lower_ptr", "host")]
    ran = _ran(sub, device_phases=["gpu.remove_double_syncs"])  # the command line wins
    assert [r for r in ran if r[1] == "device"] == [("gpu.remove_double_syncs", "device")]


def test_a_host_phase_named_for_the_device_side_is_skipped_there() -> None:
    # it rewrote a kernel's mem.malloc into gpu.alloc.block, a host operation (check said proved,
    # diff E-DIFF)
    world, _ = load_text(PROGRAM.replace("PIPELINE", ""), "<pipeline>")
    run = run_pipeline(world, verify=False, device_phases=["gpu.host_malloc2gpualloc_repl"])
    assert not run.stopped, run.diagnostics
    step = next(p for p in run.phases if p["name"] == "gpu.host_malloc2gpualloc_repl" and p.get("side") == "device")
    assert step["status"] == "skipped" and "host code" in step["detail"], step


def test_fixpoint_group_repeats_until_nothing_changes() -> None:
    world, _ = load_text(PROGRAM.replace("PIPELINE", 'lam _compile (): compile.Phase = compile.phases ff '
                                         '(compile.phases tt (compile.cleanup, compile.null), gpu.split_apply);'), "<fix>")
    spec = spec_from_definitions(world, world.pipeline_defs, "t")
    assert spec.main == [Fixpoint(("compile.cleanup",)), "gpu.split_apply"]
    run = run_pipeline(world, verify=False)
    cleanups = [p for p in run.phases if p["name"] == "compile.cleanup"]
    assert 1 <= len(cleanups) <= 8


def test_a_definition_that_is_not_a_pipeline_is_a_type_error() -> None:
    world, _ = load_text(PROGRAM.replace("PIPELINE", "lam _compile (): compile.Phase = compile.phases ff "
                                         "(compile.cleanup, gpu.split_apply);"), "<bad>")
    world.pipeline_defs["_compile"] = world.lit_nat(3)
    with pytest.raises(VerimimError) as e:
        run_pipeline(world, verify=False)
    assert e.value.code == "E-TYPE"



@pytest.mark.parametrize("pipeline, message", [
    # `compile.named` of an annex that is no phase was `skipped`, "declared as a phase"
    ('compile.phases ff (gpu.split_apply, compile.named "gpu.init")', "names `gpu.init`, which is no phase"),
    ('compile.named "mem.M"', "names `mem.M`, which is no phase"),
])
def test_a_named_annex_that_is_no_phase_is_a_type_error(pipeline: str, message: str) -> None:
    world, _ = load_text(PROGRAM.replace("PIPELINE", f"lam _compile (): compile.Phase = {pipeline};"), "p.mim")
    with pytest.raises(VerimimError) as e:
        spec_from_definitions(world, world.pipeline_defs, "t")
    assert e.value.code == "E-TYPE" and message in e.value.message and e.value.loc is not None


def test_a_named_pipeline_of_a_plugin_is_its_phases() -> None:
    # gpu.mim: `anx lam host_specific_phases () = host_malloc2gpualloc_repl;` (it was `skipped`)
    world, _ = load_text(PROGRAM.replace("PIPELINE", 'lam _compile (): compile.Phase = compile.phases ff '
                                         '(gpu.split_apply, compile.named "gpu.host_specific_phases");'), "p.mim")
    spec = spec_from_definitions(world, world.pipeline_defs, "t")
    assert spec.main == ["gpu.split_apply", "gpu.host_malloc2gpualloc_repl"]


def test_a_pipeline_with_a_parameter_is_a_type_error() -> None:
    # The unit was passed for `b`, and `compile.phases b` read the flag as ff.
    world, _ = load_text(PROGRAM.replace("PIPELINE", "lam _compile (b: Bool): compile.Phase = "
                                         "compile.phases b (compile.cleanup, gpu.split_apply);"), "p.mim")
    with pytest.raises(VerimimError) as e:
        spec_from_definitions(world, world.pipeline_defs, "t")
    assert e.value.code == "E-TYPE" and "takes no parameter" in e.value.message


@pytest.mark.parametrize("definition", ["lam _compile (): Nat = 3;", "fun _compile (): compile.Phase = return compile.null;"])
def test_a_pipeline_error_points_at_the_definition_in_the_program(definition: str) -> None:
    # `3` is one node wherever it is written: its place was core.mim's `0b11`; an application
    # the pipeline reader makes (`_compile ()` of a `fun`) had none. Both point at `_compile`.
    text = PROGRAM.replace("PIPELINE", definition)
    world, _ = load_text(text, "prog.mim")
    with pytest.raises(VerimimError) as e:
        run_pipeline(world, verify=False)
    line = text.splitlines().index(definition) + 1
    assert e.value.code == "E-TYPE" and e.value.loc is not None
    assert (e.value.loc.file, e.value.loc.line, e.value.loc.col) == ("prog.mim", line, 1)


def test_pipeline_file_on_the_command_line(tmp_path: Path) -> None:
    prog = tmp_path / "p.mim"
    prog.write_text(PROGRAM.replace("PIPELINE", ""))
    pl = tmp_path / "pl.mim"
    pl.write_text("plugin gpu;\nimport compile;\n"
                  "lam device_specific_phases (): compile.Phase = compile.null;\n")
    assert load_pipeline_file(str(pl)).device == []
    proc = subprocess.run([sys.executable, "-m", "verimim.cli", "check", str(prog), "--pipeline", str(pl), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    obj = json.loads(proc.stdout)
    assert proc.returncode == 0 and obj["ok"], proc.stderr
    assert not [p for p in obj["phases"] if p.get("side") == "device"]
    assert obj["pipeline"]["device"] == [] and "pl.mim" in obj["pipeline"]["from"]["device"]
    assert all(p["status"] in ("proved", "skipped") for p in obj["phases"])



def test_a_pipeline_files_named_and_cond_phases_are_decided_by_the_programs_plugins(tmp_path: Path) -> None:
    # The file imports only `compile`: its `compile.named "gpu.…"` and `compile.cond "gpu"` were
    # decided by its own plugins (gpu not loaded there) and the whole pipeline was left out.
    world, _ = load_text(PROGRAM.replace("PIPELINE", ""), "p.mim")
    pl = tmp_path / "pl.mim"
    pl.write_text("import compile;\n"
                  "lam _compile (): compile.Phase = compile.phases ff (compile.named \"mem.alloc2malloc_repl\",\n"
                  "    compile.named \"gpu.split_apply\", compile.cond \"gpu\" (compile.named \"gpu.mem_checks\"),\n"
                  "    compile.cond \"btensor\" (compile.named \"btensor.nothing\"));\n")
    assert load_pipeline_file(str(pl), program=world).main == ["mem.alloc2malloc_repl", "gpu.split_apply",
                                                               "gpu.mem_checks"]
    bare, _ = load_text("plugin core;\nfun extern main (m0: mem.M 0): [mem.M 0, I32] = return (m0, 7I32);\n", "q.mim")
    assert load_pipeline_file(str(pl), program=bare).main == ["mem.alloc2malloc_repl"]  # (core loads mem) no gpu


def test_a_refuted_specification_is_placed_where_its_counterexample_points(monkeypatch: pytest.MonkeyPatch) -> None:
    # E-SPEC had no position: --json and SARIF could not place it, though the counterexample names one
    from verimim.phases.runner import spec_location
    from verimim.smt import specs
    from verimim.smt.solver import Outcome

    assert spec_location({"location": "a/b.mim:12:7"}) == Loc("a/b.mim", 12, 7)
    assert spec_location({"location": "?"}) is None and spec_location("no dict") is None
    assert spec_location({"location": "x.mim:0:0"}) is None
    world, _ = load_text(PROGRAM.replace("PIPELINE", ""), "p.mim")
    monkeypatch.setattr(specs, "check_spec", lambda res, ctx: Outcome("refuted", "wrong", {"location": "p.mim:28:20"}))
    run = run_pipeline(world, verify=True)
    (d, *_) = [d for d in run.diagnostics if d.code == "E-SPEC"]
    assert d.loc == Loc("p.mim", 28, 20)


def test_named_leaves_out_a_registered_phase_of_a_plugin_the_program_does_not_load(tmp_path: Path) -> None:
    # Upstream's `compile.named` names an annex: without the gpu plugin there is none, and the
    # phase is left out (verimim ran it because it knows the phase by that name).
    from verimim import driver

    path = tmp_path / "p.mim"
    path.write_text("import mem;\nimport core;\nimport compile;\n\n"
                    "con extern main (mem: %mem.M 0, argc: I32, argv: %mem.Ptr (%mem.Ptr (I8, 0), 0), "
                    "return: Cn [%mem.M 0, I32]) =\n    return (mem, argc);\n\n"
                    'lam extern _compile (): %compile.Phase = %compile.named "gpu.remove_double_syncs";\n')
    got = driver.check(str(path), [])
    assert got.ok and got.data["pipeline"]["main"] == [], got.data["pipeline"]


def test_diff_compares_after_each_run_of_a_phase_the_plan_runs_twice(tmp_path: Path) -> None:
    # A phase named twice was one target: the second run's comparison overwrote the first's.
    from verimim import driver

    prog = tmp_path / "twice.mim"
    prog.write_text(PROGRAM.replace("PIPELINE", "lam _compile (): compile.Phase = compile.phases ff "
                                    "(compile.cleanup, compile.cleanup, gpu.split_apply);"))
    rep = driver.diff(str(prog), [], [])
    assert rep.exit_code == 0, rep.diagnostics
    assert rep.data["pipeline"]["ran"][:2] == ["compile.cleanup", "compile.cleanup"]
    assert len(rep.data["targets"]) == 1 + len(rep.data["pipeline"]["ran"])  # the source, then every run
    assert "interp after compile.cleanup (2nd run)" in rep.data["targets"]


def test_compile_refusing_what_the_plan_left_still_reports_the_plan_that_ran(tmp_path: Path) -> None:
    # An empty `_compile` leaves the kernel unsplit: the back end refuses the launch, and
    # `compile --json` said `"pipeline": null` though the (empty) plan had run.
    pytest.importorskip("llvmlite.binding")
    from verimim import driver

    prog = tmp_path / "empty.mim"
    prog.write_text(PROGRAM.replace("PIPELINE", "lam _compile (): compile.Phase = compile.phases ff ();"))
    rep = driver.compile_to(str(prog), [], str(tmp_path / "out"))
    assert [d.code for d in rep.diagnostics] == ["E-UNSUPPORTED"]
    assert rep.data["pipeline"] is not None and rep.data["pipeline"]["main"] == []


def test_a_prefix_cleanup_removing_main_points_at_main_and_at_the_step() -> None:
    # (the error named `main` alone: the step at fault, in the pipeline, was not shown)
    definition = 'lam _compile (): compile.Phase = compile.phases ff (compile.prefix_cleanup_phase "ma", gpu.split_apply);'
    text = PROGRAM.replace("PIPELINE", definition)
    world, _ = load_text(text, "prog.mim")
    run = run_pipeline(world, verify=False)
    [d] = [d for d in run.diagnostics if d.severity == "error"]
    main_line = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith("fun extern main"))
    assert d.code == "E-NAME" and d.loc is not None and d.loc.line == main_line
    [rel] = d.related
    step_line = text.splitlines().index(definition) + 1
    assert rel.loc is not None and (rel.loc.line, rel.loc.col) == (step_line, definition.index("compile.prefix") + 1)


MYP = """/// a plugin with pipelines
plugin compile;
axm ph: compile.Phase;
anx lam loop () = compile.named "myp.loop";
anx lam loop2 () = compile.phases ff (compile.named "myp.loop3", compile.null);
anx lam loop3 () = compile.named "myp.loop2";
anx lam withparam (b: Bool) = compile.phases b (compile.null, compile.null);
anx lam inner_error () = compile.phases ff (compile.named "myp.withparam", compile.null);
"""


@pytest.mark.parametrize("named, message", [
    # a pipeline naming itself was expanded until Python's recursion limit (E-UNSUPPORTED after 7 s)
    ("myp.loop", "names a pipeline that names itself: `myp.loop` → `myp.loop`"),
    ("myp.loop2", "names a pipeline that names itself: `myp.loop2` → `myp.loop3` → `myp.loop2`"),
    # a function giving a phase is no phase until given its arguments (it was "declared as a phase")
    ("myp.withparam", "names `myp.withparam`, which is no phase"),
    ("compile.prefix_cleanup_phase", "names `compile.prefix_cleanup_phase`, which is no phase"),
    ("compile.phases", "names `compile.phases`, which is no phase"),
    # an error inside a named pipeline says so (it was blamed on `_compile` alone)
    ("myp.inner_error", "in `myp.inner_error` (named by `compile.named \"myp.inner_error\"`)"),
])
def test_a_named_pipeline_that_cannot_be_read_is_a_type_error(tmp_path: Path, named: str, message: str) -> None:
    from verimim.source import load_source

    plug = tmp_path / "plug"
    plug.mkdir()
    (plug / "myp.mim").write_text(MYP)
    prog = tmp_path / "p.mim"
    prog.write_text(PROGRAM.replace("PIPELINE", f'plugin myp;\nlam _compile (): compile.Phase = compile.phases ff '
                                    f'(compile.named "{named}", gpu.split_apply);'))
    world, _ = load_source(str(prog), [str(plug)])
    with pytest.raises(VerimimError) as e:
        spec_from_definitions(world, world.pipeline_defs, "t")
    assert e.value.code == "E-TYPE" and message in e.value.message, e.value.message
    assert e.value.loc is not None and e.value.loc.file == str(prog)


def test_a_named_phase_axiom_of_a_plugin_is_its_step(tmp_path: Path) -> None:
    from verimim.source import load_source

    plug = tmp_path / "plug"
    plug.mkdir()
    (plug / "myp.mim").write_text(MYP)
    prog = tmp_path / "p.mim"
    prog.write_text(PROGRAM.replace("PIPELINE", 'plugin myp;\nlam _compile (): compile.Phase = compile.phases ff '
                                    '(compile.named "myp.ph", gpu.split_apply);'))
    world, _ = load_source(str(prog), [str(plug)])
    [skip, split] = spec_from_definitions(world, world.pipeline_defs, "t").main or []
    assert getattr(skip, "name", None) == "myp.ph" and split == "gpu.split_apply"


def test_compile_of_a_program_its_plan_rejects_reports_what_check_does(tmp_path: Path) -> None:
    # compile said the first error only, without its notes, and `"pipeline": null`
    pytest.importorskip("llvmlite.binding")
    from verimim import driver

    definition = 'lam _compile (): compile.Phase = compile.phases ff (compile.prefix_cleanup_phase "ma", gpu.split_apply);'
    prog = tmp_path / "p.mim"
    prog.write_text(PROGRAM.replace("PIPELINE", definition))
    compiled = driver.compile_to(str(prog), [], str(tmp_path / "out"))
    checked = driver.check(str(prog), [])
    assert [d for d in compiled.diagnostics if d.severity == "error"] == \
        [d for d in checked.diagnostics if d.severity == "error"]
    assert compiled.diagnostics[0].related and compiled.data["pipeline"] is not None
    both = driver.compile_to(str(SHARED / "examples" / "const_slot_store.mim"), [], str(tmp_path / "out2"))
    assert [d.code for d in both.diagnostics] == ["E-ADDR-SPACE", "E-ADDR-SPACE"]
