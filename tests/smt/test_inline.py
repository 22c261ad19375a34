"""`compile.beta_red` and `compile.lam_spec` (PHASES.md step 5) and their specification
(verimim.smt.spec_inline): every corpus program keeps its result and is proved (or skipped with
a reason); targeted programs show what is inlined and what must stay; deliberately wrong
variants are refuted with a readable reason."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PROGRAMS
from tests.conftest import annotations as program_annotations
from verimim.driver import run_with_big_stack
from verimim.dump import dump_world
from verimim.frontend.loader import load_program, load_text
from verimim.interp.machine import Machine, find_main
from verimim.ir.defs import App, Def, Lit, MutLam, Tuple
from verimim.ir.world import World
from verimim.phases.base import PhaseResult, Program, is_app_of, walk
from verimim.phases.inline import BetaRed, Inliner, LamSpec, Plan, recursive_muts
from verimim.phases.pipeline import PHASES
from verimim.phases.rewriter import Rewriter
from verimim.phases.program_pipeline import PipelineSpec
from verimim.phases.runner import run_pipeline
from verimim.smt.solver import Outcome, SpecContext
from verimim.phases.witness import Inlining
from verimim.smt.differential import compare
from verimim.smt.specs import check_spec

VALID = sorted((PROGRAMS / "valid").glob("*.mim"))
HEADER = "plugin core;\nplugin mem;\nplugin gpu;\n"
ORDER = ["mem.alloc2malloc_repl", "gpu.check_addr_spaces_repl", "gpu.mem_checks", "compile.cleanup"]
WITH_INLINE = ["gpu.lower_btensor_map_reduce", *ORDER, "compile.beta_red", "compile.lam_spec", "gpu.split_apply"]

# ----------------------------------------------------------------------------- targeted programs

# A curried mutable `lam`: `scaled_sum 2I32 3` takes two rounds of β-reduction.
CURRIED = HEADER + """
fun scaled_sum (k: I32) (n: Nat) (m0: mem.M 0, p: mem.Ptr0 «n; I32»): [mem.M 0, I32] =
    loop (m0, 0, 0I32)
    where
        con loop (m0: mem.M 0, i: Nat, acc: I32) =
            (done, body)#(core.ncmp.l (i, n)) (m0, acc)
            where
                con body (m0: mem.M 0, acc: I32) =
                    let (m0, x) = mem.load (m0, mem.lea (p, core.bitcast (Idx n) i));
                    loop (m0, core.nat.add (i, 1), core.wrap.add 0 (acc, core.wrap.mul 0 (k, x)));
            end;
        con done (m0: mem.M 0, acc: I32) = return (m0, acc);
    end;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, a) = mem.alloc («3; I32», 0) m0;
    let m0 = mem.store (m0, a, (1I32, 2I32, argc));
    let by2 = scaled_sum 2I32;
    ret (m0, s) = by2 3 $ (m0, a);
    ret (m0, t) = scaled_sum 10I32 3 $ (m0, a);
    let m0 = mem.free (m0, a);
    return (m0, core.wrap.add 0 (s, t));
"""

# gpu.synced_scope in a kernel, inside a helper `fun` that lam_spec inlines into the kernel.
SYNCED = HEADER + """
con kernel (m1: gpu.GlobalM, m3: gpu.SharedM, m4: gpu.ConstM, m5: gpu.LocalM,
            group_id: Idx 1, item_id: Idx 4, (), out: gpu.GlobalPtr «4; I32»,
            return: Cn [gpu.GlobalM, gpu.SharedM, gpu.ConstM, gpu.LocalM]) =
    let (m3, sh) = mem.slot («4; I32», 3) (m3, 7);
    let iv = core.bitcast I32 item_id;
    let v = core.wrap.mul 0 (iv, iv);
    go (m1, m3)
    where
        con go (m1: gpu.GlobalM, m3: gpu.SharedM) =
            ret (m1, m3) = publish $ (m1, m3);
            let (m3, w) = mem.load (m3, mem.lea (sh, core.wrap.add 0 (item_id, 1_4)));
            let m1 = mem.store (m1, mem.lea (out, item_id), w);
            return (m1, m3, m4, m5);
        fun publish (m1: gpu.GlobalM, m3: gpu.SharedM): [gpu.GlobalM, gpu.SharedM] =
            let (m1, m3) = gpu.synced_scope (m1, m3, store_mine);
            return (m1, m3);
        lam store_mine (m1: gpu.GlobalM, m3: gpu.SharedM): [gpu.GlobalM, gpu.SharedM] =
            let m3 = mem.store (m3, mem.lea (sh, item_id), v);
            (m1, m3);
    end;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, m1, m4) = gpu.init m0;
    let (m1, d) = gpu.alloc.block «4; I32» m1;
    ret (m0, m1, m4) = gpu.launch (1, 4, gpu.default_stream, ff, ()) kernel d $ (m0, m1, m4);
    let (m0, h) = mem.alloc («4; I32», 0) m0;
    let (m0, m1) = gpu.copy_to_host.block (m0, m1, d, h);
    let m1 = gpu.free.block (m1, d);
    let (m0, a) = mem.load (m0, mem.lea (h, core.bitcast (Idx 4) argc));
    let (m0, b) = mem.load (m0, mem.lea (h, 2_4));
    let m0 = mem.free (m0, h);
    let m0 = gpu.deinit (m0, m1, m4);
    return (m0, core.wrap.add 0 (a, b));
