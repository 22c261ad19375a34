"""Pipelines written in Mim: a program's own `_compile`, and sub-pipeline overrides.

A program chooses its pipeline by defining `_compile: [] → compile.Phase` (upstream MimIR's
convention); it may replace the sub-pipelines that `gpu.split_apply` runs by defining
`host_specific_phases` / `device_specific_phases` (`[] → compile.Phase`) at top level. The same
three names may come from a separate Mim file (`--pipeline FILE.mim`). A `compile.Phase` value
is read into a `Steps` tree: phase names, and `compile.phases tt (…)` groups that repeat until
nothing changes. `compile.named "a.b"` names a phase whose plugin need not be imported (elided
when it is not loaded); `compile.cond "plugin" p` is p when that plugin is loaded, else nothing.
Upstream's vocabulary (`compile.cleanup_phase`, `compile.pass2phase (compile.passes (…))`,
`compile.prefix_cleanup_phase "internal_"`, …) is read by the table of verimim.phases.vocabulary:
a name verimim implements becomes its phase, any other declared phase a `Skip` step that the
runner reports `skipped` with the reason.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from verimim.diagnostics import Loc, VerimimError
from verimim.ir.defs import App, Axiom, Def, Lam, Lit, MutLam, Pack, Pi, Tuple
from verimim.ir.world import World
from verimim.plug.compile import plugin_loaded, string_literal

MAX_FIXPOINT_ROUNDS = 8


@dataclass(frozen=True)
class Fixpoint:
    """`compile.phases tt (…)`: run the steps until a round changes nothing."""

    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Skip:
    """A phase the pipeline names that verimim does not run (reported `skipped`, with why)."""

    name: str
    reason: str


@dataclass(frozen=True)
class PrefixCleanup:
    """`compile.prefix_cleanup_phase "p"`: the externals named `p…` become internal, then dead
    code is removed (upstream's `internal_cleanup_phase` is the prefix `internal_`)."""

    prefix: str
    loc: Loc | None = field(default=None, compare=False)  # where the pipeline names it


Step = str | Fixpoint | Skip | PrefixCleanup


@dataclass
class PipelineSpec:
    """What a program (or a pipeline file) says about its pipeline; None: the default."""

    main: list[Step] | None = None
    host: list[Step] | None = None
    device: list[Step] | None = None
    source: dict[str, str] = field(default_factory=dict)  # which definition each came from


def steps_of(world: World, d: Def, what: str, at: Loc | None = None, program: World | None = None) -> list[Step]:
    """The steps a `compile.Phase`-valued definition denotes (a `[] → Phase` is applied). An
    error points at the definition where the node at fault has no place of its own in the same
    file (a literal is one node wherever it is written: its place is its first occurrence's,
    perhaps in a plugin; an application made here has none). `program`: the World the pipeline
    is for, where it is not `world` (a --pipeline file): its plugins decide `compile.named` and
    `compile.cond`, as the program's own pipeline would be decided."""
    try:
        return _placed(_steps_of(world, d, what, program or world), at or d.loc)
    except VerimimError as e:
        raise _here_if_elsewhere(e, at or d.loc) from None


def _here_if_elsewhere(e: VerimimError, here: Loc | None) -> VerimimError:
    """The error placed at `here` where its own place is in another file (a plugin's) or none."""
    if here is None or (e.loc is not None and e.loc.file == here.file):
        return e
    return dataclasses.replace(e, loc=here)


def _placed(steps: list[Step], here: Loc | None) -> list[Step]:
    """The steps, a prefix cleanup written in another file (a plugin's `internal_cleanup_phase`)
    placed at the definition that names it."""
    out: list[Step] = []
    for s in steps:
        if isinstance(s, Fixpoint):
            s = Fixpoint(tuple(_placed(list(s.steps), here)))
        elif isinstance(s, PrefixCleanup) and (s.loc is None or here is None or s.loc.file != here.file):
            s = PrefixCleanup(s.prefix, here)
        out.append(s)
    return out


def _steps_of(world: World, d: Def, what: str, program: World, named: tuple[str, ...] = ()) -> list[Step]:
    if isinstance(d, (Lam, MutLam)) and not world.is_cn(d.pi) and d.pi.dom is not world.unit_t():
        # (the unit was passed for the parameter, and a flag that read it became ff)
        raise VerimimError("E-TYPE", f"{what}: a pipeline takes no parameter (`[] → compile.Phase`), found "
                           f"`{_show(d.pi)}`", d.loc)
    if isinstance(d, MutLam) and d.body is not None and not world.is_cn(d.pi):
        # `lam _compile (): Phase = …` (extern or not): its value is its body; the parameter is
        # the unit, which the body cannot inspect.
        d = d.body
    elif isinstance(d, (Lam, MutLam)) and not isinstance(d, Axiom):
        d = world.app(d, world.unit())
    return _steps(world, d, what, program, named)


def step_of_name(annex: str) -> list[Step]:
    """The step a phase's annex name denotes: a verimim phase, nothing (a null phase) or a Skip."""
    from verimim.phases.vocabulary import ALIASES, NULLS, not_implemented, unknown_phase_reason

    if annex in NULLS:
        return []
    annex = ALIASES.get(annex, annex)
    if _registered(annex):
        return [annex]
    return [Skip(annex, not_implemented(annex) or unknown_phase_reason(annex))]


def _steps(world: World, d: Def, what: str, program: World, named: tuple[str, ...] = ()) -> list[Step]:
    """`named`: the plugin pipelines `compile.named` is expanding here, outermost first."""
    if isinstance(d, Axiom) and _is_phase_type(world, world.type_of(d)):
        return step_of_name(d.annex)
    if isinstance(d, App) and isinstance(d.head, Axiom):
        head, args = d.head.annex, d.args()
        if head == "compile.phases":
            fix, elems = args[-2], args[-1]
            if not isinstance(fix, Lit):
                # (it was read as ff): whether a group repeats is decided when the pipeline is built
                raise VerimimError("E-TYPE", f"{what}: `compile.phases` repeats its phases or not by a flag "
                                   f"known when the pipeline is built (`tt`, `ff`, `compile.is_loaded \"p\"`), "
                                   f"found `{_show(fix)}`", fix.loc or d.loc)
            inner = [s for e in _elements(elems) for s in _steps(world, e, what, program, named)]
            if fix.value:
                return [Fixpoint(tuple(inner))]
            return inner
        if head in ("compile.passes", "compile.repls", "compile.pass2phase", "compile.repl2phase"):
            return [s for e in _elements(args[-1]) for s in _steps(world, e, what, program, named)]
        if head == "compile.prefix_cleanup_phase":
            return [PrefixCleanup(_string(args[-1], what), d.loc)]
        if head == "compile.named":
            name = _string(args[-1], what)
            plugin, dot, rest = name.partition(".")
            if not (plugin and dot and rest):
                # no plugin to be missing: not a phase's name at all (it was elided silently)
                raise VerimimError("E-NAME", f"{what}: `compile.named \"{name}\"` names no phase: a phase's "
                                   f"name is `plugin.phase`", d.loc)
            loaded = plugin_loaded(program, plugin)
            found = program.find_annex(name)
            if found is not None and not _names_a_phase(*found):
                raise VerimimError("E-TYPE", f"{what}: `compile.named \"{name}\"` names `{name}`, which is no "
                                   f"phase: its type is `{_show(found[0].type_of(found[1]))}`, not "
                                   f"`compile.Phase` (or a pipeline `[] → compile.Phase`)", d.loc)
            if found is not None and isinstance(found[1], (Lam, MutLam)) and found[1].body is not None:
                # a pipeline the plugin defines (`anx lam host_specific_phases () = …`): its phases
                return _named_pipeline(found[0], found[1], name, d, what, program, named)
            if found is not None or (loaded and _registered(name)):
                return step_of_name(name)
            if loaded:
                # elided only when its plugin is not loaded: a name the loaded plugin lacks is a typo
                raise VerimimError("E-NAME", f"{what}: `compile.named \"{name}\"` names no phase of the loaded "
                                   f"plugin `{plugin}`", d.loc)
            return []  # (upstream: a phase of a plugin the program does not load is left out)
        if head == "compile.cond":
            plugin = _string(args[-2], what)
            return _steps(world, args[-1], what, program, named) if plugin_loaded(program, plugin) else []
        if _is_phase_type(world, world.type_of(d)):
            # A phase with arguments (`compile.eta_red_pass ff`, `mem.reshape_pass m`).
            return step_of_name(head)
    raise VerimimError("E-TYPE", f"{what}: `{_show(d)}` is not a pipeline of named phases", d.loc)


def _is_phase_type(world: World, t: Def) -> bool:
    return isinstance(t, Axiom) and t.annex in ("compile.Phase", "compile.Pass", "compile.Repl")


def _names_a_phase(world: World, annex: Def) -> bool:
    """Whether an annex is a phase, a pass, a rewrite, or a pipeline (`[] → compile.Phase`): what
    `compile.named` may name. A function of arguments giving one (`compile.prefix_cleanup_phase`,
    `compile.phases`) is no phase until it is given them."""
    t = world.type_of(annex)
    if isinstance(t, Pi) and t.dom is world.unit_t():
        t = t.codom
    return _is_phase_type(world, t)


def _named_pipeline(world: World, pipeline: Def, name: str, site: Def, what: str, program: World,
                    named: tuple[str, ...]) -> list[Step]:
    """The steps of a plugin's pipeline that `compile.named "name"` (at `site`) names: an error in
    it is the named pipeline's, placed at the site in the program where it is in the plugin; a
    pipeline that names itself, directly or not, is refused (it was expanded until Python's
    recursion limit)."""
    if name in named:
        cycle = " → ".join(f"`{n}`" for n in (*named[named.index(name):], name))
        raise VerimimError("E-TYPE", f"{what}: `compile.named \"{name}\"` names a pipeline that names itself: "
                           f"{cycle}", site.loc)
    try:
        return _steps_of(world, pipeline, f"{what}, in `{name}` (named by `compile.named \"{name}\"`)", program,
                         (*named, name))
    except VerimimError as e:
        raise _here_if_elsewhere(e, site.loc) from None


def _elements(d: Def) -> tuple[Def, ...]:
    if isinstance(d, Tuple):
        return d.ops
    if isinstance(d, Pack) and isinstance(d.shape, Lit) and d.body.bvd == 0:
        return (d.body,) * d.shape.value
    return (d,)


def _string(d: Def, what: str) -> str:
    text = string_literal(d)
    if text is not None:
        return text
    raise VerimimError("E-TYPE", f"{what}: a phase name must be a string literal, found `{_show(d)}`", d.loc)


def _registered(name: str) -> bool:
    from verimim.phases.pipeline import PHASES

    return name in PHASES


def _show(d: Def) -> str:
    from verimim.printer import show

    return show(d)


def spec_from_definitions(world: World, defs: dict[str, Def], origin: str,
                          program: World | None = None) -> PipelineSpec:
    spec = PipelineSpec()
    for name, d in defs.items():
        steps = steps_of(world, d, f"`{name}` in {origin}", world.pipeline_locs.get(name), program)
        attr = {"_compile": "main", "host_specific_phases": "host", "device_specific_phases": "device"}[name]
        setattr(spec, attr, steps)
        spec.source[attr] = f"`{name}` in {origin}"
    return spec


def merge(base: PipelineSpec, over: PipelineSpec) -> PipelineSpec:
    """`over` (e.g. a --pipeline file) wins where it says something."""
    out = PipelineSpec(base.main, base.host, base.device, dict(base.source))
    for attr in ("main", "host", "device"):
        v = getattr(over, attr)
        if v is not None:
            setattr(out, attr, v)
            out.source[attr] = over.source.get(attr, "the caller")
    return out


def flat_names(steps: list[Step]) -> list[str]:
    """The phases the steps run, in order (fixed-point groups once; skipped ones left out)."""
    out: list[str] = []
    for s in steps:
        if isinstance(s, Fixpoint):
            out.extend(flat_names(list(s.steps)))
        elif isinstance(s, PrefixCleanup):
            out.append("compile.prefix_cleanup_phase")
        elif isinstance(s, str):
            out.append(s)
    return out


def load_pipeline_file(path: str, include: list[str] | None = None, program: World | None = None) -> PipelineSpec:
    """The pipeline definitions of a Mim file (`--pipeline FILE.mim`) for `program`, whose
    plugins decide what `compile.named` and `compile.cond` keep."""
    from verimim.source import load_source  # as the program itself: a bad byte at its line:col

    world, _unit = load_source(path, include or [])
    return spec_from_definitions(world, world.pipeline_defs, path, program)
