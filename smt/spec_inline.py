"""The specification of `compile.beta_red` and `compile.lam_spec` (PHASES.md step 5: clean-up and
specialisation, "each validated by differential execution").

What either phase must achieve, stated without its code:

1. Interface: the externals are the same names, each of the same kind and type (by structure).
2. Effects are moved or copied, never made: every memory-effect operation of the output (a full
   application of an axiom whose type mentions a memory token `mem.M a`, jumps to `Fn` axioms
   included) has a counterpart in the input with the same axiom at the same source location
   (one without a location, which the World's own β-reduction of an immutable lambda makes,
   must at least be an axiom of the input's operations). Barriers are moved, never copied: no
   source location holds more `gpu.sync_work_items` operations in the output than in the input
   (two copies are two barrier operations, and work-items that met at one would wait at
   different ones — SEMANTICS.md's divergence, which the single-work-item proof below cannot
   see). One launch runs one kernel's code: the output is counted kernel by kernel (what each
   kernel reaches, and apart what none does), so a barrier copied into two kernels (a curried
   kernel specialised for two launches) is no copy. Barriers without a location (in immutable
   lambdas) are not counted.
3. The phase did what it claims and left only what it says (its witness): no application remains
   of a mutable it claims to have inlined everywhere; every mutable it inlined was
   non-recursive in the input (a loop stays a loop); and every application of the phase's kind
   that is left in the output — for `beta_red` a closed application of a non-recursive mutable
   `lam` for its value, for `lam_spec` a closed call of a non-recursive, non-external `fun` or
   `con` whose parameter holds a function or continuation — is one the phase reports leaving,
   with its reason (reported in the outcome).
4. The proof (smt.inline_proof): the output equals, node for node, the input with every claimed
   application β-reduced by the textbook substitution — `proved`, for all inputs. Only where
   that reference does not apply does 5. decide, and then the outcome is `validated`.
5. Differential execution (the reference interpreter, with argc = 1 and argc = 2, and either side
   of each literal the program compares a value with): the same
   result or fault code, the same warning codes, and for runs that finish, the same multiset of
   executed state-changing memory operations by axiom (stores, allocations, frees, copies,
   launches, synchronisations, stream operations; loads only observe, and how often the
   interpreter repeats one depends on its scheduling) — an effect dropped, repeated or added by
   the phase changes it even where the result does not show it. Where the interpreter cannot
   run the input (E-UNSUPPORTED) but runs the output, the outcome is `unknown`.
"""
from __future__ import annotations

from collections import Counter

from typing import Any

from verimim.ir.analysis import apps_with_head, scan_mut
from verimim.ir.defs import App, Arr, Axiom, Def, Lam, Lit, MutLam, Pi, Sigma, Tuple, Var
from verimim.ir.world import World
from verimim.phases.base import PhaseResult, Program, walk
from verimim.phases.witness import Inlining, mut_key
from verimim.printer import show
from verimim.smt import reference
from verimim.smt.inline_proof import prove_inlining
from verimim.smt.names import Namer
from verimim.smt.solver import Outcome, SpecContext
from verimim.smt.differential import compare, hinted_argvs
from verimim.smt.specs import spec



def _loc(d: Any) -> str:
    loc = getattr(d, "loc", None)
    return str(loc) if loc else "?"


# ----------------------------------------------------------------------------- 1. interface


def _interface(before: Program, after: Program) -> Outcome | None:
    namer = Namer()  # types compared by structure, not by how the printer shows them
    for old, new in zip(before.worlds(), after.worlds()):
        a = {n: (m.kind, namer.key(m.pi)) for n, m in old.externals.items()}
        b = {n: (m.kind, namer.key(m.pi)) for n, m in new.externals.items()}
        if set(a) != set(b):
            return Outcome("refuted", f"the externals differ: {sorted(a)} before, {sorted(b)} after",
                           {"before": sorted(a), "after": sorted(b)})
        for n in sorted(a):
            if a[n] != b[n]:
                was, now = old.externals[n], new.externals[n]
                return Outcome("refuted", f"the external `{n}` changed: `{was.kind} {show(was.pi)}` before, "
                               f"`{now.kind} {show(now.pi)}` after", {"external": n})
    return None