"""

# The scope handed to the helper as a function-typed argument: a `lam` value that closes over
# the kernel's values (a slot among them), passed to a `fun`.
SYNCED_ARG = SYNCED.replace(
    "fun publish (m1: gpu.GlobalM, m3: gpu.SharedM): [gpu.GlobalM, gpu.SharedM] =\n"
    "            let (m1, m3) = gpu.synced_scope (m1, m3, store_mine);",
    "fun publish (m1: gpu.GlobalM, m3: gpu.SharedM, scope: [gpu.GlobalM, gpu.SharedM] → "
    "[gpu.GlobalM, gpu.SharedM]): [gpu.GlobalM, gpu.SharedM] =\n"
    "            let (m1, m3) = gpu.synced_scope (m1, m3, scope);").replace(
    "ret (m1, m3) = publish $ (m1, m3);", "ret (m1, m3) = publish $ (m1, m3, store_mine);")

# A function-typed parameter (`twice`), a function called at three sites with different
# continuations (`inc`), a `con` taking a continuation (`apply`), and a recursive function
# (`count`), which must stay a loop.
HIGHER = HEADER + """
fun twice (f: Fn [mem.M 0, I32] → [mem.M 0, I32], m0: mem.M 0, x: I32): [mem.M 0, I32] =
    ret (m0, y) = f $ (m0, x);
    ret (m0, z) = f $ (m0, y);
    return (m0, z);

con apply (k: Cn [mem.M 0, I32], m0: mem.M 0, x: I32) = k (m0, core.wrap.mul 0 (x, 2I32));

fun count (m0: mem.M 0, i: I32, acc: I32): [mem.M 0, I32] =
    (stop, more)#(core.icmp.sl (i, 5I32)) m0
    where
        con more (m0: mem.M 0) = count ((m0, core.wrap.add 0 (i, 1I32), core.wrap.add 0 (acc, i)), return);
        con stop (m0: mem.M 0) = return (m0, acc);
    end;

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, cell) = mem.alloc (I32, 0) m0;
    let m0 = mem.store (m0, cell, 100I32);
    go m0
    where
        con go (m0: mem.M 0) =
            ret (m0, a) = twice $ (inc, m0, argc);
            ret (m0, b) = inc $ (m0, 7I32);
            ret (m0, c) = count $ (m0, 0I32, 0I32);
            apply (after, m0, core.wrap.add 0 (core.wrap.add 0 (a, b), c));
        fun inc (m0: mem.M 0, x: I32): [mem.M 0, I32] =
            let (m0, c) = mem.load (m0, cell);
            let m0 = mem.store (m0, cell, core.wrap.add 0 (c, 1I32));
            return (m0, core.wrap.add 0 (x, c));
        con after (m0: mem.M 0, r: I32) =
            let m0 = mem.free (m0, cell);
            return (m0, r);
    end;
"""

# A store nobody reads back: dropping it does not change the result, only the effects.
SCRIBBLE = HEADER + """
fun note (m0: mem.M 0, p: mem.Ptr0 I32, v: I32): [mem.M 0, I32] =
    let m0 = mem.store (m0, p, v);
    return (m0, core.wrap.add 0 (v, 1I32));

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»)
              : [mem.M 0, I32] =
    let (m0, scratch) = mem.alloc (I32, 0) m0;
    ret (m0, r) = note $ (m0, scratch, argc);
    let m0 = mem.free (m0, scratch);
    return (m0, r);
