"""Kernel shapes that keep state outside the loop's and join's parameters (issue 13, item 6):
where the kernel verifier's `proved` verdicts were once unsound, and where the inlining phases
once copied a helper with its shared slot into two sites. Drawn with `stateful_shapes`.

Each function extends a kernel under construction (`strategies._KernelGen`, passed as `kg`), as
the shapes of fuzz/shapes_kernel.py do, and counts a coverage feature:

    loop.slot_acc        a loop whose accumulator lives in a local slot (the loop passes only
                         the memory tokens and its counter; the body loads and stores it)
    loop.cont_carried    a loop carrying a continuation it switches on some iterations
                         `(after, adjust)#(i == j)`; the exit jumps to the one carried last
    branch.uneven_slot   a branch whose arms allocate different slots (local or shared), or
                         one arm one and the other none
    helper.shared_twice  a helper `con` with a shared slot and barriers, called from two sites in
                         sequence (its return continuation differs)
    store.value_guarded  a store to `out` whose cell depends on a loop's result, which the
                         generator computes (`value_guarded_store`); its `race` variant too
    branch.value_guarded the `divergence` defect's condition conjoined with such a test
    loop.past_bound      that loop runs past the kernel verifier's unrolling bound (its
                         summaries are used): the oracle takes `bounded` for a race after it
    launch.argc_guarded_race  a race only when argc is K, in a kernel the host launches under
                         `argc != K` (`strategies._HostGen.guarded_launch`: launch.argc_guarded)
    race.shared          the `race` defect on a shared slot instead of global memory (in
                         `strategies._KernelGen.inject`)
"""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from verimim.ir.defs import Def
from verimim.smt.kernel_eval import DEFAULT_LOOP_BOUND


def _mem_types(kg: Any) -> list[Def]:
    b = kg.b
    return [b.M1, b.M3, b.M5]


MASK32 = 2 ** 32 - 1


def _exact(init: Any) -> int | None:
    """The value of a pool value the generator knows exactly (its bounds meet), else None."""
    return init.lo if init.lo == init.hi else None


def _count(kg: Any, label: str, lo: int, long: bool) -> int:
    """A loop's trip count: a few, or (`long`, one time in three) past the kernel verifier's
    unrolling bound, where its paths are cut and its loop summaries are used."""
    if long and kg.draw(st.integers(0, 2), label=label + " past the bound") == 0:
        kg.b.features["loop.past_bound"] += 1
        return kg.draw(st.integers(DEFAULT_LOOP_BOUND + 1, DEFAULT_LOOP_BOUND + 4), label=label)
    return kg.draw(st.integers(lo, 4), label=label)


def loop_slot_accumulator(kg: Any, literal_init: bool = False) -> Any:
    """`acc` in a local slot across a counted loop:

        slot p; store p init; loop (m1, m3, m5, i: Nat) = (exit, body)#(i < n) (m1, m3, m5)
        body: a = load p; store p (a * 3 + i); loop (…, i + 1)      exit: r = load p
    """
    b, w, draw = kg.b, kg.b.w, kg.draw
    nat = w.nat()
    count = _count(kg, "slot loop count", 1, literal_init)
    init = kg.literal(32) if literal_init else kg.to32(kg.pick("slot loop init"))
    st_ = kg.state
    st_["m5"], p = b.slot(b.I32, 5, st_["m5"], kg.fresh_id())
    st_["m5"] = b.store(b.I32, 5, st_["m5"], p, init.d)
    loop, (l1, l3, l5, li) = kg.jump_to([("i", nat)], "loop")
    body, (b1, b3, b5) = kg.jump_to([], "body")
    exit_, (e1, e3, e5) = kg.jump_to([], "exit")
    kg.cur.body = w.app(loop, b.tup(*kg.mems(), w.lit_nat(0)))
    loop.body = b.branch(b.ap("core.ncmp.l", b.tup(li, w.lit_nat(count))), exit_, body, b.tup(l1, l3, l5))
    b5, a = b.load(b.I32, 5, b5, p)
    step = b.wrap("add", 32, 0, b.wrap("mul", 32, 0, a, w.lit_idx(2 ** 32, 3)), b.bitcast(nat, b.I32, li))
    b5 = b.store(b.I32, 5, b5, p, step)
    body.body = w.app(loop, b.tup(b1, b3, b5, b.nat("add", li, w.lit_nat(1))))
    kg.continue_in(exit_, [e1, e3, e5])
    kg.state["m5"], r = b.load(b.I32, 5, kg.state["m5"], p)
    b.features["loop.slot_acc"] += 1
    acc = _exact(init)
    if acc is not None:
        for i in range(count):
            acc = (acc * 3 + i) & MASK32
    return _add_exact(kg, r, acc, init.uniform)


