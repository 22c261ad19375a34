"""Run-time semantics of the `direct` plugin: a function in continuation-passing style called in
direct style (`direct.cps2ds_dep (T, U) f x`).

The interpreter runs `f (x, k)` to its end on a thread of its own, where `k` is a continuation
that ends that thread: what `f` passes `k` is the call's value. Upstream's `direct.cps2ds` phase
gets the same by cutting the caller in two at the call (the rest becomes `k`); running the
call nested leaves the program as written, so every phase and its specification see it.
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
    sub.next = (f, (x, Halt()))
    sub.jump = node
    if m.run_thread(sub) != "done":
        # a work-item's barrier needs the other work-items to run: a nested call cannot wait
        raise RuntimeFault("E-UNSUPPORTED", "a barrier inside a function called in direct style "
                           "(`direct.cps2ds`)", node.loc if node is not None else None)
    return sub.result


def register(m: Machine) -> None:
    m.register("direct.cps2ds_dep", 3, cps2ds_dep)
