"""The `verimim` command line (spec/CLI.md): exit codes, `--json`, diagnostics, `--debug`.

click parses the options (it gives us subcommands, help text and usage errors for free); every
usage error is turned into exit 2 and, with `--json`, into the JSON object on stdout.
"""
from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import os
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from verimim import driver, explain, sarif, schemas, verdicts
from verimim.diagnostics import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, Diagnostic
from verimim.driver import Report
from verimim.interp.machine import DEFAULT_MAX_WORK_ITEMS
from verimim.progress import heartbeat, progress
from verimim.render import COLOR_CHOICES, ColorChoice, render_all, use_color

FORMATS = ("text", "json", "sarif")

_common = [
    click.option("--json", "as_json", is_flag=True, help="print exactly one JSON object on stdout"),
    click.option("--debug", is_flag=True, help="show Python tracebacks of internal errors"),
    click.option("-I", "include", multiple=True, type=click.Path(exists=True, file_okay=False),
                 help="also look for plugins and imports in this directory"),
    # (no click default: a subcommand's default — `fuzz --format json report DIR`, report's own
    # `--format` — must not undo what its group was given; `_color` and `_format` hold the defaults)
    click.option("--color", type=click.Choice(COLOR_CHOICES), default=None,
                 expose_value=False, callback=lambda ctx, param, value: value and _set_color(value),
                 help="colour diagnostics (auto: on a terminal, unless NO_COLOR is set)  [default: auto]"),
    click.option("--format", "output_format", type=click.Choice(FORMATS), default=None,
                 expose_value=False, callback=lambda ctx, param, value: value and _set_format(value),
                 help="stdout: text, one JSON object (as --json) or a SARIF 2.1.0 log of the diagnostics  "
                      "[default: text]"),
]

# --color and --format are the same for every command and only the printing needs them: their
# callbacks record them instead of threading them through every command's signature.
_color: list[ColorChoice] = ["auto"]


def _set_color(value: ColorChoice) -> None:
    _color[0] = value


_format: list[str] = ["text"]
_args: list[str] = []  # the command line after `verimim` (a SARIF log's commandLine)


def _set_format(value: str) -> None:
    _format[0] = value


def _options_of(args: list[str]) -> list[str]:
    """The command line's own words: what follows `--` is the program's (`run prog.mim -- --json`
    passes argv[1] = "--json")."""
    return args[:args.index("--")] if "--" in args else args


def _format_asked(args: list[str]) -> str | None:
    """The value of the last `--format` (click reads the last), None without one."""
    asked = None
    for i, a in enumerate(args):
        if a.startswith("--format="):
            asked = a.split("=", 1)[1]
        elif a == "--format" and i + 1 < len(args):
            asked = args[i + 1]
    return asked


def _format_of(args: list[str]) -> str:
    """The output format a command line asks for, read before click parsed it (usage errors)."""
    args = _options_of(args)
    return "json" if "--json" in args else _format_asked(args) or "text"


def _other_format(args: list[str]) -> str | None:
    """The format `--format` asks for where `--json` asks for JSON too and the two differ
    (`--json --format sarif`: two outputs for one stdout), else None."""
    args = _options_of(args)
    asked = _format_asked(args)
    return asked if "--json" in args and asked not in (None, "json") else None


def render_diagnostics(diags: list[Diagnostic]) -> None:
    """Every diagnostic in the source-snippet layout of verimim.render, on stderr."""
    if not diags:
        return
    color = use_color(_color[0], sys.stderr)
    click.echo(render_all(diags, color), err=True, color=color)


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(_common):
        fn = opt(fn)
    return fn