def loop_carrying_continuation(kg: Any, literal_init: bool = False) -> Any:
    """A loop whose back edge passes a continuation chosen by the counter:

        loop (m1, m3, m5, i: Nat, acc: I32, k: Cn [M1, M3, M5, I32]) = (fin, body)#(i < n) (…)
        fin:  k (m1, m3, m5, acc)
        body: loop (…, i + 1, acc * 3 + i, (after, adjust)#(i == j))
        adjust (m1, m3, m5, r: I32) = after (m1, m3, m5, r + 7)
    """
    b, w, draw = kg.b, kg.b.w, kg.draw
    nat = w.nat()
    count = _count(kg, "carried loop count", 0, literal_init)
    switch_at = draw(st.integers(0, max(count, 4)), label="carried loop switch")
    init = kg.literal(32) if literal_init else kg.to32(kg.pick("carried loop init"))
    after, aps = kg.jump_to([("r", b.I32)], "after")
    adjust, (a1, a3, a5, ar) = kg.jump_to([("r", b.I32)], "adjust")
    adjust.body = w.app(after, b.tup(a1, a3, a5, b.wrap("add", 32, 0, ar, w.lit_idx(2 ** 32, 7))))
    kt = w.cn(w.sigma([*_mem_types(kg), b.I32]))
    loop, (l1, l3, l5, li, lacc, lk) = kg.jump_to([("i", nat), ("acc", b.I32), ("k", kt)], "loop")
    fin, (f1, f3, f5) = kg.jump_to([], "fin")
    body, (b1, b3, b5) = kg.jump_to([], "body")
    kg.cur.body = w.app(loop, b.tup(*kg.mems(), w.lit_nat(0), init.d, after))
    loop.body = b.branch(b.ap("core.ncmp.l", b.tup(li, w.lit_nat(count))), fin, body, b.tup(l1, l3, l5))
    fin.body = w.app(lk, b.tup(f1, f3, f5, lacc))
    step = b.wrap("add", 32, 0, b.wrap("mul", 32, 0, lacc, w.lit_idx(2 ** 32, 3)), b.bitcast(nat, b.I32, li))
    chosen = w.extract(w.tuple([after, adjust]), b.ap("core.ncmp.e", b.tup(li, w.lit_nat(switch_at))))
    body.body = w.app(loop, b.tup(b1, b3, b5, b.nat("add", li, w.lit_nat(1)), step, chosen))
    (r,) = kg.continue_in(after, aps)
    b.features["loop.cont_carried"] += 1
    acc = _exact(init)
    if acc is not None:
        for i in range(count):
            acc = (acc * 3 + i) & MASK32
        if count > 0 and count - 1 == switch_at:  # the last back edge carried `adjust`
            acc = (acc + 7) & MASK32
    return _add_exact(kg, r, acc, init.uniform)


def _add_exact(kg: Any, d: Def, exact: int | None, uniform: bool) -> Any:
    """Add d to the kernel's pool, with its exact value where the generator computed it."""
    lo, hi = (exact, exact) if exact is not None else (0, MASK32)
    kg.add_value(d, 32, lo, hi, uniform)
    return kg.pool[-1]


