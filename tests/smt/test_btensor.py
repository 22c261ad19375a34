"""`gpu.lower_btensor_map_reduce`: the lowering is proved and keeps the interpreter's result on
several shapes, deliberately wrong variants of it are refuted with readable counterexamples, and
operations it cannot lower are left to the host with a warning."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PROGRAMS, annotations
from verimim.driver import load, run_with_big_stack
from verimim.frontend.loader import load_text
from verimim.interp.machine import Machine, find_main
from verimim.interp.values import RuntimeFault
from verimim.ir.defs import App, MutLam
from verimim.ir.world import World
from verimim.phases.base import PhaseResult, Program, apps_of
from verimim.phases.btensor import LowerBtensor
from verimim.phases.runner import run_pipeline
from verimim.phases.witness import BtensorLowering
from verimim.smt.solver import SpecContext
from verimim.smt.specs import check_spec

VALID = PROGRAMS / "valid"
PROGRAMS_BTENSOR = ["btensor_sum.mim", "btensor_row_sums.mim", "btensor_matmul.mim", "btensor_post.mim",
                    "btensor_many_groups.mim", "btensor_post_same_as_f.mim", "btensor_reduce_16_steps.mim",
                    "btensor_rank_one_input_inferred.mim", "btensor_empty_reduction_dimension.mim",
                    "btensor_empty_last_reduction_dimension_of_rank_3.mim",
                    "btensor_loop_over_part_of_a_buffer.mim", "btensor_i8_row_sums_that_wrap.mim",
                    "btensor_post_implicits_inferred.mim", "btensor_output_cells_divided_by_five.mim",
                    "btensor_post_input_of_rank_two.mim", "btensor_two_inputs_of_one_shape.mim"]

HEADER = """plugin core;
plugin mem;
plugin buffer;
plugin btensor;
plugin gpu;

fun add (m: mem.M 0, acc: I32, x: I32): [mem.M 0, I32] = return (m, core.wrap.add 0 (acc, x));
fun horner (m: mem.M 0, acc: I32, x: I32): [mem.M 0, I32] =
    return (m, core.wrap.add 0 (core.wrap.mul 0 (acc, 10I32), x));

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
"""

# A fold over two reduction dimensions (Ro = 0, Sr = (2, 3)) with an order-sensitive combiner:
# row-major gives 123456, column-major 142536.
HORNER_2D = HEADER + """
    let (m0, a) = buffer.init (2, (2, 3), I32) (m0, ((1I32, 2I32, 3I32), (4I32, 5I32, 6I32)));
    let (m0, s) = btensor.map_reduce @1 @(I32, 0, 2) ((), (2, 3)) (horner, 0I32) (0, 1) (m0, a);
    let (m0, x) = buffer.read (0, (), I32) (m0, s, ());
    return (m0, x);