def emit(report: Report, as_json: bool, debug: bool, errors_only: bool = False) -> None:
    """Print the report (JSON or SARIF on stdout, or text: diagnostics on stderr; `errors_only`:
    only the errors of them) and exit with its code."""
    as_json = as_json or _format[0] == "json"
    as_sarif = _format[0] == "sarif" and not as_json
    if report.exit_code == EXIT_INTERNAL and not report.data.get("reproducer"):
        # CLI.md: exit 3 always prints a reproducer command; where the command has no narrower
        # one (check's E-SPEC, diff's E-DIFF), the command line that failed is it
        report.data["reproducer"] = driver.shell_command(["verimim", *sys.argv[1:]])
    if report.text is not None and not as_json and not as_sarif:
        sys.stdout.write(report.text)
        if not report.text.endswith("\n"):
            sys.stdout.write("\n")
    render_diagnostics([d for d in report.diagnostics if d.severity == "error" or not errors_only])
    if report.data.get("reproducer"):
        click.echo(f"reproduce with: {report.data['reproducer']}", err=True)
    if report.traceback and debug:
        click.echo(report.traceback, err=True)
    elif report.traceback:
        click.echo("  (run with --debug for the traceback)", err=True)
    if as_json:
        obj = report.to_json()  # without the human summary (data["summary"]), printed below
        if report.text is not None:
            obj["output"] = report.text
        if report.exit_code == EXIT_USAGE:
            # docs/cli.md: a usage error's `file` and command keys are null, whether click or the
            # command found it (an unreadable file gave `"phases": []` and its path)
            obj = {k: (v if k in ("ok", "diagnostics") else None) for k, v in obj.items()}
        click.echo(json.dumps(schemas.complete(_command_name(), obj), ensure_ascii=False))
    if as_sarif:
        log = sarif.log(report.diagnostics, report.file, report.exit_code, _command_name(), _args)
        click.echo(json.dumps(log, ensure_ascii=False, indent=1))
    if report.data.get("summary"):  # human text: stderr, with --json too
        click.echo(report.data["summary"], err=True)
    if not as_json and not as_sarif and report.output:  # stdout carries one log
        # What the program printed comes first on stdout, then main's result on its own line,
        # byte for byte where the stream takes bytes (a byte that is no UTF-8 stays itself).
        raw = report.output if report.output.endswith(b"\n") else report.output + b"\n"
        sys.stdout.flush()
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is not None:
            buffer.write(raw)
            buffer.flush()
        else:
            sys.stdout.write(raw.decode("utf-8", "replace"))
            sys.stdout.flush()
    if not as_json and not as_sarif and "result" in report.data and report.data["result"] is not None:
        click.echo(str(report.data["result"]))
    sys.exit(report.exit_code)


def _command_name() -> str:
    """The running subcommand, naming its JSON schema (verimim.schemas)."""
    ctx = click.get_current_context(silent=True)
    return ctx.info_name if ctx is not None and ctx.info_name else "usage"


class Seconds(click.FloatRange):
    """A time limit in seconds: a finite number in the range (`inf` and `nan` pass click's
    FloatRange, and then overflow where the limit becomes milliseconds)."""

    name = "seconds"

    def __init__(self, min: float, max: float = 30 * 86400.0) -> None:  # noqa: A002 — click's names
        super().__init__(min=min, max=max)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        out = super().convert(value, param, ctx)
        if not math.isfinite(out):  # nan compares false to both bounds
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return out


def resolve_file(file: str | None) -> str:
    if file is not None:
        return file
    click.echo(f"no FILE given: using the embedded demo program {driver.DEMO_PROGRAM}", err=True)
    return str(driver.DEMO_PROGRAM)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="verimim")
def cli() -> None:
    """verimim: a verification-oriented compiler for GPU programs written in Mim."""


def _phase_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [p.strip() for p in text.split(",") if p.strip()]