def _guard_loop(kg: Any) -> tuple[Def, int]:
    """A loop with state outside its parameters, started from a literal: (its result, the
    value the generator computed for it)."""
    shape = kg.draw(st.sampled_from(["slot", "carried"] if kg.f["carried_continuations"] else ["slot"]),
                    label="guard loop")
    made = (loop_slot_accumulator if shape == "slot" else loop_carrying_continuation)(kg, literal_init=True)
    exact = _exact(made)
    assert exact is not None  # a literal start: the loop's result is computed
    return made.d, exact


def value_guarded_condition(kg: Any, cond: Def) -> Def:
    """`cond` and `r == E` for a loop's result r that the generator knows is E: the same
    condition at run time (the `divergence` defect's barrier under it is reached as before),
    which a verifier modelling the loop wrongly sees as false (no barrier: divergence missed)."""
    b, w = kg.b, kg.b.w
    r, exact = _guard_loop(kg)
    same = b.icmp("e", 32, r, w.lit_idx(2 ** 32, exact))
    b.features["branch.value_guarded"] += 1
    return b.ap("core.bit2.and_", w.lit_nat(2), w.lit_nat(0), b.tup(cond, same))


def value_guarded_store(kg: Any, race: bool = False) -> None:
    """A store to `out` at a cell chosen by a value the generator knows exactly, computed by a
    loop with state outside its parameters (`E`, the loop's result, `r` at run time):

        out[(r == E) ? cell : 0] = item     (the `race` defect: `(r == E) ? 0 : cell`)

    The cell is the work-item's own unless the verifier's model of the loop is wrong: a model
    that does not know r is E sees writes of all work-items to cell 0 (a false race), and in
    the defect it misses the race that every run shows."""
    b, w = kg.b, kg.b.w
    r, exact = _guard_loop(kg)
    N = kg.N
    same = b.icmp("e", 32, r, w.lit_idx(2 ** 32, exact))
    zero = w.lit_idx(N, 0)
    # core.select (c, x, y) is x where c holds
    if_same, if_not = (zero, kg.cell) if race else (kg.cell, zero)
    idx = b.ap("core.select", w.idx_n(N), b.tup(same, if_same, if_not))
    p = b.lea(N, b.I32, 1, kg.argv["out"], idx)
    item = b.bitcast(w.nat(), b.I32, kg.gnat())
    kg.state["m1"] = b.store(b.I32, 1, kg.state["m1"], p, item)
    b.features["store.value_guarded"] += 1


def uneven_slot_branch(kg: Any) -> None:
    """A branch whose arms allocate different slots, or one arm a slot and the other none; both
    continue in `join (…, r: I32)`. Each slot is local or shared; a shared one is one block per
    group, whichever work-items reach it, and is written where that arm's work-items cannot
    collide: at the work-item's own cell, or at cell 0 in the arm of `item_id == c` (one
    work-item per group). Blocks of different slot operations are different on every path (a
    model numbering them per path makes the arms' blocks one: a false race)."""
    b, w, draw = kg.b, kg.b.w, kg.draw
    by_item = draw(st.booleans(), label="uneven slot by item")
    if by_item:
        c = draw(st.integers(0, kg.I - 1), label="uneven slot item")
        cond = b.icmp("e", 32, b.bitcast(w.idx_n(kg.I), b.I32, kg.iid), w.lit_idx(2 ** 32, c))
    else:
        x = kg.to32(kg.pick("uneven slot cond"))
        # a bound inside x's range where it is small (the work-item's index: the items split)
        bound = draw(st.integers(x.lo, x.hi) if x.hi - x.lo <= 40 else st.integers(0, 40), label="uneven slot bound")
        cond = b.icmp("ule", 32, x.d, w.lit_idx(2 ** 32, bound))
    t, (t1, t3, t5) = kg.jump_to([], "then")
    e, (e1, e3, e5) = kg.jump_to([], "else")
    join, jps = kg.jump_to([("r", b.I32)], "join")
    v = kg.to32(kg.pick("uneven slot value"))
    t3, t5, r = _slot_round(kg, t3, t5, v.d, cell0=by_item)
    t.body = w.app(join, b.tup(t1, t3, t5, b.wrap("add", 32, 0, r, w.lit_idx(2 ** 32, 1))))
    c2 = kg.to32(kg.pick("uneven slot else"))
    ev = b.wrap("mul", 32, 0, c2.d, w.lit_idx(2 ** 32, 2))
    if draw(st.booleans(), label="else arm slot"):
        e3, e5, ev = _slot_round(kg, e3, e5, ev, cell0=False)
    e.body = w.app(join, b.tup(e1, e3, e5, ev))
    kg.cur.body = b.branch(cond, e, t, b.tup(*kg.mems()))
    (jr,) = kg.continue_in(join, jps)
    b.features["branch.uneven_slot"] += 1
    kg.add_value(jr, 32, 0, 2 ** 32 - 1, False)