"""


def from_file(name: str) -> World:
    return run_with_big_stack(lambda: load(str(VALID / name), [])[0])


def from_text(text: str, name: str = "prog.mim") -> World:
    return run_with_big_stack(lambda: load_text(text, name)[0])


def lower(world: World, phase: LowerBtensor | None = None) -> PhaseResult:
    p = phase or LowerBtensor()
    return run_with_big_stack(lambda: p.apply(Program(world)))


def verdict(res: PhaseResult) -> tuple[str, str, object]:
    out = run_with_big_stack(lambda: check_spec(res, SpecContext(timeout_ms=10_000)))
    return out.status, out.detail, out.counterexample


def result(prog: Program, args: list[str] | None = None) -> int:
    return run_with_big_stack(lambda: Machine(prog.host, device=prog.device).run_main(
        find_main(prog.host), args or ["prog"]))


def launches(world: World) -> list[App]:
    return run_with_big_stack(lambda: apps_of(world, "gpu.launch", 4))


# ----------------------------------------------------------------------------- the right phase


@pytest.mark.parametrize("name", PROGRAMS_BTENSOR)
def test_lowering_is_proved_and_keeps_the_result(name: str) -> None:
    path = VALID / name
    expected = int(annotations(path)["EXPECT"])
    res = lower(from_file(name))
    assert res.skipped is None and not res.diagnostics
    assert len(res.claim(BtensorLowering).lowered) == 1
    status, detail, _ = verdict(res)
    assert status == "proved", detail
    argv = [str(path), *annotations(path).get("ARGS", "").split()]
    assert result(res.before, argv) == expected
    assert result(res.after, argv) == expected
    # One launch of PHASES.md's shape, and no btensor operation left.
    (site,) = launches(res.after.host)
    n_groups, n_items = (a.value for a in site.args()[1].ops[:2])  # type: ignore[attr-defined]
    rec = res.claim(BtensorLowering).lowered[0]
    assert (n_groups, n_items) == (rec.n_groups, rec.n_items)
    assert not run_with_big_stack(lambda: apps_of(res.after.host, "btensor.map_reduce", 7)
                                  + apps_of(res.after.host, "btensor.map_reduce_post", 7))


def test_launch_configuration_for_more_than_one_group() -> None:
    res = lower(from_file("btensor_many_groups.mim"))
    rec = res.claim(BtensorLowering).lowered[0]
    assert (rec.n_groups, rec.n_items) == (2, 1024)  # 1100 cells: ⌈1100 / 1024⌉ groups


@pytest.mark.parametrize("name", ["btensor_sum.mim", "btensor_post.mim"])
def test_the_rest_of_the_pipeline_accepts_the_lowered_program(name: str) -> None:
    world = from_file(name)
    run = run_with_big_stack(lambda: run_pipeline(world, timeout_ms=10_000))
    assert not run.stopped, [d.render() for d in run.diagnostics]
    assert all(p["status"] in ("proved", "bounded", "validated", "skipped") for p in run.phases), run.phases
    assert [p["name"] for p in run.phases if p["status"] == "skipped"] in ([], ["compile.beta_red"],
                                                                           ["compile.beta_red", "compile.lam_spec"])
    assert run.program.device is not None and "btensor_kernel" in run.program.device.externals
    assert result(run.program) == int(annotations(VALID / name)["EXPECT"])


def test_a_fold_over_two_reduction_dimensions_is_row_major() -> None:
    res = lower(from_text(HORNER_2D))
    assert verdict(res)[0] == "proved"
    assert result(res.before) == result(res.after) == 123456


# Three operations in one continuation (the second reads the first's result, the third a buffer
# written in between; the first's init is a run-time value) and one in a loop body.
SEVERAL = HEADER + """
    let (m0, a) = buffer.init (2, (2, 3), I32) (m0, ((1I32, 2I32, 3I32), (4I32, 5I32, 6I32)));
    let (m0, rows) = btensor.map_reduce @1 @(I32, 1, 2) (2, (2, 3)) (horner, argc) (0, 1) (m0, a);
    let (m0, a) = buffer.write (2, (2, 3), I32) (m0, a, (0_2, 0_3), 9I32);
    let (m0, tot) = btensor.map_reduce @1 @(I32, 0, 1) ((), 2) @(I32, 1, 2) (add, 0I32) 0 (m0, rows);
    let (m0, again) = btensor.map_reduce @1 @(I32, 1, 2) (2, (2, 3)) (horner, 0I32) (0, 1) (m0, a);
    let (m0, x) = buffer.read (0, (), I32) (m0, tot, ());
    let (m0, y) = buffer.read (1, 2, I32) (m0, again, 0_2);
    loop (m0, 0, x)
    where
        con loop (m0: mem.M 0, i: Nat, acc: I32) =
            (exit, body)#(core.ncmp.l (i, 2)) (m0, acc)
            where
                con body (m0: mem.M 0, acc: I32) =
                    let (m0, b) = buffer.lit (1, 2, I32) (m0, acc);
                    let (m0, s) = btensor.map_reduce @1 @(I32, 0, 1) ((), 2) @(I32, 1, 2) (add, 0I32) 0 (m0, b);
                    let (m0, v) = buffer.read (0, (), I32) (m0, s, ());
                    loop (m0, core.nat.add (i, 1), v);
            end;
        con exit (m0: mem.M 0, acc: I32) = return (m0, core.wrap.add 0 (acc, y));
    end;
"""


def test_several_operations_and_one_in_a_loop() -> None:
    res = lower(from_text(SEVERAL))
    assert len(res.claim(BtensorLowering).lowered) == 4
    status, detail, _ = verdict(res)
    assert status == "proved", detail
    # rows = (1123, 1456) (init argc = 1), tot = 2579, again#0 = 923, 2579 doubled twice: 10316.
    assert result(res.before) == result(res.after) == 11239


# Unit dimensions (`«1; T» = T`: no index for them), two epilogue inputs of different ranks.
UNIT_DIMS = HEADER.replace("fun extern main", """fun scale (m: mem.M 0, acc: I32, (b: I32, c: I32)): [mem.M 0, I32] =
    return (m, core.wrap.sub 0 (core.wrap.mul 0 (acc, b), c));

