"""The kernel verifier's own wrong variants: each one (ignoring barriers, confusing groups,
checking only write-write pairs, skipping a loop iteration, one work-item instead of two
distinct ones) gives a wrong verdict on a program where the real check is right."""
from __future__ import annotations

from pathlib import Path

from tests.smt import kernel_programs as kp
from verimim.smt.kernel_host import bind_launch, launch_sites
from verimim.smt.kernel_model import KernelPaths, explore_kernel
from verimim.smt.kernel_queries import Launch, check_divergence, check_races
from verimim.smt.solver import SpecContext


def _kernel(tmp: Path, name: str, body: str, loop_bound: int = 64) -> tuple[KernelPaths, Launch]:
    prog = kp.device_program(kp.write(tmp, name, kp.program(body)))
    assert prog.device is not None
    (site,) = launch_sites(prog.host)
    paths = explore_kernel(prog.device.externals["kernel"], 2_000, loop_bound)
    return paths, bind_launch(prog.host, site, paths.inputs)


def _races(paths: KernelPaths, launch: Launch, **variant: bool) -> str:
    return check_races(paths, launch, SpecContext(), "variant", **variant)[0].status


def test_ignoring_barriers_is_caught(tmp_path: Path) -> None:
    # Race-free only because of its barrier: a verifier that ignores barriers refutes it.
    paths, launch = _kernel(tmp_path, "ex", kp.SHARED_EXCHANGE)
    assert _races(paths, launch) == "proved"
    assert _races(paths, launch, ignore_barriers=True) == "refuted"


def test_confusing_groups_is_caught(tmp_path: Path) -> None:
    # The race is only between groups: treating global memory like shared memory misses it.
    paths, launch = _kernel(tmp_path, "cg", kp.CROSS_GROUP)
    assert _races(paths, launch) == "refuted"
    assert _races(paths, launch, same_group_only=True) == "proved"


def test_checking_only_write_write_pairs_is_caught(tmp_path: Path) -> None:
    paths, launch = _kernel(tmp_path, "rn", kp.READ_NEIGHBOUR)
    assert _races(paths, launch) == "refuted"
    assert _races(paths, launch, writes_only=True) == "proved"


def test_skipping_a_loop_iteration_is_caught(tmp_path: Path) -> None:
    # The race is in the last of four iterations. Unrolled one iteration short, the paths miss
    # it: a verifier that called that a proof would be wrong; ours says `bounded`.
    full, launch = _kernel(tmp_path, "last", kp.LAST_ITERATION_RACE)
    assert _races(full, launch) == "refuted"
    short, launch = _kernel(tmp_path, "last", kp.LAST_ITERATION_RACE, loop_bound=3)
    assert _races(short, launch) == "proved"  # what the skipping variant would report …
    assert any(p.status == "bound" for p in short.paths)  # … on paths that say they were cut
    from verimim.smt.kernel_verify import verify_kernels

    rep = verify_kernels(kp.device_program(str(tmp_path / "last.mim")), SpecContext(), "last.mim", loop_bound=3)
    # past the bound, a run of the program shows the race: an error, with that run
    assert rep.entries[0]["races"] == "refuted" and "shown_by_run" in rep.entries[0]["counterexample"]


def test_one_work_item_is_not_two(tmp_path: Path) -> None:
    # Without distinct ids, a work-item's own read-then-write of its cell would be a "race".
    paths, launch = _kernel(tmp_path, "own", kp.OWN_CELL.replace(
        "    let m1 = mem.store", "    let (m1, x) = mem.load (m1, mem.lea (out, core.bitcast (Idx 16) t));\n    let m1 = mem.store"))
    assert _races(paths, launch) == "proved"
    assert _races(paths, launch, allow_same_item=True) == "refuted"


def test_divergence_needs_two_items_of_one_group(tmp_path: Path) -> None:
    # A barrier under a branch on group_id is uniform in each group: not divergence.
    body = """    (skip, wait)#(core.icmp.e (group_id, 1_2)) (m1, m3)
    where
        con wait (m1: gpu.GlobalM, m3: gpu.SharedM) =
            let (m1, m3) = gpu.sync_work_items (m1, m3);
            skip (m1, m3);
        con skip (m1: gpu.GlobalM, m3: gpu.SharedM) = return (m1, m3, m4, m5);
    end;"""
    paths, launch = _kernel(tmp_path, "gb", body)
    assert check_divergence(paths, launch, SpecContext(), "d").status == "proved"
    paths, launch = _kernel(tmp_path, "ib", body.replace("group_id, 1_2", "item_id, 1_4"))
    assert check_divergence(paths, launch, SpecContext(), "d").status == "refuted"
