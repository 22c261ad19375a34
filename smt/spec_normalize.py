"""`core.normalize`: every fold the `core` normalizers made while the checked program was built,
proved at check time, one rewrite instance at a time.

The front end records each fold as (the application as written, what the normalizer made of
it) (`World.folds`). Both sides are encoded with the bit-vector semantics of `verimim.smt.bv`,
which is independent of the normalizers (core.py, core_rules.py, core_ops.py); every operand
that is no literal or `core` term (a parameter, a load, a call's result) is a free variable of
its type, so a proof holds for every value the program may give it. Z3 looks for inputs on
which the application is defined and the fold undefined or different, or the application
undefined and the fold defined (normalizer_proofs.violation: undefined behaviour must stay
visible to the interpreter). unsat for every fold: proved; a model: refuted, with the fold's
place and the inputs; a time-out or a fold without bit-vector meaning: unknown, naming it.

`core.trait.size`/`align` folds are facts about a type's layout, not integer operations: each
is compared with the ABI size and alignment LLVM itself gives the type under the NVPTX64 data
layout (llvmlite's target data, SEMANTICS.md's rule: "sizes and alignments follow the LLVM
data layout of the target"; verimim.smt.reference), built from the type and never from
verimim.layout, which the normalizer uses.
"""
from __future__ import annotations

import time
from typing import Any

import z3

from verimim.ir.defs import App, Axiom, Def, Extract, Lit, Pack, Tuple
from verimim.ir.world import World
from verimim.phases.base import is_app_of, walk
from verimim.printer import show
from verimim.smt import bv
from verimim.smt.normalizer_proofs import violation
from verimim.smt.reference import abi_layout
from verimim.smt.solver import Outcome, SpecContext

NAME = "core.normalize"


class _Leaves(dict):  # type: ignore[type-arg]
    """bv.encode's environment: each operand that is no literal or core term is a variable of
    its type (one per node), with the range facts of its type."""

    def __init__(self, world: World) -> None:
        super().__init__()
        self.world = world
        self.facts: list[z3.BoolRef] = []
        self.model: z3.ModelRef | None = None  # a refutation's model (_fold_holds)

    @staticmethod
    def structural(d: Def) -> bool:
        if isinstance(d, (Lit, Tuple)):
            return True
        if isinstance(d, Pack):
            return isinstance(d.shape, Lit) and d.body.closed
        if isinstance(d, Extract):
            return isinstance(d.index, Lit) and _Leaves.structural(d.tup)
        return isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex.startswith("core.")

    def __contains__(self, d: object) -> bool:
        return isinstance(d, Def) and not self.structural(d)

    def __missing__(self, d: Def) -> z3.ExprRef:
        ty = self.world.type_of(d)
        if is_app_of(ty, "mem.M"):
            # a memory token (core.div's first operand): only equality matters (smt.bv)
            m = self[d] = z3.Const(f"m{len(self)}", bv.MEM)
            return m
        t = bv.int_type(ty)  # NoSemantics for any other operand that is no integer
        bits = bv.NAT_BITS if t is None else t.width
        v = z3.BitVec(f"x{len(self)}", bits)
        if t is not None and not t.pow2:
            self.facts.append(z3.ULT(v, t.s))
        if t is None:
            self.facts.append(z3.ULT(v, 2 ** 64))  # Nat operands below 2^64, as normalizer_proofs
        self[d] = v
        return v


class _CutLeaves(_Leaves):
    """_Leaves where an application that the fold's input and its result share is a variable
    too: the fold does not look into it (it is on both sides), and encoding every operand down
    to the program's inputs made a fold's query as large as the program before it (checking a
    chain of n lets took n² time). A refutation this finds is checked with the whole terms
    (the fold may rest on what the shared term is: `zext(y) < 256`)."""

    def __init__(self, world: World, app: Def, res: Def) -> None:
        super().__init__(world)
        self.cut = _shared_apps(world, app, res)

    def __contains__(self, d: object) -> bool:
        return isinstance(d, Def) and (d.gid in self.cut or not self.structural(d))


def _shared_apps(world: World, a: Def, b: Def) -> set[int]:
    """The applications below both a and b (by gid), neither a nor b themselves."""
    in_b = {d.gid for d in walk(world, [b])}
    return {d.gid for d in walk(world, [a]) if isinstance(d, App) and d.gid in in_b and d.gid not in (a.gid, b.gid)}


def _fold_holds(app: App, res: Def, env: _Leaves, ctx: SpecContext) -> tuple[z3.CheckSatResult, _Leaves]:
    """Z3's answer to "the fold is wrong for some input" under env's leaves."""
    before = bv.encode(app, env)
    after = bv.encode(res, env)
    wrong = violation(before, after)
    if not env.facts and z3.is_false(z3.simplify(wrong)):
        # Z3's simplifier settles it (a fold of literals, the common case once a phase has
        # inlined constants): the same answer as the solver's, without a solver per fold
        env.model = None
        return z3.unsat, env
    s = ctx.solver()
    s.add(*env.facts)
    s.add(wrong)
    r = ctx.check(s, f"{NAME} {app.head.annex}")  # type: ignore[union-attr]
    env.model = s.model() if r == z3.sat else None
    return r, env


