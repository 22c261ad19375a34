"""Race and barrier-divergence queries over two symbolic work-items (GPUVerify's reduction).

The paths of ONE generic work-item (`kernel_model`) are instantiated twice — work-item 1 and
work-item 2, each with its own ids and its own copy of every value it loaded — sharing the
kernel's arguments and the launch (`Launch`: the host's constraints on them). Asking Z3 for
two distinct work-items that conflict covers every pair of every group of every launch size
the constraints allow: if no two can, none of the n² can.

- A race: two accesses, at least one a write, to overlapping bytes of one object, that no
  barrier separates. Shared memory (3) is per group: only work-items of one group conflict,
  and only in the same barrier interval (equal epochs). Global memory (1) is one for the
  launch: work-items of different groups conflict whatever their epochs; of one group, only in
  the same interval. A write-write conflict in which both store the same value at the same
  bytes is benign (`W-BENIGN-RACE`); the harmful query excludes it, a second query finds it.
- Divergence: two work-items of one group whose paths reach different barrier sequences (other
  barrier nodes, or another number of them). A path cut by the unrolling bound or stopped by
  undefined behaviour only has a prefix: only a difference inside both sequences counts.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import z3

from verimim.smt import z3_typed as z3t
from verimim.smt.kernel_model import Access, KernelInputs, KernelPaths, KPath, int_value
from verimim.smt.solver import SpecContext

E = TypeVar("E", bound=z3.ExprRef)


@dataclass
class Launch:
    """What the host says about one launch: constraints on the kernel's argument variables and
    on the launch sizes (over main's inputs `host_vars`), and how to name objects."""

    n_groups: z3.BitVecRef | None  # None: the kernel's Idx size (any launch the type allows)
    n_items: z3.BitVecRef | None
    constraints: list[z3.BoolRef] = field(default_factory=list)
    host_vars: dict[str, z3.BitVecRef] = field(default_factory=dict)
    tied: bool = False  # every argument and size is a function of main's inputs
    # when main issues the launch is known (False: the host code is not modelled, and a fault
    # for some argc may be in a launch main never issues with that argc)
    reach_known: bool = True
    objects: dict[int, str] = field(default_factory=dict)  # object id → host allocation
    # the loads no store reaches, by the paths they were found in (untouched_loads)
    untouched: dict[int, frozenset[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkItem:
    group: z3.BitVecRef
    item: z3.BitVecRef
    subst: tuple[tuple[z3.ExprRef, z3.ExprRef], ...]
    # Each term is renamed once: a query pairs every access with every other one.
    _memo: dict[int, z3.ExprRef] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __call__(self, e: E) -> E:
        """e for this work-item: a term of e's sort."""
        if not self.subst:
            return e
        k = e.get_id()
        hit = self._memo.get(k)
        if hit is None:
            hit = self._memo[k] = z3.substitute(e, *self.subst)
        return cast(E, hit)


def work_item(kp: KernelPaths, k: int, paths: list[KPath]) -> WorkItem:
    inp = kp.inputs
    g = z3.BitVec(f"group{k}", inp.group.size())
    i = z3.BitVec(f"item{k}", inp.item.size())
    pairs: list[tuple[z3.ExprRef, z3.ExprRef]] = [(inp.group, g), (inp.item, i)]
    seen: set[int] = set()
    for p in paths:
        for v in p.fresh:
            if v.get_id() not in seen:
                seen.add(v.get_id())
                pairs.append((v, z3.Const(f"{v.decl().name()}@{k}", v.sort())))
    return WorkItem(g, i, tuple(pairs))


def launch_facts(inp: KernelInputs, launch: Launch, group: z3.BitVecRef, item: z3.BitVecRef) -> list[z3.BoolRef]:
    """What the launch says about one work-item's ids (group and item below the kernel's Idx
    sizes and the launch's sizes) and its arguments (the host's constraints)."""
    out: list[z3.BoolRef] = list(launch.constraints)
    for v, size, n in ((group, inp.group_size, launch.n_groups), (item, inp.item_size, launch.n_items)):
        if (1 << v.size()) > size:
            out.append(z3.ULT(v, size))
        if n is not None:
            out.append(z3.ULT(z3.ZeroExt(n.size() - v.size(), v), n) if n.size() >= v.size()
                       else z3.ULT(v, z3.Extract(v.size() - 1, 0, n)))
    return out


def _launch_facts(kp: KernelPaths, launch: Launch, wis: list[WorkItem], distinct: bool = True,
                  untouched: frozenset[int] = frozenset()) -> list[z3.BoolRef]:
    out: list[z3.BoolRef] = []
    for w in wis:
        out += launch_facts(kp.inputs, launch, w.group, w.item)
    a, b = wis
    if distinct:
        out.append(z3t.Or(a.group != b.group, a.item != b.item))
    return out + _read_only_facts(kp, wis, untouched)


def _read_only_facts(kp: KernelPaths, wis: list[WorkItem], untouched: frozenset[int]) -> list[z3.BoolRef]:
    """Global memory the launch never writes is the same for every work-item: a load no store
    can reach reads the launch's initial contents, one function of (object, offset) for all
    work-items (else two work-items could read different values from the same address, and a
    branch on a value every work-item loads alike would look divergent). A load reaches no store
    where `untouched` holds its value (`untouched_loads`: no work-item's store overlaps its bytes),
    or where no store of any path writes its object — sound only where the objects are the same
    for every work-item: a store whose object depends on the work-item (a pointer it loaded)
    could write anywhere, so then only `untouched` ties a load."""
    accesses = [a for a in kp.accesses() if a.space == 1]
    ids = {x.get_id() for w in wis for x, _ in w.subst}
    objects_known = not any(a.write and _mentions(a.obj, ids) for a in accesses)
    stores = list({a.obj.get_id(): a.obj for a in accesses if a.write}.values())
    out: list[z3.BoolRef] = []
    seen: set[int] = set()
    for a in accesses:
        if not _tiable_load(a, ids):
            continue
        v = cast(z3.BitVecRef, a.loaded[0])  # z3.is_bv (_tiable_load)
        if v.get_id() in seen or not (objects_known or v.get_id() in untouched):
            continue
        seen.add(v.get_id())
        init = z3.Function(f"global_init_{v.size()}", a.obj.sort(), a.off.sort(), v.sort())
        if v.get_id() in untouched:
            reached: z3.BoolRef = z3.BoolVal(True)
        else:
            reached = z3t.And(*[cast(z3.BoolRef, s != a.obj) for s in stores]) if stores else z3.BoolVal(True)
        for w in wis:
            out.append(z3.Implies(reached, w(v) == init(a.obj, w(a.off))))
    return out


def untouched_loads(kp: KernelPaths, launch: Launch, ctx: SpecContext, label: str) -> frozenset[int]:
    """The values (by id) of the global loads whose bytes no store of any work-item of the
    launch overlaps, in any interval (a cell the kernel only reads, of a buffer it writes
    elsewhere): each a Z3 query, unsat for none of them. Kept on the launch, per paths."""
    memo = launch.untouched.get(id(kp))
    if memo is not None:
        return memo
    accesses = [a for a in kp.accesses() if a.space == 1]
    stores = [a for a in accesses if a.write]
    w1, w2 = work_item(kp, 1, kp.paths), work_item(kp, 2, kp.paths)
    own = {x.get_id() for w in (w1, w2) for x, _ in w.subst}
    loads = [a for a in accesses if _tiable_load(a, own)]
    out: set[int] = set()
    if stores and loads:
        base = launch_facts(kp.inputs, launch, w1.group, w1.item) + launch_facts(kp.inputs, launch, w2.group, w2.item)
        for a in loads:
            # work-item 1 loads, work-item 2 (maybe the same one) stores over the loaded bytes
            reach = z3t.Or(*[z3t.And(w1(a.cond), w2(s.cond), _overlap(a, s, w1, w2)[0]) for s in stores])
            solver = ctx.solver()
            solver.add(*base, reach)
            if ctx.check(solver, f"{label}: a load no store reaches") == z3.unsat:
                out.add(a.loaded[0].get_id())
    launch.untouched[id(kp)] = frozenset(out)
    return launch.untouched[id(kp)]


def _tiable_load(a: Access, ids: set[int]) -> bool:
    """A load of one integer from an object the same for every work-item (not through a
    pointer the work-item loaded, whose variables `ids` name): one its initial contents can give."""
    return not a.write and len(a.loaded) == 1 and z3.is_bv(a.loaded[0]) and not _mentions(a.obj, ids)


def _mentions(e: z3.ExprRef, ids: set[int]) -> bool:
    """Whether e mentions one of the variables with these ids (a work-item's own)."""
    return any(v.get_id() in ids for v in z3t.free_vars(e))


@dataclass(frozen=True)
class Conflict:
    """One candidate: access a of work-item 1 against access b of work-item 2."""

    a: Access
    b: Access
    harmful: z3.BoolRef
    write_write: z3.BoolRef


def _overlap(a: Access, b: Access, w1: WorkItem, w2: WorkItem) -> tuple[z3.BoolRef, z3.BoolRef]:
    oa, ob = w1(a.off), w2(b.off)
    overlap = z3t.And(w1(a.obj) == w2(b.obj), z3.ULT(oa, ob + b.size), z3.ULT(ob, oa + a.size))
    if not (a.write and b.write):
        return overlap, z3.BoolVal(False)
    if bytes_compared(a, b):
        return z3t.And(overlap, z3t.Not(_same_shared_bytes(a, b, w1, w2))), overlap
    same = [oa == ob] if a.size == b.size and len(a.value) == len(b.value) else [z3.BoolVal(False)]
    for x, y in zip(a.value, b.value):
        same.append(cast(z3.BoolRef, w1(x) == w2(y)) if x.sort() == y.sort() else z3.BoolVal(False))
    return z3t.And(overlap, z3t.Not(z3t.And(*same))), overlap


# Two writes are compared byte by byte up to this many byte pairs (a 64-byte store against
# another); larger ones leaf by leaf at equal offsets, and a race so found is run (kernel_verify).
MAX_BYTE_PAIRS = 4096


def bytes_compared(a: Access, b: Access) -> bool:
    """Whether two writes' shared bytes are compared one by one (SEMANTICS.md: a write-write race
    storing the same bytes is benign): their bytes are known, no pointer among them (its bytes
    are the interpreter's encoding), and there are not too many pairs."""
    if a.data is None or b.data is None or len(a.data) * len(b.data) > MAX_BYTE_PAIRS:
        return False
    return not any(isinstance(x, tuple) for x in (*a.data, *b.data))


def _same_shared_bytes(a: Access, b: Access, w1: WorkItem, w2: WorkItem) -> z3.BoolRef:
    """Where the two writes overlap, they write the same bytes: for each distance k between their
    starts (b's at a's + k), a's byte i against b's byte i − k."""
    assert a.data is not None and b.data is not None
    oa, ob = w1(a.off), w2(b.off)
    cases = []
    for k in range(-(len(b.data) - 1), len(a.data)):
        pairs = [(a.data[i], b.data[i - k]) for i in range(max(0, k), min(len(a.data), len(b.data) + k))]
        same = [cast(z3.BoolRef, w1(x) == w2(y)) for x, y in pairs]
        cases.append(z3.Implies(ob == oa + z3.BitVecVal(k, oa.size()), z3t.And(*same)))
    return z3t.And(*cases)


def _pairs(kp: KernelPaths, diverging: bool) -> list[tuple[Access, Access, bool]]:
    """The access pairs to check, each once ((b, a) is (a, b) with the work-items' names
    swapped), and whether barrier intervals decide them. With `diverging` barriers they do not:
    once any two work-items of a group wait at different barriers none of the group goes on,
    and which pairs that stops depends on the input — only groups apart still conflict."""
    accs = kp.accesses()
    return [(a, b, not diverging) for i, a in enumerate(accs) for b in accs[i:]]


def conflicts(kp: KernelPaths, w1: WorkItem, w2: WorkItem, *, ignore_barriers: bool = False,
              same_group_only: bool = False, writes_only: bool = False,
              diverging: bool = False) -> list[Conflict]:
    """Every pair of accesses that may conflict; `diverging`: the barriers diverge (see
    `_pairs`). The other switches are the verifier's own wrong variants (tests show that each
    one misses a race the real check finds)."""
    out: list[Conflict] = []
    for a, b, aligned in _pairs(kp, diverging):
        if a.space != b.space or not (a.write or b.write):
            continue
        if writes_only and not (a.write and b.write):
            continue
        same_interval = ignore_barriers or a.epoch == b.epoch
        if not aligned:  # the barriers diverged before: only groups apart can conflict
            if a.space != 1:
                continue
            groups = w1.group != w2.group
        elif a.space == 3 or same_group_only:
            if not same_interval:
                continue
            groups = w1.group == w2.group
        else:  # global memory: no barrier orders work-items of different groups
            groups = z3.BoolVal(True) if same_interval else w1.group != w2.group
        harmful, ww = _overlap(a, b, w1, w2)
        pc = z3t.And(w1(a.cond), w2(b.cond))
        out.append(Conflict(a, b, z3t.And(pc, groups, harmful), z3t.And(pc, groups, ww)))
    return out


@dataclass
class Verdict:
    status: str  # proved | refuted | unknown
    detail: str = ""
    model: z3.ModelRef | None = None
    witness: Any = None  # the Conflict or the (p, q) pair found


MAX_ARGC_FOR_RUN = 64  # an argc whose fault check itself confirms by a run; its arguments written out
PREFERRED_ARGC = 16  # a counterexample's argc is this or less where one such shows the fault
# A larger argc is given by the shell (`yes a | head`), up to this: each argument takes 10 bytes
# of the kernel's ARG_MAX (2 MiB on Linux: "a", its NUL and its pointer), so 100,000 take 1 MB.
MAX_ARGC_FOR_COMMAND = 100_000


def run_command(file: str, argc: int | None) -> str | None:
    """The `verimim run` line that gives main this argc (schedule 0), where one can be given: the
    arguments written out up to MAX_ARGC_FOR_RUN, made by the shell beyond (a race only for
    argc = 300 is shown by a run with 299 arguments)."""
    if argc is None or not 1 <= argc <= MAX_ARGC_FOR_COMMAND:
        return None
    head = " ".join(shlex.quote(w) for w in ["verimim", "run", file])
    if argc > MAX_ARGC_FOR_RUN:
        return f"{head} $(yes a | head -n {argc - 1}) --schedule 0"
    return " ".join([head, *["a"] * (argc - 1), "--schedule", "0"])


def small_argc(argc: z3.BitVecRef | None) -> list[list[z3.BoolRef]]:
    """What a counterexample should rather satisfy, best first: an argc of at most 16, else one
    a `verimim run` line can still give (at most 64)."""
    if argc is None:
        return []
    return [[argc >= 1, argc <= PREFERRED_ARGC], [argc >= 1, argc <= MAX_ARGC_FOR_RUN]]


def model_preferring(ctx: SpecContext, s: z3.Solver, prefer: list[list[z3.BoolRef]], label: str) -> z3.ModelRef:
    """The model of a satisfiable `s`, one that also satisfies the first of `prefer` that one
    does (Z3's first answer may pick argc = 2^30 where argc = 1 shows the same race: no `run`
    to give)."""
    model = s.model()
    for tier in prefer:
        if all(z3.is_true(model.eval(p, model_completion=True)) for p in tier):
            return model
        s.push()
        s.add(*tier)
        found = ctx.check(s, f"{label} (a smaller counterexample)") == z3.sat
        if found:
            model = s.model()
        s.pop()
        if found:
            return model
    return model


def _solve(ctx: SpecContext, facts: list[z3.BoolRef], goal: z3.BoolRef, label: str,
           prefer: list[list[z3.BoolRef]] | None = None) -> tuple[str, z3.ModelRef | None]:
    s = ctx.solver()
    s.add(*facts, goal)
    r = ctx.check(s, label)
    if r == z3.sat:
        return "refuted", model_preferring(ctx, s, prefer or [], label)
    if r == z3.unsat:
        return "proved", None
    return "unknown", None


def check_races(kp: KernelPaths, launch: Launch, ctx: SpecContext, label: str,
                allow_same_item: bool = False, **variant: bool) -> tuple[Verdict, Verdict | None]:
    """The harmful-race verdict, and (when it is proved) a benign write-write race if one exists.
    `allow_same_item` and `variant` (see `conflicts`) are the verifier's wrong variants."""
    w1, w2 = work_item(kp, 1, kp.paths), work_item(kp, 2, kp.paths)
    facts = _launch_facts(kp, launch, [w1, w2], distinct=not allow_same_item,
                          untouched=untouched_loads(kp, launch, ctx, label))
    cands = conflicts(kp, w1, w2, **variant)
    if not cands:
        return Verdict("proved", "no two accesses of which one writes"), None
    prefer = small_argc(launch.host_vars.get("argc"))
    status, model = _solve(ctx, facts, z3t.Or(*(c.harmful for c in cands)), f"{label}: races", prefer)
    if status == "refuted":
        assert model is not None
        hit = next(c for c in cands if z3.is_true(model.eval(c.harmful, model_completion=True)))
        return Verdict("refuted", "", model, (hit, w1, w2)), None
    if status == "unknown":
        return Verdict("unknown", f"the solver gave no answer within {ctx.timeout_ms} ms"), None
    ww = [c for c in cands if not z3.is_false(z3.simplify(c.write_write))]
    if not ww:
        return Verdict("proved"), None
    b_status, b_model = _solve(ctx, facts, z3t.Or(*(c.write_write for c in ww)), f"{label}: benign races", prefer)
    if b_status == "refuted":
        assert b_model is not None
        hit = next(c for c in ww if z3.is_true(b_model.eval(c.write_write, model_completion=True)))
        return Verdict("proved"), Verdict("refuted", "", b_model, (hit, w1, w2))
    return Verdict("proved"), None


def _diverge(p: KPath, q: KPath) -> bool:
    a = [b.site.gid for b in p.barriers]
    b = [x.site.gid for x in q.barriers]
    n = min(len(a), len(b))
    if a[:n] != b[:n]:
        return True
    return len(a) != len(b) and p.status == "done" and q.status == "done"


def check_divergence(kp: KernelPaths, launch: Launch, ctx: SpecContext, label: str) -> Verdict:
    w1, w2 = work_item(kp, 1, kp.paths), work_item(kp, 2, kp.paths)
    facts = _launch_facts(kp, launch, [w1, w2], untouched=untouched_loads(kp, launch, ctx, label)) \
        + [cast(z3.BoolRef, w1.group == w2.group)]
    pairs = [(pi, qi) for pi, p in enumerate(kp.paths) for qi, q in enumerate(kp.paths) if pi < qi and _diverge(p, q)]
    if not pairs:
        return Verdict("proved", "every path reaches the same barriers")
    terms = [z3t.And(w1(kp.paths[p].condition), w2(kp.paths[q].condition)) for p, q in pairs]
    status, model = _solve(ctx, facts, z3t.Or(*terms), f"{label}: barrier divergence",
                           small_argc(launch.host_vars.get("argc")))
    if status == "refuted":
        assert model is not None
        hit = next(pq for pq, t in zip(pairs, terms) if z3.is_true(model.eval(t, model_completion=True)))
        return Verdict("refuted", "", model, (hit, w1, w2))
    if status == "unknown":
        return Verdict("unknown", f"the solver gave no answer within {ctx.timeout_ms} ms")
    return Verdict("proved")


def ids(model: z3.ModelRef, w: WorkItem) -> dict[str, int]:
    return {"group": int_value(model, w.group), "item": int_value(model, w.item)}
