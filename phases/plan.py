"""The pipeline plan: which phases run on a program, decided once, for every command.

`check` proves the phases of the plan, `compile` and `run --target gpu` compile what the plan
produces, `diff` and the fuzzer compare the program after each phase of the plan, `dump --after`
stops in it. Built from (in increasing priority) the default pipeline of PHASES.md and the
sub-pipelines of `gpu.mim`, the program's own definitions (`_compile`, `host_specific_phases`,
`device_specific_phases`), a pipeline file (`--pipeline FILE.mim`) and the command line
(`--host-phases`, `--device-phases`). The phases the backends need (`buffer.lower_ptr`: buffers
reach the host code generator as pointers) end every plan, so what `check` proves is what
`compile` compiles.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verimim.ir.world import World
from verimim.phases.program_pipeline import (
    Fixpoint, PipelineSpec, PrefixCleanup, Skip, Step, flat_names, merge, spec_from_definitions, step_of_name,
)

# Phases every backend relies on, run after the program's pipeline on the host World (each one
# does nothing, and says so, on a program that does not need it).
BACKEND_PHASES: tuple[str, ...] = ("buffer.lower_ptr",)


@dataclass(frozen=True)
class PipelinePlan:
    main: tuple[Step, ...]
    host: tuple[Step, ...]     # after gpu.split_apply, on the host World
    device: tuple[Step, ...]   # after gpu.split_apply, on the device World
    backend: tuple[Step, ...]  # last, on the host World (the whole program when nothing was split)
    source: tuple[tuple[str, str], ...] = ()  # part → the definition it came from

    def describe(self) -> dict[str, Any]:
        """The plan as JSON (the `pipeline` key of every command's report)."""
        return {"main": describe_steps(self.main), "host": describe_steps(self.host),
                "device": describe_steps(self.device), "backend": describe_steps(self.backend),
                "from": dict(self.source)}


def describe_steps(steps: tuple[Step, ...] | list[Step]) -> list[Any]:
    out: list[Any] = []
    for s in steps:
        if isinstance(s, Fixpoint):
            out.append({"fixpoint": describe_steps(s.steps)})
        elif isinstance(s, Skip):
            out.append({"skipped": s.name, "reason": s.reason})
        elif isinstance(s, PrefixCleanup):
            out.append({"phase": "compile.prefix_cleanup_phase", "prefix": s.prefix})
        else:
            out.append(s)
    return out


def _command_line(names: list[str]) -> list[Step]:
    """Phase names from the command line: upstream's names are read as in a Mim pipeline; a name
    nobody declares stays as it is, for the runner to reject (E-USAGE: a typo is not skipped)."""
    from verimim.phases.vocabulary import is_known

    out: list[Step] = []
    for n in names:
        out.extend(step_of_name(n) if is_known(n) else [n])
    return out


def build_plan(world: World, pipeline: PipelineSpec | None = None, host_phases: list[str] | None = None,
               device_phases: list[str] | None = None) -> PipelinePlan:
    from verimim.phases.pipeline import default_pipeline, sub_pipelines

    spec = spec_from_definitions(world, world.pipeline_defs, "the program")
    if pipeline is not None:
        spec = merge(spec, pipeline)
    source = dict(spec.source)
    host_default, dev_default = sub_pipelines(world)
    main: list[Step] = spec.main if spec.main is not None else list(default_pipeline())
    host: list[Step] = spec.host if spec.host is not None else list(host_default)
    device: list[Step] = spec.device if spec.device is not None else list(dev_default)
    if host_phases is not None:
        host, source["host"] = _command_line(host_phases), "the command line"
    if device_phases is not None:
        device, source["device"] = _command_line(device_phases), "the command line"
    # A backend phase the program already runs (in its main pipeline, or on the host World after
    # a split it performs) is not run twice.
    ran = set(flat_names(main))
    if "gpu.split_apply" in ran:
        ran |= set(flat_names(host))
    backend = tuple(p for p in BACKEND_PHASES if p not in ran)
    if backend:
        source["backend"] = "verimim's backends"
    return PipelinePlan(tuple(main), tuple(host), tuple(device), backend, tuple(sorted(source.items())))
