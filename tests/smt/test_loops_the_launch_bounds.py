"""A barrier loop whose trip count is a kernel argument: explored for every argument it is cut
at the unrolling bound (`bounded`); where the launch bounds the argument (a literal 3, `argc & 3`
the host computes for a captured parameter), the kernel is explored again under the launch's
constraints (kernel_verify._explore_for_launch), its paths end, and the verdict is `proved`.
The twins that diverge or race inside the loop stay refuted: the launch's paths keep them."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.smt import kernel_programs as kp
from verimim import driver

HEAD = """plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 4, (), (d: gpu.GlobalPtr «8; I32», n: I32),
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let i = core.bitcast I32 item_id;
    loop (m1, m3, 0I32)
    where
        con loop (m1: gpu.GlobalM, m3: gpu.SharedM, k: I32) =
            (done, body)#(core.icmp.ul (k, TRIPS)) (m1, m3)
            where
                con body (m1: gpu.GlobalM, m3: gpu.SharedM) =
                    let m1 = mem.store (m1, mem.lea (d, core.bitcast (Idx 8) (CELL)), core.wrap.add 0 (k, i));
                    let (m1, m3) = gpu.sync_work_items (m1, m3);
                    loop (m1, m3, core.wrap.add 0 (k, 1I32));
            end;
        con done (m1: gpu.GlobalM, m3: gpu.SharedM) = return (m1, m3, m4, m5);
    end;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, h) = mem.alloc («8; I32», 0) m0;
    let m0 = mem.store (m0, h, ‹j: 8; core.bitcast I32 j›);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, h);
    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel (d, ARG_N) $ (m0, m1, m4);
    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, h);
    let m1 = gpu.free.block (m1, d);
    let (m0, v) = mem.load (m0, mem.lea (h, 1_8));
    let m0 = mem.free (m0, h);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, v);
"""
OWN_CELL = "item_id"  # each work-item its own cell in every iteration
SAME_TRIPS = "n"


def _text(n: str, trips: str = SAME_TRIPS, cell: str = OWN_CELL) -> str:
    return HEAD.replace("TRIPS", trips).replace("CELL", cell).replace("ARG_N", n)


def _check(tmp_path: Path, name: str, text: str) -> tuple[dict[str, object], set[str]]:
    report = driver.check(kp.write(tmp_path, name, text), [])
    [entry] = report.data["kernels"]
    return entry, {d.code for d in report.diagnostics}


@pytest.mark.parametrize("n", ["3I32", "core.bit2.and_ 0 (argc, 3I32)"], ids=["literal", "argc & 3"])
def test_a_loop_the_launch_bounds_is_proved(tmp_path: Path, n: str) -> None:
    entry, codes = _check(tmp_path, "bounded_by_launch", _text(n))
    assert (entry["races"], entry["divergence"]) == ("proved", "proved") and not codes, entry
    assert "that this launch's arguments and sizes allow" in str(entry["detail"]), entry


def test_an_argument_the_launch_leaves_unbounded_stays_bounded(tmp_path: Path) -> None:
    entry, _codes = _check(tmp_path, "argc", _text("argc"))
    assert (entry["races"], entry["divergence"]) == ("bounded", "bounded"), entry


def test_a_trip_count_that_differs_by_work_item_still_diverges(tmp_path: Path) -> None:
    trips = "core.wrap.add 0 (n, core.bit2.and_ 0 (i, 1I32))"
    entry, codes = _check(tmp_path, "diverges", _text("3I32", trips=trips))
    assert entry["divergence"] == "refuted" and "E-BARRIER-DIVERGENCE" in codes, entry


def test_a_race_inside_the_bounded_loop_is_refuted(tmp_path: Path) -> None:
    # every work-item stores k + i into d[k & 7]: four different values into one cell
    entry, codes = _check(tmp_path, "races", _text("3I32", cell="core.bit2.and_ 0 (k, 7I32)"))
    assert entry["races"] == "refuted" and "E-RACE" in codes, entry
