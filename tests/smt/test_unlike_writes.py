"""A write-write race between a word and a byte store (two shapes) is decided byte by byte: the
shared byte stored the same by both is benign (W-BENIGN-RACE), else E-RACE — for all inputs, by
Z3 (it was `unknown`, "the proof compares their values whole")."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.smt import kernel_programs as kp
from verimim import driver

# Item 0 stores the word 0x01020305 into d[0] (bytes 05 03 02 01, little-endian); item 1 stores
# the byte VALUE at byte BYTE of d.
PROGRAM = """plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
        group_id: Idx 1, item_id: Idx 2, (), d: gpu.GlobalPtr «4; I32»,
        return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    (bytew, wordw)#(core.icmp.e (item_id, 0_2)) m1
    where
        con wordw (m1: gpu.GlobalM) =
            let m1 = mem.store (m1, mem.lea (d, 0_4), 16909061I32);
            done m1;
        con bytew (m1: gpu.GlobalM) =
            let bv = core.bitcast (gpu.GlobalPtr «16; I8») d;
            let m1 = mem.store (m1, mem.lea (bv, BYTE), VALUE);
            done m1;
        con done (m1: gpu.GlobalM) = return (m1, m3, m4, m5);
    end;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, h) = mem.alloc («4; I32», 0) m0;
    let m0 = mem.store (m0, h, ‹j: 4; core.bitcast I32 j›);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, h);
    ret (m0, m1, m4) = gpu.launch (1, 2, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, h);
    let m1 = gpu.free.block (m1, d);
    let (m0, v) = mem.load (m0, mem.lea (h, 0_4));
    let m0 = mem.free (m0, h);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, v);
"""


@pytest.mark.parametrize("byte, value, benign", [("0_16", "5I8", True), ("1_16", "3I8", True), ("3_16", "1I8", True),
                                                 ("1_16", "7I8", False), ("0_16", "1I8", False)])
def test_a_word_and_a_byte_store_race_benign_exactly_where_the_shared_byte_agrees(
        tmp_path: Path, byte: str, value: str, benign: bool) -> None:
    path = kp.write(tmp_path, "unlike", PROGRAM.replace("BYTE", byte).replace("VALUE", value))
    report = driver.check(path, [])
    [entry] = report.data["kernels"]
    codes = {d.code for d in report.diagnostics}
    ran = {d.code for d in driver.run(path, [], []).diagnostics}
    if benign:
        assert entry["races"] == "proved" and "W-BENIGN-RACE" in codes and "E-RACE" not in codes
        assert "W-BENIGN-RACE" in ran
    else:
        assert entry["races"] == "refuted" and "E-RACE" in codes and "E-RACE" in ran
