"""A Nat the interpreter computes past the 130 bits smt.bv holds one in: the model wrapped
(2^33·argc)^4 to 0 where the interpreter's unbounded Nat is not 0, so a race that needs it
non-zero was `proved` (host-model prober, j03–j05: check exit 0, run E-RACE). A Nat sum or
product that may pass those bits is an unknown value of its path now (kernel_eval's
`_nat_beyond`; a launch argument computing one is read off main's paths): the race is
refuted by a run. One that cannot (an index's Nat times a literal) stays exact, so the usual
`group · n + item` refutations still stand without a run."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.smt import kernel_programs as kp
from tests.smt.test_argument_chosen_by_argc import HEAD, TAIL
from verimim import driver

X = "core.nat.mul (core.nat.mul (Y, Y), core.nat.mul (Y, Y))"  # Y^4
Y_HOST = "core.nat.mul (8589934592, core.bitcast Nat argc)"  # 2^33 · argc: Y^4 = 2^132 · argc^4
S = f"(4I32, 2I32)#(core.ncmp.e ({X.replace('Y', Y_HOST)}, 0))"  # 4 (a race) where Y^4 ≠ 0: always
DIRECT = HEAD + f"""    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel (d, {S}) $ (m0, m1, m4);
""" + TAIL
CELL = HEAD + f"""    let (m0, c) = mem.slot (I32, 0) (m0, 0);
    let m0 = mem.store (m0, c, {S});
    let (m0, s) = mem.load (m0, c);
    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel (d, s) $ (m0, m1, m4);
""" + TAIL
# in the kernel: ((k+1)·2^33)^4 is never 0 for the interpreter, always 0 for a model that wraps
Y_ITEM = "core.nat.mul (8589934592, core.nat.add (core.bitcast Nat item_id, 1))"


def _in_kernel(choice: str) -> str:
    return HEAD.replace(
        "let j = core.bit2.and_ 0 (core.wrap.mul 0 (core.bitcast I32 item_id, s), 7I32);",
        f"let j = {choice}#(core.ncmp.e ({X.replace('Y', Y_ITEM)}, 0));") + """    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel (d, 2I32) $ (m0, m1, m4);
""" + TAIL


@pytest.mark.parametrize("text", [DIRECT, CELL], ids=["at the launch", "through a host cell"])
def test_a_launch_argument_past_the_models_nat_is_not_proved(tmp_path: Path, text: str) -> None:
    path = kp.write(tmp_path, "beyond", text)
    report = driver.check(path, [])
    [entry] = report.data["kernels"]
    assert entry["races"] == "refuted" and "E-RACE" in {d.code for d in report.diagnostics}, entry
    assert "E-RACE" in {d.code for d in driver.run(path, [], []).diagnostics}


def test_a_kernel_value_past_the_models_nat_does_not_hide_a_race(tmp_path: Path) -> None:
    # every work-item writes d[0] (X ≠ 0): the wrapping model had each write d[k], `proved`
    path = kp.write(tmp_path, "racy", _in_kernel("(0I32, core.bitcast I32 item_id)"))
    assert "ncmp.e" in Path(path).read_text(encoding="utf-8")
    report = driver.check(path, [])
    [entry] = report.data["kernels"]
    assert entry["races"] == "refuted" and "E-RACE" in {d.code for d in report.diagnostics}, entry


def test_a_kernel_value_past_the_models_nat_raises_no_false_race(tmp_path: Path) -> None:
    # every work-item writes d[k] (X ≠ 0): the wrapping model had them all write d[0], an E-RACE
    # no run shows
    path = kp.write(tmp_path, "free", _in_kernel("(core.bitcast I32 item_id, 0I32)"))
    report = driver.check(path, [])
    [entry] = report.data["kernels"]
    assert entry["races"] != "refuted" and "E-RACE" not in {d.code for d in report.diagnostics}, entry
    assert not {d.code for d in driver.run(path, [], []).diagnostics if d.severity == "error"}


def test_an_index_times_a_literal_stays_exact() -> None:
    path = Path(__file__).resolve().parents[1] / "programs" / "runtime_errors" / "race_host_loop_kernel_arg.mim"
    report = driver.check(str(path), [])
    [entry] = report.data["kernels"]
    assert entry["races"] == "refuted" and "does not track" not in entry["detail"], entry
