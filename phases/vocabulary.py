"""Upstream MimIR's phase vocabulary (its `compile.mim`, and the phases of the plugins verimim
ships) and what verimim does with each name: run one of its own phases, or report the name
`skipped` with the reason. `compile.mim` is the source of truth for the names and their types;
this table only says how verimim treats them.

Passes (`compile.Pass`, bundled by `compile.passes` and run by `compile.pass2phase`) and
replacement phases (`compile.Repl`, `compile.repls`, `compile.repl2phase`) are read as the
sequence of their members: upstream runs a pass bundle interleaved until nothing changes; the
members verimim implements are phases that reach their own fixed point in one run.
"""
from __future__ import annotations

# Upstream names that are verimim phases under another name.
ALIASES: dict[str, str] = {
    "compile.cleanup_phase": "compile.cleanup",
    "compile.beta_red_phase": "compile.beta_red",
    "compile.beta_red_pass": "compile.beta_red",
    "compile.lam_spec_pass": "compile.lam_spec",
}

# Names that denote "do nothing": elided from the plan (running them is the identity).
NULLS = frozenset({"compile.null", "compile.null_phase", "compile.null_pass", "compile.null_repl"})

# Upstream phases and passes verimim does not implement, with what upstream does. Each is an
# optimisation or a normal-form rewrite that preserves the program's meaning, so leaving the
# program as it is stays correct; the phase is reported `skipped` with this reason.
_NOT_IMPLEMENTED: dict[str, str] = {
    "compile.branch_normalize_phase": "normalizes branches",
    "compile.eta_exp_phase": "η-expands continuations used as values",
    "compile.eta_red_phase": "η-reduces `λ x. f x` to `f`",
    "compile.eta_exp_pass": "η-expands continuations used as values",
    "compile.eta_red_pass": "η-reduces `λ x. f x` to `f`",
    "compile.ret_wrap_phase": "wraps each function's `return` continuation",
    "compile.sym_expr_opt": "optimizes symbolic expressions (value numbering)",
    "compile.scalarize_pass": "splits tuple parameters into scalars",
    "compile.tail_rec_elim_pass": "turns tail recursion into loops",
    "mem.add_mem_phase": "adds a memory token to functions without one (verimim's interpreter and "
                         "backends run such functions as they are)",
    "mem.remem_repl": "replaces `mem.remem` by its argument",
    "mem.ssa_pass": "promotes slots to SSA values",
    "mem.copy_prop_pass": "propagates copies through memory",
    "mem.reshape_pass": "reshapes arguments",
}


def not_implemented(annex: str) -> str | None:
    """Why a phase named in a pipeline does not run (None: verimim implements it)."""
    what = _NOT_IMPLEMENTED.get(annex)
    if what is not None:
        return f"not implemented in verimim (upstream: {what}); the program is left as it is"
    return None


def unknown_phase_reason(annex: str) -> str:
    return (f"`{annex}` is declared as a phase but verimim has no implementation of it; "
            f"the program is left as it is")


def is_known(annex: str) -> bool:
    """Whether a phase name (e.g. from the command line) means something to verimim: one of its
    phases, an upstream alias or null phase, or an upstream phase it reports skipped."""
    from verimim.phases.pipeline import PHASES

    return annex in PHASES or annex in ALIASES or annex in NULLS or annex in _NOT_IMPLEMENTED


def resolve(name: str) -> str:
    """A phase name as a user may type it: the full annex name, an upstream alias, or the name
    without its plugin (`remove_double_syncs`, as CLI.md's own example writes it) where exactly
    one of verimim's phases has it. Anything else comes back unchanged, for the caller to reject."""
    from verimim.phases.pipeline import PHASES

    if name in PHASES:
        return name
    if name in ALIASES:
        return ALIASES[name]
    matches = [p for p in PHASES if p.split(".", 1)[-1] == name]
    return matches[0] if len(matches) == 1 else name


def unknown_phase(name: str) -> str:
    """What to say of a name that is no phase: the nearest one, or the list of them."""
    import difflib

    from verimim.phases.pipeline import PHASES

    near = difflib.get_close_matches(name, list(PHASES), n=1)
    hint = f"did you mean `{near[0]}`?" if near else f"known: {', '.join(sorted(PHASES))}"
    return f"unknown phase `{name}`; {hint}"
