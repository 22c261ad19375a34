"""One campaign program, as a Dask task: generate it from its seed (or replay its choices), check
it with the oracle, and return a picklable record.

Programs are drawn by Hypothesis's own engine (`ConjectureData` with a seeded random source)
from `mixed_programs`, the strategy the plain `fuzz` command uses. The choice sequence it
records is the program's exact recipe: `ConjectureData.for_choices` replays it to the same
program on any machine, which is what makes a campaign resumable and distributable, and it is
what the journal stores as the program's "generator choices".
"""
from __future__ import annotations

import functools
import hashlib
import json
import random
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from verimim.fuzz.signature import Signature, of_verdict

Choice = int | bool | float | str | bytes


@dataclass(frozen=True)
class Settings:
    """What every program of one campaign is checked with (stored in the journal's meta)."""

    seed: int
    verify: bool = True
    defect_ratio: float = 0.25
    gpu: bool = False
    timeout_ms: int = 2000  # per Z3 query, as in the plain fuzz command

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "verify": self.verify, "defect_ratio": self.defect_ratio, "gpu": self.gpu,
                "timeout_ms": self.timeout_ms}


@dataclass(frozen=True)
class Checked:
    """The journal row of one checked program (also what a worker sends back)."""

    index: int
    seed: int
    choices: tuple[Choice, ...]
    defect: str | None
    features: tuple[str, ...]
    ops: int
    kernels: int
    launches: int
    size: int                     # characters of the program text
    verdict: str                  # "ok", or the failure kind (spec, diff, ..., hang, crash)
    signature: Signature | None
    message: str = ""
    times: tuple[tuple[str, float], ...] = ()      # seconds per stage (generate, oracle stages)
    phases: tuple[tuple[str, str], ...] = ()       # (phase, status) of the pipeline
    text: str = ""                # kept only for failures: the reproducer
    args: tuple[str, ...] = ()
    expected: tuple[str, ...] = ()
    worker: str = ""
    seconds: float = 0.0
    finished: float = field(default_factory=time.time)
    fingerprint: str = ""         # of the program (text, arguments, defect): duplicates share it
    # check's race and divergence verdicts by status (this run's summary; not journaled)
    kernel_verdicts: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Generated:
    """What a worker sends back once it has drawn program `index`: its fingerprint, so that the
    campaign checks each distinct program once (the worker keeps the program for its check)."""

    index: int
    fingerprint: str


def defect_position(campaign_seed: int, index: int, pool_size: int) -> int:
    """The defect kind of program `index` (its position in strategies.defect_pool): each block of
    `pool_size` programs has every position once, in an order of its own, so every defect kind
    comes in every campaign of that many programs and injected defects are their exact share
    (drawn at random, a 60 s campaign of 79 programs had no divergence and no double free)."""
    block, at = divmod(index, pool_size)
    order = list(range(pool_size))
    random.Random(f"verimim-fuzz-defects:{campaign_seed}:{block}").shuffle(order)
    return order[at]


def program_seed(campaign_seed: int, index: int) -> int:
    """The seed of program `index`: independent of which worker checks it and in which order."""
    h = hashlib.sha256(f"verimim-fuzz:{campaign_seed}:{index}".encode()).digest()
    return int.from_bytes(h[:8], "big")


def generate(seed: int | None = None, choices: tuple[Choice, ...] | None = None,
             defect_ratio: float = 0.25, defect_kinds: tuple[str, ...] | None = None,
             gpu: bool = False, defect: int | None = None) -> tuple[Any, tuple[Choice, ...]]:
    """(GeneratedProgram, its choice sequence) from a seed, or replayed from choices. `gpu`: for
    a campaign that also runs the programs on the GPU (`GPU_FEATURES`). `defect`: the first
    choice, the position in strategies.defect_pool of the defect kind (or None, clean)."""
    from hypothesis.internal.conjecture.data import ConjectureData

    if choices is not None:
        data = ConjectureData.for_choices(choices)
    else:
        data = ConjectureData(random=random.Random(seed), prefix=None if defect is None else [defect])
    prog = data.draw(_mix(defect_ratio, defect_kinds, gpu))
    data.freeze()
    return prog, tuple(data.choices)


