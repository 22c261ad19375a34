"""Control-flow shapes of upstream's programs, generated inside kernels (issue 10, item 7).

Each function extends a kernel under construction (`strategies._KernelGen`, passed as `kg`):
it ends the current block with the shape and continues in the block after it, adding the
values it computed to the kernel's pool so that they flow into the output. Every shape counts a
coverage feature (`GeneratedProgram.features_used`, the fuzz JSON's `coverage`):

    branch.cont_param    a `con` taking `k: Cn T` branches `(other, k)#cond`
    branch.return_param  the kernel's own `return` is a branch target
    branch.lam_target    `lam`s (λs over the memory tokens) as branch targets, capturing values
    cont.curried         a curried continuation `con join (c: I32) (m1, m3, m5, r: I32)`
    rec.mutual           two continuations calling each other in tail position (an `and`
                         group when printed), bounded by a counter
"""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from verimim.ir.defs import App, Def, Extract


def _mem_types(kg: Any) -> list[Def]:
    b = kg.b
    return [b.M1, b.M3, b.M5]


def count_branch(b: Any, feature: str, body: Def) -> None:
    """Count a branch shape only where the branch survived: a condition the normalizer folds
    to a literal picks one target, and the shape is then not in the program."""
    if isinstance(body, App) and isinstance(body.callee, Extract):
        b.features[feature] += 1


def cont_param_branch(kg: Any) -> None:
    """`con choose (m1, m3, m5, x: I32, k: Cn [.., I32]) = (other, k)#(x < lit) (.., x + 1)`,
    `other` (nested: it calls `k`) doubling its argument before it continues in `k`. The
    caller passes the block after it as `k`."""
    b, w, draw = kg.b, kg.b.w, kg.draw
    x = kg.to32(kg.pick("cont value"))
    kt = w.cn(w.sigma([*_mem_types(kg), b.I32]))
    choose, (c1, c3, c5, cx, ck) = b.con("choose", [("m1", b.M1), ("m3", b.M3), ("m5", b.M5),
                                                    ("x", b.I32), ("k", kt)])
    other, (o1, o3, o5, oy) = kg.jump_to([("y", b.I32)], "other")
    other.body = w.app(ck, b.tup(o1, o3, o5, b.wrap("mul", 32, 0, oy, w.lit_idx(2 ** 32, 2))))
    bound = draw(st.integers(0, 40), label="cont bound")
    cond = b.icmp("ul", 32, cx, w.lit_idx(2 ** 32, bound))
    arg = b.tup(c1, c3, c5, b.wrap("add", 32, 0, cx, w.lit_idx(2 ** 32, 1)))
    choose.body = w.app(w.extract(w.tuple([other, ck]), cond), arg)
    join, jps = kg.jump_to([("r", b.I32)], "join")
    kg.cur.body = w.app(choose, b.tup(*kg.mems(), x.d, join))
    (r,) = kg.continue_in(join, jps)
    b.features["branch.cont_param"] += 1
    kg.add_value(r, 32, 0, 2 ** 32 - 1, x.uniform)


def return_param_branch(kg: Any, ret: Def, mems: list[Def]) -> Def:
    """The kernel's last jump as a branch whose targets are `return` itself and a block that
    stores into a local slot before it returns: `(finish, return)#cond (m1, m3, m4, m5)`.
    Returns the body that replaces `return (m1, m3, m4, m5)`."""
    b, w = kg.b, kg.b.w
    v = kg.to32(kg.pick("return branch value"))
    bound = kg.draw(st.integers(0, 40), label="return branch bound")
    finish, (f1, f3, f4, f5) = b.con("finish", [("m1", b.M1), ("m3", b.M3), ("m4", b.M4), ("m5", b.M5)])
    f5, p = b.slot(b.I32, 5, f5, kg.fresh_id())
    f5 = b.store(b.I32, 5, f5, p, v.d)
    finish.body = w.app(ret, b.tup(f1, f3, f4, f5))
    cond = b.icmp("ule", 32, v.d, w.lit_idx(2 ** 32, bound))
    body = w.app(w.extract(w.tuple([finish, ret]), cond), b.tup(*mems))
    count_branch(b, "branch.return_param", body)
    return body