# ----------------------------------------------------------------------------- 2. effects


def _arity(t: Def) -> int:
    """How many arguments make a full application of an axiom of type t (`Fn`s included: a
    jump to `gpu.launch … $ (…)` is its full application)."""
    n = 0
    while isinstance(t, Pi):
        n += 1
        t = t.codom
    return n


def _effect_axiom(ax: Axiom, memo: dict[int, bool]) -> bool:
    """An axiom whose type mentions a memory token: its applications read or write memory."""
    hit = memo.get(ax.gid)
    if hit is None:
        hit = memo[ax.gid] = bool(apps_with_head(ax.ops[0], "mem.M"))
    return hit


def _effects(world: World) -> tuple[dict[tuple[str, str], Def], Counter[tuple[str, str]]]:
    """The full applications of memory-effect axioms of a World (inside immutable lambdas too),
    by (axiom, location); and how many operations each source location holds of those whose
    identity is their meaning: barriers (`gpu.sync_work_items`: work-items meet at the same
    one) and shared slots (`mem.slot`/`mem.mslot` of space 3, or of a space not known: a block
    per operation). Those without a location (inside an immutable lambda's body, and what the
    World's own β-reduction makes of them) are not counted: as for effects, their copies cannot
    be told from the World's own."""
    memo: dict[int, bool] = {}
    out: dict[tuple[str, str], Def] = {}
    unique: Counter[tuple[str, str]] = Counter()
    for d in walk(world):
        if isinstance(d, App) and isinstance(d.head, Axiom) and _effect_axiom(d.head, memo) \
                and d.depth == _arity(d.head.ops[0]):
            out.setdefault((d.head.annex, _loc(d)), d)
            key = _one_of_a_kind(d, memo)
            if key is not None:
                unique[key] += 1
    return out, unique


def _unique_per_kernel(world: World) -> Counter[tuple[str, str]]:
    """`_effects`'s count of barriers and shared slots by location, for the most any one launch
    can run: the nodes in the bodies each kernel reaches (smt.reference.kernels), and apart
    those of the mutables no kernel reaches."""
    memo: dict[int, bool] = {}
    own: dict[int, dict[int, tuple[str, str]]] = {}  # a mutable → its one-of-a-kind nodes (gid → key)
    muts = [m for m in walk(world) if isinstance(m, MutLam) and m.annex is None and m.body is not None]
    for m in muts:
        found: dict[int, tuple[str, str]] = {}
        seen: set[int] = set()
        stack: list[Def] = [m.body] if m.body is not None else []
        while stack:  # m's own body: not into other mutables, nor through a parameter to its mutable
            d = stack.pop()
            if d.gid in seen or isinstance(d, (MutLam, Var)):
                continue
            seen.add(d.gid)
            stack.extend(d.ops)
            key = _one_of_a_kind(d, memo)
            if key is not None:
                found[d.gid] = key
        own[m.gid] = found
    units: list[set[MutLam]] = []
    for k in reference.kernels(world):
        unit = {k}
        stack_m = [k]
        while stack_m:
            for y in scan_mut(stack_m.pop())[1]:
                if y not in unit:
                    unit.add(y)
                    stack_m.append(y)
        units.append(unit)
    covered = set().union(*units) if units else set()
    units.append({m for m in muts if m not in covered})
    out: Counter[tuple[str, str]] = Counter()
    for unit in units:
        nodes: dict[int, tuple[str, str]] = {}
        for m in unit:
            nodes.update(own.get(m.gid, {}))
        for key, n in Counter(nodes.values()).items():
            out[key] = max(out[key], n)
    return out


def _one_of_a_kind(d: Def, memo: dict[int, bool]) -> tuple[str, str] | None:
    """("barrier" or "shared slot", location) for a located full application of
    `gpu.sync_work_items` or of a slot that may be shared (`_effects` counts these), else None."""
    if not (isinstance(d, App) and d.loc is not None and isinstance(d.head, Axiom)
            and _effect_axiom(d.head, memo) and d.depth == _arity(d.head.ops[0])):
        return None
    if d.head.annex == "gpu.sync_work_items":
        return ("barrier", _loc(d))
    if d.head.annex in ("mem.slot", "mem.mslot") and _space_may_be_shared(d):
        return ("shared slot", _loc(d))
    return None


