"""Every specification refutes deliberately wrong variants of its phase (PHASES.md): a
specification that cannot fail is a defect. The right phase is proved on the same program."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PROGRAMS
from verimim import driver
from verimim.driver import load, run_with_big_stack
from verimim.frontend.loader import load_text
from verimim.ir.defs import App, Axiom, Def, Extract, Lit, MutLam, Tuple, Var
from verimim.printer import show
from verimim.ir.world import World
from verimim.phases.base import Phase, PhaseResult, Program, walk
from verimim.phases.checks import CheckAddrSpaces, MemChecks
from verimim.phases.inline import BetaRed
from verimim.phases.pipeline import PHASES, Cleanup, run_on_side
from verimim.phases.repl import (
    Alloc2Malloc, HostMalloc2GpuAlloc, RemoveDoubleSyncs, _Alloc2Malloc, _HostMalloc2GpuAlloc, _RemoveDoubleSyncs,
    full_app,
)
from verimim.phases.rewriter import Rewriter
from verimim.phases.runner import run_pipeline
from verimim.phases.kernel_captures import Lifted, LiftedKernel, host_launch
from verimim.phases.split import SplitApply
from verimim.phases.witness import CleanupPrefix, Rewrites, Split
from verimim.smt.solver import SpecContext
from verimim.smt.specs import check_spec

VALID = PROGRAMS / "valid"


HEADER_GPU = "plugin core;\nplugin mem;\nplugin gpu;\nimport compile;\n"


def program_before(path: Path, phase: str) -> Program:
    """The program as it reaches `phase` in the default pipeline."""
    def go() -> Program:
        world, _ = load(str(path), [])
        if phase == "mem.alloc2malloc_repl":
            return Program(world)
        order = ["mem.alloc2malloc_repl", "gpu.check_addr_spaces_repl", "gpu.mem_checks", "compile.cleanup",
                 "compile.beta_red", "compile.lam_spec",
                 "gpu.split_apply"]
        if phase in order:
            prev = order[order.index(phase) - 1]
            run = run_pipeline(world, verify=False, until=prev)
        else:
            run = run_pipeline(world, verify=False, until="gpu.split_apply")
        assert not run.stopped, run.diagnostics
        return run.program
    return run_with_big_stack(go)


def verdict(res: PhaseResult) -> tuple[str, str, object]:
    out = run_with_big_stack(lambda: check_spec(res, SpecContext(timeout_ms=10_000)))
    return out.status, out.detail, out.counterexample


def apply(phase: Phase, prog: Program, side: str | None = None) -> PhaseResult:
    return run_with_big_stack(lambda: run_on_side(phase, prog, side) if side else phase.apply(prog))


# ----------------------------------------------------------------------------- checkers

class AcceptEverything(Phase):
    def __init__(self, name: str) -> None:
        self.name = name

    def apply(self, prog: Program) -> PhaseResult:
        return PhaseResult(self.name, prog, prog)


class RejectEverything(Phase):
    def __init__(self, name: str) -> None:
        self.name = name

    def apply(self, prog: Program) -> PhaseResult:
        from verimim.diagnostics import Diagnostic

        res = PhaseResult(self.name, prog, prog)
        res.diagnostics.append(Diagnostic("E-ADDR-SPACE", "rejected by a wrong checker", None))
        return res


def test_addr_space_checker_right_and_wrong() -> None:
    bad = PROGRAMS / "phase_errors" / "store_const.mim"
    good = VALID / "store_global_ptr.mim"
    pb, pg = program_before(bad, "gpu.check_addr_spaces_repl"), program_before(good, "gpu.check_addr_spaces_repl")
    assert verdict(apply(CheckAddrSpaces(), pb))[0] == "proved"
    assert verdict(apply(CheckAddrSpaces(), pg))[0] == "proved"
    status, detail, cex = verdict(apply(AcceptEverything("gpu.check_addr_spaces_repl"), pb))
    assert status == "refuted" and "accepted a violation" in detail and cex["location"] != "?"
    status, detail, _ = verdict(apply(RejectEverything("gpu.check_addr_spaces_repl"), pg))
    assert status == "refuted" and "without violation" in detail


@pytest.mark.parametrize("name", ["gpu.check_addr_spaces_repl", "gpu.mem_checks"])
def test_a_checker_that_rejects_a_valid_program_is_refuted_in_the_pipeline(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The pipeline believed every rejection (exit 1, the user's fault) without asking the spec:
    # a checker rejecting everything blamed every program. Now the spec judges it: E-SPEC.
    monkeypatch.setitem(PHASES, name, RejectEverything(name))
    got = driver.check(str(VALID / "store_global_ptr.mim"), [])
    entry = next(p for p in got.data["phases"] if p["name"] == name)
    assert entry["status"] == "refuted" and "without violation" in entry["detail"], entry
    assert [d.code for d in got.diagnostics if d.severity == "error"] == ["E-SPEC"]


@pytest.mark.parametrize("path", sorted((PROGRAMS / "phase_errors").glob("*.mim")), ids=lambda p: p.stem)
def test_every_right_rejection_of_the_corpus_is_confirmed_by_its_spec(path: Path) -> None:
    # (the main-token rule reports `main` once for its type's tokens, `mem.M 0` among them: the
    # spec asked each token alone and refuted the right rejection)
    got = driver.check(str(path), [])
    assert not got.ok and "E-SPEC" not in {d.code for d in got.diagnostics}, got.diagnostics
    assert not [p for p in got.data["phases"] if p["status"] == "refuted"], got.data["phases"]


class RejectEverySymbolicSpace(CheckAddrSpaces):
    """The checker as it was: every address space that is no literal "may be" forbidden."""

    def apply(self, prog: Program) -> PhaseResult:
        from verimim.diagnostics import Diagnostic
        from verimim.ir.defs import Lit
        from verimim.phases.base import apps_of
        from verimim.phases.checks import ADDR_SPACE_RULES, address_space_of

        res = PhaseResult(self.name, prog, prog)
        for op, _bad, words in ADDR_SPACE_RULES:
            for app in apps_of(prog.host, op, 2):
                if not isinstance(address_space_of(app, prog.host), Lit):
                    res.diagnostics.append(Diagnostic("E-ADDR-SPACE", f"{words} a symbolic space", app.loc))
        return res


def test_addr_space_checker_on_symbolic_spaces_right_and_wrong() -> None:
    never = program_before(VALID / "symbolic_address_spaces_never_forbidden.mim", "gpu.check_addr_spaces_repl")
    wraps = program_before(PROGRAMS / "phase_errors" / "store_in_a_space_that_wraps_to_constant.mim",
                           "gpu.check_addr_spaces_repl")
    assert verdict(apply(CheckAddrSpaces(), never))[0] == "proved"
    res = apply(CheckAddrSpaces(), wraps)
    assert res.rejected and "may be 4" in res.diagnostics[0].message
    assert verdict(res)[0] == "proved"
    status, detail, _ = verdict(apply(RejectEverySymbolicSpace(), never))
    assert status == "refuted" and "without violation" in detail, detail
    status, detail, _ = verdict(apply(AcceptEverything("gpu.check_addr_spaces_repl"), wraps))
    assert status == "refuted" and "accepted a violation" in detail, detail


def test_mem_checks_right_and_wrong() -> None:
    bad = PROGRAMS / "phase_errors" / "mem_crossing_launch_arg.mim"
    prog = program_before(bad, "gpu.mem_checks")
    assert verdict(apply(MemChecks(), prog))[0] == "proved"
    status, detail, _ = verdict(apply(AcceptEverything("gpu.mem_checks"), prog))
    assert status == "refuted"


# ----------------------------------------------------------------------------- alloc2malloc

class _WrongSize(_Alloc2Malloc):
    """Allocates one byte too many."""

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        res = super().rewrite_imm(old, ops)
        if res is not None and full_app(res, "mem.malloc", 2):
            w = self.new
            assert isinstance(res, App)
            m, size = w.extract_n(res.arg, 2, 0), w.extract_n(res.arg, 2, 1)
            return w.app(res.callee, w.tuple([m, w.lit_nat(int(size.value) + 1 if isinstance(size, Lit) else 1)]))
        return res


class WrongSizeAlloc2Malloc(Alloc2Malloc):
    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        return _WrongSize(world, res)


class _SlotsForgotten(_Alloc2Malloc):
    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        return None if full_app(old, "mem.slot", 2) else super().rewrite_imm(old, ops)


class SlotsForgotten(Alloc2Malloc):
    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        return _SlotsForgotten(world, res)


def test_alloc2malloc_right_and_wrong() -> None:
    prog = program_before(VALID / "kernel_slots_ok.mim", "mem.alloc2malloc_repl")
    assert verdict(apply(Alloc2Malloc(), prog))[0] == "proved"
    status, detail, _ = verdict(apply(WrongSizeAlloc2Malloc(), prog))
    assert status == "refuted", detail
    status, detail, _ = verdict(apply(SlotsForgotten(), prog))
    assert status == "refuted" and "remains" in detail


# ----------------------------------------------------------------------------- host malloc → gpu alloc

class _EverySpace(_HostMalloc2GpuAlloc):
    """Rewrites mallocs of every address space, not only the global one."""

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        if full_app(old, "mem.malloc", 2):
            w = self.new
            ty_a = ops[0].ops[1]  # type: ignore[union-attr]
            assert isinstance(ty_a, Tuple)
            return w.app(w.app(self.annex("gpu.alloc.block"), ty_a.ops[0]), w.extract_n(ops[1], 2, 0))
        return super().rewrite_imm(old, ops)


class EverySpace(HostMalloc2GpuAlloc):
    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        return _EverySpace(world, res)


class Nothing(HostMalloc2GpuAlloc):
    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        return Rewriter(world)


def test_host_malloc2gpualloc_right_and_wrong() -> None:
    prog = program_before(VALID / "malloc_global_host.mim", "gpu.host_malloc2gpualloc_repl")
    assert verdict(apply(HostMalloc2GpuAlloc(), prog, "host"))[0] == "proved"
    status, detail, _ = verdict(apply(EverySpace(), prog, "host"))
    assert status == "refuted", detail
    status, detail, _ = verdict(apply(Nothing(), prog, "host"))
    assert status == "refuted" and "address space 1 remains" in detail


# ----------------------------------------------------------------------------- remove_double_syncs

class _DropSyncs(Rewriter):
    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        return ops[1] if full_app(old, "gpu.sync_work_items", 1) else None


class DropEverySync(RemoveDoubleSyncs):
    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        return _DropSyncs(world)


class _DropSyncsLogged(Rewriter):
    """Drops every barrier and says so in the log (the claim the token proof examines)."""

    def __init__(self, old: World, res: PhaseResult) -> None:
        super().__init__(old)
        self.res = res

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        if full_app(old, "gpu.sync_work_items", 1):
            self.res.rewrote(old, ops[1])
            return ops[1]
        return None


class ClaimEverySync(RemoveDoubleSyncs):
    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        return _DropSyncsLogged(world, res)


@pytest.mark.parametrize("name", ["kernel_no_args.mim", "shared_reduce_barrier.mim", "barrier_uniform_branch.mim"])
def test_remove_double_syncs_right_and_wrong(name: str) -> None:
    prog = program_before(VALID / name, "gpu.remove_double_syncs")
    # Proved for every path at once, loops included (no unrolling bound).
    got, detail, _ = verdict(apply(RemoveDoubleSyncs(), prog, "device"))
    assert got == "proved" and "the output is the input, node for node" in detail, detail
    # Dropping barriers without saying so: the output is not the input less the claimed ones.
    status, detail, _ = verdict(apply(DropEverySync(), prog, "device"))
    assert status == "refuted", detail
    # Claiming every barrier: the direct argument does not cover them, the path encoding refutes.
    status, detail, cex = verdict(apply(ClaimEverySync(), prog, "device"))
    assert status == "refuted", detail
    assert cex["kernel"]


def _kernel_program(body: str) -> str:
    return HEADER_GPU + """