# What a GPU campaign does not draw: constructs the GPU backend states it does not compile
# (E-UNSUPPORTED), which would be reported as differences from the interpreter on every such
# program. None now: continuations chosen at run time compile as device-heap records (cps_dyn).
GPU_FEATURES: dict[str, Any] = {}


@functools.lru_cache(maxsize=8)
def _mix(defect_ratio: float, defect_kinds: tuple[str, ...] | None, gpu: bool = False) -> Any:
    """The campaign's strategy, built once per process (not once per program)."""
    from verimim.fuzz.strategies import mixed_programs

    return mixed_programs(defect_ratio, defect_kinds, **(GPU_FEATURES if gpu else {}))


def _stats(prog: Any) -> dict[str, Any]:
    from verimim.fuzz.reduce import size  # (the size a failure's reduction reports before and after)

    return {"defect": prog.defect, "features": tuple(sorted(prog.features_used)), "ops": prog.ops,
            "kernels": prog.stat("kernels"), "launches": prog.stat("launches"), "size": size(prog.text)[0],
            "args": tuple(prog.args), "expected": tuple(sorted(prog.expected_codes))}


def fingerprint(prog: Any) -> str:
    """What makes two generated programs the same check: the text, main's arguments and the
    injected defect with the codes it must produce."""
    key = "\0".join([prog.text, " ".join(prog.args), str(prog.defect), ",".join(sorted(prog.expected_codes))])
    return hashlib.sha256(key.encode()).hexdigest()[:20]


# Programs this worker process drew (generate_index) and has not checked yet, by (settings,
# index): the check that follows on the same worker takes the program from here instead of
# drawing it again. A few entries: a check normally follows its draw at once.
_DRAWN: "OrderedDict[tuple[Settings, int], tuple[Any, tuple[Choice, ...], float]]" = OrderedDict()
_DRAWN_MAX = 16
_DRAWN_LOCK = threading.Lock()  # a worker may run tasks on several threads


def generate_index(settings: Settings, index: int) -> Generated:
    """Draw program `index` of the campaign and return its fingerprint (runs on a worker)."""
    from verimim.driver import run_with_big_stack

    drawn = run_with_big_stack(lambda: _draw(settings, index))
    with _DRAWN_LOCK:
        _DRAWN[(settings, index)] = drawn
        while len(_DRAWN) > _DRAWN_MAX:
            _DRAWN.popitem(last=False)
    return Generated(index, fingerprint(drawn[0]))


def _draw(settings: Settings, index: int) -> tuple[Any, tuple[Choice, ...], float]:
    from verimim.fuzz.strategies import defect_pool

    t0 = time.perf_counter()
    pool = len(defect_pool(settings.defect_ratio))
    prog, choices = generate(program_seed(settings.seed, index), defect_ratio=settings.defect_ratio,
                             gpu=settings.gpu, defect=defect_position(settings.seed, index, pool))
    return prog, choices, time.perf_counter() - t0


def check_index(settings: Settings, index: int) -> Checked:
    """Check program `index` of the campaign (runs on a worker, on a big stack): the one this
    worker drew for generate_index, else drawn here."""
    from verimim.driver import run_with_big_stack

    worker = _worker_name()  # here: the worker is known on its task thread only
    return run_with_big_stack(lambda: _check(settings, index, worker))