def _space_may_be_shared(slot: App) -> bool:
    """Whether a full `mem.slot (T, a) (m, id)` may be in address space 3 (a not a literal 3)."""
    first = slot.callee
    pair = first.arg if isinstance(first, App) else None
    space = pair.ops[1] if isinstance(pair, Tuple) and len(pair.ops) == 2 else None
    return not isinstance(space, Lit) or space.value == 3


def _indirect_calls(world: World) -> tuple[set[str], set[str]]:
    """The locations of the calls through a parameter (`f x`, f a variable: an effect of
    whatever f is bound to), and the axioms the World mentions at all (as values too: the
    C function or `mem.load @(I32, 0)` passed for f)."""
    calls: set[str] = set()
    named: set[str] = set()
    for d in walk(world):
        if isinstance(d, Axiom):
            named.add(d.annex)
        elif isinstance(d, App) and d.loc is not None and not isinstance(d.head, (Axiom, MutLam, Lam)):
            calls.add(_loc(d))  # (the head a parameter, or an element of one: `f` of `(m, f)`)
    return calls, named


def _effects_correspond(before: Program, after: Program) -> Outcome | None:
    for old, new in zip(before.worlds(), after.worlds()):
        (have, had_barriers), (now, barriers) = _effects(old), _effects(new)
        if any(n > had_barriers[key] for key, n in barriers.items()):
            # more copies than the input in the whole World: are they in one kernel? (a kernel's
            # count is at most the World's, so only then is the walk kernel by kernel needed)
            barriers = _unique_per_kernel(new)
        axioms = {a for a, _ in have}
        indirect: tuple[set[str], set[str]] | None = None
        for key, d in sorted(now.items()):
            # An operation without a location was made by the World's own β-reduction of an
            # immutable lambda (a `lam` value substituted for a parameter): it must be one of
            # the input's axioms; every other one must have its counterpart at its location.
            if key in have or (key[1] == "?" and key[0] in axioms):
                continue
            # An axiom passed for a parameter and called through it (`f x` with f bound to a C
            # function): the input's effect is that call, at the same location, and the axiom
            # is one the input mentions.
            indirect = indirect if indirect is not None else _indirect_calls(old)
            if key[1] not in indirect[0] or key[0] not in indirect[1]:
                return Outcome("refuted", f"the effect `{key[0]}` at {key[1]} has no counterpart in the "
                               f"input", {"operation": show(d)[:300], "location": key[1]})
        # Inlining may move a barrier or a shared slot, never copy it within what one launch
        # runs: SEMANTICS.md asks every work-item of a group to reach the *same* barrier
        # operation, and gives them one block per slot operation — two copies are two
        # operations: work-items that met at one barrier would wait at different ones (a
        # divergence the input does not have), and work-items that shared one block would get two.
        for (what, where), n in sorted(barriers.items()):
            if n > had_barriers[(what, where)]:
                effect = ("work-items that met at it would wait at different barriers" if what == "barrier" else
                          "work-items that shared its block would get different blocks")
                return Outcome("refuted", f"the {what} at {where} is duplicated: {n} copies where the input has "
                               f"{had_barriers[(what, where)]}; {effect}",
                               {"location": where, "copies": n, "before": had_barriers[(what, where)]})
    return None


# ----------------------------------------------------------------------------- 3. claims


def _reaches_itself(m: MutLam) -> bool:
    """Whether m's body reaches m through direct references (through other mutables' bodies)."""
    seen: set[int] = set()
    stack: list[Def] = [m.body] if m.body is not None else []
    while stack:
        d = stack.pop()
        if d is m:
            return True
        if d.gid in seen:
            continue
        seen.add(d.gid)
        if isinstance(d, MutLam):
            if d.body is not None:
                stack.append(d.body)
        elif not isinstance(d, Var):  # a parameter is no reference to its mutable
            stack.extend(d.ops)
    return False