"""

PIPELINE_IN_MIM = HEADER + """
lam _compile (): compile.Phase = compile.phases ff (mem.alloc2malloc_repl, compile.cleanup,
    compile.beta_red, compile.lam_spec, gpu.split_apply);
""" + SCRIBBLE.removeprefix(HEADER)


# ----------------------------------------------------------------------------- helpers


def from_text(src: str) -> World:
    return run_with_big_stack(lambda: load_text(src, "<inline-test>")[0])


def from_file(path: Path) -> World:
    return run_with_big_stack(lambda: load_program(str(path), [])[0])


def before_inline(world: World) -> Program:
    """The program as the default pipeline hands it to step 5 (after compile.cleanup)."""
    run = run_with_big_stack(lambda: run_pipeline(world, verify=False, until="compile.cleanup"))
    assert not run.stopped, [d.render() for d in run.diagnostics]
    return run.program


def apply(phase: object, prog: Program) -> PhaseResult:
    return run_with_big_stack(lambda: phase.apply(prog))  # type: ignore[attr-defined]


def verdict(res: PhaseResult) -> Outcome:
    return run_with_big_stack(lambda: check_spec(res, SpecContext(timeout_ms=10_000)))


def result(prog: Program, argv: list[str]) -> int:
    return run_with_big_stack(lambda: Machine(prog.host, device=prog.device).run_main(find_main(prog.host), argv))


def both(prog: Program) -> tuple[PhaseResult, PhaseResult]:
    beta = apply(BetaRed(), prog)
    spec = apply(LamSpec(), beta.after)
    return beta, spec


def calls_of(world: World, name: str) -> list[App]:
    return [d for d in walk(world) if isinstance(d, App) and isinstance(d.callee, MutLam) and d.callee.name == name]


def muts_named(world: World, name: str) -> list[MutLam]:
    return [d for d in walk(world) if isinstance(d, MutLam) and d.name == name]


def round_trips(world: World, header: list[str]) -> None:
    """The printed World parses back (type-checking) and prints the same."""
    text = run_with_big_stack(lambda: dump_world(world, header))
    again = from_text(text)
    assert run_with_big_stack(lambda: dump_world(again, header)) == text


def headers(src: str) -> list[str]:
    return [line for line in src.splitlines() if line.startswith("plugin ")]


# ----------------------------------------------------------------------------- the corpus


@pytest.mark.parametrize("path", VALID, ids=[p.name for p in VALID])
def test_corpus_programs(path: Path) -> None:
    ann = program_annotations(path)
    prog = before_inline(from_file(path))
    argv = [str(path), *ann.get("ARGS", "").split()]
    expected = result(prog, argv) if "EXPECT" in ann else None
    for res in both(prog):
        if res.skipped is not None:
            assert res.skipped.startswith("no "), res.skipped  # a reason: nothing to inline
            assert res.after is res.before
            continue
        out = verdict(res)
        assert out.status == "proved", (res.name, out.detail, out.counterexample)
        if expected is not None:
            assert result(res.after, argv) == expected, res.name
        round_trips(res.after.host, headers(path.read_text()))


# ----------------------------------------------------------------------------- targeted programs


def test_dependent_fun_is_specialised_per_application() -> None:
    prog = before_inline(from_file(PROGRAMS / "valid" / "dependent_fun.mim"))
    beta, spec = both(prog)
    assert beta.claim(Inlining).inlined == {"lam sum_n@9:1": 2}
    # Each application got its own copy, with n substituted: the loops bound by 5 and by 3.
    funs = muts_named(beta.after.host, "sum_n")
    assert len(funs) == 2 and all(f.kind == "fun" for f in funs)
    text = run_with_big_stack(lambda: dump_world(beta.after.host, []))
    assert "core.ncmp.l (i, 5)" in text and "core.ncmp.l (i_1, 3)" in text
    assert not [d for d in walk(beta.after.host) if isinstance(d, App) and isinstance(d.callee, MutLam)
                and d.callee.kind == "lam"]
    assert verdict(beta).status == verdict(spec).status == "proved"
    assert result(spec.after, ["p", "q", "r"]) == 39
    # The loops stay loops: two recursive continuations named `loop`, no longer behind a call.
    loops = muts_named(spec.after.host, "loop")
    assert len(loops) == 2 and {m.gid for m in loops} <= recursive_muts(spec.after.host)
    assert not calls_of(spec.after.host, "sum_n")


def test_curried_lam_takes_one_round_per_argument() -> None:
    prog = before_inline(from_text(CURRIED))
    beta, spec = both(prog)
    assert beta.claim(Inlining).rounds == 2 and beta.claim(Inlining).inlined == {"lam scaled_sum@5:1": 4}
    assert verdict(beta).status == "proved"
    assert verdict(spec).status == "proved"
    for res in (beta, spec):
        assert result(res.after, ["p"]) == 2 * (1 + 2 + 1) + 10 * (1 + 2 + 1)
        round_trips(res.after.host, headers(CURRIED))
    assert [m.kind for m in muts_named(beta.after.host, "scaled_sum")] == ["fun", "fun"]


def test_with_streams_two_is_specialised() -> None:
    path = PROGRAMS / "valid" / "with_streams_two.mim"
    prog = before_inline(from_file(path))
    beta, spec = both(prog)
    assert beta.claim(Inlining).inlined == {"lam with_streams@66:1": 1}
    assert spec.claim(Inlining).inlined == {"fun with_streams@66:1": 1, "fun work@39:9": 1}
    w = spec.after.host
    # No higher-order parameter is left: the annex is gone, `work` was inlined where with_streams
    # calls `func`, and the stream array has its literal size.
    assert not [d for d in walk(w) if isinstance(d, MutLam) and d.annex == "gpu.with_streams"]
    assert not calls_of(w, "work") and not calls_of(w, "with_streams")
    text = run_with_big_stack(lambda: dump_world(w, []))
    assert "mem.malloc («2; gpu.Stream», 0)" in text
    # The stream (de)initialisation loops stay loops.
    assert len([m for m in muts_named(w, "loop") if m.gid in recursive_muts(w)]) == 2
    for res in (beta, spec):
        out = verdict(res)
        assert out.status == "proved", out.detail
    assert result(spec.after, [str(path)]) == 24


def test_synced_scope_in_a_kernel() -> None:
    prog = before_inline(from_text(SYNCED))
    beta, spec = both(prog)
    assert beta.skipped is not None and spec.claim(Inlining).inlined == {"fun publish@18:9": 1}
    assert verdict(spec).status == "proved"
    kernel = spec.after.host.externals.get("kernel") or next(m for m in muts_named(spec.after.host, "kernel"))
    syncs = [d for d in walk(spec.after.host, [kernel]) if is_app_of(d, "gpu.sync_work_items")]
    assert len(syncs) == 2 and not calls_of(spec.after.host, "publish")
    assert result(spec.after, ["p"]) == 4 + 9  # out[argc] + out[2], out[i] = (i + 1)²
    # The rest of the pipeline still proves every phase on the specialised kernel.
    spec_ = PipelineSpec(main=WITH_INLINE, source={"main": "the test"})
    run = run_with_big_stack(lambda: run_pipeline(from_text(SYNCED), pipeline=spec_))
    assert [(p["name"], p["status"]) for p in run.phases if p["status"] not in ("proved", "skipped")] == []
    assert ("gpu.remove_double_syncs", "proved") in [(p["name"], p["status"]) for p in run.phases]


def test_a_lam_argument_closing_over_kernel_values_is_proved_and_runs_alike() -> None:
    prog = before_inline(from_text(SYNCED_ARG))
    spec = apply(LamSpec(), prog)
    # The input runs (the λ reads the slot its kernel made, never making it again): the same
    # result and the same effects before and after ...
    diff, runs = run_with_big_stack(lambda: compare(spec))
    assert diff is None, diff
    assert "argc = 1: 13" in runs
    # ... and the structural proof needs no run.
    out = verdict(spec)
    assert out.status == "proved" and "β-reduced" in out.detail, out.detail
    assert result(spec.after, ["p"]) == 4 + 9


# A wrong literal on a path no differential run takes (argc is 1 or 2 there, never 7).
RARE_PATH = HEADER + """
fun scale (k: I32) (m0: mem.M 0, x: I32): [mem.M 0, I32] = return (m0, core.wrap.mul 0 (k, x));