def _check(settings: Settings, index: int, worker: str) -> Checked:
    from verimim.fuzz.strategies import check_generated

    t0 = time.perf_counter()
    with _DRAWN_LOCK:
        drawn = _DRAWN.pop((settings, index), None)
    prog, choices, t_gen = drawn if drawn is not None else _draw(settings, index)
    v = check_generated(prog, verify=settings.verify, timeout_ms=settings.timeout_ms, gpu=settings.gpu)
    sig = of_verdict(v)
    return Checked(index, program_seed(settings.seed, index), choices, verdict="ok" if v.ok else v.kind,
                   signature=sig, message=v.message.splitlines()[0][:500] if v.message else "",
                   times=(("generate", round(t_gen, 4)), *v.times.items()), phases=tuple(v.phases),
                   text=prog.text if sig else "", worker=worker,
                   seconds=round(time.perf_counter() - t0 + (t_gen if drawn is not None else 0.0), 4),
                   fingerprint=fingerprint(prog), kernel_verdicts=tuple(sorted(v.kernels.items())),
                   **_stats(prog))


def lost(settings: Settings, index: int, kind: str, message: str, worker: str, seconds: float,
         stage: str = "") -> Checked:
    """The record of a program whose check never came back (`hang` or `crash`): regenerated here,
    on the campaign's side, from its seed, so that it keeps its reproducer. Its signature names
    the stage that never came back (`generate`, `check`) and a crash's cause as far as the
    message tells it (an exit status, a signal, memory, an exception), so that another cause is
    another failure."""
    from verimim.driver import run_with_big_stack

    prog, choices, _ = run_with_big_stack(lambda: _draw(settings, index))
    sig = Signature(kind, crash_cause(message) if kind == "crash" else "", stage)
    return Checked(index, program_seed(settings.seed, index), choices, verdict=kind, signature=sig, message=message[:500],
                   text=prog.text, worker=worker, seconds=round(seconds, 4), fingerprint=fingerprint(prog),
                   **_stats(prog))


_CAUSES = ((re.compile(r"exited with status (-?\d+)"), "status {}"), (re.compile(r"killed by signal (\d+)"), "signal {}"),
           (re.compile(r"memory budget"), "memory"), (re.compile(r"^(\w+(?:Error|Exception)):"), "{}"))


def crash_cause(message: str) -> str:
    """What killed a program's worker, as its crash message says: `status 13`, `signal 9`,
    `memory`, an exception's name; '' where it does not say (a bare KilledWorker)."""
    for pattern, shown in _CAUSES:
        m = pattern.search(message)
        if m is not None:
            return shown.format(*m.groups())
    return ""


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return "local"


def choices_json(choices: tuple[Choice, ...]) -> str:
    """Choices as JSON (bytes and floats tagged, so that they come back as what they were)."""
    def enc(c: Choice) -> Any:
        if isinstance(c, bytes):
            return {"b": c.hex()}
        if isinstance(c, float):
            return {"f": c.hex()}
        return c
    return json.dumps([enc(c) for c in choices])


def choices_from_json(text: str) -> tuple[Choice, ...]:
    def dec(c: Any) -> Choice:
        if isinstance(c, dict):
            return bytes.fromhex(c["b"]) if "b" in c else float.fromhex(c["f"])
        return c  # type: ignore[no-any-return]
    return tuple(dec(c) for c in json.loads(text))


def reduce_index(settings: Settings, choices: tuple[Choice, ...], signature: Signature,
                 budget_s: float) -> Any:
    """Reduce a failing program (replayed from its choices) to a smaller one with the same
    signature (runs on a worker); returns a `verimim.fuzz.reduce.Reduction`."""
    from verimim.driver import run_with_big_stack

    return run_with_big_stack(lambda: _reduce(settings, choices, signature, budget_s))