def _slot_round(kg: Any, m3: Def, m5: Def, v: Def, cell0: bool) -> tuple[Def, Def, Def]:
    """A fresh slot (shared, or local), v stored and loaded back: (m3, m5, the value loaded).
    A shared slot's cell is the work-item's own, or cell 0 (`cell0`: one work-item per group
    comes here)."""
    b, w = kg.b, kg.b.w
    if kg.f["shared"] and kg.draw(st.booleans(), label="uneven slot shared"):
        m3, p = b.slot(b.arr(kg.I, b.I32), 3, m3, kg.fresh_id())
        cell = b.lea(kg.I, b.I32, 3, p, w.lit_idx(kg.I, 0) if cell0 else kg.iid)
        m3 = b.store(b.I32, 3, m3, cell, v)
        m3, r = b.load(b.I32, 3, m3, cell)
        return m3, m5, r
    m5, p = b.slot(b.I32, 5, m5, kg.fresh_id())
    m5 = b.store(b.I32, 5, m5, p, v)
    m5, r = b.load(b.I32, 5, m5, p)
    return m3, m5, r


def helper_with_shared_slot(kg: Any) -> None:
    """A helper holding a shared slot, called from two sites with a barrier between them:

        con cell (m1, m3, m5, item: Idx I, v: I32, write: Bool, return: Cn [M1, M3, M5, I32]) =
            slot p (space 3); (get, put)#write (m1, m3, m5)
            where put: p[item] = v; return (…, v)      get: return (…, p[item + k])
        cell (…, item_id, v1, tt, first)
        first (…, r1) = barrier; cell (…, item_id, r1 + v2, write2, second)

    One slot operation is one block per group, whichever call reaches it: a second call that
    does not write reads what the first wrote. A copy of the helper per call site (what
    compile.lam_spec may do with a closed function called with literals) would read a block
    never written. The helper is closed (the work-item's index is a parameter) and holds no
    barrier, so that only its shared slot keeps it from being copied."""
    b, w, draw = kg.b, kg.b.w, kg.draw
    I = kg.I
    kt = w.cn(w.sigma([*_mem_types(kg), b.I32]))
    helper, (h1, h3, h5, hi, hv, hw, hret) = kg.jump_to(
        [("item", w.idx_n(I)), ("v", b.I32), ("write", w.bool_t()), ("return", kt)], "cell")
    h3, p = b.slot(b.arr(I, b.I32), 3, h3, kg.fresh_id())
    put, (p1, p3, p5) = kg.jump_to([], "put")
    get, (g1, g3, g5) = kg.jump_to([], "get")
    helper.body = b.branch(hw, get, put, b.tup(h1, h3, h5))
    put.body = w.app(hret, b.tup(p1, b.store(b.I32, 3, p3, b.lea(I, b.I32, 3, p, hi), hv), p5, hv))
    k = draw(st.integers(0, I - 1), label="cell neighbour")
    other = b.wrap("add", I.bit_length() - 1, 0, hi, w.lit_idx(I, k)) if I > 1 and k else hi
    g3, r = b.load(b.I32, 3, g3, b.lea(I, b.I32, 3, p, other))
    get.body = w.app(hret, b.tup(g1, g3, g5, r))
    v1 = kg.to32(kg.pick("cell first"))
    v2 = kg.to32(kg.pick("cell second"))
    write2 = draw(st.booleans(), label="cell writes again")
    first, (f1, f3, f5, r1) = kg.jump_to([("r", b.I32)], "first")
    second, sps = kg.jump_to([("r", b.I32)], "second")
    kg.cur.body = w.app(helper, b.tup(*kg.mems(), kg.iid, v1.d, w.lit_bool(True), first))
    s = b.ap("gpu.sync_work_items", b.tup(f1, f3))
    f1, f3 = b.x(s, 2, 0), b.x(s, 2, 1)
    first.body = w.app(helper, b.tup(f1, f3, f5, kg.iid, b.wrap("add", 32, 0, r1, v2.d), w.lit_bool(write2), second))
    (r2,) = kg.continue_in(second, sps)
    # a later write of the cells (the shape drawn again is another slot: no) or of anything
    # else needs no barrier; one keeps the rounds apart all the same
    kg.barrier()
    b.features["helper.shared_twice"] += 1
    kg.add_value(r1, 32, 0, 2 ** 32 - 1, False)
    kg.add_value(r2, 32, 0, 2 ** 32 - 1, False)


