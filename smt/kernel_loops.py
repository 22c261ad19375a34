"""Loop invariants for the kernel verifier: candidates, checked inductively (Houdini).

A loop whose trip count is not a constant (`k < n` with n an argument) cannot be unrolled to
its end. Instead, at the loop header's first entry on a path, its parameters' integer parts are
replaced by fresh variables h ("any iteration"), constrained by an inductive invariant I:

1. candidates, from the entry values v and the loop itself: h = v, h ≥ v, h ≤ v (unsigned),
   the comparisons of h with loop-independent terms found in the body's branch conditions
   (the guard `k < n` gives k ≤ n and k < n), and h ≡ v (mod c) for a constant stride c;
2. those that hold at entry (Z3, under the path's condition) and are preserved by every path of
   the body back to the header (the body explored from h, assuming the surviving candidates,
   Z3 asked for each back edge whether the new values satisfy each) survive — repeated until
   none is dropped. A path of the body that leaves the loop for good ends there
   (`LoopSummaries.left_loop`): what follows the loop is no part of its body.

The path then runs the body once from h (covering every iteration's accesses, since every
iteration's state satisfies I) and stops at the back edge (status `loop`), or leaves the loop
with h (covering the code after it). Only the integer parts are "any iteration": a loop whose
body reaches a barrier, writes the work-item's local memory (which h does not cover: the path
after the loop would read it as it was before), changes another part of the parameters (a
continuation, a pointer, a Bool: h keeps its entry value), or whose body exploration is itself
cut by the unrolling bound, is not summarized: it is unrolled as before.

The kernel verifier uses these summaries only where unrolling was cut (first for the loops
whose headers the bound cut only, `kernel_verify._explore_summarized`), and only their proofs:
a refutation found through a summary could be an artefact of the invariant being too weak.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import z3

from verimim.ir.analysis import scan_mut
from verimim.ir.defs import Lam, MutLam
from verimim.ir.schedule import Scopes
from verimim.smt import z3_typed as z3t
from verimim.smt.kernel_eval import CUT_STATUSES, Closure, Evaluator, LoopReentry, Op, Ptr
from verimim.smt.symbolic import Explorer, SymbolicError

MAX_BODY_PATHS = 64
MAX_STRIDE = 1 << 16
NESTED_NAMES = 1_000_000  # fresh-variable numbers of body explorations start here (no clash)

HandlerFactory = Callable[[], tuple[dict[str, Op], Callable[[], bool]]]


def path_facts(explorer: Explorer, decisions_only: bool = False) -> list[z3.BoolRef]:
    """What the current path assumes: the explorer's assumptions and the branch decisions so far.
    (The Explorer keeps the decisions of the running path in `_pc`.)"""
    return list(explorer._pc) if decisions_only else list(explorer.assumptions) + list(explorer._pc)


def _bv_leaves(v: Any, out: list[z3.BitVecRef]) -> None:
    if isinstance(v, tuple):
        for x in v:
            _bv_leaves(x, out)
    elif isinstance(v, z3.BitVecRef):
        out.append(v)


def _same_but_bitvectors(a: Any, b: Any) -> bool:
    """Whether b is a, but for its bit-vector leaves (what a summary replaces by "any
    iteration"): every other part — a continuation, a pointer, a Bool, a token — the same. A
    part a back edge changes is one the summary would keep at its entry value."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) \
            and all(_same_but_bitvectors(x, y) for x, y in zip(a, b))
    if isinstance(a, z3.BitVecRef) and isinstance(b, z3.BitVecRef):
        return a.size() == b.size()
    if isinstance(a, z3.ExprRef) or isinstance(b, z3.ExprRef):
        return isinstance(a, z3.ExprRef) and isinstance(b, z3.ExprRef) and a.eq(b)
    if isinstance(a, Ptr) and isinstance(b, Ptr):
        return a.space == b.space and a.obj.eq(b.obj) and a.off.eq(b.off)
    return a is b or (type(a) is type(b) and a == b)


def _replace(v: Any, new: list[z3.ExprRef]) -> Any:
    if isinstance(v, tuple):
        return tuple(_replace(x, new) for x in v)
    if isinstance(v, z3.BitVecRef):
        return new.pop(0)
    return v


_CMPS = {z3.Z3_OP_ULT: (z3.ULT, z3.ULE), z3.Z3_OP_ULEQ: (z3.ULE, z3.ULE), z3.Z3_OP_UGT: (z3.UGT, z3.UGE),
         z3.Z3_OP_UGEQ: (z3.UGE, z3.UGE), z3.Z3_OP_SLT: (lambda a, b: a < b, lambda a, b: a <= b),
         z3.Z3_OP_SLEQ: (lambda a, b: a <= b, lambda a, b: a <= b),
         z3.Z3_OP_SGT: (lambda a, b: a > b, lambda a, b: a >= b),
         z3.Z3_OP_SGEQ: (lambda a, b: a >= b, lambda a, b: a >= b)}


def _atoms(e: z3.ExprRef, out: list[z3.ExprRef]) -> None:
    if z3.is_app(e) and e.decl().kind() in _CMPS:
        out.append(e)
        return
    if z3.is_app(e):
        for c in e.children():
            _atoms(c, out)


def _mentions(e: z3.ExprRef, names: set[str]) -> bool:
    return any(str(v) in names for v in z3t.free_vars(e))


@dataclass
class LoopSummaries:
    """Summaries of loop headers for one kernel exploration; `notes` says what was used."""

    make_handlers: HandlerFactory
    timeout_ms: int = 2_000
    notes: dict[str, str] = field(default_factory=dict)
    _headers: dict[int, bool] = field(default_factory=dict)
    _reaches: dict[int, frozenset[int]] = field(default_factory=dict)
    _summarizing: set[int] = field(default_factory=set)  # headers whose summary is being made
    # Wall-clock seconds for all the summaries of one kernel: a body explored from "any
    # iteration" may branch at every step of an inner loop it has to unroll (a btensor
    # reduction of 16 steps took 4 minutes). Past it, loops are not summarized: the verdicts
    # stay `bounded`, which the unrolled exploration already showed.
    budget_s: float = 10.0
    # The headers to summarize (None: every one): the loops whose unrolling the bound cut.
    # Another loop is unrolled, as without summaries: its values stay exact where an "any
    # iteration" would lose what a proof needs (a guard on the value a short loop computes).
    only: frozenset[int] | None = None
    _deadline: float | None = None

    def is_header(self, m: MutLam, scopes: Scopes) -> bool:
        """Whether m's body can reach m again (it heads a loop), not through a mutable m is
        nested in: entering that starts a new activation of m's scope, and m's entries anew
        (`Evaluator._restart_loops`), so m is never re-entered as a loop header is (a loop's
        body reaches itself through its header). Summarized as a loop of its own, each entry
        of such a body was a first one, its back edge never met: its exploration unrolled the
        enclosing loop to the bound, branching at each step."""
        hit = self._headers.get(m.gid)
        if hit is not None:
            return hit
        hit = False
        seen: set[int] = set()
        stack = list(scan_mut(m)[1])
        while stack and not hit:
            x = stack.pop()
            hit = x is m
            if x.gid in seen or m in scopes.local_muts(x):
                continue
            seen.add(x.gid)
            stack.extend(scan_mut(x)[1])
        self._headers[m.gid] = hit
        return hit

    def _reach(self, m: MutLam) -> frozenset[int]:
        """The mutables m's body can reach by naming them (m included), by id."""
        hit = self._reaches.get(m.gid)
        if hit is None:
            seen: set[int] = set()
            stack = [m]
            while stack:
                x = stack.pop()
                if x.gid not in seen:
                    seen.add(x.gid)
                    stack.extend(scan_mut(x)[1])
            hit = self._reaches[m.gid] = frozenset(seen)
        return hit

    def left_loop(self, ev: Evaluator, q: MutLam, arg: Any) -> bool:
        """Whether a path exploring the body of the loop headed by `ev.stop_at`, entering q with
        `arg`, has left the loop for good: no back edge can follow, so the path is of no use to
        the summary (which asks only what the back edges pass) and stops here.

        q's body must not name the header (through any mutable it names), and no continuation
        the path can still jump to may: those in `arg`, in the parameters of the activations
        whose parameters the mutables q reaches read (`Scopes.free`: a return continuation
        an enclosing helper received), for a closure in the activations it captured, and
        those an opened immutable lambda's body reads — followed on through the continuations
        found there. An immutable lambda as a value is not looked into: the path goes on.
        Exploring such a path to the kernel's end cost time exponential in the loops that
        follow, and whatever it met there (a barrier, a write of local memory, a cut) kept the
        loop from being summarized. (Saying "not left" is always sound: the path goes on.)"""
        header = ev.stop_at
        if header is None:
            return False
        # (the placeholders of opened immutable lambdas: what their bodies read)
        todo: list[Any] = [arg, q, *ev.params.values()]
        seen: set[int] = set()
        while todo:
            v = todo.pop()
            if isinstance(v, tuple):
                todo.extend(v)
                continue
            if isinstance(v, Closure):
                for x, s in v.acts:
                    kept = ev.acts.kept.get(s)
                    todo.append(kept.frame if kept is not None else ev.frames.get(x.gid))
                v = v.fn
            if isinstance(v, Lam):
                return False
            if not isinstance(v, MutLam) or v.gid in seen:
                continue
            seen.add(v.gid)
            if header in self._reach(v):
                return False
            todo.extend(ev.frames.get(x.gid) for x in ev.scopes.free(v))
        return True

    def _out_of_time(self) -> bool:
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + self.budget_s
        return now > self._deadline

    def _valid(self, facts: list[z3.BoolRef], claim: z3.BoolRef) -> bool:
        s = z3.Solver()
        s.set("timeout", self.timeout_ms)
        s.add(*facts, z3.Not(claim))
        return s.check() == z3.unsat

    def summarize(self, ev: Evaluator, m: MutLam, init: Any) -> Any | None:
        """The header's parameter for "any iteration" (its invariant assumed on the path), or
        None when the loop is not summarized (then it is unrolled).

        Not while m's own summary is being made: a continuation of m's body that also heads a
        loop (it reaches itself through m) is summarized inside m's, and its body enters m
        again as if for the first time. Summarizing m there again recursed without end (a
        btensor reduction of 16 or more steps: `check` never finished)."""
        if m.gid in self._summarizing or (self.only is not None and m.gid not in self.only) or self._out_of_time():
            return None
        self._summarizing.add(m.gid)
        try:
            return self._summarize(ev, m, init)
        finally:
            self._summarizing.discard(m.gid)

    def _summarize(self, ev: Evaluator, m: MutLam, init: Any) -> Any | None:
        inits: list[z3.BitVecRef] = []
        _bv_leaves(init, inits)
        if not inits:
            return None
        hs = [ev.fresh_bv(v.size(), f"{m.name or 'loop'}_{j}") for j, v in enumerate(inits)]
        h = _replace(init, list(hs))
        facts = path_facts(ev.explorer)
        body = self._explore_body(ev, m, h, facts)
        if body is None:
            return None
        if not all(_same_but_bitvectors(h, arg) for _, arg in body):
            return None  # a back edge changes a part the summary does not make "any iteration"
        cands = self._candidates(hs, inits, body, facts)
        back = [(c, a) for c, a in body]
        changed = True
        while changed and cands:
            changed = False
            inv = [c for c, _ in cands]
            for cond, arg in back:
                new: list[z3.BitVecRef] = []
                _bv_leaves(arg, new)
                if len(new) != len(hs):
                    return None
                sub = list(zip(hs, new))
                for c, text in list(cands):
                    if not self._valid(facts + inv + [cond], z3t.substitute(c, *sub)):
                        cands.remove((c, text))
                        changed = True
                if changed:
                    break
        inv = [c for c, _ in cands]
        self.notes[m.name or "loop"] = ", ".join(t for _, t in cands) or "no invariant (any values)"
        if inv:
            ev.assume(z3t.And(*inv))
        return h

    def _explore_body(self, ev: Evaluator, m: MutLam, h: Any,
                      facts: list[z3.BoolRef]) -> list[tuple[z3.BoolRef, Any]] | None:
        """(condition, parameter) of every path of the body back to the header; None if some
        path reaches a barrier or writes local memory, is cut, or cannot be modelled."""
        nested = Explorer(assumptions=facts, timeout_ms=self.timeout_ms, max_paths=MAX_BODY_PATHS)

        def one() -> tuple[str, Any, bool]:
            if self._out_of_time():
                raise SymbolicError("loop summaries ran out of their time")
            handlers, unsummarizable = self.make_handlers()
            sub = Evaluator(nested, ev.scopes, handlers, values=ev.values, loop_bound=ev.loop_bound, world=ev.world,
                            params=dict(ev.params),
                            memo=dict(ev.memo), frames=dict(ev.frames), acts=ev.acts.copy(), entries=dict(ev.entries),
                            loops=self, abstracted=set(ev.abstracted), stop_at=m.gid,
                            _counter=ev._counter + NESTED_NAMES)
            status = sub.run(m, h)
            return status, sub.backedge, unsummarizable()

        try:
            paths = nested.run(one, stop_at_error=True)
        except (SymbolicError, LoopReentry):
            return None
        out = []
        for p in paths:
            if p.error is not None or p.outcome is None:
                return None
            status, arg, unsummarizable = p.outcome
            if unsummarizable or status in CUT_STATUSES:
                return None
            if status == "backedge":
                out.append((p.condition(), arg))
        return out

    def _candidates(self, hs: list[z3.BitVecRef], inits: list[z3.BitVecRef],
                    body: list[tuple[z3.BoolRef, Any]], facts: list[z3.BoolRef]) -> list[tuple[z3.BoolRef, str]]:
        names = {str(x) for x in hs}
        out: list[tuple[z3.BoolRef, str]] = []
        for j, (hj, vj) in enumerate(zip(hs, inits)):
            out += [(hj == vj, f"{hj} = entry"), (z3.UGE(hj, vj), f"{hj} ≥ entry"), (z3.ULE(hj, vj), f"{hj} ≤ entry")]
            atoms: list[z3.ExprRef] = []
            for cond, arg in body:
                _atoms(z3.simplify(cond), atoms)
                new: list[z3.BitVecRef] = []
                _bv_leaves(arg, new)
                if j < len(new):
                    step = z3.simplify(new[j] - hj)
                    if z3t.is_bv_value(step) and 1 < step.as_long() < MAX_STRIDE:
                        c = step.as_long()
                        out.append((cast(z3.BoolRef, z3.URem(hj - vj, c) == 0), f"{hj} ≡ entry (mod {c})"))
            for a in atoms:
                x, y = a.children()
                strict, weak = _CMPS[a.decl().kind()]
                if x.eq(hj) and not _mentions(y, names):
                    out += [(weak(hj, y), f"{weak(hj, y)}"), (strict(hj, y), f"{strict(hj, y)}")]
                elif y.eq(hj) and not _mentions(x, names):
                    out += [(weak(x, hj), f"{weak(x, hj)}"), (strict(x, hj), f"{strict(x, hj)}")]
        seen: set[int] = set()
        kept = []
        for c, text in out:
            if c.get_id() in seen:
                continue
            seen.add(c.get_id())
            entry = z3t.substitute(c, *zip(hs, inits))
            if self._valid(facts, entry):
                kept.append((c, text))
        return kept
