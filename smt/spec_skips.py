"""A phase that says it had nothing to do must show there was nothing (issue 11, item 5).

A skipped phase leaves the program as it was, and its claim is checked against the program
itself — never by the phase's own helpers: `lower_btensor_map_reduce` skips only a program that
is split, uses no `btensor` operation or already opens a GPU session; `lower_ptr` only a program
without buffer operations; `split_apply` only a program that is split or launches no kernel;
`beta_red` / `lam_spec` only when every application of their kind in the input is one the witness
lists as left, with its reason. A false claim is `refuted` (E-SPEC), as any other violation.
"""
from __future__ import annotations

from collections.abc import Callable

from verimim.ir.defs import App, Axiom
from verimim.phases.base import PhaseResult, Program, walk
from verimim.smt.sides import side_view
from verimim.smt.solver import Outcome

SkipClaim = Callable[[PhaseResult], "str | None"]  # None: the claim holds; else what refutes it
CLAIMS: dict[str, SkipClaim] = {}


def claim(name: str) -> Callable[[SkipClaim], SkipClaim]:
    def reg(fn: SkipClaim) -> SkipClaim:
        CLAIMS[name] = fn
        return fn
    return reg


def _axioms(prog: Program, pred: Callable[[str], bool]) -> list[Axiom]:
    return [d for w in prog.worlds() for d in walk(w) if isinstance(d, Axiom) and pred(d.annex)]


def _applied(prog: Program, annex: str) -> bool:
    return any(isinstance(d, App) and isinstance(d.head, Axiom) and d.head.annex == annex
               for w in prog.worlds() for d in walk(w))


@claim("gpu.lower_btensor_map_reduce")
def _btensor(res: PhaseResult) -> str | None:
    p = res.before
    if p.device is not None or not _axioms(p, lambda a: a.startswith("btensor.")):
        return None
    if _axioms(p, lambda a: a in ("gpu.init", "gpu.auto_init")):
        return None
    return "the program uses btensor operations, opens no GPU session of its own and is not split"


@claim("buffer.lower_ptr")
def _buffers(res: PhaseResult) -> str | None:
    # (`buffer.ptr_copy` is on pointers: what the phase makes of `buffer.copy`)
    left = _axioms(res.before, lambda a: (a.startswith("buffer.") and a != "buffer.ptr_copy")
                   or a in ("gpu.buf_alloc_copy", "gpu.buf_copy_to_host"))
    return f"the program uses `{left[0].annex}`" if left else None


@claim("gpu.split_apply")
def _split(res: PhaseResult) -> str | None:
    if res.before.device is not None or not _applied(res.before, "gpu.launch"):
        return None
    return "the program launches a kernel (`gpu.launch`) and is not split"


def _inline(res: PhaseResult) -> str | None:
    from verimim.smt.spec_inline import _claims

    out = _claims(res)  # on a skip, `after` is the input: every candidate must be left, with why
    return out.detail if out is not None else None


claim("compile.beta_red")(_inline)
claim("compile.lam_spec")(_inline)


def check_skip(res: PhaseResult) -> Outcome:
    """`skipped` with the reason when the claim holds (said so in the detail), else `refuted`."""
    assert res.skipped is not None
    if res.after.host is not res.before.host or res.after.device is not res.before.device:
        return Outcome("refuted", f"the phase says it skipped ({res.skipped}) but changed the program")
    fn = CLAIMS.get(res.name)
    if fn is None:
        return Outcome("skipped", res.skipped)
    why = fn(side_view(res))  # on one side of a split program: what that side holds (smt.sides)
    if why is not None:
        return Outcome("refuted", f"the phase says it had nothing to do ({res.skipped}), but {why}")
    return Outcome("skipped", f"{res.skipped} (checked)")
