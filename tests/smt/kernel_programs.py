"""Small kernel programs for the kernel verifier's tests: one kernel over a global array of N
I32 (initialised to 0..N-1 by main), launched with G groups of I items; main returns
out[argc - 1] after copying back."""
from __future__ import annotations

from pathlib import Path

from verimim.phases.base import Program

TEMPLATE = """plugin core;
plugin mem;
plugin gpu;

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx {G}, item_id: Idx {I}, (), out: gpu.GlobalPtr «{N}; I32»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
{BODY}

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m0, arr) = mem.alloc («{N}; I32», 0) m0;
    let m0 = mem.store (m0, arr, ‹j: {N}; core.bitcast I32 j›);
    let (m0, m1, d) = gpu.alloc_copy.block (m0, m1, arr);
    ret (m0, m1, m4) = gpu.launch ({G}, {I}, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, arr);
    let m1 = gpu.free.block (m1, d);
    let (m0, v) = mem.load (m0, mem.lea (arr, core.bitcast (Idx {N}) (core.wrap.sub 0 (argc, 1I32))));
    let m0 = mem.free (m0, arr);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, v);
"""

# t = group_id * I + item_id as Nat, the usual global index.
T = "core.nat.add (core.nat.mul (core.bitcast Nat group_id, {I}), core.bitcast Nat item_id)"


def program(body: str, groups: int = 2, items: int = 4, n: int = 16) -> str:
    return TEMPLATE.format(G=groups, I=items, N=n, BODY=body.replace("{T}", T.format(I=items)))


def write(tmp: Path, name: str, text: str) -> str:
    path = tmp / f"{name}.mim"
    path.write_text(text, encoding="utf-8")
    return str(path)


def device_program(path: str) -> Program:
    """The program after the default pipeline (no phase proofs): what `check` verifies."""
    from verimim.driver import load, run_with_big_stack
    from verimim.phases.runner import run_pipeline

    def go() -> Program:
        world, _ = load(path, [])
        run = run_pipeline(world, verify=False)
        assert not run.stopped, run.diagnostics
        return run.program

    return run_with_big_stack(go)


# Every work-item t writes out[t] := its own index: race-free.
OWN_CELL = """    let t = {T};
    let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) t), core.bitcast I32 t);
    return (m1, m3, m4, m5);"""

# out[item_id] := group_id: work-items of different groups (only) write one cell with
# different values.
# Every work-item writes its own id into out[0]: a write-write race of different values.
SAME_CELL = """    let m1 = mem.store (m1, mem.lea (out, 0_16), core.bitcast I32 item_id);
    return (m1, m3, m4, m5);"""
CROSS_GROUP = """    let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) (core.bitcast Nat item_id)), core.bitcast I32 group_id);
    return (m1, m3, m4, m5);"""

# t reads out[t + 1] and writes out[t]: a read-write race and no write-write one.
READ_NEIGHBOUR = """    let t = {T};
    let (m1, x) = mem.load (m1, mem.lea (out, core.bitcast (Idx 16) (core.nat.add (t, 1))));
    let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) t), x);
    return (m1, m3, m4, m5);"""

# Shared exchange across a barrier (race-free only because of the barrier).
SHARED_EXCHANGE = """    let (m3, sh) = mem.slot («4; I32», 3) (m3, 0);
    let m3 = mem.store (m3, mem.lea (sh, item_id), core.bitcast I32 item_id);
    let (m1, m3) = gpu.sync_work_items (m1, m3);
    let (m3, v) = mem.load (m3, mem.lea (sh, core.wrap.add 0 (item_id, 1_4)));
    let t = {T};
    let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) t), v);
    return (m1, m3, m4, m5);"""

# A loop k = 0..3: iterations 0..2 write the work-item's own cell out[2t]; only the last
# iteration (k = 3) writes the common cell out[0] with the item's id.
LAST_ITERATION_RACE = """    let t = {T};
    loop (m1, 0)
    where
        con loop (m1: gpu.GlobalM, k: Nat) =
            (exit, body)#(core.ncmp.l (k, 4)) m1
            where
                con body (m1: gpu.GlobalM) =
                    (own, shared)#(core.ncmp.e (k, 3)) m1
                    where
                        con own (m1: gpu.GlobalM) =
                            let j = core.nat.add (core.nat.mul (t, 2), core.nat.mul (k, 0));
                            let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) j), core.bitcast I32 k);
                            loop (m1, core.nat.add (k, 1));
                        con shared (m1: gpu.GlobalM) =
                            let m1 = mem.store (m1, mem.lea (out, 0_16), core.bitcast I32 item_id);
                            loop (m1, core.nat.add (k, 1));
                    end;
            end;
        con exit (m1: gpu.GlobalM) = return (m1, m3, m4, m5);
    end;"""

# A barrier under a branch on a value loaded from global memory at an item-dependent address.
DATA_DEPENDENT_BARRIER = """    let (m1, x) = mem.load (m1, mem.lea (out, core.bitcast (Idx 16) (core.bitcast Nat item_id)));
    (skip, wait)#(core.icmp.e (x, 1I32)) (m1, m3)
    where
        con wait (m1: gpu.GlobalM, m3: gpu.SharedM) =
            let (m1, m3) = gpu.sync_work_items (m1, m3);
            skip (m1, m3);
        con skip (m1: gpu.GlobalM, m3: gpu.SharedM) = return (m1, m3, m4, m5);
    end;"""

# The kernel takes a second argument n, which main computes from its input: argc - 1.
ARG_TEMPLATE = TEMPLATE.replace("(), out: gpu.GlobalPtr «{N}; I32»", "(), (out: gpu.GlobalPtr «{N}; I32», n: I32)") \
    .replace("kernel d $", "kernel (d, core.wrap.sub 0 (argc, 1I32)) $")

# Work-item t writes out[t] when t < n, else out[0] (with t): a race unless n ≥ 8, that is
# unless argc ≥ 9.
GUARDED_BY_ARG = """    let t = {T};
    (clamp, own)#(core.icmp.ul (core.bitcast I32 t, n)) m1
    where
        con own (m1: gpu.GlobalM) =
            let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 16) t), core.bitcast I32 t);
            return (m1, m3, m4, m5);
        con clamp (m1: gpu.GlobalM) =
            let m1 = mem.store (m1, mem.lea (out, 0_16), core.bitcast I32 t);
            return (m1, m3, m4, m5);
    end;"""


def arg_program(body: str, groups: int = 2, items: int = 4, n: int = 16) -> str:
    return ARG_TEMPLATE.format(G=groups, I=items, N=n, BODY=body.replace("{T}", T.format(I=items)))

# A loop to the kernel's argument n (= argc - 1, any value): work-item t writes
# out[t + STRIDE * k] for k < n. Its trip count is unknown, so unrolling is cut.
ARG_LOOP = """    let t = {T};
    loop (m1, 0I32)
    where
        con loop (m1: gpu.GlobalM, k: I32) =
            (exit, body)#(core.icmp.ul (k, n)) m1
            where
                con body (m1: gpu.GlobalM) =
                    let j = core.nat.add (t, core.nat.mul (core.bitcast Nat k, STRIDE));
                    let m1 = mem.store (m1, mem.lea (out, core.bitcast (Idx 1024) j), core.bitcast I32 t);
                    loop (m1, core.wrap.add 0 (k, 1I32));
            end;
        con exit (m1: gpu.GlobalM) = return (m1, m3, m4, m5);
    end;"""