fun extern main""") + """
    let (m0, a) = buffer.init (3, (2, 1, 3), I32) (m0, (((1I32, 2I32, 3I32)), ((4I32, 5I32, 6I32))));
    let (m0, b) = buffer.lit (2, (2, 1), I32) (m0, 2I32);
    let (m0, c) = buffer.init (1, 2, I32) (m0, (argc, 7I32));
    let (m0, s) = btensor.map_reduce_post @(1, 2) @(I32, I32, 2, 3) ((2, 1), (2, 1, 3))
        @(I32, 3, (2, 1, 3), (I32, I32), (2, 1), ((2, 1), 2)) (horner, 0I32, scale)
        ((0, 1, 2), ((0, 1), 0)) (m0, a, (b, c));
    let (m0, x) = buffer.read (2, (2, 1), I32) (m0, s, (0_2, 0_1));
    let (m0, y) = buffer.read (2, (2, 1), I32) (m0, s, (1_2, 0_1));
    return (m0, core.wrap.add 0 (x, y));
"""


def test_unit_dimensions_and_two_epilogue_inputs() -> None:
    res = lower(from_text(UNIT_DIMS))
    status, detail, _ = verdict(res)
    assert status == "proved", detail
    assert result(res.before) == result(res.after) == (123 * 2 - 1) + (456 * 2 - 7)


@pytest.mark.parametrize("name", ["btensor_matmul.mim", "btensor_post.mim"])
def test_the_printed_lowered_program_type_checks_and_runs(name: str) -> None:
    """The phase's output is well-typed Mim: printed, read back and run, it gives the result."""
    from verimim.dump import dump_world

    res = lower(from_file(name))
    header = [line for line in (VALID / name).read_text().splitlines() if line.startswith("plugin ")]
    text = run_with_big_stack(lambda: dump_world(res.after.host, header))
    assert "gpu.launch" in text and "gpu.auto_deinit" in text
    again = from_text(text, "printed.mim")
    assert result(Program(again)) == int(annotations(VALID / name)["EXPECT"])


def test_a_program_that_does_not_name_the_gpu_plugin() -> None:
    """btensor does not import gpu; the phase loads it for the operations it generates."""
    res = lower(from_text(HORNER_2D.replace("plugin gpu;\n", "")))
    assert len(res.claim(BtensorLowering).lowered) == 1
    assert verdict(res)[0] == "proved"
    assert result(res.after) == 123456


def test_the_combiner_gets_a_device_copy() -> None:
    """`f` is cloned for the kernel, so a host use of the same function stays on the host."""
    res = lower(from_file("btensor_sum.mim"))
    kernel = res.claim(BtensorLowering).lowered[0].kernel
    assert isinstance(kernel, MutLam) and kernel.name == "btensor_kernel"
    names = {d.name for d in run_with_big_stack(lambda: list(_muts(res.after.host)))}
    assert "add_device" in names and "add" not in names


def _muts(world: World) -> list[MutLam]:
    from verimim.phases.base import walk

    return [d for d in walk(world) if isinstance(d, MutLam)]


# ----------------------------------------------------------------------------- wrong variants


class LongerLoop(LowerBtensor):
    """Off by one: one reduction point too many."""

    def loop_bound(self, points: int) -> int:
        return points + 1


class ShorterLoop(LowerBtensor):
    """Off by one: the last reduction point is dropped."""

    def loop_bound(self, points: int) -> int:
        return points - 1


class ColumnMajor(LowerBtensor):
    """The reduction dimensions are visited in column-major order."""

    def red_order(self, rank: int) -> list[int]:
        return list(range(rank))


class NoGuard(LowerBtensor):
    """Surplus work-items are not sent home."""

    guard = False


class TooFewItems(LowerBtensor):
    """One work-item fewer than cells."""

    def config(self, total: int) -> tuple[int, int]:
        return 1, total - 1


class OneBigGroup(LowerBtensor):
    """Covers every cell, but with more than 1024 work-items in one group."""

    def config(self, total: int) -> tuple[int, int]:
        return 1, total