def argc_race(kg: Any) -> None:
    """A race only for one value K of the program's argc, which the host never launches the
    kernel with (`strategies._HostGen.guarded_launch`):

        (calm, racy)#(argc == K) (m1, m3, m5)    racy: out[0] = item (every work-item)
    """
    b, w = kg.b, kg.b.w
    if kg.defect is not None:
        # Its launch would be guarded by `argc != K`: run with argc = K (the program's
        # arguments may give it), the kernel's injected defect never runs, and the oracle
        # counted a missed defect (`fuzz --oracle kernels --seed 2027`: 1 of 697 programs).
        return
    if kg.argc_guard is None:  # one K per kernel: its launch is guarded once
        kg.argc_guard = kg.draw(st.integers(1, 4), label="argc guard")
    racy, (r1, r3, r5) = kg.jump_to([], "racy")
    calm, (c1, c3, c5) = kg.jump_to([], "calm")
    join, jps = kg.jump_to([], "join")
    cond = b.icmp("e", 32, kg.argv["argc"], w.lit_idx(2 ** 32, kg.argc_guard))
    kg.cur.body = b.branch(cond, calm, racy, b.tup(*kg.mems()))
    cell0 = b.lea(kg.N, b.I32, 1, kg.argv["out"], w.lit_idx(kg.N, 0))
    r1 = b.store(b.I32, 1, r1, cell0, b.bitcast(w.nat(), b.I32, kg.gnat()))
    racy.body = w.app(join, b.tup(r1, r3, r5))
    calm.body = w.app(join, b.tup(c1, c3, c5))
    kg.continue_in(join, jps)
    b.features["launch.argc_guarded_race"] += 1


def shared_race(kg: Any) -> None:
    """The `race` defect in shared memory: every work-item of a group writes its own id into
    cell 0 of a fresh shared slot, with no barrier between the writes (two or more items)."""
    b, w = kg.b, kg.b.w
    I = kg.I
    st_ = kg.state
    st_["m3"], p = b.slot(b.arr(I, b.I32), 3, st_["m3"], kg.fresh_id())
    cell = b.lea(I, b.I32, 3, p, w.lit_idx(I, 0))
    st_["m3"] = b.store(b.I32, 3, st_["m3"], cell, b.bitcast(w.idx_n(I), b.I32, kg.iid))
    b.features["race.shared"] += 1