def evidence(signature: Signature) -> str:
    """What, besides its signature, makes a smaller program the same failure.

    `signature`: two parts of verimim disagree about the program itself (a spec refuted, a
    phase changed the result, a crash, check missed a race that a run reports): any edit of the
    text that keeps the signature keeps the bug. The other failures rest on what the generator
    says about the program, and a text edit does not keep that: a program whose injected double
    free is cut out "misses" the defect all the same (seen: a double_free program reduced to
    one with no free at all), and one whose barrier is cut out turns a false alarm into a
    true one.
    `construction`: only programs regenerated from shrunk choices count, since the generator
    builds the defect, or the well-defined program, into each of them again.
    `clean runs`: an error from `check` on a program built well-defined stays a false positive
    in an edited text that the interpreter runs without a fault under every schedule the oracle
    tries: the independent witness that the text is still well-defined."""
    if signature.kind == "missed-defect":
        # at `kernels` a run reported the code and check's verdicts do not: they disagree
        return "signature" if signature.phase == "kernels" else "construction"
    if signature.kind == "false-positive":
        # at `interp` the interpreter is the one accused: it cannot also be the witness
        return "construction" if signature.phase == "interp" else "clean runs"
    return "signature"


def _reduce(settings: Settings, choices: tuple[Choice, ...], signature: Signature, budget_s: float) -> Any:
    from dataclasses import replace

    from verimim.fuzz.reduce import Budget, reduce_text, reduction, shrink_choices
    from verimim.fuzz.strategies import canonical, check_generated, runs_clean

    start = time.monotonic()
    clock = Budget(budget_s)
    prog, _ = generate(choices=choices, defect_ratio=settings.defect_ratio, gpu=settings.gpu)
    original = prog.text
    state = {"kept": prog, "candidate": prog}  # the program a text belongs to (its args, its defect)
    how = evidence(signature)

    def fails_alike(p: Any, text: str) -> bool:
        v = check_generated(replace(p, text=text), verify=settings.verify,
                            timeout_ms=settings.timeout_ms, gpu=settings.gpu)
        return of_verdict(v) == signature

    def regenerate(cs: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]] | None:
        try:
            p, normal = generate(choices=cs, defect_ratio=settings.defect_ratio, gpu=settings.gpu)
        except Exception:  # noqa: BLE001 — an invalid choice sequence
            return None
        except BaseException as e:  # Hypothesis stops a replay that runs out of choices this way
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            return None
        if p.defect != prog.defect:
            return None  # another defect kind expects another code: not the same failure
        state["candidate"] = p
        return p.text, normal

    def candidate_fails_alike(text: str) -> bool:
        ok = fails_alike(state["candidate"], text)
        if ok:
            state["kept"] = state["candidate"]
        return ok

    def edit_fails_alike(text: str) -> bool:
        p = state["kept"]
        return fails_alike(p, text) and (how != "clean runs" or runs_clean(text, p.args))

    def canon(text: str) -> str | None:
        try:
            return canonical(text)
        except Exception:  # noqa: BLE001 — a candidate that does not elaborate is just not kept
            return None

    if how == "construction":
        # No text edit keeps what makes it a failure: the whole budget goes to the choices.
        if not clock.timed(lambda text: fails_alike(prog, text))(original):
            return reduction(original, original, 1, 0, start, "not reproducible", tuple(prog.args))
        _, shrunk, tries, kept, out_of_time = shrink_choices(choices, original, regenerate, candidate_fails_alike,
                                                             clock)
        return reduction(original, shrunk if shrunk is not None else original, tries + 1, kept, start,
                         "budget" if out_of_time else "fixpoint", tuple(state["kept"].args))
    # At most half the budget on the choices, the rest on the text (one clock: the text stage
    # knows what a check costs from the choices stage).
    clock.seconds = budget_s / 2
    _, shrunk, c_tries, c_kept, _ = shrink_choices(choices, original, regenerate, candidate_fails_alike, clock)
    clock.seconds = budget_s
    text = shrunk if shrunk is not None else original
    # A text the choices stage kept fails alike already; under "clean runs" it must run clean too,
    # which only the text stage's check asks.
    r = reduce_text(text, edit_fails_alike, canon, clock, known_to_fail=shrunk is not None and how != "clean runs")
    if r.status == "not reproducible" and shrunk is None:
        return replace(r, args=tuple(prog.args))
    return reduction(original, r.text, r.tries + c_tries, r.accepted + c_kept, start, r.status,
                     tuple(state["kept"].args))
