"""Upstream MimIR's `compile` vocabulary (verimim.phases.vocabulary, plug/compile.mim): names
verimim implements run as its phases, the others are reported `skipped` with the reason."""
from __future__ import annotations

from pathlib import Path

import pytest

from verimim import driver
from verimim.frontend.loader import load_text
from verimim.phases.program_pipeline import PrefixCleanup, Skip, spec_from_definitions
from verimim.phases.runner import run_pipeline

UPSTREAM = Path("/work/shared/upstream")

HOST_ONLY = """
plugin core;
plugin mem;
import compile;

PIPELINE

fun extern internal_dead (x: I32): I32 = return x;
fun extern internal_used (x: I32): I32 = return (core.wrap.add 0 (x, 1I32));
fun extern main (m0: mem.M 0): [mem.M 0, I32] =
    ret y = internal_used $ 41I32;
    return (m0, y);
"""


def _world(pipeline: str):  # type: ignore[no-untyped-def]
    world, _ = load_text(HOST_ONLY.replace("PIPELINE", pipeline), "<vocabulary>")
    return world


def test_upstream_names_are_read_as_verimim_phases_or_skips() -> None:
    world = _world("""lam _compile (): compile.Phase = compile.phases ff (
        compile.internal_cleanup_phase, compile.cleanup_phase, compile.null_phase,
        compile.phases tt (compile.beta_red_phase, compile.eta_red_phase),
        compile.pass2phase (compile.passes (compile.beta_red_pass, compile.eta_red_pass ff,
                                            compile.lam_spec_pass, compile.null_pass)),
        compile.repl2phase (compile.repls (compile.null_repl, mem.remem_repl)),
        mem.add_mem_phase, compile.sym_expr_opt);""")
    steps = spec_from_definitions(world, world.pipeline_defs, "t").main
    assert steps is not None
    names = [s.name if isinstance(s, Skip) else s for s in steps if not isinstance(s, PrefixCleanup)]
    assert isinstance(steps[0], PrefixCleanup) and steps[0].prefix == "internal_"
    assert names[0] == "compile.cleanup"
    assert names[1:4] == [names[1], "compile.beta_red", "compile.eta_red_pass"]
    assert names[4:] == ["compile.lam_spec", "mem.remem_repl", "mem.add_mem_phase", "compile.sym_expr_opt"]
    skips = [s for s in steps if isinstance(s, Skip)]
    assert all("not implemented in verimim" in s.reason for s in skips)


def test_skipped_phases_are_reported_with_their_reason() -> None:
    world = _world("lam _compile (): compile.Phase = compile.phases ff "
                   "(compile.internal_cleanup_phase, compile.ret_wrap_phase, compile.eta_exp_phase);")
    run = run_pipeline(world, verify=True, timeout_ms=10_000)
    assert not run.stopped, run.diagnostics
    by_name = {p["name"]: p for p in run.phases}
    assert by_name["compile.prefix_cleanup_phase"]["status"] == "proved", by_name
    for name in ("compile.ret_wrap_phase", "compile.eta_exp_phase"):
        assert by_name[name]["status"] == "skipped" and "not implemented" in by_name[name]["detail"]
    assert "compile.ret_wrap_phase" not in run.ran and "compile.prefix_cleanup_phase" in run.ran
    assert run.pipeline["main"][1] == {"skipped": "compile.ret_wrap_phase",
                                       "reason": by_name["compile.ret_wrap_phase"]["detail"]}


def test_internal_cleanup_makes_prefixed_externals_internal() -> None:
    world = _world("lam _compile (): compile.Phase = compile.internal_cleanup_phase;")
    run = run_pipeline(world, verify=False)
    after = run.program.host
    assert "internal_dead" not in after.externals and "internal_used" not in after.externals
    assert set(after.externals) == {"main"}
    # The one still used stays, no longer external; the dead one is gone.
    assert [m.name for m in after.muts if m.name == "internal_used"] == ["internal_used"]
    assert not [m for m in after.muts if m.name == "internal_dead"]
    assert not [m for m in after.muts if m.name == "internal_used" and m.external]


def test_command_line_reads_upstream_names_and_rejects_typos() -> None:
    from verimim.phases.vocabulary import is_known

    assert is_known("compile.eta_red_phase") and is_known("compile.cleanup") and is_known("compile.null_phase")
    assert not is_known("nosuch.phase")
    world = _world("")
    run = run_pipeline(world, verify=False, host_phases=["compile.beta_red_phase", "compile.eta_red_phase"])
    host = [(p["name"], p["status"]) for p in run.phases if p.get("side") == "host"]
    assert ("compile.eta_red_phase", "skipped") in host
    run = run_pipeline(_world(""), verify=False, host_phases=["nosuch.phase"])
    assert run.stopped and [d.code for d in run.diagnostics] == ["E-USAGE"]


def test_a_declared_phase_verimim_does_not_know_is_skipped_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "myplug.mim").write_text("import compile;\naxm my_phase: compile.Phase;\n")
    src = tmp_path / "p.mim"
    src.write_text(HOST_ONLY.replace("PIPELINE", "plugin myplug;\nlam _compile (): compile.Phase = "
                                     "compile.phases ff (myplug.my_phase, compile.cleanup);"))
    report = driver.check(str(src), [str(tmp_path)])
    assert report.ok, [d.message for d in report.diagnostics]
    entry = next(p for p in report.data["phases"] if p["name"] == "myplug.my_phase")
    assert entry["status"] == "skipped" and "no implementation" in entry["detail"]


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="the shared upstream corpus is not here")
@pytest.mark.parametrize("name", ["compile_unused.mim", "mem_add_top_mem2.mim", "regex_dont_compile.mim"])
def test_upstream_pipelines_check(name: str) -> None:
    report = driver.check(str(UPSTREAM / name), [])
    assert report.ok, [f"{d.code}: {d.message}" for d in report.diagnostics]
    assert all(p["status"] in ("proved", "skipped") for p in report.data["phases"]), report.data["phases"]