fun extern main (m0: mem.M 0, argc: I32, argv: mem.Ptr0 «⊤:Nat; mem.Ptr0 «⊤:Nat; I8»»): [mem.M 0, I32] =
    ret (m0, y) = scale 3I32 $ (m0, argc);
    (usual, rare)#(core.icmp.e (argc, 7I32)) (m0, y)
    where
        con usual (m0: mem.M 0, y: I32) = return (m0, y);
        con rare (m0: mem.M 0, y: I32) = return (m0, 100I32);
    end;
"""


class _RareLiteral(Rewriter):
    def rewrite_imm(self, old: Def, ops: tuple[Def, ...]) -> Def | None:
        if isinstance(old, Lit) and old.value == 100:
            return self.new.lit(ops[0], 101)
        return None


class RareWrong(BetaRed):
    """Wrong: β-reduces, and changes a literal only the rare path returns."""

    def apply(self, prog: Program) -> PhaseResult:
        res = super().apply(prog)
        res.after = Program(_RareLiteral(res.after.host).run())
        return res


def test_a_change_on_a_rare_path_is_run_where_the_comparison_switches() -> None:
    # The path is taken with argc = 7, a literal the program compares argc with: the runs take
    # it too (argc 1 and 2 did not, and the wrong variant was `validated`).
    prog = before_inline(from_text(RARE_PATH))
    right = verdict(apply(BetaRed(), prog))
    assert right.status == "proved", right.detail
    wrong = apply(RareWrong(), prog)
    assert result(wrong.after, ["p"]) == result(prog, ["p"]) == 3
    out = verdict(wrong)
    assert out.status == "refuted" and isinstance(out.counterexample, dict), out.detail
    assert (out.counterexample["argc"], out.counterexample["after"]) == (7, ("ok", 101)), out.counterexample


def test_only_the_proof_sees_a_change_on_a_path_no_run_takes() -> None:
    # argc · argc = 49 switches at no literal argc is compared with: no run takes the path.
    prog = before_inline(from_text(RARE_PATH.replace("core.icmp.e (argc, 7I32)",
                                                     "core.icmp.e (core.wrap.mul 0 (argc, argc), 49I32)")))
    wrong = apply(RareWrong(), prog)
    out = verdict(wrong)
    assert out.status == "validated" and "not proved: the output differs" in out.detail, out.detail


def test_higher_order_functions_and_a_recursive_one() -> None:
    prog = before_inline(from_text(HIGHER))
    beta, spec = both(prog)
    assert beta.skipped is not None
    # Round 1 inlines `twice` (its `f` becomes `inc`), round 2 the two calls of `inc` it made.
    assert spec.claim(Inlining).rounds == 2
    assert spec.claim(Inlining).inlined == {"fun twice@5:1": 1, "fun inc@30:9": 3, "con apply@10:1": 1}
    out = verdict(spec)
    assert out.status == "proved", out.detail
    w = spec.after.host
    assert not calls_of(w, "inc") and not calls_of(w, "twice") and not calls_of(w, "apply")
    assert len(calls_of(w, "count")) == 2  # the call from main and its own tail call: a loop
    assert result(prog, ["p"]) == result(spec.after, ["p"]) == ((1 + 100 + 101) + (7 + 102) + 10) * 2


def test_a_loop_that_is_a_recursive_continuation_stays() -> None:
    prog = before_inline(from_file(PROGRAMS / "valid" / "host_loop_sum.mim"))
    for res in both(prog):
        assert res.skipped is not None and res.after is prog


def test_program_pipeline_can_name_the_phases() -> None:
    assert {"compile.beta_red", "compile.lam_spec"} <= set(PHASES)
    run = run_with_big_stack(lambda: run_pipeline(from_text(PIPELINE_IN_MIM)))
    assert not run.stopped, [d.render() for d in run.diagnostics]
    status = {p["name"]: p["status"] for p in run.phases}
    assert status["compile.beta_red"] == "skipped" and status["compile.lam_spec"] == "proved"


# ----------------------------------------------------------------------------- wrong variants


class FirstArgInliner(Inliner):
    """Wrong: every application of a mutable gets the argument of the first one inlined."""

    def inline(self, f: MutLam, arg: Def, site: App) -> Def:
        first: dict[int, Def] = self.plan.__dict__.setdefault("first", {})
        return super().inline(f, first.setdefault(f.gid, arg), site)


class WrongArgument(BetaRed):
    inliner = FirstArgInliner


class DropStores(Inliner):
    """Wrong: drops the stores of the inlined copies (their memory token passes through)."""

    def default(self, x: Def, ops: tuple[Def, ...]) -> Def:
        if self.owner is not None and isinstance(x, App) and is_app_of(x, "mem.store") and x.depth == 2 \
                and isinstance(ops[1], Tuple):
            return ops[1].ops[0]
        return super().default(x, ops)


class DroppingStores(LamSpec):
    inliner = DropStores


class ExtraBarrier(Inliner):
    """Wrong: puts a second barrier after each barrier of an inlined copy (at the function's head)."""

    def default(self, x: Def, ops: tuple[Def, ...]) -> Def:
        res = super().default(x, ops)
        if self.owner is not None and isinstance(x, App) and is_app_of(x, "gpu.sync_work_items") and x.depth == 1:
            w = self.new
            again = w.app(ops[0], w.tuple((w.extract_n(res, 2, 0), w.extract_n(res, 2, 1))))
            self.place(x, res, again)
            return again
        return res

    def place(self, old: Def, first: Def, second: Def) -> None:
        second.loc = self.owner.loc if self.owner is not None else None


class AddingBarriers(LamSpec):
    inliner = ExtraBarrier


class PeelOnce(Plan):
    """Wrong: inlines recursive functions too, one level deep."""

    def __init__(self, world: World, mode: str, stats: object) -> None:
        super().__init__(world, mode, stats)  # type: ignore[arg-type]
        self.really_recursive: set[int] = self.recursive
        self.recursive = set[int]()

    def decide(self, x: Def, depth: int) -> MutLam | None:
        return super().decide(x, depth) if depth == 0 else None


class CutRecursion(Inliner):
    """Wrong: in the inlined copy of `count (m0, i, acc)`, the recursive call returns `acc`."""

    def _node(self, x: Def) -> Def:
        owner = self.owner
        if owner is not None and isinstance(x, App) and x.callee is owner \
                and owner.gid in getattr(self.plan, "really_recursive", set()):
            w = self.new
            a = self.memo[x.arg.gid]
            data, ret = w.extract_n(a, 2, 0), w.extract_n(a, 2, 1)
            return w.app(ret, w.tuple((w.extract_n(data, 3, 0), w.extract_n(data, 3, 2))))
        return super()._node(x)


class Peeling(LamSpec):
    planner = PeelOnce
    max_rounds = 1


class Cutting(Peeling):
    inliner = CutRecursion


class Boasting(LamSpec):
    """Wrong: reports what it would inline but returns the input."""

    def apply(self, prog: Program) -> PhaseResult:
        res = super().apply(prog)
        res.after = prog
        return res


class SkipsInc(Plan):
    """Wrong: silently never inlines `inc` (no reason in the log)."""

    def decide(self, x: Def, depth: int) -> MutLam | None:
        f = self.candidate(x)
        if f is not None and f.name == "inc":
            return None
        return super().decide(x, depth)


class Lazy(LamSpec):
    planner = SkipsInc


class Renaming(LamSpec):
    """Wrong: renames the external it inlined into."""

    def apply(self, prog: Program) -> PhaseResult:
        res = super().apply(prog)
        ext = res.after.host.externals
        ext["entry"] = ext.pop("main")
        return res


def refuted(res: PhaseResult, *words: str) -> Outcome:
    assert res.skipped is None
    out = verdict(res)
    assert out.status == "refuted", out.detail
    for w in words:
        assert w in out.detail, out.detail
    return out


def test_wrong_argument_is_refuted() -> None:
    prog = before_inline(from_file(PROGRAMS / "valid" / "dependent_fun.mim"))
    out = refuted(apply(WrongArgument(), prog), "differential execution")
    assert out.counterexample["before"] == ("ok", 30 + 1 * 3)  # argc = 1: a3 = (1, 1, 1)


def test_dropping_an_effect_is_refuted_where_the_result_does_not_show_it() -> None:
    prog = before_inline(from_text(SCRIBBLE))
    res = apply(DroppingStores(), prog)
    assert result(res.after, ["p"]) == result(prog, ["p"]) == 2  # the same result ...
    out = refuted(res, "executed memory effects differ")       # ... but one store fewer
    assert out.counterexample["only_before"] == [("mem.store", 1)]
    assert verdict(apply(LamSpec(), prog)).status == "proved"


def test_an_invented_barrier_is_refuted() -> None:
    prog = before_inline(from_text(SYNCED))
    refuted(apply(AddingBarriers(), prog), "`gpu.sync_work_items`", "no counterpart in the input")


def test_inlining_a_recursive_function_is_refuted() -> None:
    prog = before_inline(from_text(HIGHER))
    peel = apply(Peeling(), prog)
    assert "fun count@12:1" in peel.claim(Inlining).inlined
    assert result(peel.after, ["p"]) == result(prog, ["p"])  # peeling one level keeps the result ...
    refuted(peel, "`fun count@12:1`", "recursive")            # ... but a loop must stay a loop
    cut = apply(Cutting(), prog)
    refuted(cut, "recursive")
    # Cutting the recursion is also caught by differential execution on its own.
    out, _ = run_with_big_stack(lambda: compare(cut))
    assert out is not None and out.status == "refuted" and "differential execution" in out.detail


def test_claiming_without_inlining_is_refuted() -> None:
    prog = before_inline(from_file(PROGRAMS / "valid" / "curried_lam.mim"))
    refuted(apply(Boasting(), prog), "claims to have inlined every application of `fun square_plus@10:1`")


def test_leaving_calls_without_a_reason_is_refuted() -> None:
    prog = before_inline(from_text(HIGHER))
    refuted(apply(Lazy(), prog), "is left at", "without a reason")


def test_changing_the_interface_is_refuted() -> None:
    prog = before_inline(from_text(SCRIBBLE))
    refuted(apply(Renaming(), prog), "the externals differ")


def test_free_variables_follow_parameters_of_enclosing_mutables() -> None:
    from verimim.smt.inline_proof import FreeVars

    prog = before_inline(from_file(PROGRAMS / "valid" / "dependent_fun.mim"))
    fv = FreeVars(prog.host)
    muts = {(m.name, m.kind): m for m in walk(prog.host) if isinstance(m, MutLam)}
    outer, inner = muts[("sum_n", "lam")], muts[("sum_n", "fun")]
    # `body` uses only loop's and its own parameters; it still depends on `n` (sum_n's lam)
    # through loop, which depends on it.
    assert outer.gid in fv.of(muts[("body", "con")]) and inner.gid in fv.of(muts[("loop", "con")])
    assert fv.of(muts[("main", "fun")]) == frozenset() and outer.gid not in fv.of(outer)


class CopiesAnything(Plan):
    """Wrong: inlines into every call site, whatever the function holds (barriers, shared slots)."""

    def _one_of_a_kind(self, f: MutLam) -> str | None:
        return None


class Copying(LamSpec):
    planner = CopiesAnything


def test_copying_a_shared_slot_into_two_call_sites_is_refuted() -> None:
    # One slot operation is one block per group: two copies are two blocks (the loads of the
    # second call site would read a block the first never wrote).
    prog = before_inline(from_file(PROGRAMS / "valid" / "shared_slot_in_a_helper_with_two_call_sites.mim"))
    kept = apply(LamSpec(), prog)
    assert "fun acc@13:1" in kept.claim(Inlining).left, kept.claim(Inlining).left
    assert "shared slot" in kept.claim(Inlining).left["fun acc@13:1"]
    out = refuted(apply(Copying(), prog), "shared slot at", "duplicated", "different blocks")
    assert out.counterexample["copies"] == 2 and out.counterexample["before"] == 1


class DoubledBarrier(ExtraBarrier):
    """Wrong: runs each barrier of an inlined copy twice (a second operation at its location)."""

    def place(self, old: Def, first: Def, second: Def) -> None:
        first.loc = second.loc = old.loc


class DoublingBarriers(BetaRed):
    inliner = DoubledBarrier


def test_a_curried_kernel_with_a_barrier_is_copied_once_into_each_launch() -> None:
    # Each launch runs one copy of the curried kernel: its barrier and shared slot are copied
    # into different kernels, never twice into one (the spec counts what one launch runs; a
    # helper called twice within one kernel stays one: the test above).
    prog = before_inline(from_file(PROGRAMS / "valid" / "curried_kernel_with_a_barrier_launched_twice.mim"))
    res = apply(BetaRed(), prog)
    assert res.claim(Inlining).inlined == {"lam kernel@14:1": 2}, res.claim(Inlining)
    out = verdict(res)
    assert out.status == "proved", out.detail
    assert result(res.after, ["p", "x"]) == 215
    # two barrier operations in one kernel's code, each copy
    out = refuted(apply(DoublingBarriers(), prog), "barrier at", "duplicated", "different barriers")
    assert out.counterexample["copies"] == 2 and out.counterexample["before"] == 1