con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 2, smem: [], data: gpu.GlobalPtr I32,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
""" + body + """
fun extern main (m0: mem.M 0): [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = gpu.alloc.block I32 m1;
    ret (m0, m1, m4) = gpu.launch (1, 2, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let m1 = gpu.free.block (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, 7I32);
"""


def test_an_operation_that_may_run_between_two_barriers_leaves_it_to_the_paths() -> None:
    from verimim.smt.spec_syncs import prove_by_dependencies
    from verimim.smt.specs import separation_on_paths

    # The store uses the tokens from before both barriers: some order runs it between them (the
    # schedule the interpreter and the code generator share may), so the block argument does
    # not apply; the paths decide, in that schedule.
    text = _kernel_program("""
    let s = gpu.sync_work_items (m1, m3);
    let t = gpu.sync_work_items (s#0_2, s#1_2);
    let m = mem.store (m1, data, 1I32);
    return (m, t#1_2, m4, m5);
""")
    world, _ = run_with_big_stack(lambda: load_text(text, "<between>"))
    res = apply(RemoveDoubleSyncs(), Program(world))
    # (the schedule runs the store first: the entry barrier is not the first operation, the
    # second directly follows the first)
    assert len(res.claim(Rewrites).rewrites) == 1
    assert run_with_big_stack(lambda: prove_by_dependencies(res)) is None
    assert verdict(res)[0] == "proved"
    # The paths' detail counts every path it compared: it said "preserved on 0 path(s)" (no path
    # holds two memory operations to separate), which read as if nothing had been checked.
    out = run_with_big_stack(lambda: separation_on_paths(res, SpecContext(timeout_ms=10_000)))
    assert out.status == "proved", out.detail
    assert "(0 path(s) with two or more)" in out.detail and "preserved on 1 path(s) of 1 kernel(s)" in out.detail, \
        out.detail
    # Such programs through check: proved, not E-SPEC (the phase dropped both entry barriers and
    # its spec refuted it); a store between two barriers keeps the second (it was dropped: a race).
    for name in ("entry_barriers_beside_an_unordered_global_store.mim", "barrier_after_an_unordered_shared_store.mim",
                 "entry_barrier_after_an_unordered_shared_store.mim",
                 "barrier_after_an_unordered_shared_store_kept_by_a_capture.mim"):
        got = driver.check(str(VALID / name), [])
        assert got.ok, (name, got.diagnostics)
        assert "E-DIFF" not in {d.code for d in driver.diff(str(VALID / name), [], [], use_gpu=False).diagnostics}


def test_a_barrier_after_a_store_the_jump_demands_first_stays_when_the_callee_captures_the_rest() -> None:
    # `fin (x, g)` with fin capturing g: making fin demands nothing, x runs between the barriers s
    # and r, so r is no double sync. The phase and its spec made fin first, with g, the load and r
    # before x: r "followed s directly", was dropped and the spec proved it (a race in the PTX).
    prog = program_before(VALID / "barrier_after_an_unordered_shared_store_kept_by_a_capture.mim",
                          "gpu.remove_double_syncs")
    res = apply(RemoveDoubleSyncs(), prog, "device")
    assert len(res.claim(Rewrites).rewrites) <= 1  # the entry barrier s at most
    assert res.after.device is not None
    assert any(full_app(d, "gpu.sync_work_items", 1) for d in walk(res.after.device))
    assert verdict(res)[0] == "proved"


class _RemoveAcrossBlocks(_RemoveDoubleSyncs):
    """The phase without its block condition: a barrier on the entry tokens (or on a barrier's)
    is dropped in any continuation, though the entry block (the barrier's block) ran work before."""

    def redundant(self, old: App) -> bool:
        arg = old.arg
        if not (isinstance(arg, Tuple) and len(arg.ops) == 2 and all(isinstance(e, Extract) for e in arg.ops)):
            return False
        src = arg.ops[0].tup  # type: ignore[attr-defined]
        if src is not arg.ops[1].tup:  # type: ignore[attr-defined]
            return False
        return full_app(src, "gpu.sync_work_items", 1) or (isinstance(src, Var) and src.mut.gid in self.kernels)


class RemoveAcrossBlocks(RemoveDoubleSyncs):
    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        rw = super().make_rewriter(world, res)
        assert isinstance(rw, _RemoveDoubleSyncs)
        return _RemoveAcrossBlocks(world, res, rw.kernels)


def test_a_barrier_on_entry_tokens_in_a_later_block_is_kept_and_dropping_it_refuted() -> None:
    prog = program_before(VALID / "barrier_on_entry_tokens_after_the_entry_block.mim", "gpu.remove_double_syncs")
    got, detail, _ = verdict(apply(RemoveDoubleSyncs(), prog, "device"))
    assert got == "proved" and "no barrier removed" in detail, detail
    res = apply(RemoveAcrossBlocks(), prog, "device")
    assert len(res.claim(Rewrites).rewrites) == 1
    status, detail, cex = verdict(res)
    assert status == "refuted" and "separated by a barrier before the phase and not after" in detail, detail
    assert isinstance(cex, dict) and cex["separated_before"] and not cex["separated_after"], cex


def test_a_barrier_after_a_call_is_on_the_spec_paths() -> None:
    # The spec's paths follow the call into the recursive function and back out through the
    # continuation its call passed: dropping the barrier after it is refuted (it was `bounded`:
    # the paths ended at the function's return).
    prog = program_before(VALID / "barrier_after_a_call_of_a_recursive_function.mim", "gpu.remove_double_syncs")
    status, detail, cex = verdict(apply(ClaimEverySync(), prog, "device"))
    assert status == "refuted" and isinstance(cex, dict) and cex["path"] == 0, detail


def test_a_call_given_a_memory_token_between_barriers_keeps_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # A function called in direct style on the shared token between two barriers may touch any
    # memory: the phase keeps the second (the first, on the entry tokens before anything else,
    # goes); dropping both (the phase looking at mem operations only, as it did) is refuted.
    import verimim.phases.repl as repl

    name = "barriers_around_a_direct_style_call.mim"
    prog = program_before(VALID / name, "gpu.remove_double_syncs")
    res = apply(RemoveDoubleSyncs(), prog, "device")
    assert [old.loc.line for old, _ in res.claim(Rewrites).rewrites if old.loc] == [18]
    got, detail, _ = verdict(res)
    assert got == "proved" and "1 barrier(s) removed" in detail, detail
    assert "E-DIFF" not in {d.code for d in driver.diff(str(VALID / name), [], [], use_gpu=False).diagnostics}
    touches = repl._may_touch_memory

    def mem_operations_only(world: World, d: Def) -> bool:
        return isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex.startswith(("mem.", "gpu.sync")) \
            and touches(world, d)

    monkeypatch.setattr(repl, "_may_touch_memory", mem_operations_only)
    res = apply(RemoveDoubleSyncs(), prog, "device")
    assert len(res.claim(Rewrites).rewrites) == 2
    status, detail, cex = verdict(res)
    assert status == "refuted" and "separated by a barrier before the phase and not after" in detail, detail
    assert isinstance(cex, dict) and (cex["first"].split(":")[-2], cex["second"].split(":")[-2]) == ("19", "22"), cex


@pytest.mark.parametrize("name", ["barriers_around_a_call_that_captures_the_token.mim",
                                  "barrier_after_a_call_that_reads_through_a_captured_token.mim"])
def test_a_call_that_captures_a_token_between_barriers_keeps_them(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The callee uses a token it captured, not one it is given: the call is an operation whatever
    # its argument. A phase that asks the argument's type (as it did) drops both barriers: refuted.
    import verimim.phases.repl as repl

    assert "E-DIFF" not in {d.code for d in driver.diff(str(VALID / name), [], [], use_gpu=False).diagnostics}
    prog = program_before(VALID / name, "gpu.remove_double_syncs")
    assert verdict(apply(RemoveDoubleSyncs(), prog, "device"))[0] == "proved"
    takes_a_token = repl._may_touch_memory

    def by_argument(world: World, d: Def) -> bool:
        return isinstance(d, App) and d.bvd == 0 and "mem.M" in show(world.type_of(d.arg)) and takes_a_token(world, d)

    monkeypatch.setattr(repl, "_may_touch_memory", by_argument)
    res = apply(RemoveDoubleSyncs(), prog, "device")
    assert res.claim(Rewrites).rewrites  # (the barrier after the call among them)
    status, detail, _ = verdict(res)
    assert status == "refuted" and "separated by a barrier before the phase and not after" in detail, detail


class _ChangeAStoredValue(_RemoveDoubleSyncs):
    """Removes the double barriers as the phase does, and stores 2 where the kernel stores 1."""

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        new = super().rewrite_imm(old, ops)
        if new is None and isinstance(old, Lit) and old.value == 1 and ops[0] is self.new.idx_n(2 ** 32):
            return self.new.lit(ops[0], 2)
        return new


class ChangeAStoredValue(RemoveDoubleSyncs):
    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        rw = super().make_rewriter(world, res)
        assert isinstance(rw, _RemoveDoubleSyncs)
        return _ChangeAStoredValue(world, res, rw.kernels)


def test_a_value_changed_beside_a_barrier_the_block_proof_does_not_cover_is_refuted() -> None:
    # The store is on a token from before the barrier (the paths decide the removal), and the
    # variant also changes the stored value: the structural match refutes it whichever way the
    # removal is decided (the paths alone compared operations by place only: `proved`).
    text = _kernel_program("""
    let m = mem.store (m1, data, 1I32);
    let s = gpu.sync_work_items (m, m3);
    let t = gpu.sync_work_items (s#0_2, s#1_2);
    return (t#0_2, t#1_2, m4, m5);
""")
    world, _ = run_with_big_stack(lambda: load_text(text, "<changed>"))
    status, detail, _ = verdict(apply(ChangeAStoredValue(), Program(world)))
    assert status == "refuted" and "before `1I32`, after `2I32`" in detail, detail


class _DropFirstSyncLogged(Rewriter):
    """Drops the first barrier of the text only (and says so)."""

    def __init__(self, old: World, res: PhaseResult, line: int) -> None:
        super().__init__(old)
        self.res, self.line = res, line

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        if full_app(old, "gpu.sync_work_items", 1) and old.loc is not None and old.loc.line == self.line:
            self.res.rewrote(old, ops[1])
            return ops[1]
        return None


def test_dropping_a_barrier_on_one_side_of_a_branch_is_refuted_as_divergence() -> None:
    # Both sides reach one barrier, and no memory operation follows either: separation of
    # operations is unchanged when one side loses its barrier, but the two paths, which reached
    # the same number of barriers, no longer do. Only the divergence clause can refute it.
    text = _kernel_program("""
    let m1 = mem.store (m1, data, 1I32);
    (left, right)#(core.icmp.e (group_id, 0_1)) (m1, m3)
    where
        con left (m1: gpu.GlobalM, m3: gpu.SharedM) =
            let (m1, m3) = gpu.sync_work_items (m1, m3);
            return (m1, m3, m4, m5);
        con right (m1: gpu.GlobalM, m3: gpu.SharedM) =
            let (m1, m3) = gpu.sync_work_items (m1, m3);
            return (m1, m3, m4, m5);
    end;
""")
    world, _ = run_with_big_stack(lambda: load_text(text, "<branch>"))
    prog = Program(world)
    got, detail, _ = verdict(apply(RemoveDoubleSyncs(), prog))
    assert got == "proved", detail
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "gpu.sync_work_items" in t)

    class DropLeftSync(RemoveDoubleSyncs):
        def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
            return _DropFirstSyncLogged(world, res, line)

    status, detail, cex = verdict(apply(DropLeftSync(), prog))
    assert status == "refuted" and "divergence" in detail, detail
    assert cex["kernel"] == "kernel"


# ----------------------------------------------------------------------------- split_apply

class _KeepKernelOnHost(SplitApply):
    """Duplicates the kernels: the host keeps their bodies too."""

    def apply(self, prog: Program) -> PhaseResult:
        res = super().apply(prog)
        both = Rewriter(prog.host).run()
        res.after = Program(both, res.after.device)
        return res


class _HostOpOnDevice(SplitApply):
    """Puts main (with its host-only operations) into the device World too."""

    def apply(self, prog: Program) -> PhaseResult:
        res = super().apply(prog)
        assert res.after.device is not None
        dev = Rewriter(prog.host)
        for name, m in prog.host.externals.items():
            nm = dev.rewrite(m)
            assert isinstance(nm, MutLam)
            dev.new.externals[name] = nm
        dev.finish()
        res.after = Program(res.after.host, dev.new)
        return res


def test_split_apply_right_and_wrong() -> None:
    prog = program_before(VALID / "block_copy_roundtrip.mim", "gpu.split_apply")
    status, detail, _ = verdict(apply(SplitApply(), prog))
    assert status == "proved" and "node for node" in detail, detail
    status, detail, _ = verdict(apply(_KeepKernelOnHost(), prog))
    assert status == "refuted", detail
    status, detail, _ = verdict(apply(_HostOpOnDevice(), prog))
    assert status == "refuted" and "host" in detail


class _SwapsTheKernelsNames(SplitApply):
    """Splits right, then swaps the names of the two device kernels (each launch names the other
    one's code), the witness unchanged."""

    def apply(self, prog: Program) -> PhaseResult:
        res = super().apply(prog)
        dev = res.after.device
        assert dev is not None
        a, b = sorted(n for n, k in dev.externals.items() if k.body is not None)
        ka, kb = dev.externals[a], dev.externals[b]
        ka.name, kb.name = b, a
        dev.externals[a], dev.externals[b] = kb, ka
        return res


def test_split_apply_names_two_kernels_of_one_name_apart_right_and_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    import verimim.phases.split as split

    prog = program_before(VALID / "generic_kernel_specialised_twice.mim", "gpu.split_apply")
    res = apply(SplitApply(), prog)
    assert res.after.device is not None
    assert sorted(res.after.device.externals) == ["generic_kernel", "generic_kernel_1"]
    status, detail, _ = verdict(res)
    assert status == "proved" and "node for node" in detail, detail
    status, detail, _ = verdict(apply(_SwapsTheKernelsNames(), prog))
    assert status == "refuted" and "changed the code it moved" in detail, detail
    # one name for both (what a split that keeps every kernel's own name does): the second
    # kernel's code replaces the first's under it
    monkeypatch.setattr(split, "device_names", lambda world, kernels: {k.gid: k.name for k in kernels})
    status, detail, _ = verdict(apply(SplitApply(), prog))
    assert status == "refuted", detail


def test_split_apply_that_renames_a_kernel_no_other_shares_a_name_with_is_refuted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Host and device agree on `kernel_dev`: the behaviour is the same, but the PTX's interface
    # is not the program's (PHASES.md: external under its own name). It was proved.
    import verimim.phases.split as split

    real = split.device_names
    monkeypatch.setattr(split, "device_names",
                        lambda world, kernels: {g: n + "_dev" for g, n in real(world, kernels).items()})
    prog = program_before(VALID / "kernel_no_args.mim", "gpu.split_apply")
    status, detail, _ = verdict(apply(SplitApply(), prog))
    assert status == "refuted" and "not its own name" in detail, detail


def test_split_apply_that_names_a_second_kernel_with_another_suffix_than_the_first_free_is_refuted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # PHASES.md: the later kernel of a shared name takes the first free suffix `_1`, `_2`, ….
    # A split naming it `generic_kernel_0` (a counter started at 0), or `generic_kernel_2` with
    # `_1` free, or renaming both, was proved (any `_<digits>` passed).
    import verimim.phases.split as split

    prog = program_before(VALID / "generic_kernel_specialised_twice.mim", "gpu.split_apply")
    real = split.device_names
    first, second = sorted(real(prog.host, split.kernels_of(prog.host)).items())
    for names in ({first[0]: first[1], second[0]: "generic_kernel_0"},
                  {first[0]: first[1], second[0]: "generic_kernel_2"},
                  {first[0]: first[1], second[0]: "generic_kernel_01"},  # (`_1` spelled otherwise)
                  {first[0]: "generic_kernel_1", second[0]: "generic_kernel_2"}):
        monkeypatch.setattr(split, "device_names", lambda world, kernels, names=names: dict(names))
        status, detail, _ = verdict(apply(SplitApply(), prog))
        assert status == "refuted" and "first free name" in detail, (names, detail)


class _SwappedCaptures(LiftedKernel):
    """Reads the captured host values in the reverse order of the launch's arguments."""

    def __init__(self, old: World, new: World, lift: Lifted) -> None:
        super().__init__(old, new, Lifted(lift.kernel, lift.n, lift.ts, lift.caps[::-1]))


def _host_passes_wrong_values(rw: Rewriter, old: App, ops: tuple[Def, ...], lifts: dict[int, Lifted]) -> Def | None:
    """The launch passes each captured value plus one."""
    res = host_launch(rw, old, ops, lifts)
    if res is None or old.depth != 4 or not isinstance(res, App) or not isinstance(res.arg, Tuple):
        return res
    w = rw.new
    parts = list(res.arg.ops)
    add = rw.annex("core.wrap.add")
    parts[-1] = w.app(w.app(w.app(add, w.lit_nat(2**32)), w.lit_nat(0)), w.tuple([parts[-1], w.lit(w.idx_n(2**32), 1)]))
    return w.app(res.callee, w.tuple(parts))


def test_split_apply_lifted_captures_right_and_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    import verimim.phases.split as split

    prog = program_before(VALID / "curried_kernel_capture.mim", "gpu.split_apply")
    status, detail, _ = verdict(apply(SplitApply(), prog))
    assert status == "proved" and "each captured host value passed by every launch" in detail, detail
    with monkeypatch.context() as mp:
        mp.setattr(split, "LiftedKernel", _SwappedCaptures)
        status, detail, _ = verdict(apply(SplitApply(), prog))
        assert status == "refuted" and "differential" in detail, detail
    with monkeypatch.context() as mp:
        mp.setattr(split, "host_launch", _host_passes_wrong_values)
        status, detail, _ = verdict(apply(SplitApply(), prog))
        assert status == "refuted" and "differential" in detail, detail


def test_split_apply_that_moves_a_c_call_into_a_kernel_is_refuted(monkeypatch: pytest.MonkeyPatch) -> None:
    # A kernel calling `putchar` (libc: host code). The right phase rejects it; one that forgot
    # C functions moved the call to the device World and its specification said `proved`
    # (HOST_ONLY names the gpu driver's operations only), `check` ok.
    import verimim.phases.split as split

    prog = program_before(PROGRAMS / "phase_errors" / "c_function_called_in_a_kernel.mim", "gpu.split_apply")
    res = apply(SplitApply(), prog)
    assert res.rejected and [d.code for d in res.diagnostics] == ["E-UNSUPPORTED"]
    monkeypatch.setattr(split, "c_name", lambda head: None)
    status, detail, _ = verdict(apply(SplitApply(), prog))
    assert status == "refuted" and "C function `putchar` at" in detail and ":15:" in detail, detail


@pytest.mark.parametrize("name, op, where", [
    ("nested_kernel_loads_with_the_hosts_token.mim", "mem.load @(I32, 1) (m1, d)", ":22:23"),
    ("nested_kernel_reads_a_captured_host_pointer.mim", "mem.load @(I32, 0) (⊥:(mem.M 0), h)", ":21:23"),
])
def test_split_apply_that_moves_a_kernels_memory_operation_to_the_host_is_refuted(
        name: str, op: str, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A kernel nested in main loads with host values only. The split before 234d857 took the
    # load for a capture: the host performed it before the launch (another program), and the
    # specification said `proved` (both sides matched node for node, the load a captured value).
    import verimim.phases.split as split

    prog = program_before(PROGRAMS / "phase_errors" / name, "gpu.split_apply")
    assert apply(SplitApply(), prog).rejected
    monkeypatch.setattr(split, "kernel_only_effect", lambda world, scopes, k, host: None)
    monkeypatch.setattr(split, "captured_token", lambda world, scopes, k: None)
    res = apply(SplitApply(), prog)
    assert not res.rejected and res.claim(Split).lifted_captures
    status, detail, cex = verdict(res)
    assert status == "refuted" and "an operation only a kernel demands" in detail, detail
    assert isinstance(cex, dict) and cex["operation"] == op and cex["location"].endswith(where), cex


def test_split_apply_of_a_nested_kernel_with_its_own_token_is_proved() -> None:
    # the twin: the kernel's load uses its own token; the host performs no load of its own
    prog = program_before(VALID / "nested_kernel_loads_with_its_own_token.mim", "gpu.split_apply")
    status, detail, _ = verdict(apply(SplitApply(), prog))
    assert status == "proved", detail


class _MovesChangedCode(SplitApply):
    """Moves the kernels right but adds one to every non-zero I32 literal on the given sides."""

    def __init__(self, sides: tuple[str, ...]) -> None:
        self.sides = sides

    def apply(self, prog: Program) -> PhaseResult:
        res = super().apply(prog)
        host, dev = res.after.host, res.after.device
        assert dev is not None
        res.after = Program(_ChangeALiteral(host).run() if "host" in self.sides else host,
                            _ChangeALiteral(dev).run() if "device" in self.sides else dev)
        return res


@pytest.mark.parametrize("sides", [("device",), ("host",)])
def test_split_apply_that_changes_the_code_it_moves_is_refuted(sides: tuple[str, ...]) -> None:
    # the partition alone is right: only the node-for-node match of both sides sees this
    # (the kernel adds 10I32, main stores 100I32)
    prog = program_before(VALID / "barrier_then_return.mim", "gpu.split_apply")
    assert verdict(apply(SplitApply(), prog))[0] == "proved"
    status, detail, _ = verdict(apply(_MovesChangedCode(sides), prog))
    assert status == "refuted" and "changed the code it moved" in detail, detail
    prog = program_before(VALID / "curried_kernel_capture.mim", "gpu.split_apply")
    status, detail, _ = verdict(apply(_MovesChangedCode(("host",)), prog))
    assert status == "refuted" and "changed the code it moved" in detail, detail


def test_split_apply_lifted_capture_declared_with_another_type_is_not_proved(monkeypatch: pytest.MonkeyPatch) -> None:
    import verimim.phases.kernel_captures as kc

    real = kc._arg_types

    def widened(rw: Rewriter, lift: Lifted) -> list[Def]:  # each captured value declared I64
        own = real(rw, lift)[:lift.n]
        return own + [rw.new.idx_n(2**64) for _ in lift.caps]

    prog = program_before(VALID / "curried_kernel_capture.mim", "gpu.split_apply")
    monkeypatch.setattr(kc, "_arg_types", widened)
    status, detail, _ = verdict(apply(SplitApply(), prog))
    # the launch and the kernel agree with each other, not with the captured I32s: the proof
    # says so, and execution (which does not see a declared type) only validates
    assert status == "validated" and "takes captured value 0 as `I64`, but `argc` is `I32`" in detail, detail


def test_split_apply_launch_declaring_another_kernel_type_than_the_device_is_refuted(monkeypatch: pytest.MonkeyPatch) -> None:
    import verimim.phases.kernel_captures as kc
    import verimim.phases.split as split

    def host_widened(rw: Rewriter, lift: Lifted) -> Def:  # only the host's declaration: I64 captures
        wide = Lifted(lift.kernel, lift.n, lift.ts, lift.caps)
        real = kc._arg_types
        try:
            kc._arg_types = lambda rw, lift: real(rw, lift)[:lift.n] + [rw.new.idx_n(2**64) for _ in lift.caps]
            return kc.lifted_pi(rw, wide)
        finally:
            kc._arg_types = real

    prog = program_before(VALID / "curried_kernel_capture.mim", "gpu.split_apply")
    monkeypatch.setattr(split, "lifted_pi", host_widened)
    status, detail, _ = verdict(apply(SplitApply(), prog))
    assert status == "refuted" and "declares a kernel of type" in detail, detail


# ----------------------------------------------------------------------------- cleanup

class _ChangeALiteral(Rewriter):
    """Adds one to every non-zero I32 literal (an off-by-one constant fold)."""

    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        if isinstance(old, Lit) and old.value and ops[0] is self.new.idx_n(2**32):
            return self.new.lit(ops[0], old.value + 1)
        return None


class BadCleanup(Cleanup):
    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        res.after = Program(_ChangeALiteral(prog.host).run())
        return res


class _DropExternal(Cleanup):
    """Removes `main` from the externals (and so everything only it reaches)."""

    def apply(self, prog: Program) -> PhaseResult:
        res = PhaseResult(self.name, prog, prog)
        res.after = Program(Rewriter(prog.host).run(lambda n: n == "main"))
        return res


class _CutABody(Cleanup):
    """Keeps `main` but forgets the body of a continuation it reaches (dead code misjudged)."""

    def apply(self, prog: Program) -> PhaseResult:
        res = super().apply(prog)
        main = res.after.host.externals["main"]
        from verimim.ir.analysis import scan_mut

        victim = next(iter(scan_mut(main)[1]))
        victim.body = None
        return res


def test_cleanup_right_and_wrong() -> None:
    prog = program_before(VALID / "kernel_no_args.mim", "compile.cleanup")
    status, detail, _ = verdict(apply(Cleanup(), prog))
    assert status == "proved" and "none referenced from what is kept" in detail, detail
    for bad in (BadCleanup(), _DropExternal(), _CutABody()):
        status, detail, _ = verdict(apply(bad, prog))
        assert status == "refuted", (type(bad).__name__, detail)


def test_prefix_cleanup_makes_only_prefixed_externals_internal() -> None:
    from verimim.phases.pipeline import PrefixCleanup

    prog = program_before(VALID / "kernel_no_args.mim", "compile.cleanup")
    res = apply(PrefixCleanup("internal_"), prog)
    assert verdict(res)[0] == "proved"
    # Claiming the prefix `ma` while dropping `main` is allowed; claiming `internal_` is not.
    wrong = apply(_DropExternal(), prog)
    wrong.witness = CleanupPrefix("internal_")
    assert verdict(wrong)[0] == "refuted"
    wrong.witness = CleanupPrefix("ma")
    assert verdict(wrong)[0] == "proved"


def test_cleanup_closure_query_refutes_a_reference_to_a_removed_continuation() -> None:
    from verimim.ir.analysis import scan_mut
    from verimim.smt.solver import SpecContext
    from verimim.smt.specs import _closed_under_references

    prog = program_before(VALID / "kernel_no_args.mim", "compile.cleanup")
    main = prog.host.externals["main"]
    reached = {m.gid for m in prog.host.muts}
    assert _closed_under_references(SpecContext(), "t", prog.host, [main], reached) is None
    callee = next(iter(scan_mut(main)[1]))
    out = _closed_under_references(SpecContext(), "t", prog.host, [main], reached - {callee.gid})
    assert out is not None and out.status == "refuted" and callee.name in out.detail, out


def test_every_phase_of_the_pipeline_has_a_specification() -> None:
    from verimim.smt.specs import SPECS

    missing = [n for n in PHASES if n not in SPECS]
    assert missing == []


def test_remove_double_syncs_proves_removed_barriers_directly() -> None:
    # The kernel syncs twice at its entry: both barriers separate nothing.
    from tests.phases.test_program_pipeline import PROGRAM

    world, _ = run_with_big_stack(lambda: load_text(PROGRAM.replace("PIPELINE", ""), "<double>"))
    run = run_with_big_stack(lambda: run_pipeline(world, timeout_ms=10_000))
    entry = next(p for p in run.phases if p["name"] == "gpu.remove_double_syncs")
    assert entry["status"] == "proved" and entry["detail"].startswith("2 barrier(s) removed"), entry
    assert entry["time_s"] < 1.0, entry


def test_remove_double_syncs_spec_answers_on_many_paths_within_the_fuzz_time_out() -> None:
    # 247 paths through three kernels: every pair of memory operations of every path as one
    # quantified array query ran out of 2 s (`unknown`); neighbouring pairs decide the same.
    prog = program_before(PROGRAMS / "fuzz_found" / "many_barrier_paths.mim", "gpu.remove_double_syncs")
    res = apply(RemoveDoubleSyncs(), prog, "device")
    out = run_with_big_stack(lambda: check_spec(res, SpecContext(timeout_ms=2_000)))
    assert out.status == "bounded" and "247 path(s)" in out.detail, out.detail


def test_a_kernel_that_jumps_back_to_itself_has_no_entry_tokens_after_the_first_pass() -> None:
    """The barrier at the top of a kernel that re-enters itself separates one pass's accesses
    from the next one's: the phase keeps it, and a variant that takes every kernel's parameters
    for the launch's fresh tokens (and drops it) is refuted."""
    from verimim.phases.repl import _RemoveDoubleSyncs, kernels_of

    class TrustEveryKernelEntry(RemoveDoubleSyncs):
        def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
            return _RemoveDoubleSyncs(world, res, {k.gid for k in kernels_of(world)})

    prog = program_before(VALID / "kernel_that_jumps_back_to_itself_keeps_its_barrier.mim",
                          "gpu.remove_double_syncs")
    got, detail, _ = verdict(apply(RemoveDoubleSyncs(), prog, "device"))
    assert got == "proved" and "the output is the input, node for node" in detail, detail
    status, detail, cex = verdict(apply(TrustEveryKernelEntry(), prog, "device"))
    assert status == "refuted", detail
    assert cex["kernel"] == "kernel"


# ----------------------------------------------------------------------------- one side of a split

def test_a_sub_pipeline_phase_is_judged_on_its_side_and_must_leave_the_other_alone() -> None:
    path = PROGRAMS / "runtime_errors" / "host_violation_beside_a_device_side_checker.mim"
    world = run_with_big_stack(lambda: load(str(path), [])[0])
    split = run_with_big_stack(lambda: run_pipeline(world, verify=False, until="gpu.split_apply"))
    prog = split.program
    assert prog.device is not None
    # the host's malloc in the constant space is no concern of a checker on the device side
    assert verdict(apply(CheckAddrSpaces(), prog, "device"))[0] == "proved"
    # on the host side it is: accepting it is refuted, and so is a checker that saw nothing
    res = apply(CheckAddrSpaces(), prog, "host")
    assert res.rejected and verdict(res)[0] == "proved"
    status, detail, _ = verdict(apply(AcceptEverything("gpu.check_addr_spaces_repl"), prog, "host"))
    assert status == "refuted" and "accepted a violation" in detail, detail
    # a phase of one side that hands back another World for the other side
    res = apply(Cleanup(), prog, "device")
    assert verdict(res)[0] == "proved"
    res.after = Program(Rewriter(prog.host).run(), res.after.device)
    status, detail, _ = verdict(res)
    assert status == "refuted" and "the host World changed" in detail, detail


def test_host_malloc2gpualloc_in_the_device_world_is_refuted() -> None:
    path = VALID / "host_malloc2gpualloc_after_the_split_in_compile.mim"
    world = run_with_big_stack(lambda: load(str(path), [])[0])
    prog = run_with_big_stack(lambda: run_pipeline(world, verify=False, until="gpu.split_apply")).program
    assert prog.device is not None
    assert verdict(apply(HostMalloc2GpuAlloc(), prog, "host"))[0] == "proved"
    # run on both Worlds the phase leaves the kernels' code (a device World's kernels are of
    # kernel type); a variant that does not puts `gpu.alloc.block` into the kernel's helper
    assert verdict(apply(HostMalloc2GpuAlloc(), prog))[0] == "proved"
    status, detail, _ = verdict(apply(RewriteKernelCodeToo(), prog))
    assert status == "refuted" and "a host operation, is in a kernel's code" in detail, detail


class _RewriteKernelCodeToo(_HostMalloc2GpuAlloc):
    def __init__(self, old: World, res: PhaseResult) -> None:
        super().__init__(old, res)
        self.kernel_code = frozenset()


class RewriteKernelCodeToo(HostMalloc2GpuAlloc):
    """The phase as it was: in a World not split, a kernel's malloc became `gpu.alloc.block`."""

    def make_rewriter(self, world: World, res: PhaseResult) -> Rewriter:
        return _RewriteKernelCodeToo(world, res)


# `_compile` runs gpu.host_malloc2gpualloc_repl on the program not split: the kernel's code is in
# the same World. The phase rewrote the malloc of `mk`, which the kernel calls, into
# `gpu.alloc.block` (a host operation), and its specification said `proved`. (Not in the corpus:
# without a split there is no device World, so the program has no GPU code to compile.)
NO_SPLIT_KERNEL_MALLOC = """plugin core;
plugin mem;
plugin gpu;
import compile;

lam _compile (): compile.Phase = gpu.host_malloc2gpualloc_repl;
// a helper doing a global malloc, called by the host and by the kernel
fun mk (m1: gpu.GlobalM, v: I32): [gpu.GlobalM, gpu.GlobalPtr I32] =
    let (m1, p) = mem.malloc (I32, 1) (m1, 4);
    let m1 = mem.store (m1, p, v);
    return (m1, p);

con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 1, (), d: gpu.GlobalPtr I32,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    ret (m1, q) = mk $ (m1, 5I32);
    let (m1, x) = mem.load (m1, q);
    let m1 = mem.free (m1, q);
    let m1 = mem.store (m1, d, x);
    return (m1, m3, m4, m5);

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = mem.malloc (I32, 1) (m1, 4);
    ret (m0, m1, m4) = gpu.launch (1, 1, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let (m0, h) = mem.alloc (I32, 0) m0;
    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, h);
    let (m0, v) = mem.load (m0, h);
    let m1 = mem.free (m1, d);
    let m0 = gpu.deinit (m0, m1, m4);
    let m0 = mem.free (m0, h);
    return (m0, core.wrap.add 0 (v, argc));
"""


DIRECT_LAUNCH = "gpu.launch (1, 1, gpu.default_stream, ff, ()) kernel d"


@pytest.mark.parametrize("launch", [DIRECT_LAUNCH, DIRECT_LAUNCH.replace(
    " kernel d", " ((kernel, kernel)#(core.icmp.e (argc, 1I32))) d")], ids=["named", "selected"])
def test_host_malloc2gpualloc_leaves_the_kernels_code_of_a_world_not_split(tmp_path: Path, launch: str) -> None:
    """The kernel's own malloc (in `mk`, which main calls too) stays; main's are rewritten. A
    kernel chosen by `#` (or passed through a parameter) was not counted — only launches naming a
    continuation were — and the spec, walking from the same launches, said proved (adversarial
    probe)."""
    text = NO_SPLIT_KERNEL_MALLOC.replace(DIRECT_LAUNCH, launch)
    assert DIRECT_LAUNCH in NO_SPLIT_KERNEL_MALLOC
    path = tmp_path / "p.mim"
    path.write_text(text, encoding="utf-8")
    checked = run_with_big_stack(lambda: driver.check(str(path), []))
    assert checked.ok, checked.diagnostics
    ran = run_with_big_stack(lambda: driver.run(str(path), [], []))
    assert ran.ok and ran.data["result"] == 6, ran.diagnostics
    prog = Program(run_with_big_stack(lambda: load(str(path), [])[0]))
    res = apply(HostMalloc2GpuAlloc(), prog)
    # main's own malloc and free; not mk's malloc, which the kernel calls, nor the kernel's free
    assert [old.loc.line for old, _ in res.claim(Rewrites).rewrites if old.loc] == [25, 30]
    assert verdict(res)[0] == "proved"
    status, detail, _ = verdict(apply(RewriteKernelCodeToo(), prog))
    assert status == "refuted" and "a host operation, is in a kernel's code" in detail, detail


# ----------------------------------------------------------------------------- beta_red

class _ThreeBecomesFour(Rewriter):
    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        if isinstance(old, Lit) and old.value == 3 and ops[0] is self.new.idx_n(2 ** 32):
            return self.new.lit(ops[0], 4)
        return None


class BetaRedChangingALiteral(BetaRed):
    """Reduces as the phase does, then turns `3I32` into `4I32`: the output differs from the
    β-reduced input, and runs differ only with argc = 3."""

    def apply(self, prog: Program) -> PhaseResult:
        res = super().apply(prog)
        if res.after is not prog:
            res.after = Program(_ThreeBecomesFour(res.after.host).run(), None)
        return res


BETA_ARGC_3 = HEADER_GPU + """
fun add_n (n: I32) (x: I32): I32 = return (core.wrap.add 0 (x, n));

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    ret y = add_n 7I32 $ core.select (core.icmp.e (argc, 3I32), 100I32, 0I32);
    return (m0, y);
"""


def test_beta_red_that_changes_a_value_only_argc_3_reaches_is_refuted() -> None:
    # The β proof sees the mismatch; the differential runs (argc 1 and 2) agreed, and the outcome
    # was `validated`. The runs now include the argcs the program's comparisons switch at.
    world, _ = run_with_big_stack(lambda: load_text(BETA_ARGC_3, "<beta3>"))
    prog = Program(world)
    got, _, _ = verdict(apply(BetaRed(), prog))
    assert got == "proved"
    status, detail, cex = verdict(apply(BetaRedChangingALiteral(), prog))
    assert status == "refuted" and isinstance(cex, dict) and cex["argc"] == 3, detail


SUB_AFTER_INLINING = """plugin core;
plugin mem;
fun inc (m: mem.M 0, x: I32): [mem.M 0, I32] = return (m, core.wrap.add 0 (x, 1I32));
fun apply_sub (m: mem.M 0, f: Fn [mem.M 0, I32] -> [mem.M 0, I32], k: I32): [mem.M 0, I32] =
    ret (m, y) = f $ (m, core.wrap.sub 1 (k, 3I32));
    return (m, y);
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»») : [mem.M 0, I32] =
    ret (m0, r) = apply_sub $ (m0, inc, 10I32);
    return (m0, r);
"""


@pytest.mark.parametrize("wrong", [False, True])
def test_a_wrong_fold_made_while_a_phase_builds_its_output_is_refuted(wrong: bool) -> None:
    """`k - 3` folds only once compile.lam_spec has inlined k = 10 (in its first round's World, which
    its second round copies as a literal). The phase's reference is built by the same normalizers,
    so a wrong fold agreed with itself: `proved`, and the program gave 14 for 8."""
    def go() -> tuple[list[dict[str, object]], list[str]]:
        world, _ = load_text(SUB_AFTER_INLINING, "sub_after_inlining.mim")
        if wrong:
            arity, right = world.normalizers["core.wrap.sub"]

            def wrong_sub(w: World, app: App) -> Def | None:
                _s, _mode, (a, b) = app.args()[0], app.args()[1], app.args()[2].ops
                if isinstance(a, Lit) and isinstance(b, Lit) and b.value == 3:
                    return w.lit(w.type_of(app), a.value + 3)  # an addition
                return right(w, app)
            world.normalizers["core.wrap.sub"] = (arity, wrong_sub)
        run = run_pipeline(world, verify=True)
        spec = [d for d in run.diagnostics if d.code == "E-SPEC"]
        if spec:  # placed where the folded subtraction is written (apply_sub's `core.wrap.sub 1 (k, 3I32)`)
            assert spec[0].loc is not None and (spec[0].loc.line, spec[0].loc.col) == (5, 26), spec[0].loc
        return run.phases, [d.code for d in run.diagnostics]
    phases, codes = run_with_big_stack(go)
    lam_spec = next(p for p in phases if p["name"] == "compile.lam_spec")
    if not wrong:
        assert lam_spec["status"] == "proved" and "E-SPEC" not in codes, lam_spec
        return
    assert lam_spec["status"] == "refuted" and "E-SPEC" in codes, lam_spec
    assert "core.wrap.sub" in str(lam_spec["detail"]) and "10I32, 3I32" in str(lam_spec["detail"])
    assert next(p for p in phases if p["name"] == "core.normalize")["status"] != "refuted"  # the front end's are right


def _folds_every_computed_bool(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong inliner: every computed `Idx 2` in an inlined copy becomes 0 (a branch that
    always takes its first target)."""
    from verimim.ir.defs import IdxT
    import verimim.phases.inline as inline

    right = inline.Inliner.default

    def wrong(self: inline.Inliner, x: Def, ops: tuple[Def, ...]) -> Def:
        res = right(self, x, ops)
        if self.owner is None or isinstance(res, Lit) or res.bvd != 0:
            return res
        try:
            t = self.new.type_of(res)
        except Exception:  # noqa: BLE001 — not typeable here
            return res
        if isinstance(t, IdxT) and isinstance(t.size, Lit) and t.size.value == 2:
            return self.new.lit_idx(2, 0)
        return res

    monkeypatch.setattr(inline.Inliner, "default", wrong)


def test_a_wrong_inliner_on_one_side_of_a_split_is_refuted_by_running_the_whole_program(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # (mutation test) Judged on its side, the host's lam_spec ran the host World alone (its
    # kernels are declarations: E-UNSUPPORTED) and the device's the device World (no main:
    # E-NAME): the same fault before and after passed as the same execution, `validated`, and
    # an inliner that turned a loop's exit test into "always go on" passed too.
    path = VALID / "pipeline_inliners_judged_on_their_own_side.mim"
    _folds_every_computed_bool(monkeypatch)
    world, _ = run_with_big_stack(lambda: load(str(path), []))
    run = run_with_big_stack(lambda: run_pipeline(world, verify=True, timeout_ms=10_000))
    lam_spec = [e for e in run.phases if e["name"] == "compile.lam_spec"]
    assert lam_spec and lam_spec[0]["status"] == "refuted", lam_spec
    assert "differential execution" in lam_spec[0]["detail"], lam_spec[0]["detail"]


PICK_AT_ARGC_3 = """plugin core;
plugin mem;
fun pick (n: I32): I32 =
    let c = core.icmp.ne (core.wrap.mul 0 (core.wrap.sub 0 (n, 1I32), core.wrap.sub 0 (n, 2I32)), 0I32);
    return (10I32, 20I32)#c;
fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    ret v = pick $ argc;
    return (m0, v);
"""


def test_a_wrong_inliner_whose_program_differs_from_argc_3_on_is_refuted(monkeypatch: pytest.MonkeyPatch) -> None:
    # (mutation test) no literal the program compares with is near 3: the runs were argc 1 and 2
    _folds_every_computed_bool(monkeypatch)
    world, _ = run_with_big_stack(lambda: load_text(PICK_AT_ARGC_3, "<pick3>"))
    run = run_with_big_stack(lambda: run_pipeline(world, verify=True, timeout_ms=10_000))
    lam_spec = [e for e in run.phases if e["name"] == "compile.lam_spec"]
    assert lam_spec and lam_spec[0]["status"] == "refuted" and "argc = 3" in lam_spec[0]["detail"], lam_spec


def test_split_apply_passing_captures_in_the_wrong_order_agreeing_on_argc_1_and_2_is_refuted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import verimim.phases.split as split

    prog = program_before(VALID / "curried_kernel_captures_equal_for_argc_1_and_2.mim", "gpu.split_apply")
    monkeypatch.setattr(split, "LiftedKernel", _SwappedCaptures)
    status, detail, cex = verdict(apply(SplitApply(), prog))
    assert status == "refuted" and isinstance(cex, dict) and cex["argc"] == 3, detail

