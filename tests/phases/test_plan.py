"""One pipeline plan (verimim.phases.plan) for every command: what `compile` and `run --target
gpu` compile is what `check` proved, `buffer.lower_ptr` included."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from verimim import driver
from verimim.frontend.loader import load_text
from verimim.phases.plan import BACKEND_PHASES, build_plan

from .test_program_pipeline import PROGRAM

OWN_HOST = ("lam host_specific_phases (): compile.Phase = compile.phases ff "
            "(compile.cleanup, gpu.host_malloc2gpualloc_repl, compile.eta_red_phase);")

PLAN_KEYS = ("main", "host", "device", "backend", "from")


def _plan_part(pipeline: dict) -> dict:  # type: ignore[type-arg]
    return {k: pipeline[k] for k in PLAN_KEYS}


def test_the_backend_phases_end_every_plan() -> None:
    world, _ = load_text(PROGRAM.replace("PIPELINE", ""), "<plan>")
    plan = build_plan(world)
    assert plan.backend == BACKEND_PHASES == ("buffer.lower_ptr",)
    # A program whose host sub-pipeline already lowers buffers does not lower them twice.
    world, _ = load_text(PROGRAM.replace("PIPELINE", "lam host_specific_phases (): compile.Phase = "
                                         "buffer.lower_ptr;"), "<plan>")
    plan = build_plan(world)
    assert plan.backend == () and plan.host == ("buffer.lower_ptr",)
    # The command line overrides the program; the plan says where each part came from.
    plan = build_plan(world, host_phases=["compile.cleanup"])
    assert plan.host == ("compile.cleanup",) and plan.backend == ("buffer.lower_ptr",)
    assert dict(plan.source)["host"] == "the command line"


def test_check_compile_and_run_run_the_same_plan(tmp_path: Path) -> None:
    pytest.importorskip("llvmlite.binding")
    pytest.importorskip("z3")  # check proves; the GPU machine has no z3
    src = tmp_path / "own_host.mim"
    src.write_text(PROGRAM.replace("PIPELINE", OWN_HOST))
    checked = driver.check(str(src), [])
    assert checked.ok, [d.message for d in checked.diagnostics]
    ran = checked.data["pipeline"]["ran"]
    # The program's own host steps ran (not gpu.mim's), then the backend's phase.
    host = [p["name"] for p in checked.data["phases"] if p.get("side") == "host"]
    assert host == ["compile.cleanup", "gpu.host_malloc2gpualloc_repl", "compile.eta_red_phase", "buffer.lower_ptr"]
    assert "compile.cleanup[host]" in ran and "gpu.host_malloc2gpualloc_repl[host]" in ran
    compiled = driver.compile_to(str(src), [], str(tmp_path / "out"))
    assert compiled.ok, [d.message for d in compiled.diagnostics]
    assert compiled.data["pipeline"] == checked.data["pipeline"]
    interp = driver.run(str(src), [], [])
    # run compiles too (the same plan up to the backend's lowering, so a rejection stops it),
    # then interprets the source
    ran_by_run = interp.data["pipeline"]
    backend = {f"{b}[host]" for b in checked.data["pipeline"]["backend"]}
    assert interp.ok and ran_by_run["backend"] == [] and ran_by_run["ran"] == [r for r in ran if r not in backend]
    assert {k: ran_by_run[k] for k in ("main", "host", "device")} == \
        {k: checked.data["pipeline"][k] for k in ("main", "host", "device")}
    from verimim.runtime.cuda import device_available

    if device_available() and not os.environ.get("VERIMIM_NO_GPU"):
        for host_mode in ("native", "interp"):
            on_gpu = driver.run(str(src), [], [], target="gpu", host=host_mode)
            assert on_gpu.ok and on_gpu.data["result"] == 7, on_gpu.diagnostics
            assert _plan_part(on_gpu.data["pipeline"]) == _plan_part(checked.data["pipeline"])
            if "ran" in on_gpu.data["pipeline"]:
                assert on_gpu.data["pipeline"]["ran"] == ran


def test_diff_and_dump_use_the_plan(tmp_path: Path) -> None:
    src = tmp_path / "own_host.mim"
    src.write_text(PROGRAM.replace("PIPELINE", OWN_HOST))
    checked = driver.check(str(src), [])
    diffed = driver.diff(str(src), [], [], use_gpu=False)
    assert diffed.ok, [d.message for d in diffed.diagnostics]
    assert diffed.data["pipeline"] == checked.data["pipeline"]
    assert "interp after compile.cleanup[host]" in diffed.data["targets"]


def test_check_summarises_the_statuses(tmp_path: Path) -> None:
    src = tmp_path / "own_host.mim"
    src.write_text(PROGRAM.replace("PIPELINE", OWN_HOST))
    report = driver.check(str(src), [])
    obj = report.to_json()
    summary = obj["summary"]
    assert set(summary) == {"proved", "bounded", "validated", "unknown", "refuted", "skipped", "rejected"}
    # every verdict: the phases', and each launch's races and divergence (as the text counts them)
    statuses = [p["status"] for p in obj["phases"]] + [k[a] for k in obj["kernels"] for a in ("races", "divergence")]
    assert obj["kernels"] and sum(summary.values()) == len(statuses)
    for status, n in summary.items():
        assert n == statuses.count(status)
    assert summary["skipped"] >= 2  # compile.eta_red_phase, and lower_ptr without buffers


@pytest.mark.parametrize("name, skipped", [("pipeline_split_in_device_side.mim", "gpu.split_apply[device]"),
                                           ("pipeline_checks_on_both_sides.mim", None)])
def test_sub_pipelines_run_on_their_side_only(name: str, skipped: str | None) -> None:
    pytest.importorskip("z3")
    path = Path(__file__).resolve().parents[1] / "programs" / "valid" / name
    checked = driver.check(str(path), [])
    statuses = {(p["name"] + (f"[{p['side']}]" if "side" in p else "")): p["status"] for p in checked.data["phases"]}
    assert checked.ok and "refuted" not in statuses.values(), statuses
    if skipped is not None:
        assert statuses[skipped] == "skipped"
    assert driver.run(str(path), [], []).data["result"] == 43
    assert driver.diff(str(path), [], []).ok