class LamTarget:
    """A branch target written as upstream's gpu tests write it: a `lam` (an immutable λ, as
    the frontend elaborates a non-recursive `lam`) over the memory tokens, capturing the values
    its body uses. Build the body from `fields`, then `close(body)` gives the λ; the caller
    counts the shape (`count_branch`) once the branch is built."""

    def __init__(self, kg: Any, name: str) -> None:
        b, w = kg.b, kg.b.w
        self.w, self.name = w, name
        self.dom = w.sigma(_mem_types(kg))
        self.param = w.param(self.dom, name)
        self.fields = [b.x(self.param, 3, i) for i in range(3)]

    def close(self, body: Def) -> Def:
        w = self.w
        return w.lam(w.cn(self.dom), w.abstract(body, self.param), self.name)


def curried_join(kg: Any) -> tuple[Def, Def]:
    """A join point curried over a captured I32: `con join (c: I32) (m1, m3, m5, r: I32)`.
    Returns (the outer `lam`, its parameter `c`); the caller jumps to `join c' (…, r)` and
    continues in the inner block (`kg.continue_in`, done here)."""
    b, w = kg.b, kg.b.w
    inner_t = w.cn(w.sigma([*_mem_types(kg), b.I32]))
    outer = w.mut_lam(w.pi(b.I32, w.shift(inner_t, 1)), "join", "lam")
    outer.param_names = ("c",)
    inner, ips = kg.jump_to([("r", b.I32)], "join_body")
    outer.body = inner
    (r,) = kg.continue_in(inner, ips)
    b.features["cont.curried"] += 1
    c = w.var(outer)
    kg.add_value(r, 32, 0, 2 ** 32 - 1, False)
    kg.add_value(c, 32, 0, 2 ** 32 - 1, False)
    return outer, c


def mutual_recursion(kg: Any) -> None:
    """`ping` and `pong` call each other in tail position until a counter reaches a bound:

        con ping (m1, m3, m5, i: Nat, acc: I32) = (exit, go)#(i < n) (m1, m3, m5, acc)
            where con go (m1, m3, m5, acc: I32) = pong (m1, m3, m5, i + 1, acc * 3 + i) end
        and con pong (m1, m3, m5, j: Nat, acc: I32) = ping (m1, m3, m5, j, acc + 5)
    """
    b, w, draw = kg.b, kg.b.w, kg.draw
    nat = w.nat()
    count = draw(st.integers(0, 4), label="mutual recursion count")
    init = kg.to32(kg.pick("mutual init"))
    step = draw(st.integers(0, 9), label="mutual step")
    ping, (p1, p3, p5, pi_, pacc) = kg.jump_to([("i", nat), ("acc", b.I32)], "ping")
    pong, (q1, q3, q5, qj, qacc) = kg.jump_to([("j", nat), ("acc", b.I32)], "pong")
    go, (g1, g3, g5, gacc) = kg.jump_to([("acc", b.I32)], "go")
    exit_, eps = kg.jump_to([("acc", b.I32)], "exit")
    kg.cur.body = w.app(ping, b.tup(*kg.mems(), w.lit_nat(0), init.d))
    ping.body = b.branch(b.ap("core.ncmp.l", b.tup(pi_, w.lit_nat(count))), exit_, go, b.tup(p1, p3, p5, pacc))
    nxt = b.wrap("add", 32, 0, b.wrap("mul", 32, 0, gacc, w.lit_idx(2 ** 32, 3)), b.bitcast(nat, b.I32, pi_))
    go.body = w.app(pong, b.tup(g1, g3, g5, b.nat("add", pi_, w.lit_nat(1)), nxt))
    pong.body = w.app(ping, b.tup(q1, q3, q5, qj, b.wrap("add", 32, 0, qacc, w.lit_idx(2 ** 32, step))))
    (acc,) = kg.continue_in(exit_, eps)
    b.features["rec.mutual"] += 1
    kg.add_value(acc, 32, 0, 2 ** 32 - 1, init.uniform)
