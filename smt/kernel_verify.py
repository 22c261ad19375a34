"""`verimim check`'s kernel verification: races and barrier divergence of every launched kernel.

For each `gpu.launch` of the host World the pipeline produced, the launched kernel of the
device World is explored for one generic work-item (`kernel_model`), the launch is read on the
host (`kernel_host`), and two symbolic work-items are asked to diverge or to race
(`kernel_queries`). The result is one `kernels` entry per launch (spec/CLI.md) and, for a
refutation, an `E-BARRIER-DIVERGENCE` / `E-RACE` error at one access with the other as related
(a benign write-write race is the warning `W-BENIGN-RACE`); conflicts between launches and
copies on different streams are `kernel_streams`' part.

Statuses are honest: `proved` only when every path was explored to its end and Z3 found no
pair; `bounded` when some path was cut by the unrolling bound, which bounds the depth of a
recursion as it bounds a loop (stated in `detail`); `unknown`
on a solver time-out or a construct the model does not encode (named).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

import z3

from verimim.diagnostics import LAUNCHED_HERE, Diagnostic, Loc, Related
from verimim.ir.defs import MutLam
from verimim.ir.world import World
from verimim.phases.base import Program
from verimim.interp.observe import Observation
from verimim.smt.kernel_confirm import DEFAULT_ARGCS, ShownFault, argc_hints, candidate_argcs, confirming_run
from verimim.smt.kernel_eval import DEFAULT_LOOP_BOUND, LoopReentry, Unsupported
from verimim.smt.kernel_host import LaunchSite, bind_from_paths, bind_launch, launch_sites
from verimim.smt.kernel_model import Access, KernelPaths, explore_kernel, int_value, signed
from verimim.smt.kernel_queries import (
    Conflict, Launch, Verdict, WorkItem, bytes_compared, check_divergence, check_races, ids, launch_facts,
    run_command,
)
from verimim.smt.kernel_streams import HostRun, check_streams, host_run, mentions_streams
from verimim.smt import z3_typed as z3t
from verimim.smt.solver import SpecContext

SPACE_NAMES = {1: "global", 3: "shared"}


@dataclass
class KernelReport:
    entries: list[dict[str, Any]]
    diagnostics: list[Diagnostic]


def verify_kernels(program: Program, ctx: SpecContext, file: str,
                   loop_bound: int = DEFAULT_LOOP_BOUND, earlier: list[Program] | None = None) -> KernelReport:
    """The `kernels` entries and diagnostics for every launch of the program (`earlier`: the
    program before the pipeline's phases, first to last, whose host's streams are checked too)."""
    out = KernelReport([], [])
    program = _split_for_verification(program)
    explored: dict[str, KernelPaths | str] = {}
    summarized: dict[str, KernelPaths | None] = {}
    by_site: dict[int, dict[str, Any]] = {}
    # The confirming runs of the program, by argc: one run answers every kernel and code.
    runs: dict[int, Observation] = {}
    device = program.device
    sites = launch_sites(program.host) if device is not None else []  # no device: no launch
    # main's paths, once: when each launch is issued (its reach), and the streams below
    main_run = host_run(program.host, ctx, loop_bound) if sites or mentions_streams(program.host) else None
    reach = main_run.launch_reach() if isinstance(main_run, HostRun) else None
    for site in sites:
        t0 = time.perf_counter()
        kernel = cast(World, device).externals.get(site.kernel)  # launch sites only with a device
        entry: dict[str, Any] = {"name": site.kernel, "launch": _loc_json(site.loc), "races": "unknown",
                                 "divergence": "unknown", "time_s": 0.0, "detail": "", "counterexample": None}
        if not isinstance(kernel, MutLam) or kernel.body is None:
            entry["detail"] = f"the kernel `{site.kernel}` has no body in the device World"
        else:
            if site.kernel not in explored:
                try:
                    explored[site.kernel] = explore_kernel(kernel, min(ctx.timeout_ms, 2_000), loop_bound,
                                                           world=program.device)
                except (Unsupported, z3.Z3Exception) as e:
                    explored[site.kernel] = f"not modelled: {e}"
            kp = explored[site.kernel]
            if isinstance(kp, str):
                entry["detail"] = kp
                _shown_unmodelled(kernel, site, program, file, entry, out.diagnostics, runs)
            else:
                if _bound_note(kp) and site.kernel not in summarized:
                    # Unrolling was cut: try loop invariants instead (used only for proofs).
                    summarized[site.kernel] = _explore_summarized(kernel, kp, min(ctx.timeout_ms, 2_000),
                                                                  loop_bound, program.device)
                issued = None if reach is None else reach.get(site.app.gid, z3.BoolVal(False))
                _verify_launch(kp, summarized.get(site.kernel), site, program, ctx, file, entry, out.diagnostics,
                               runs, issued, main_run if isinstance(main_run, HostRun) else None)
        entry["time_s"] = round(time.perf_counter() - t0, 4)
        out.entries.append(entry)
        by_site[site.app.gid] = entry
    # Streams race without any launch too (an `.asyn` copy pending while the host reads its
    # buffer, two copies on two streams): the streams are checked wherever the host uses them.
    if out.entries or mentions_streams(program.host):
        check_streams(program, ctx, file, {k: v for k, v in explored.items() if not isinstance(v, str)},
                      by_site, out.diagnostics, loop_bound, [p.host for p in earlier or []], main_run, runs,
                      summarized)
    return out


def _explore_summarized(kernel: MutLam, kp: KernelPaths, timeout_ms: int, loop_bound: int,
                        world: World | None) -> KernelPaths | None:
    """The kernel's paths with loops summarized by inductive invariants; None where that
    cannot be modelled. First only the loops whose headers the unrolling bound cut (in `kp`),
    the others unrolled; where that is cut again (the bound cut a recursive helper a loop
    calls, not the loop; or a loop after a summarized one runs "any" number of times), every
    loop is summarized."""
    only = _cut_loops(kp) or None
    try:
        summary = explore_kernel(kernel, timeout_ms, loop_bound, summarize_loops=True, world=world,
                                 summarize_only=only)
        if only is not None and _bound_note(summary):
            summary = explore_kernel(kernel, timeout_ms, loop_bound, summarize_loops=True, world=world)
        return summary
    except (Unsupported, LoopReentry, z3.Z3Exception):
        return None


def _cut_loops(kp: KernelPaths) -> frozenset[int]:
    return frozenset(p.cut_gid for p in kp.paths if p.status == "bound" and p.cut_gid is not None)


def _split_for_verification(program: Program) -> Program:
    """The program with its kernels in a device World: as it is when the pipeline split it, else
    split here by `gpu.split_apply` (a program's own pipeline need not split it, e.g.
    `compile.null`, and must not switch the race checks off). Unsplittable: as it is."""
    if program.device is not None or not launch_sites(program.host):
        return program
    from verimim.phases.split import SplitApply

    res = SplitApply().apply(program)
    return program if res.rejected or res.skipped or res.after.device is None else res.after


def _loc_json(loc: Loc | None) -> dict[str, int | None]:
    return {"line": loc.line if loc and loc.line else None, "col": loc.col if loc and loc.col else None}


def _bound_note(kp: KernelPaths) -> str:
    cut = sorted({p.cut_at for p in kp.paths if p.status == "bound"})
    calls = sorted({p.cut_at for p in kp.paths if p.status == "recursion"})
    if not cut and not calls:
        return ""
    where = []
    if cut:
        where.append(f"loops and recursive calls unrolled up to {kp.bound} entries of a continuation per path "
                     f"(cut in {', '.join(f'`{c}`' for c in cut)})")
    if calls:
        where.append(f"paths cut where {', '.join(f'`{c}`' for c in calls)} returns into an activation "
                     f"of a recursion the model does not resume")
    return f"bounded: {'; '.join(where)}; proved up to there only"


def _verify_launch(kp: KernelPaths, summary: KernelPaths | None, site: LaunchSite, program: Program,
                   ctx: SpecContext, file: str, entry: dict[str, Any], diags: list[Diagnostic],
                   runs: dict[int, Observation], issued: z3.BoolRef | None = None,
                   main_run: HostRun | None = None) -> None:
    """Verify one launch (`issued`: when main issues it, None where that is not known; `main_run`:
    main's paths, where modelled)."""
    launch, from_paths = _bind(program, site, kp, issued, main_run)
    label = f"kernel {site.kernel} at {site.loc}"
    bounded = _bound_note(kp)
    notes = [f"two symbolic work-items over {len(kp.paths)} path(s) of `{site.kernel}`"]
    narrowed = _explore_for_launch(kp, launch, ctx, program.device) if bounded else None
    if narrowed is not None:
        # (the kernel explored for every argument was cut; this launch's paths end)
        notes = [f"two symbolic work-items over {len(narrowed.paths)} path(s) of `{site.kernel}` that this "
                 f"launch's arguments and sizes allow (for every argument, {len(kp.paths)} paths were cut)"]
        kp, bounded = narrowed, ""
    if from_paths:
        notes.append(f"arguments and launch sizes as main computes them each time it issues the launch "
                     f"({from_paths} on its paths)")
    if not launch.tied:
        notes.append("some arguments or launch sizes are not known on the host: verified for every value")
    if not launch.reach_known:
        notes.append("when main issues the launch is not known: verified for every argc")
    div = check_divergence(kp, launch, ctx, label)
    if div.status == "refuted":
        # Diverging barriers leave barrier intervals undefined within a group (see
        # kernel_queries._pairs): only races between groups are still decided.
        races, benign = check_races(kp, launch, ctx, label, diverging=True)
        if races.status == "proved":
            races = Verdict("unknown", "races within a group not decided: the barriers diverge")
    else:
        races, benign = check_races(kp, launch, ctx, label)
    div, div_argc, div_shown = _confirmed(div, "E-BARRIER-DIVERGENCE", kp, launch, site, program, notes, runs)
    races, race_argc, race_shown = _confirmed(races, "E-RACE", kp, launch, site, program, notes, runs)
    if bounded or "unknown" in (div.status, races.status):
        # No proof for every input (loops cut, or undecided): a run may still show the fault, past
        # the bound (a race in iteration 37 of 40) or where Z3 gave up; it is then an error.
        div, div_argc, div_shown = _shown_past_proof((div, div_argc, div_shown), "E-BARRIER-DIVERGENCE",
                                                     bool(bounded), kp, site, program, notes, runs)
        races, race_argc, race_shown = _shown_past_proof((races, race_argc, race_shown), "E-RACE",
                                                         bool(bounded), kp, site, program, notes, runs)
    entry["divergence"] = _status(div, bounded)
    entry["races"] = _status(races, bounded)
    if bounded and summary is not None and not _bound_note(summary):
        # The cut paths found nothing: with the loops summarized by their invariants every
        # iteration is covered, and a proof there is a proof (a refutation may be spurious).
        s_launch = _bind(program, site, summary, issued, main_run)[0]
        used = []
        if entry["divergence"] == "bounded" and check_divergence(summary, s_launch, ctx, label + " (loop invariants)").status == "proved":
            entry["divergence"] = "proved"
            used.append("divergence")
        if entry["races"] == "bounded" and check_races(summary, s_launch, ctx, label + " (loop invariants)")[0].status == "proved":
            entry["races"] = "proved"
            used.append("races")
        if used:
            inv = "; ".join(f"`{k}`: {v}" for k, v in summary.invariants.items())
            notes.append(f"{' and '.join(used)} proved with loops summarized by inductive invariants ({inv})")
        if len(used) == 2:
            bounded = ""
    for v in (div, races):
        if v.detail and v.status != "proved":
            notes.append(v.detail)
    if bounded and "bounded" in (entry["divergence"], entry["races"]):
        notes.append(bounded)  # what the bounded verdict is proved up to (also beside a refutation)
    cex: dict[str, Any] | None = None
    if div.status == "refuted":
        cex, diag = (_shown_cex(div_shown, site, file) if div_shown is not None else
                     _divergence_cex(kp, launch, div, site, run_command(file, div_argc)))
        diags.append(diag)
    if races.status == "refuted":
        rcex, diag = (_shown_cex(race_shown, site, file) if race_shown is not None else
                      _race_cex(kp, launch, races, site, run_command(file, race_argc), "E-RACE"))
        diags.append(diag)
        cex = rcex if cex is None else {"divergence": cex, "race": rcex}
    if benign is not None and not launch.reach_known:
        # as a refutation (_confirmed): the argc it needs may be one main never launches with
        notes.append("a benign write-write race is possible for some argc, for which main may not issue "
                     "the launch (its host code is not modelled): not reported")
    elif benign is not None:
        _, diag = _race_cex(kp, launch, benign, site, None, "W-BENIGN-RACE")
        diags.append(diag)
        notes.append("a benign write-write race (the work-items that write the same bytes store the same value)")
    entry["detail"] = "; ".join(notes)
    entry["counterexample"] = cex


def _bind(program: Program, site: LaunchSite, kp: KernelPaths, issued: z3.BoolRef | None,
          main_run: HostRun | None) -> tuple[Launch, int]:
    """What the host says about the launch: read off its expression (`bind_launch`); where that
    leaves an argument or size untied (kept in a host cell, passed to a join's parameter, a
    host loop's counter), from main's paths when each of them computes it from argc
    (`bind_from_paths`). With how many launches main's paths issue there (0: read off the
    expression)."""
    launch = bind_launch(program.host, site, kp.inputs, issued)
    if launch.tied or main_run is None:
        return launch, 0
    values = main_run.launch_values(site.app.gid)
    from_paths = None if values is None else bind_from_paths(values, kp.inputs, main_run.argc)
    return (launch, 0) if from_paths is None else (from_paths, len(values or ()))


def _explore_for_launch(kp: KernelPaths, launch: Launch, ctx: SpecContext, world: World | None) -> KernelPaths | None:
    """The kernel's paths under what one launch says about its arguments and sizes (a barrier
    loop whose trip count the host bounds: `argc & 3`, a literal); None where the launch says
    nothing of them, or those paths are cut too. Valid for that launch alone."""
    said = {str(v) for c in launch.constraints for v in z3t.free_vars(c)}
    sizes = [n for n in (launch.n_groups, launch.n_items) if n is not None and not z3.is_bv_value(n)]
    if not said & set(kp.inputs.arg_names) and not sizes:
        return None
    try:
        paths = explore_kernel(kp.kernel, min(ctx.timeout_ms, 2_000), kp.bound, world=world,
                               assume=lambda inp: launch_facts(inp, launch, inp.group, inp.item))
    except (Unsupported, LoopReentry, z3.Z3Exception):
        return None
    return None if _bound_note(paths) else paths


def _status(v: Verdict, bounded: str) -> str:
    if v.status == "proved" and bounded:
        return "bounded"
    return v.status


# ------------------------------------------------------------------ counterexamples


def _first_unlike_byte(model: z3.ModelRef, a: Access, b: Access, w1: WorkItem, w2: WorkItem, oa: int, ob: int,
                       first: int) -> int:
    """The first byte two racing writes both write with different values (a harmful race's
    byte: the first shared one may hold the same value in both), else the first shared one."""
    assert a.data is not None and b.data is not None
    for p in range(max(oa, ob), min(oa + len(a.data), ob + len(b.data))):
        x = model.eval(w1(a.data[p - oa]), model_completion=True)
        y = model.eval(w2(b.data[p - ob]), model_completion=True)
        if not x.eq(y):
            return p
    return first


def _args(model: z3.ModelRef, kp: KernelPaths) -> dict[str, int]:
    return {n: signed(int_value(model, v), v.size()) for n, v in zip(kp.inputs.arg_names, kp.inputs.arg_vars)
            if not n.startswith(("obj_", "off_"))}


def _main_inputs(model: z3.ModelRef, launch: Launch) -> dict[str, int]:
    return {n: signed(int_value(model, v), v.size()) for n, v in launch.host_vars.items()}


def _access_json(model: z3.ModelRef, a: Access, w: WorkItem, launch: Launch, who: int) -> dict[str, Any]:
    obj = int_value(model, w(a.obj))
    return {"work_item": who, "kind": "write" if a.write else "read", "line": a.loc.line if a.loc else None,
            "col": a.loc.col if a.loc else None, "space": SPACE_NAMES.get(a.space, str(a.space)),
            "object": launch.objects.get(obj, a.label), "byte_offset": int_value(model, w(a.off)), "size": a.size,
            "value": [int_value(model, w(x)) for x in a.value] if a.write else None}


def _memory_free(terms: list[z3.ExprRef], kp: KernelPaths, launch: Launch) -> bool:
    """Whether the terms depend only on ids and on what the host ties to main's inputs (no
    loaded memory value, no unconstrained argument) and main is known to issue the launch for
    those inputs: then `run` with those inputs reproduces it."""
    if not launch.tied or not launch.reach_known:
        return False
    fresh = {str(v) for p in kp.paths for v in p.fresh}
    for t in terms:
        for v in z3t.free_vars(t):
            name = str(v).split("@")[0]
            if name in fresh:
                return False
    return True


def _model_argc(model: z3.ModelRef, launch: Launch) -> int:
    """main's argc in the model (1 where main takes none: `verimim run FILE` gives it that)."""
    argc = launch.host_vars.get("argc")
    return signed(int_value(model, argc), 32) if argc is not None else 1


def _cex_terms(v: Verdict, kp: KernelPaths) -> list[z3.ExprRef]:
    """What a refutation's fault depends on: the two paths' conditions, and for a race the
    two addresses and, for two writes, the values they store (a write-write race is harmful
    only where they differ: values loaded from memory the verifier leaves free may differ in
    the model and never in the program)."""
    if isinstance(v.witness[0], Conflict):
        hit, w1, w2 = v.witness
        values = [w1(x) for x in hit.a.value] + [w2(y) for y in hit.b.value] if hit.a.write and hit.b.write else []
        return [w1(hit.a.cond), w2(hit.b.cond), w1(hit.a.off), w2(hit.b.off), *values]
    (pi, qi), w1, w2 = v.witness
    return [w1(kp.paths[pi].condition), w2(kp.paths[qi].condition)]


def _unlike_writes(v: Verdict) -> bool:
    """A race of two writes whose bytes the query did not compare one by one (large, or holding
    pointers: kernel_queries.bytes_compared): it compared their leaves at equal offsets, so equal
    bytes on the overlap (a benign race) may look like a conflict. Only a run decides it."""
    if not isinstance(v.witness[0], Conflict):
        return False
    a, b = v.witness[0].a, v.witness[0].b
    return a.write and b.write and not bytes_compared(a, b)


def _confirmed(v: Verdict, code: str, kp: KernelPaths, launch: Launch, site: LaunchSite, program: Program,
               notes: list[str], runs: dict[int, Observation]) -> tuple[Verdict, int | None, ShownFault | None]:
    """The verdict; the argc a `verimim run` line shows its fault with (None: no line); the run
    that showed it where Z3's counterexample alone does not. A refutation over main's inputs
    alone stands, with its own argc. One that rests on memory contents or arguments the verifier
    leaves unconstrained stands only where a run shows the fault (smt.kernel_confirm), and then
    the run's fault is the counterexample (Z3's work-items and values may be ones the program
    never has); else it is `unknown`: it may be a fault the program never has."""
    if v.status != "refuted":
        return v, None, None
    assert v.model is not None
    argc = _model_argc(v.model, launch)
    if _memory_free(_cex_terms(v, kp), kp, launch) and not _unlike_writes(v):
        return v, argc, None
    what = "race" if code == "E-RACE" else "barrier divergence"
    tried = candidate_argcs(argc) if launch.tied else candidate_argcs(None, argc_hints(program.host))
    shown = confirming_run(program, code, kp, tried, runs, site.app)
    why = _why_not_alone(v, what, launch)
    if shown is not None:
        notes.append(f"{why}; a run with argc = {shown.argc} shows it")
        return v, shown.argc, shown
    argcs = ", ".join(str(n) for n in tried)
    return Verdict("unknown", f"{why}, and no run shows it (argc = {argcs}): not refuted, not proved"), None, None


def _why_not_alone(v: Verdict, what: str, launch: Launch) -> str:
    """Why Z3's counterexample alone does not show the fault (`_confirmed`)."""
    if _unlike_writes(v):
        return ("two writes of different shapes overlap (the proof compares their values whole, not "
                "the bytes they share)")
    if not launch.reach_known:
        return (f"a {what} is possible for some argc, for which main may not issue the launch (its host "
                "code is not modelled)")
    return f"a {what} is possible for some memory contents or arguments the verifier does not track"


def _shown_past_proof(confirmed: tuple[Verdict, int | None, ShownFault | None], code: str, bounded: bool,
                      kp: KernelPaths, site: LaunchSite, program: Program, notes: list[str],
                      runs: dict[int, Observation]
                      ) -> tuple[Verdict, int | None, ShownFault | None]:
    """A verdict that proves nothing for every input (`proved` only up to a loop bound, or
    `unknown`) against the runs `verimim run FILE` and `verimim run FILE a` make: a run that
    stops with the code inside this kernel shows the fault, which is then refuted with that run.
    Else the verdict stands (`confirmed`: the verdict, argc and run as _confirmed left them)."""
    v = confirmed[0]
    if not ((v.status == "proved" and bounded) or v.status == "unknown"):
        return confirmed
    shown = confirming_run(program, code, kp, DEFAULT_ARGCS, runs, site.app)
    if shown is None:
        return confirmed
    what = "race" if code == "E-RACE" else "barrier divergence"
    why = "past where the proof's paths were cut (a loop bound, a recursive call)" if v.status == "proved" \
        else "where the proof was not decided"
    notes.append(f"a {what} {why}: a run with argc = {shown.argc} shows it")
    return Verdict("refuted", f"a run with argc = {shown.argc} shows a {what} {why}"), shown.argc, shown


def _shown_unmodelled(kernel: MutLam, site: LaunchSite, program: Program, file: str, entry: dict[str, Any],
                      diags: list[Diagnostic], runs: dict[int, Observation]) -> None:
    """A kernel the model cannot explore is `unknown` for races and divergence; like any
    `unknown` (docs/kernels.md), it is checked against the runs `verimim run FILE` and `verimim
    run FILE a` make: a run that stops with E-BARRIER-DIVERGENCE or E-RACE inside this kernel
    refutes it, with that run as the counterexample."""
    cexs: dict[str, Any] = {}
    for key, code in (("divergence", "E-BARRIER-DIVERGENCE"), ("races", "E-RACE")):
        shown = confirming_run(program, code, kernel, DEFAULT_ARGCS, runs, site.app)
        if shown is None:
            continue
        cex, diag = _shown_cex(shown, site, file)
        diags.append(diag)
        cexs[key] = cex
        entry[key] = "refuted"
        what = "race" if code == "E-RACE" else "barrier divergence"
        entry["detail"] += f"; a run with argc = {shown.argc} shows a {what} the model could not decide"
    if cexs:
        entry["counterexample"] = next(iter(cexs.values())) if len(cexs) == 1 else \
            {"divergence": cexs["divergence"], "race": cexs["races"]}


def _shown_cex(shown: ShownFault, site: LaunchSite, file: str) -> tuple[dict[str, Any], Diagnostic]:
    """A refutation a run confirmed: the run's own fault, with the line that shows it."""
    f = shown.fault
    cex: dict[str, Any] = {"main_inputs": {"argc": shown.argc}, "run": run_command(file, shown.argc),
                           "shown_by_run": {"code": f.code, "message": f.message, **_loc_json(f.loc)}}
    msg = f"in kernel `{site.kernel}`, a run with argc = {shown.argc} shows: {f.message}"
    # (the run's fault names its launch already: the one confirming_run matched with this site)
    related = f.related if any(r.message == LAUNCHED_HERE for r in f.related) else \
        (*f.related, Related(LAUNCHED_HERE, site.loc))  # type: ignore[arg-type]
    return cex, Diagnostic(f.code, msg, f.loc or site.loc, "error", related)


def _race_cex(kp: KernelPaths, launch: Launch, v: Verdict, site: LaunchSite, run: str | None,
              code: str) -> tuple[dict[str, Any], Diagnostic]:
    assert v.model is not None
    model = v.model
    hit, w1, w2 = v.witness
    assert isinstance(hit, Conflict)
    a, b = hit.a, hit.b
    acc = [_access_json(model, a, w1, launch, 1), _access_json(model, b, w2, launch, 2)]
    wis = [ids(model, w1), ids(model, w2)]
    # the first byte both accesses touch (they overlap: a halfword written at 6 and a word read
    # at 4 share bytes 6 and 7, not 4)
    byte = max(x["byte_offset"] for x in acc)
    if code == "E-RACE" and a.write and b.write and bytes_compared(a, b):
        byte = _first_unlike_byte(model, a, b, w1, w2, acc[0]["byte_offset"], acc[1]["byte_offset"], byte)
    cex: dict[str, Any] = {"work_items": wis, "kernel_args": _args(model, kp), "main_inputs": _main_inputs(model, launch),
                           "accesses": acc, "address": {"space": acc[0]["space"], "object": acc[0]["object"],
                                                        "byte_offset": byte}}
    cex["run"] = run
    who = lambda k: f"work-item {wis[k]['item']} of group {wis[k]['group']}"  # noqa: E731
    what = lambda x: "writes" if x["kind"] == "write" else "reads"  # noqa: E731
    where = f"byte {byte} of {acc[0]['object']} ({acc[0]['space']} memory)"
    if code == "W-BENIGN-RACE":
        # (the input that makes it: such a race may need an argc `run` with no arguments never has)
        inputs = ", ".join(f"{k} = {v}" for k, v in cex["main_inputs"].items())
        msg = (f"benign write-write race in kernel `{site.kernel}`: {who(0)} and {who(1)} both write "
               f"the same value to {where}" + (f" (for example with {inputs})" if inputs else ""))
        sev = "warning"
    else:
        # a barrier orders the work-items of one group only: two groups' accesses are never
        # "in one barrier interval", whatever their barrier counts
        other_group = wis[0]["group"] != wis[1]["group"]
        sep = ("(no barrier orders the work-items of different groups)" if other_group
               else "in the same barrier interval" if a.epoch == b.epoch else "with no barrier between them")
        msg = (f"data race in kernel `{site.kernel}`: {who(0)} {what(acc[0])} {where}, which {who(1)} "
               f"{what(acc[1])} {sep}")
        sev = "error"
    related = (Related(f"the other access ({who(1)} {what(acc[1])})", b.loc), Related(LAUNCHED_HERE, site.loc))
    return cex, Diagnostic(code, msg, a.loc or site.loc, sev, related)  # type: ignore[arg-type]


def _divergence_cex(kp: KernelPaths, launch: Launch, v: Verdict, site: LaunchSite,
                    run: str | None) -> tuple[dict[str, Any], Diagnostic]:
    assert v.model is not None
    model = v.model
    (pi, qi), w1, w2 = v.witness
    p, q = kp.paths[pi], kp.paths[qi]
    wis = [ids(model, w1), ids(model, w2)]
    seqs = [[{"line": b.loc.line if b.loc else None, "col": b.loc.col if b.loc else None} for b in x.barriers]
            for x in (p, q)]
    cex: dict[str, Any] = {"work_items": wis, "kernel_args": _args(model, kp), "main_inputs": _main_inputs(model, launch),
                           "barriers": seqs}
    cex["run"] = run
    # where the two sequences part: the first place they reach different barriers (or one stops)
    k = next((j for j in range(max(len(p.barriers), len(q.barriers)))
              if j >= len(p.barriers) or j >= len(q.barriers) or p.barriers[j].site is not q.barriers[j].site), 0)
    first = p if k < len(p.barriers) else q
    other = q if first is p else p
    w_first, w_other = (wis[0], wis[1]) if first is p else (wis[1], wis[0])
    bar = first.barriers[k] if k < len(first.barriers) else None
    def barriers(x: Any) -> str:
        """A work-item's barriers: how many, and where (two sequences of one length differ in a place)."""
        places = ", ".join(f"{b.loc.line}:{b.loc.col}" if b.loc else "?" for b in x.barriers[:4])
        more = ", …" if len(x.barriers) > 4 else ""
        return f"{len(x.barriers)} barrier{'' if len(x.barriers) == 1 else 's'}" + (f" at {places}{more}" if places else "")

    msg = (f"barrier divergence in kernel `{site.kernel}`: work-items {w_first['item']} and {w_other['item']} of "
           f"group {w_first['group']} reach different barriers (work-item {w_first['item']}: {barriers(first)}; "
           f"work-item {w_other['item']}: {barriers(other)})")
    obar = other.barriers[k] if k < len(other.barriers) else None
    related = (Related(f"work-item {w_other['item']} " + ("waits here" if obar else "returns here without reaching it"),
                       obar.loc if obar else other.end), Related(LAUNCHED_HERE, site.loc))
    loc = bar.loc if bar is not None else site.loc
    return cex, Diagnostic("E-BARRIER-DIVERGENCE", msg, loc, "error", related)