def _check_layout(app: App, res: Def) -> str | None:
    """Why a `core.trait.size`/`align` fold is wrong (None: it is LLVM's value); raises
    bv.NoSemantics for a type LLVM's layout is not built for here."""
    which = app.head.annex.rsplit(".", 1)[1]  # type: ignore[union-attr]
    lay = abi_layout(app.arg, "nvptx64")
    if lay is None:
        raise bv.NoSemantics(f"no LLVM type for `{show(app.arg)}`")
    want = lay[0] if which == "size" else lay[1]
    if want is None:
        raise bv.NoSemantics(f"LLVM's layout has no size for `{show(app.arg)}` (2^64 bytes or more)")
    if isinstance(res, Lit) and res.value == want:
        return None
    return f"`{show(app)}` folded to `{show(res)}`; LLVM's NVPTX64 data layout gives {want}"


def prove_folds(world: World, ctx: SpecContext) -> tuple[Outcome, Def | None]:
    """The verdict on every recorded fold of `world`, and the application a refutation is at."""
    t0 = time.perf_counter()
    folds = list((world.folds or {}).values())
    checked = [(a, r) for a, r in folds if isinstance(a.head, Axiom) and a.head.annex.startswith("core.")]
    if not checked:
        return Outcome("skipped", "no fold by the core normalizers while building the program",
                       time_s=time.perf_counter() - t0), None
    unknown: list[str] = []
    literal = 0  # core.idx_unsafe folds, checked to be their literal
    layouts = 0  # core.trait folds, checked against LLVM's data layout
    same = 0  # bitcasts of a type to itself, checked to be their operand
    for app, res in checked:
        if app.head.annex.startswith("core.trait."):  # type: ignore[union-attr]
            try:
                wrong = _check_layout(app, res)
            except bv.NoSemantics as e:
                unknown.append(f"`{show(app)[:120]}` ({e})")
                continue
            if wrong is not None:
                return Outcome("refuted", wrong, {"before": show(app), "after": show(res)},
                               time_s=time.perf_counter() - t0), app
            layouts += 1
            continue
        if app.head.annex == "core.idx_unsafe":  # type: ignore[union-attr]
            # `core.idx_unsafe l` is the literal l of `Idx ⊤` (no bit-vector type: ⊤ has no
            # width): the fold must be that literal, nothing else.
            (arg,) = app.args()
            if isinstance(arg, Lit) and isinstance(res, Lit) and res.value == arg.value:
                literal += 1
                continue
            return Outcome("refuted", f"`{show(app)}` folded to `{show(res)}`, not the literal {show(arg)}",
                           {"before": show(app), "after": show(res)}, time_s=time.perf_counter() - t0), app
        if app.head.annex == "core.bitcast":  # type: ignore[union-attr]
            # `bitcast S S x ↦ x` holds for values of any type, not only the integers smt.bv
            # encodes (a pointer, once a generic's type argument is substituted): the fold must
            # be the operand itself
            src, dst, x = app.args()
            if src is dst:
                if res is x:
                    same += 1
                    continue
                return Outcome("refuted", f"`{show(app)}` folded to `{show(res)}`, not its operand `{show(x)}`",
                               {"before": show(app), "after": show(res)}, time_s=time.perf_counter() - t0), app
        env: _Leaves = _CutLeaves(world, app, res)
        try:
            r, env = _fold_holds(app, res, env, ctx)
        except (bv.NoSemantics, AssertionError):
            r = z3.unknown
        try:
            if r != z3.unsat:  # (refuted or undecided with the shared terms as variables: the whole terms)
                r, env = _fold_holds(app, res, _Leaves(world), ctx)
        except (bv.NoSemantics, AssertionError) as e:  # AssertionError: bv's shape checks
            unknown.append(f"`{show(app)[:120]}` ({e or 'no bit-vector meaning'})")
            continue
        if r == z3.sat:
            model = env.model
            assert model is not None
            inputs = {show(d)[:60]: str(model.eval(v, model_completion=True)) for d, v in env.items()}
            where = f" at {app.loc}" if app.loc else ""
            return Outcome("refuted", f"the fold of `{show(app)[:200]}`{where} to `{show(res)[:200]}` is wrong "
                           f"for {inputs or 'every input'}",
                           {"before": show(app)[:300], "after": show(res)[:300], "inputs": inputs},
                           time_s=time.perf_counter() - t0), app
        if r != z3.unsat:
            unknown.append(f"`{show(app)[:120]}` (solver: {r})")
    layout_note = f"; {layouts} core.trait folds agree with LLVM's data layout" if layouts else ""
    if unknown:
        return Outcome("unknown", f"{len(checked) - len(unknown)} of {len(checked)} folds by the core normalizers "
                       f"proved; not decided: {'; '.join(unknown[:3])}{layout_note}",
                       time_s=time.perf_counter() - t0), None
    # Z3 proves the folds of integer operations for all inputs; the other two kinds are closed
    # facts without inputs, each compared exactly with what it must be — said apart.
    parts = [f"{len(checked) - literal - layouts - same} proved by Z3 for every value of their operands with "
             f"smt.bv's semantics"]
    if same:
        parts.append(f"{same} `core.bitcast` of a type to itself, each its operand")
    if literal:
        parts.append(f"{literal} `core.idx_unsafe`, each compared with its literal")
    if layouts:
        parts.append(f"{layouts} `core.trait.size`/`align` of closed types, each compared with LLVM's NVPTX64 "
                     f"data layout")
    return Outcome("proved", f"{len(checked)} folds by the core normalizers while building the program, each "
                   "shown for all inputs: " + "; ".join(parts), time_s=time.perf_counter() - t0), None


def entry(world: World, ctx: SpecContext) -> tuple[dict[str, Any], Def | None]:
    """The `phases` entry of `check` for the folds."""
    out, at = prove_folds(world, ctx)
    return ({"name": NAME, "status": out.status, "time_s": round(out.time_s, 4), "detail": out.detail,
             "counterexample": out.counterexample}, at)
