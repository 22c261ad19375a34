"""`check` reports an operation on a stream that `stream_deinit` ended (E-STREAM), as `run` does,
for every argc that reaches it, and only where one does."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.smt import kernel_programs as kp
from verimim import driver

# The stream is ended on one branch only: argc > LIMIT. The launch after the join uses it.
BRANCHED = """plugin core;
plugin mem;
plugin gpu;

con fill (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
          group_id: Idx 1, item_id: Idx 4, (), d: gpu.GlobalPtr «4; I32»,
          return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let m1 = mem.store (m1, mem.lea (d, item_id), core.wrap.add 0 (core.bitcast I32 item_id, 1I32));
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = mem.alloc («4; I32», 1) m1;
    let (m0, sp) = mem.slot (gpu.Stream, 0) (m0, 0);
    let (m0, m1) = gpu.stream_init (m0, m1, sp);
    let (m0, s) = mem.load (m0, sp);
    (keep, drop)#(core.icmp.ug (argc, LIMIT)) (m0, m1)
    where
        con drop (m0: mem.M 0, m1: gpu.GlobalM) =
            let (m0, m1) = gpu.stream_deinit (m0, m1, s);
            go (m0, m1);
        con keep (m0: mem.M 0, m1: gpu.GlobalM) = go (m0, m1);
        con go (m0: mem.M 0, m1: gpu.GlobalM) =
            ret (m0, m1, m4) = gpu.launch (1, 4, s, ff, ()) fill d $ (m0, m1, m4);
            let (m0, m1) = gpu.stream_sync (m0, m1, s);
            let (m0, arr) = mem.alloc («4; I32», 0) m0;
            let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, arr);
            let (m0, v) = mem.load (m0, mem.lea (arr, 1_4));
            let m1 = mem.free (m1, d);
            let m0 = mem.free (m0, arr);
            let m0 = gpu.deinit (m0, m1, m4);
            return (m0, v);
    end;
"""


@pytest.mark.parametrize("limit, reached", [("2I32", True), ("2147483647I32", False)])
def test_an_operation_on_a_stream_ended_on_one_branch(tmp_path: Path, limit: str, reached: bool) -> None:
    # argc > 2 ends the stream before the launch: E-STREAM at the launch, with the argc of a
    # run that shows it; argc > INT_MAX never holds: accepted (the launch is proved race-free).
    path = kp.write(tmp_path, "branched", BRANCHED.replace("LIMIT", limit))
    got = [d for d in driver.check(path, []).diagnostics if d.code == "E-STREAM"]
    if not reached:
        assert got == []
        return
    [diag] = got
    assert diag.severity == "error" and "`gpu.launch` on a stream that is already deinitialised" in diag.message
    lines = BRANCHED.splitlines()
    launch = next(i for i, t in enumerate(lines, 1) if "gpu.launch" in t)
    assert diag.loc is not None and (diag.loc.line, diag.loc.col) == (launch, lines[launch - 1].index("gpu.launch") + 1)
    ended, reach = diag.related
    deinit = next(i for i, t in enumerate(lines, 1) if "gpu.stream_deinit" in t)
    assert ended.message == "deinitialised here" and ended.loc is not None and ended.loc.line == deinit
    argc = int(reach.message.split("argc = ")[1].split(":")[0])
    assert argc > 2
    ran = driver.run(path, [], ["a"] * (argc - 1))
    assert [(d.code, d.loc) for d in ran.diagnostics if d.severity == "error"] == [("E-STREAM", diag.loc)]


KEPT_PAST_WITH_STREAMS = """plugin core;
plugin mem;
plugin gpu;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, cell) = mem.alloc (gpu.Stream, 0) m0;
    ret (m0, m1) = gpu.with_streams (2, scope)
    where
        fun scope (m0: mem.M 0, m1: gpu.GlobalM, (s1 s2: gpu.Stream)) : [mem.M 0, gpu.GlobalM] =
            let m0 = mem.store (m0, cell, s2);
            SYNC_INSIDE
            return (m0, m1);
    end
    $ (m0, m1);
    let (m0, s) = mem.load (m0, cell);
    SYNC_AFTER
    let m0 = mem.free (m0, cell);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, argc);
"""
SYNC = "let (m0, m1) = gpu.stream_sync (m0, m1, s2);"


@pytest.mark.parametrize("inside", [False, True], ids=["after with_streams", "inside it"])
def test_a_stream_kept_past_with_streams(tmp_path: Path, inside: bool) -> None:
    # with_streams deinitialises its streams when the scope returns (the seed): a handle kept in
    # a host cell and synced after it is E-STREAM; synced inside the scope, it is fine.
    text = KEPT_PAST_WITH_STREAMS.replace("SYNC_INSIDE", SYNC if inside else "")
    text = text.replace("SYNC_AFTER", "" if inside else SYNC.replace("s2", "s"))
    path = kp.write(tmp_path, "kept", text)
    checked = {d.code for d in driver.check(path, []).diagnostics if d.severity == "error"}
    ran = {d.code for d in driver.run(path, [], []).diagnostics if d.severity == "error"}
    assert checked == ran == (set() if inside else {"E-STREAM"})