def _known_phases(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--host-phases / --device-phases: every name one that means something to verimim (the
    plan's own test, verimim.phases.vocabulary), checked before any work."""
    from verimim.phases.vocabulary import is_known, unknown_phase

    for name in _phase_list(value) or []:
        if not is_known(name):
            raise click.BadParameter(unknown_phase(name), ctx, param)
    return value


def _writable_dir(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--emit-smt2 DIR: created and written to once before any work, so that an unwritable place
    is a usage error (exit 2) and not an internal error halfway through the pipeline."""
    if value is None:
        return None
    try:
        Path(value).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise click.BadParameter(f"cannot write into `{value}`: {e.strerror or e}", ctx, param) from None
    why = driver.cannot_write_into(value)
    if why is not None:
        raise click.BadParameter(f"cannot write into `{value}`: {why}", ctx, param)
    return value


def pipeline_options(f: Any) -> Any:
    """--host-phases, --device-phases and --pipeline: the overrides of the program's plan, for
    every command that runs it (check, run, diff, compile)."""
    f = click.option("--pipeline", "pipeline_file", type=click.Path(dir_okay=False), default=None,
                     help="a Mim file whose `_compile` / `host_specific_phases` / `device_specific_phases` "
                          "replace the program's pipeline")(f)
    f = click.option("--device-phases", default=None, callback=_known_phases,
                     help="comma-separated phases run on the device World")(f)
    return click.option("--host-phases", default=None, callback=_known_phases,
                        help="comma-separated phases run on the host World after split_apply")(f)


@cli.command()
@click.argument("file", required=False)
@click.option("--timeout", type=Seconds(min=0.001), default=10.0, show_default=True,
              help="seconds per Z3 query (a time-out is `unknown`, never `proved`)")
@click.option("--emit-smt2", type=click.Path(file_okay=False), default=None, callback=_writable_dir,
              help="write every Z3 query as SMT-LIB 2 into this directory")
@pipeline_options
@click.option("--strict", is_flag=True,
              help="exit 1 unless every phase and kernel verdict is proved or skipped")
@click.option("-q", "--quiet", is_flag=True, help="print only `FILE: ok` instead of the verdicts")
@common
def check(file: str | None, as_json: bool, debug: bool, include: tuple[str, ...], timeout: float,
          emit_smt2: str | None, host_phases: str | None, device_phases: str | None,
          pipeline_file: str | None, strict: bool, quiet: bool) -> None:
    """Type-check FILE (default: the embedded demo), run the pipeline proving every phase."""
    path = resolve_file(file)
    with heartbeat(f"verimim check {path}"):
        report = driver.check(path, list(include), timeout_ms=int(timeout * 1000), emit_smt2=emit_smt2,
                              host_phases=_phase_list(host_phases), device_phases=_phase_list(device_phases),
                              pipeline=pipeline_file)
    found = verdicts.of_check(path, report.data, report.diagnostics)
    if strict:
        report.diagnostics.extend(verdicts.strict_diagnostics(path, found))
    if quiet:
        if report.ok:
            report.data.setdefault("summary", f"{path}: ok")
    elif found or report.ok:
        # Under --strict the unsettled verdicts are already diagnostics: not printed twice.
        lines = [] if strict else [v.line() for v in verdicts.attention(found)]
        lines.append(f"{path}: {'ok' if report.ok else 'failed'}: {verdicts.summary(found)}")
        report.data.setdefault("summary", "\n".join(lines))
    emit(report, as_json, debug, errors_only=quiet)


class ProgramCommand(click.Command):
    """A command whose ARGS are the program's argv[1..]: a negative number (`-5`) and a lone `-`
    are arguments, as C programs take them; any other `-x`/`--x` before a `--` that is no option
    of the command is a bad option (exit 2), not a silent argument.

    Checked before click parses: with unknown options ignored, click reads `-hello` as the group
    `-h -e -l …` and printed the help (exit 0, no JSON) without running anything, and read
    `-5I/tmp` as the argument `-5` and the include directory `/tmp`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        options = [p for p in self.get_params(ctx) if isinstance(p, click.Option)]
        names = {o for p in options for o in (*p.opts, *p.secondary_opts)}
        valued = {o for p in options if not p.is_flag and not p.count for o in p.opts}
        takes_value = False
        for a in args:
            if takes_value:
                takes_value = False
                continue
            if a == "--":
                break
            if a in names:
                takes_value = a in valued
                continue
            if not a.startswith("-") or a == "-" or re.fullmatch(r"-\d[\d.]*", a):
                continue
            if a.startswith("--") and a.split("=", 1)[0] in names:
                continue  # --fuel=5 (and `--json=1`: click says the flag takes no value)
            if not a.startswith("--") and a[:2] in valued:
                continue  # -I/usr/include
            raise click.NoSuchOption(a, ctx=ctx)
        return super().parse_args(ctx, args)


@cli.command(cls=ProgramCommand, context_settings={"ignore_unknown_options": True})
@click.argument("file", required=False)
@click.argument("args", nargs=-1)
@click.option("--target", type=click.Choice(["interp", "gpu"]), default=None,
              help="where to run main (default: the interpreter when no CUDA device is found)")
@click.option("--fuel", type=click.IntRange(min=1), default=None, help="step budget (E-FUEL when exceeded)")
@click.option("--schedule", type=int, default=0,
              help="seed of the order in which work-items run between barriers (0: in order)")
@click.option("--host", type=click.Choice(["native", "interp"]), default="native", show_default=True,
              help="with --target gpu: host code compiled (llvmlite JIT) or interpreted")
@click.option("--max-work-items", type=click.IntRange(min=1), default=DEFAULT_MAX_WORK_ITEMS, show_default=True,
              help="the most work-items of one launch the interpreter runs (about a minute); a bigger "
                   "launch is refused before it starts (E-FUEL)")
@pipeline_options
@common
def run(file: str | None, args: tuple[str, ...], target: str | None, fuel: int | None, schedule: int,
        host: str, max_work_items: int, host_phases: str | None, device_phases: str | None,
        pipeline_file: str | None, as_json: bool, debug: bool, include: tuple[str, ...]) -> None:
    """Execute main of FILE (default: the embedded demo) with ARGS as argv[1..]."""
    path = resolve_file(file)
    if target is None:
        from verimim.runtime.cuda import device_available

        target = "gpu" if device_available() else "interp"
    with heartbeat(f"verimim run {path}"):
        report = driver.run(path, list(include), list(args), fuel=fuel, seed=schedule, target=target, host=host,
                            max_work_items=max_work_items, host_phases=_phase_list(host_phases),
                            device_phases=_phase_list(device_phases), pipeline=pipeline_file)
    if report.ok:
        report.data.setdefault("summary", f"{path}: main returned {report.data.get('result')}")
    emit(report, as_json, debug)


@cli.command(cls=ProgramCommand, context_settings={"ignore_unknown_options": True})
@click.argument("file", required=False)
@click.argument("args", nargs=-1)
@click.option("--fuel", type=click.IntRange(min=1), default=None, help="step budget of each run")
@click.option("--gpu/--no-gpu", "use_gpu", default=None, help="include the GPU (default: when a device is found)")
@pipeline_options
@common
def diff(file: str | None, args: tuple[str, ...], fuel: int | None, use_gpu: bool | None, host_phases: str | None,
         device_phases: str | None, pipeline_file: str | None, as_json: bool, debug: bool,
         include: tuple[str, ...]) -> None:
    """Run FILE on every target (interpreter before/after each phase, GPU) and compare."""
    path = resolve_file(file)
    with heartbeat(f"verimim diff {path}"):
        report = driver.diff(path, list(include), list(args), fuel=fuel, use_gpu=use_gpu,
                             host_phases=_phase_list(host_phases), device_phases=_phase_list(device_phases),
                             pipeline=pipeline_file)
    if report.ok:
        n = len(report.data.get("targets", {}))
        report.data.setdefault("summary", f"{path}: {n} targets agree" if n else f"{path}: not compared")
    emit(report, as_json, debug)


@cli.command(name="compile")
@click.argument("file", required=False)
@click.option("-o", "out", required=True, help="output prefix: writes OUT.ll (host) and OUT.ptx (device)")
@click.option("--sm", default="sm_90", show_default=True, callback=lambda ctx, param, v: _sm_option(v),
              help="the NVPTX target GPU architecture (sm_XY, as `sm_90` or `sm_90a`)")
@pipeline_options
@common
def compile_cmd(file: str | None, out: str, sm: str, host_phases: str | None, device_phases: str | None,
                pipeline_file: str | None, as_json: bool, debug: bool, include: tuple[str, ...]) -> None:
    """Compile FILE: host LLVM IR to OUT.ll, device PTX to OUT.ptx."""
    path = resolve_file(file)
    emit(driver.compile_to(path, list(include), out, sm, host_phases=_phase_list(host_phases),
                           device_phases=_phase_list(device_phases), pipeline=pipeline_file), as_json, debug)


@cli.command()
@click.argument("file", required=False)
@click.option("--dot", is_flag=True, help="print a Graphviz graph instead of Mim")
@click.option("--after", default=None, help="print the program after this phase of the pipeline")
@click.option("--pipeline", "pipeline_file", type=click.Path(dir_okay=False), default=None,
              help="a Mim file whose pipeline definitions replace the program's (with --after)")
@common
def dump(file: str | None, dot: bool, after: str | None, pipeline_file: str | None, as_json: bool, debug: bool,
         include: tuple[str, ...]) -> None:
    """Print FILE back as Mim (or as a Graphviz graph with --dot)."""
    path = resolve_file(file)
    emit(driver.dump(path, list(include), dot=dot, after=after, pipeline=pipeline_file), as_json, debug)


class Duration(click.ParamType):
    """Seconds, or a duration with units: `90`, `90s`, `30m`, `8h`, `1h30m`, `2d`."""

    name = "duration"
    UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip().lower()
        parts = re.findall(r"(\d+(?:\.\d+)?)([smhd]?)", text)
        if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
            self.fail(f"`{value}` is not a duration (seconds, or e.g. 90s, 30m, 8h, 1h30m)", param, ctx)
        if len(parts) > 1 and any(not u for _, u in parts):
            self.fail(f"`{value}`: give every part of a duration its unit (e.g. 1h30m)", param, ctx)
        seconds = sum(float(n) * self.UNITS[u or "s"] for n, u in parts)
        if seconds < 0.1:
            self.fail(f"`{value}` is shorter than 0.1 s", param, ctx)
        return seconds


DEFAULT_FUZZ_BUDGET = 60.0


@cli.group(invoke_without_command=True)
@click.option("--budget", type=Duration(), default=None,
              help="how long to generate and check programs: seconds, or 90s, 30m, 8h, 1h30m "
                   "[default: 60 s; with --programs: no time limit]")
@click.option("--seed", type=int, default=None, help="seed of the campaign (default: random)")
@click.option("--programs", "max_programs", type=click.IntRange(min=1), default=None,
              help="stop after N programs (with --seed: exactly the same programs every time)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="directory for reproducer .mim files of failures (default: a temp dir)")
@click.option("--target", type=click.Choice(["interp", "gpu"]), default="interp", show_default=True,
              help="where generated programs are executed (gpu: also on the GPU, compared)")
@click.option("--no-verify", is_flag=True, help="skip the phases' Z3 specifications (faster)")
@click.option("--campaign", "campaign_dir", type=click.Path(), default=None,
              help="a campaign directory: journal every program there, resume it if it exists")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="with --campaign: Dask worker processes of a local cluster (default: the cores)")
@click.option("--scheduler", default=None, help="with --campaign: join the Dask cluster at tcp://HOST:PORT")
@click.option("--preload", multiple=True, help="with --campaign: a module each Dask worker imports first")
@click.option("--program-timeout", type=Seconds(min=1), default=300.0, show_default=True,
              help="with --campaign: seconds after which a program is journaled as `hang`")
@click.option("--reduce-budget", type=Seconds(min=0), default=60.0, show_default=True,
              help="with --campaign: seconds to reduce each new failure (0: none now, a resume "
                   "with a budget reduces it)")
@click.option("--oracle", type=click.Choice(["pipeline", "kernels"]), default="pipeline", show_default=True,
              help="pipeline: every phase and target against the interpreter; kernels: the kernel "
                   "verifier (`check`'s race and divergence verdicts) against `run`, on race-free "
                   "kernels and on ones with an injected race or divergence")
@common
@click.pass_context
def fuzz(ctx: click.Context, budget: float | None, seed: int | None, max_programs: int | None, out_dir: str | None,
         target: str, no_verify: bool,
         campaign_dir: str | None, workers: int | None, scheduler: str | None, preload: tuple[str, ...],
         program_timeout: float, reduce_budget: float, oracle: str, as_json: bool, debug: bool,
         include: tuple[str, ...]) -> None:
    """Generate random GPU programs and check them for BUDGET seconds (docs/fuzzing.md);
    `fuzz report DIR` reports on a campaign."""
    if ctx.invoked_subcommand is not None:
        if as_json:
            _set_format("json")  # `fuzz --json report DIR`: the group's --json is the report's
        return
    as_json = as_json or _format[0] == "json"
    # `--programs N` alone runs to N programs: a default time limit would cut a seeded run short
    # at a point that depends on the machine's speed.
    budget = budget if budget is not None else (math.inf if max_programs is not None else DEFAULT_FUZZ_BUDGET)
    if oracle == "kernels" and campaign_dir is not None:
        _usage_error("--oracle kernels is a plain run: give it no --campaign (campaigns verify every kernel)",
                     as_json)
    from verimim.fuzz.kernel_oracle import kernel_summary
    from verimim.fuzz.strategies import run_campaign

    gpu = target == "gpu"
    if gpu:
        from verimim.runtime.cuda import device_available

        if not device_available():
            _usage_error("--target gpu: no CUDA device (or no cuda-python) is available here", as_json)
    if campaign_dir is None and (workers is not None or scheduler is not None or preload):
        _usage_error("--workers, --scheduler and --preload run a campaign: give it a directory with --campaign DIR",
                     as_json)
    given = [f"--{n.replace('_', '-')}" for n in ("program_timeout", "reduce_budget")
             if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE]
    if campaign_dir is None and given:  # (they would be silently ignored)
        _usage_error(f"{' and '.join(given)} apply to a campaign: give it a directory with --campaign DIR", as_json)
    if campaign_dir is not None and out_dir is not None:
        _usage_error("--out is for the plain fuzz run: a campaign keeps its failures in DIR/failures", as_json)
    if workers is not None and scheduler is not None:
        _usage_error("--workers starts a local cluster, --scheduler joins one: give one of them", as_json)
    if campaign_dir is not None:
        _fuzz_campaign(campaign_dir, budget, seed=seed, verify=not no_verify, gpu=gpu, workers=workers,
                       scheduler=scheduler, preload=preload, program_timeout=program_timeout,
                       reduce_budget=reduce_budget, max_programs=max_programs, as_json=as_json, debug=debug)

    # --oracle kernels: the same oracle on a mix for the kernel verifier — half the programs
    # race-free, the others with an injected race or barrier divergence.
    mix: dict[str, Any] = {"defect_kinds": ("race", "divergence"), "defect_ratio": 0.5} if oracle == "kernels" else {}
    from verimim.fuzz.command import terminate_as_interrupt

    with terminate_as_interrupt(), progress("fuzzing", budget) as update:  # (SIGTERM: as Ctrl-C, exit 130)
        res = run_campaign(budget, seed=seed, out_dir=out_dir, verify=not no_verify, gpu=gpu, progress=update,
                           max_programs=max_programs, **mix)
    kernels = kernel_summary(res.kernels, res.kernel_programs, res.false_alarms)
    obj = {"programs": res.programs, "per_second": round(res.per_second, 3), "failures": res.failures,
           "coverage": dict(sorted(res.coverage.items())), "defects": res.defects,
           "seconds": round(res.seconds, 2), "ok": not res.failures, "oracle": oracle, "kernels": kernels,
           "duplicates": res.duplicates}
    for f in res.failures:
        click.echo(f"failure[{f['kind']}]: {f['message']}\n  reproduce: verimim check {f['file']} && "
                   f"verimim run {f['file']}", err=True)
    if as_json:
        obj.update(file=None, diagnostics=[])
        click.echo(json.dumps(schemas.complete("fuzz", obj), ensure_ascii=False))
    else:
        click.echo(f"{res.programs} programs in {res.seconds:.1f} s ({res.per_second:.2f}/s, "
                   f"{res.duplicates} duplicates not checked again), {len(res.failures)} failures; {kernels['kernels']} kernels verified "
                   f"({', '.join(f'{n} {k}' for k, n in kernels['verdicts'].items()) or 'none'}), "
                   f"{res.false_alarms} false alarms", err=True)
        width = max((len(k) for k in res.coverage), default=10)
        for k, v in sorted(res.coverage.items()):
            click.echo(f"  {k:<{width}}  {v}", err=True)
    sys.exit(3 if res.failures else 0)


def _fuzz_campaign(directory: str, budget: float, *, as_json: bool, debug: bool, **options: Any) -> None:
    from verimim.fuzz import command

    def body() -> int:
        with progress("fuzzing", budget) as update:
            return command.campaign(directory, budget, as_json=as_json,
                                    complete=lambda o: schemas.complete("fuzz", o), progress=update, **options)
    sys.exit(_campaign_guarded(body, directory, as_json, debug, "fuzz"))


def _campaign_guarded(body: Callable[[], int], directory: str, as_json: bool, debug: bool, command: str) -> int:
    """A campaign command's exit code: what it returns, or, as every command does (CLI.md), a
    bad directory or journal as E-USAGE (exit 2: the environment) and anything else as one line
    of E-INTERNAL (exit 3, the traceback with --debug); with --json, one JSON object either way."""
    import sqlite3

    from verimim.diagnostics import UsageError

    try:
        return body()
    except UsageError as e:
        _usage_error(e.message, as_json, command)
    except (OSError, sqlite3.Error) as e:
        _usage_error(f"the campaign in `{directory}` cannot be used: {type(e).__name__}: {e}", as_json, command)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 — a bug of ours: one line, as driver.guarded says it
        report = Report(directory, [Diagnostic("E-INTERNAL", f"internal error: {type(e).__name__}: {e}", None)],
                        traceback=traceback.format_exc())
        render_diagnostics(report.diagnostics)
        click.echo(report.traceback if debug else "  (run with --debug for the traceback)", err=True)
        if as_json:
            click.echo(json.dumps(schemas.complete(command, report.to_json()), ensure_ascii=False))
    return EXIT_INTERNAL


@fuzz.command(name="report")
@click.argument("directory", type=click.Path())
@common
def fuzz_report(directory: str, as_json: bool, debug: bool, include: tuple[str, ...]) -> None:
    """Write DIRECTORY/report.html and report.json about the campaign in DIRECTORY."""
    from verimim.fuzz import command

    as_json = as_json or _format[0] == "json"
    sys.exit(_campaign_guarded(lambda: command.report(directory, as_json, lambda o: schemas.complete("fuzz-report", o)),
                               directory, as_json, debug, "fuzz-report"))


@cli.command(name="explain")
@click.argument("code", required=False)
@common
def explain_cmd(code: str | None, as_json: bool, debug: bool, include: tuple[str, ...]) -> None:
    """What diagnostic CODE means, with an example (without CODE: every code)."""
    as_json = as_json or _format[0] == "json"
    if code is None:
        text = explain.index()
    else:
        code = code.strip().upper()  # the code as the page names it (` e-race` is E-RACE)
        page = explain.lookup(code)
        if page is None:
            near = explain.suggestions(code)
            hint = f"; did you mean {', '.join(f'`{c}`' for c in near)}?" if near else ""
            _usage_error(f"unknown diagnostic code `{code}`{hint} (`verimim explain` lists them)", as_json)
            return
        text = page.text
    if as_json:
        obj: dict[str, Any] = {"file": None, "ok": True, "diagnostics": [], "code": code,
                               "text": text}
        click.echo(json.dumps(schemas.complete("explain", obj), ensure_ascii=False))
    else:
        click.echo(text)
    sys.exit(0)


def _usage_error(message: str, as_json: bool, command: str | None = None) -> NoReturn:
    diag = Diagnostic("E-USAGE", message, None)
    render_diagnostics([diag])
    if _format[0] == "sarif" and not as_json:
        click.echo(json.dumps(sarif.log([diag], None, EXIT_USAGE, command or _command_name(), _args), indent=1))
    elif as_json:
        obj = {"file": None, "ok": False, "diagnostics": [diag.to_json()]}
        click.echo(json.dumps(schemas.complete(command or _command_name(), obj)))
    sys.exit(EXIT_USAGE)


def _sm_option(value: str) -> str:
    """`--sm`: an NVPTX architecture name; LLVM takes any string and writes it into the PTX
    (`.target bogus`), which only the driver refuses, on a GPU."""
    if not re.fullmatch(r"sm_[1-9][0-9]{1,2}[af]?", value):
        raise click.BadParameter(f"`{value}` is not an NVPTX architecture (expected sm_XY, as sm_90 or sm_90a)")
    from verimim.runtime.nvptx import llvm_knows

    if not llvm_knows(value):
        raise click.BadParameter(f"`{value}` is not an NVPTX architecture LLVM knows (as sm_80, sm_90 or sm_90a)")
    return value


def _command_of(args: list[str]) -> str:
    """The subcommand named on a command line that click rejected (its JSON schema): `fuzz
    report …` is `fuzz-report`, whatever click found wrong with it."""
    words = [a for a in _options_of(args) if not a.startswith("-")]
    if not words or words[0] not in cli.commands:
        return "usage"
    if words[0] == "fuzz":
        return "fuzz-report" if _subcommand(cli.commands["fuzz"], args[args.index("fuzz") + 1:]) == "report" else "fuzz"
    return words[0]


def _subcommand(group: click.Command, args: list[str]) -> str | None:
    """The first word after a group's own options (`fuzz --seed 3 report`: `report`; the value of
    an option is none: `fuzz --campaign report` names a folder)."""
    takes_value = {name for p in group.params if isinstance(p, click.Option) and not p.is_flag and not p.count
                   for name in p.opts}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return None
        if not a.startswith("-"):
            return a
        i += 2 if a in takes_value else 1
    return None


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if sys.stderr is None:  # started with stderr closed (`2>&-`): what it would say is lost
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 — stands for the closed stream until exit
    if sys.stdout is None:  # started with stdout closed (`>&-`): writing the output fails, exit 2
        sys.stdout = _ClosedOutput()
    _args[:] = args
    fmt = _format_of(args)
    _set_format(fmt if fmt in FORMATS else "text")
    _set_color("auto")  # (the options have no click default: each run starts from these)
    as_json = fmt == "json"
    for stream in (sys.stdout, sys.stderr):
        # A terminal or pipe that cannot encode a character (PYTHONIOENCODING=ascii) gets an
        # escape for it, not a UnicodeEncodeError from the middle of a report.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        other = _other_format(args)
        if other is not None:
            raise click.UsageError(f"`--json` and `--format {other}` ask for two outputs on stdout; give one of them")
        cli.main(args=args, prog_name="verimim", standalone_mode=False)
    except click.UsageError as e:
        _usage_error(e.format_message(), as_json, _command_of(args))
    except (click.exceptions.Abort, KeyboardInterrupt):
        _interrupted()
    except SystemExit:
        raise
    except OSError as e:
        _output_failed(e)
    sys.exit(0)


class _ClosedOutput(io.TextIOBase):
    """Standard output of a process started with it closed: any write is the OSError a write
    to a closed descriptor is (reported as E-USAGE, exit 2, by `main`)."""

    def write(self, s: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")

    def writable(self) -> bool:
        return True


def _interrupted() -> NoReturn:
    """Ctrl-C: exit 130 now. The work may still be inside Z3 on its own thread (a daemon,
    verimim.driver): the process ends without waiting for it or finalizing what it holds."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    _exit_now(EXIT_INTERRUPTED, "interrupted")


def _output_failed(e: OSError) -> NoReturn:
    """Writing the output failed (a full disk, a closed pipe): the environment's fault, exit 2.
    A reader that went away (`| head`) is no error to report."""
    _exit_now(EXIT_USAGE, None if isinstance(e, BrokenPipeError) else
              f"error[E-USAGE]: cannot write the output: {e.strerror or e}")


def _exit_now(code: int, line: str | None) -> NoReturn:
    """End the process with `code`, saying `line` on stderr where it still takes it, and with
    no complaint from Python at exit about a stdout it cannot flush."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 — replaces the (maybe broken) stream until exit
    if line is not None:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
