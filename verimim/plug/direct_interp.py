"""Run-time semantics of the `direct` plugin: a function in continuation-passing style called in
direct style (`direct.cps2ds_dep (T, U) f x`).

The interpreter runs `f (x, k)` to its end on a thread of its own, where `k` is a continuation
that ends that thread: what `f` passes `k` is the call's value. Upstream's `direct.cps2ds` phase
gets the same by cutting the caller in two at the call (the rest becomes `k`); running the
call nested leaves the program as written, so every phase and its specification see it. Where
`f` jumps instead to the continuation that ends an enclosing thread (an outer function's
`return`, main's), the rest of the caller never runs, as after upstream's cut: the jump leaves
the nested runs for that thread (interp.machine.Escape). A jump to the `k` of a call that has
returned (re-entering the caller's rest) is E-UNSUPPORTED: that rest is no longer running.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from verimim.interp.values import Halt, RuntimeFault, Value
from verimim.ir.defs import App

if TYPE_CHECKING:
    from verimim.interp.machine import Machine, Thread


def cps2ds_dep(m: Machine, th: Thread, args: list[Value], node: App | None) -> Value:
    from verimim.interp.machine import Thread

    _types, f, x = args
    sub = Thread(f"{th.name}/cps2ds", th.device, th.group, th.item, th.launch)
    sub.halt = Halt()  # (a jump to an enclosing thread's own ends this call and the caller's block: Escape)
    sub.next = (f, (x, sub.halt))
    sub.jump = node
    if m.run_thread(sub) != "done":
        # a work-item's barrier needs the other work-items to run: a nested call cannot wait
        raise RuntimeFault("E-UNSUPPORTED", "a barrier inside a function called in direct style "
                           "(`direct.cps2ds`)", node.loc if node is not None else None)
    return sub.result


def register(m: Machine) -> None:
    m.register("direct.cps2ds_dep", 3, cps2ds_dep)