class NoCopyBack(LowerBtensor):
    copy_back = False


def test_off_by_one_too_long_is_refuted() -> None:
    status, detail, cex = verdict(lower(from_file("btensor_row_sums.mim"), LongerLoop()))
    assert status == "refuted", detail
    assert "outside" in detail and "work-item" in detail
    assert isinstance(cex, dict) and {"group", "item"} <= set(cex)


def test_off_by_one_too_short_is_refuted_by_z3() -> None:
    status, detail, cex = verdict(lower(from_file("btensor_row_sums.mim"), ShorterLoop()))
    assert status == "refuted", detail
    assert "the kernel computes" in detail and "map-reduce fold" in detail
    assert isinstance(cex, dict) and cex["cell"] and "f(" in cex["map_reduce"]


def test_reordered_reduction_is_refuted() -> None:
    res = lower(from_text(HORNER_2D), ColumnMajor())
    status, detail, cex = verdict(res)
    assert status == "refuted", detail
    assert isinstance(cex, dict) and cex["kernel"] != cex["map_reduce"]
    # Really wrong: the interpreter sees it too.
    assert result(res.before) == 123456 and result(res.after) == 142536


def test_dropped_surplus_guard_is_refuted() -> None:
    status, detail, _ = verdict(lower(from_file("btensor_many_groups.mim"), NoGuard()))
    assert status == "refuted", detail
    assert "outside" in detail


def test_too_few_work_items_is_refuted() -> None:
    status, detail, cex = verdict(lower(from_file("btensor_row_sums.mim"), TooFewItems()))
    assert status == "refuted", detail
    assert "never written" in detail and isinstance(cex, dict) and cex["cell"] == [2]


def test_wrong_n_items_is_refuted() -> None:
    status, detail, cex = verdict(lower(from_file("btensor_many_groups.mim"), OneBigGroup()))
    assert status == "refuted", detail
    assert "PHASES.md demands 2 of 1024" in detail and isinstance(cex, dict) and cex["n_items"] == 1100


def test_forgotten_copy_back_is_refuted() -> None:
    res = lower(from_file("btensor_matmul.mim"), NoCopyBack())
    status, detail, _ = verdict(res)
    assert status == "refuted", detail
    assert "not copied back" in detail
    with pytest.raises(RuntimeFault) as e:  # the interpreter reads the never-written result buffer
        result(res.after)
    assert e.value.code == "E-UNINIT"


# ----------------------------------------------------------------------------- what is not lowered


def test_skipped_when_the_program_opens_a_gpu_session() -> None:
    text = HEADER + """
    let (m0, m1, m4) = gpu.init m0;
    let m0 = gpu.deinit (m0, m1, m4);
    let (m0, b) = buffer.lit (1, 3, I32) (m0, argc);
    let (m0, s) = btensor.map_reduce @1 @(I32, 0, 1) ((), 3) @(I32, 1, 3) (add, 0I32) 0 (m0, b);
    let (m0, x) = buffer.read (0, (), I32) (m0, s, ());
    return (m0, x);
"""
    res = lower(from_text(text))
    assert res.skipped == "the program already contains an explicit gpu.init"


def test_skipped_with_a_session_the_program_opens_with_auto_init_and_says_so() -> None:
    # (it said "an explicit gpu.init", which the program does not have)
    text = HEADER + """
    let (m0, m1, m4) = gpu.auto_init m0;
    let (m0, b) = buffer.lit (1, 3, I32) (m0, argc);
    let (m0, s) = btensor.map_reduce @1 @(I32, 0, 1) ((), 3) @(I32, 1, 3) (add, 0I32) 0 (m0, b);
    let (m0, x) = buffer.read (0, (), I32) (m0, s, ());
    let m0 = gpu.auto_deinit (m0, m1, m4);
    return (m0, x);
"""
    res = lower(from_text(text))
    assert res.skipped is not None and "gpu.auto_init" in res.skipped and "explicit" not in res.skipped


def test_skipped_without_btensor() -> None:
    res = lower(from_file("buffer_roundtrip.mim"))
    assert res.skipped == "the program does not use btensor"


