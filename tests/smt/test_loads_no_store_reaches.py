"""A global load whose bytes no work-item's store overlaps reads the launch's initial contents,
the same for every work-item (kernel_queries.untouched_loads: a Z3 query per load), even where
the kernel writes other cells of that buffer. Before, only loads from buffers the kernel never
writes were tied: a barrier loop counting to a cell's value looked divergent and a copy of one
cell into another by every work-item looked harmful, and both stayed `unknown` (no run shows
them). The twins whose stores do reach the loaded cell are not tied."""
from __future__ import annotations

from pathlib import Path

from tests.smt import kernel_programs as kp
from verimim import driver

# every work-item loads out[1] and waits at a barrier that many times (& 3), then writes out[8 + t]
TRIPS_FROM_A_CELL = """    let (m1, c) = mem.load (m1, mem.lea (out, 1_16));
    loop (m1, m3, 0)
    where
        con loop (m1: gpu.GlobalM, m3: gpu.SharedM, k: Nat) =
            (done, body)#(core.ncmp.l (k, core.bitcast Nat (core.bit2.and_ 0 (c, 3I32)))) (m1, m3)
            where
                con body (m1: gpu.GlobalM, m3: gpu.SharedM) =
                    let (m1, m3) = gpu.sync_work_items (m1, m3);
                    loop (m1, m3, core.nat.add (k, 1));
            end;
        con done (m1: gpu.GlobalM, m3: gpu.SharedM) =
            let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) (WHERE)), core.bitcast I32 ({T}));
            return (m1, m3, m4, m5);
    end;"""
# every work-item copies out[3] into out[0]: the same value (benign) where nobody writes out[3]
COPY_A_CELL = """    let (m1, x) = mem.load (m1, mem.lea (out, FROM));
    let m1 = mem.store (m1, mem.lea (out, 0_16), x);
    return (m1, m3, m4, m5);"""


def _check(tmp_path: Path, name: str, body: str) -> tuple[dict[str, object], set[str]]:
    report = driver.check(kp.write(tmp_path, name, kp.program(body)), [])
    [entry] = report.data["kernels"]
    return entry, {d.code for d in report.diagnostics}


def test_a_trip_count_loaded_from_a_cell_nobody_writes_is_uniform(tmp_path: Path) -> None:
    entry, codes = _check(tmp_path, "uniform", TRIPS_FROM_A_CELL.replace("WHERE", "core.nat.add ({T}, 8)"))
    assert (entry["races"], entry["divergence"]) == ("proved", "proved") and not codes, entry


def test_a_trip_count_loaded_from_a_cell_another_group_writes_is_not(tmp_path: Path) -> None:
    # work-item t = 1 writes out[1] after its loop: another group may load it before or after
    entry, codes = _check(tmp_path, "written", TRIPS_FROM_A_CELL.replace("WHERE", "{T}"))
    assert entry["divergence"] != "proved" and entry["races"] == "refuted" and "E-RACE" in codes, entry


def test_copying_a_cell_nobody_writes_is_a_benign_race(tmp_path: Path) -> None:
    entry, codes = _check(tmp_path, "benign", COPY_A_CELL.replace("FROM", "3_16"))
    assert entry["races"] == "proved" and codes == {"W-BENIGN-RACE"}, entry


def test_copying_the_cell_every_work_item_writes_is_a_race(tmp_path: Path) -> None:
    entry, codes = _check(tmp_path, "harmful", COPY_A_CELL.replace("FROM", "0_16"))
    assert entry["races"] == "refuted" and "E-RACE" in codes, entry