def _holds_closure(t: Def) -> bool:
    """Whether values of type t hold a function or continuation (in a field or element)."""
    if isinstance(t, Pi):
        return True
    if isinstance(t, Sigma):
        return any(_holds_closure(f) for f in t.ops)
    if isinstance(t, Arr):
        return _holds_closure(t.body)
    return False


def _of_the_kind(world: World, d: Def, mode: str, recursive: dict[int, bool]) -> MutLam | None:
    """The callee when d is an application the phase's kind covers (see the module docstring)."""
    if not (isinstance(d, App) and isinstance(d.callee, MutLam)) or d.bvd != 0:
        return None
    f = d.callee
    if f.body is None:
        return None
    if f.gid not in recursive:
        recursive[f.gid] = _reaches_itself(f)
    if recursive[f.gid]:
        return None
    if mode == "beta":
        return None if world.is_cn(f.pi) else f
    if not world.is_cn(f.pi) or f.external or not _holds_closure(f.pi.dom):
        return None
    return f


def _claims(res: PhaseResult) -> Outcome | None:
    claim = res.claim(Inlining)
    mode, inlined, left = claim.mode, claim.inlined, claim.left
    if mode not in ("beta", "spec"):
        return Outcome("refuted", "the phase did not say what it inlined (no `mode` in its witness)")
    old_muts: dict[str, list[MutLam]] = {}
    for w in res.before.worlds():
        for d in walk(w):
            if isinstance(d, MutLam):
                old_muts.setdefault(mut_key(d), []).append(d)
    for key in sorted(inlined):
        rec = [m for m in old_muts.get(key, []) if _reaches_itself(m)]
        if rec:
            return Outcome("refuted", f"the phase inlined `{key}`, which is recursive in the input (a loop "
                           f"must stay a loop)", {"mutable": key, "location": _loc(rec[0])})
    everywhere = set(inlined) - set(left)
    recursive: dict[int, bool] = {}
    for w in res.after.worlds():
        for d in walk(w):
            if not (isinstance(d, App) and isinstance(d.callee, MutLam)):
                continue
            key = mut_key(d.callee)
            if key in everywhere:
                return Outcome("refuted", f"the phase claims to have inlined every application of `{key}`, "
                               f"but one remains at {_loc(d)}", {"application": show(d)[:300], "location": _loc(d)})
            f = _of_the_kind(w, d, mode, recursive)
            if f is not None and key not in left:
                return Outcome("refuted", f"an application of `{key}` is left at {_loc(d)} without a reason",
                               {"application": show(d)[:300], "location": _loc(d)})
    return None


# ----------------------------------------------------------------------------- 4. differential execution


def spec_inline(res: PhaseResult, ctx: SpecContext) -> Outcome:
    # The structural checks can fail on their own; then the output is compared with the input
    # β-reduced by the textbook substitution (smt.inline_proof): equal graphs, a proof for all
    # inputs. Where that reference does not apply, differential execution validates.
    for check in (lambda: _interface(res.before, res.after), lambda: _effects_correspond(res.before, res.after),
                  lambda: _claims(res)):
        failed = check()
        if failed is not None:
            return failed
    inlined, left = res.claim(Inlining).inlined, res.claim(Inlining).left
    what = ", ".join(f"{k} ×{n}" for k, n in sorted(inlined.items()))
    kept = "; left: " + ", ".join(f"{k} ({why})" for k, why in sorted(left.items())) if left else ""
    proved, shown = prove_inlining(res)
    if proved:
        return Outcome("proved", f"inlined {what}{kept}; {shown}")
    # (the argcs where the program's comparisons switch too: where the output differs from the
    # reference at a literal, a run with argc 1 and 2 alone may not reach the difference)
    out, runs = compare(res, hinted_argvs(res))
    if out is not None:
        return out
    # The equivalence rests on the executions only: shown for these inputs, not proved.
    return Outcome("validated", f"inlined {what}{kept}; interface and effects preserved; same execution "
                   f"before and after: {runs}; not proved: {shown}")


spec("compile.beta_red")(spec_inline)
spec("compile.lam_spec")(spec_inline)