def test_a_combiner_with_memory_effects_stays_on_the_host() -> None:
    text = HEADER.replace("fun extern main", """fun add_logged (m: mem.M 0, acc: I32, x: I32): [mem.M 0, I32] =
    let (m, p) = mem.alloc (I32, 0) m;
    let m = mem.store (m, p, x);
    let (m, y) = mem.load (m, p);
    let m = mem.free (m, p);
    return (m, core.wrap.add 0 (acc, y));

fun extern main""") + """
    let (m0, b) = buffer.lit (1, 3, I32) (m0, argc);
    let (m0, s) = btensor.map_reduce @1 @(I32, 0, 1) ((), 3) @(I32, 1, 3) (add_logged, 0I32) 0 (m0, b);
    let (m0, x) = buffer.read (0, (), I32) (m0, s, ());
    return (m0, x);
"""
    res = lower(from_text(text))
    (warn,) = res.diagnostics
    assert warn.severity == "warning" and warn.code == "W-UNSUPPORTED" and "memory operations" in warn.message
    assert warn.loc is not None and warn.loc.line > 0
    assert res.claim(BtensorLowering).lowered == [] and res.after is res.before
    assert verdict(res)[0] == "proved"
    assert result(res.after) == 3


def test_a_shape_known_only_at_run_time_stays_on_the_host() -> None:
    text = HEADER.replace("fun extern main", """fun total (m: mem.M 0, n: Nat, b: buffer.Buf (1, n, I32)): [mem.M 0, I32] =
    let (m, s) = btensor.map_reduce @1 @(I32, 0, 1) ((), n) @(I32, 1, n) (add, 0I32) 0 (m, b);
    let (m, x) = buffer.read (0, (), I32) (m, s, ());
    return (m, x);

fun extern main""") + """
    let (m0, b) = buffer.lit (1, 3, I32) (m0, argc);
    ret (m0, x) = total $ (m0, 3, b);
    return (m0, x);
"""
    res = lower(from_text(text))
    (warn,) = res.diagnostics
    assert warn.code == "W-UNSUPPORTED" and "not a literal" in warn.message
    assert verdict(res)[0] == "proved"
    assert result(res.after) == 3


def test_an_output_shape_that_is_no_prefix_of_the_loop_shape() -> None:
    """Malformed for PLUGINS.md: not lowered (with a warning), and an error when it runs."""
    text = HEADER + """
    let (m0, a) = buffer.lit (2, (3, 4), I32) (m0, argc);
    let (m0, s) = btensor.map_reduce @1 @(I32, 1, 2) (2, (3, 4)) (add, 0I32) (0, 1) (m0, a);
    let (m0, x) = buffer.read (1, 2, I32) (m0, s, 0_2);
    return (m0, x);
"""
    world = from_text(text)
    res = lower(world)
    assert [d.code for d in res.diagnostics] == ["W-UNSUPPORTED"] and "first 1 entries" in res.diagnostics[0].message
    with pytest.raises(RuntimeFault) as e:
        result(Program(world))
    assert e.value.code == "E-TYPE"


def test_the_interpreter_folds_in_row_major_order() -> None:
    """The reference semantics itself: Horner's step over (1, 2, 3, 4, 5, 6) in row-major order."""
    assert result(Program(from_text(HORNER_2D))) == 123456


def test_every_valid_btensor_program_is_listed() -> None:
    on_disk = sorted(p.name for p in Path(VALID).glob("btensor_*.mim"))
    assert on_disk == sorted(PROGRAMS_BTENSOR)


def test_an_epilogue_replaced_by_the_combiner_is_refuted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel calls (a copy of) `f` where `post` belongs. Refuted where the two differ; where
    the epilogue is written exactly as the combiner (btensor_post_same_as_f.mim) the same kernel
    is right, and proved."""
    import dataclasses

    import verimim.phases.btensor as phase

    read = phase.read_op
    monkeypatch.setattr(phase, "read_op", lambda w, app, args: dataclasses.replace(
        read(w, app, args), post=read(w, app, args).f))
    res = lower(from_file("btensor_post.mim"))
    assert result(res.after) != 572  # it really is wrong
    status, detail, _ = verdict(res)
    assert status == "refuted" and "the kernel computes" in detail, detail
    same = lower(from_file("btensor_post_same_as_f.mim"))
    assert verdict(same)[0] == "proved"


def test_lowering_nothing_without_saying_why_is_refuted(monkeypatch: pytest.MonkeyPatch) -> None:
    # The planner finds nothing to lower: the program is unchanged, and the spec said `proved`
    # ("no operation lowered") though PHASES.md leaves an operation only for a stated reason.
    import verimim.phases.btensor as bt

    monkeypatch.setattr(bt, "plan", lambda world, res: [])
    status, detail, cex = verdict(lower(from_file("btensor_row_sums.mim"), LowerBtensor()))
    assert status == "refuted" and "does not say why" in detail, detail
    assert isinstance(cex, dict) and cex["location"] != "None"


def test_addressing_inputs_by_the_loop_extents_is_refuted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's `mem.lea`s name the extents the loop reads (`«3; «3; I32»»`) instead of the
    buffer's (`«5; «5; I32»»`): the same index paths, other addresses. The specification proved it
    (it followed the paths and ignored the types the code generators compute addresses from)."""
    import verimim.phases.btensor as bt

    work = bt.KernelGen.work

    def wrong(self: bt.KernelGen, cell: object, argv: list) -> object:  # type: ignore[type-arg]
        saved = [op.shape for op in self.mr.ins]
        for op in self.mr.ins:
            op.shape = [self.mr.sr[p] for p in op.positions]
        try:
            return work(self, cell, argv)  # type: ignore[arg-type]
        finally:
            for op, shape in zip(self.mr.ins, saved):
                op.shape = shape

    monkeypatch.setattr(bt.KernelGen, "work", wrong)
    res = lower(from_file("btensor_loop_over_part_of_a_buffer.mim"))
    assert result(res.before) == 11580 and result(res.after) == 7620  # it really is wrong
    status, detail, cex = verdict(res)
    assert status == "refuted", detail
    assert "«5; «5; I32»»" in detail and "«3; «3; I32»»" in detail
    assert isinstance(cex, dict) and cex["buffer"] == "«5; «5; I32»»"


def test_loading_elements_with_the_wrong_type_is_refuted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel loads the I8 elements as I32: past the device buffer's end (E-OOB after the
    phase). The specification proved it (it ignored the type `mem.load` names)."""
    import verimim.phases.btensor as bt

    load = bt.Builder.load
    monkeypatch.setattr(bt.Builder, "load", lambda self, t, m, p: load(self, self.w.idx_n(2 ** 32), m, p))
    res = lower(from_file("btensor_i8_row_sums_that_wrap.mim"))
    with pytest.raises(RuntimeFault) as e:  # it really is wrong
        result(res.after)
    assert e.value.code == "E-OOB"
    status, detail, _ = verdict(res)
    assert status == "refuted", detail
    assert "loads `I32` where the buffer holds `I8`" in detail


def test_a_kernel_that_declares_fewer_work_items_than_the_launch_is_refuted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel takes its work-item id as `Idx 2` while the launch runs 4 work-items (an
    ill-typed launch no phase re-checks): the code generators hold the id in its declared type, so
    work-items 2 and 3 redo cells 0 and 1 and cells 2 and 3 are never written (the NVPTX code
    masks `%tid.x` to one bit). The specification ran each work-item with the launch's id and
    proved it."""
    import verimim.phases.btensor as bt

    con = bt.Builder.con

    def wrong(self: bt.Builder, name: str, params: list, loc: object, names: tuple | None = None) -> object:  # type: ignore[type-arg]
        if names and names[:6] == ("m1", "m3", "m4", "m5", "group_id", "item_id"):
            params = [*params[:5], self.w.idx_n(int(params[5].size.value) // 2), *params[6:]]
        return con(self, name, params, loc, names)  # type: ignore[arg-type]

    monkeypatch.setattr(bt.Builder, "con", wrong)
    res = lower(from_text(HEADER + """
    let (m0, a) = buffer.init (2, (4, 2), I32) (m0, ((1I32, 2I32), (3I32, 4I32), (5I32, 6I32), (7I32, 8I32)));
    let (m0, s) = btensor.map_reduce @1 @(I32, 1, 2) (4, (4, 2)) @(I32, 2, (4, 2)) (add, 0I32) (0, 1) (m0, a);
    let (m0, x) = buffer.read (1, 4, I32) (m0, s, 3_4);
    return (m0, x);
"""))
    status, detail, cex = verdict(res)
    assert status == "refuted", detail
    assert "work-item id as `Bool`" in detail and "4 work-items" in detail
    assert isinstance(cex, dict) and cex["launched"] == 4
