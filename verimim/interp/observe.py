"""What one run of a program shows, and how two runs differ: the one observation-and-compare
of `verimim diff` (the source against every phase's output and the GPU), the fuzz oracle (every
schedule, every phase) and the specifications that validate by execution
(verimim.smt.differential).

An observation is:

- the result (main's return value), or the fault code of undefined behaviour, or, where the
  caller allows it, the name of the exception that stopped the interpreter itself (an
  ill-formed phase output);
- what the program's C functions printed, and whether that depends on the clock (then it is
  not compared);
- the final host heap: the bytes of every heap block of address space 0 the run allocated,
  freed ones included (what was written before the free is the record of the program's
  stores), sorted — a phase may allocate in another order — leaving out blocks C's `time`
  wrote (they differ run to run);
- the warning codes;
- optionally, the state-changing effects executed, counted by axiom: every operation on a
  memory token except those that only observe memory (how often the interpreter performs a
  load depends on where it schedules it, not on the program's meaning; what it read shows in
  the result, a read that faults in the fault code).

A part that was not observed (the heap of a compiled program, effects not traced) is None and
never differs.
"""
from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verimim.diagnostics import Diagnostic, VerimimError
from verimim.interp.memory import ADDR_SHIFT, Block
from verimim.interp.values import RuntimeFault, Token

if TYPE_CHECKING:
    from verimim.interp.machine import Machine
    from verimim.ir.world import World

# Operations that only observe memory (see the module's docstring).
OBSERVERS = frozenset({"mem.load"})

# What `differences` compares, in the order it reports them.
ASPECTS = ("result", "warnings", "effects", "heap", "output")
ASPECT_WORDS = {"result": "result", "warnings": "other warnings", "effects": "other memory effects",
                "heap": "other host memory", "output": "other output"}


@dataclass(frozen=True)
class Observation:
    result: tuple[str, Any]                 # ("ok", value) | ("fault", code) | ("crash", exception name)
    output: bytes | None = None             # what C calls printed (None: not observed)
    heap: tuple[bytes, ...] | None = None   # the final host heap's blocks, sorted (None: not observed)
    warnings: tuple[str, ...] | None = None
    effects: tuple[tuple[str, int], ...] | None = None  # executed effects by axiom, sorted
    nondeterministic: str = ""              # why the output depends on the clock ("" when it does not)
    message: str = field(default="", compare=False)     # the fault's message
    fault: BaseException | None = field(default=None, compare=False, repr=False)
    # the warnings as the run reported them (place, message): what `diff` shows, as `run` does
    warned: tuple[Diagnostic, ...] = field(default=(), compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.result[0] == "ok"

    @property
    def code(self) -> str | None:
        """The fault's code (None when the run returned)."""
        return None if self.ok else str(self.result[1])

    def shown(self) -> str:
        """The result as a message shows it: the value, or the fault with its message."""
        if self.ok:
            return repr(self.result[1])
        return f"{self.result[1]}: {self.message}" if self.message else str(self.result[1])

    def outcome(self) -> tuple[Any, ...]:
        """The result and what was printed, as one comparable value: ("ok", value, output) or
        ("fault", code)."""
        return ("ok", self.result[1], self.output) if self.ok else self.result


def differences(a: Observation, b: Observation, aspects: Sequence[str] = ASPECTS) -> list[str]:
    """The aspects (of `aspects`, in ASPECTS' order) in which b differs from a. Output is not
    compared when either run's output depends on the clock; a part one side did not observe
    never differs."""
    out: list[str] = []
    for aspect in ASPECTS:
        if aspect not in aspects:
            continue
        if aspect == "output" and (a.nondeterministic or b.nondeterministic):
            continue
        x, y = getattr(a, aspect), getattr(b, aspect)
        if x is not None and y is not None and x != y:
            out.append(aspect)
    return out


def describe(diff: list[str]) -> str:
    """" with other host memory and other output" for what differs besides the result."""
    words = [ASPECT_WORDS[d] for d in diff if d != "result"]
    return f" with {' and '.join(words)}" if words else ""


def observe(host: World, argv: list[str], *, device: World | None = None, fuel: int | None = None,
            seed: int = 0, effects: bool = False, crash_ok: bool = False,
            prepare: Callable[[Machine], None] | None = None) -> Observation:
    """What one run of host's main with argv shows. `prepare` sets the machine up before the
    run (e.g. kernels on the GPU); `crash_ok` turns an exception of the interpreter itself into
    a ("crash", name) result instead of letting it through."""
    from verimim.interp.machine import DEFAULT_FUEL, Machine, find_main

    traced: Counter[str] = Counter()
    m = Machine(host, fuel=fuel or DEFAULT_FUEL, seed=seed, device=device)
    if prepare is not None:
        prepare(m)
    if effects:
        _trace(m, traced)
    try:
        value: Any = m.run_main(find_main(host, argv[0] if argv else None), argv)
    except (RuntimeFault, VerimimError) as e:
        return _seen(m, ("fault", e.code), None, e.message, e)
    except Exception as e:  # noqa: BLE001 — an ill-formed phase output can stop the interpreter
        if not crash_ok:
            raise
        return Observation(("crash", type(e).__name__), message=str(e), fault=e)
    return _seen(m, ("ok", value), tuple(sorted(traced.items())) if effects else None, "", None)


def _seen(m: Machine, result: tuple[str, Any], effects: tuple[tuple[str, int], ...] | None,
          message: str, fault: BaseException | None) -> Observation:
    clock = m.state.get("c.clock_blocks", set())  # what C's `time` wrote differs run to run
    names: dict[int, tuple[int, int, int]] = {}  # block ranks, made at the first stored pointer
    heap = tuple(sorted(_with_pointers_named(m, b, names) for b in m.memory.blocks.values()
                        if b.space == 0 and b.kind == "heap" and b.id not in clock))
    why = m.state.get("c.nondeterministic", "")
    return Observation(result, bytes(m.stdout), heap, tuple(sorted(w.code for w in m.warnings)), effects,
                       str(why) if why else "", message, fault, tuple(m.warnings))


_POINTER_WORD = struct.Struct("<Q")
_NAMED_POINTER = struct.Struct("<BBHI")  # address space, kind, rank among its blocks, offset
_KINDS = ("heap", "stack", "static", "shared", "dynshared", "argv")


def _with_pointers_named(m: Machine, b: Block, rank: dict[int, tuple[int, int, int]]) -> bytes:
    """A heap block's bytes with every stored pointer (where the block's pointer shadow says one
    starts: an 8-byte word `block id << 40 | offset`) written as what it points to: the block's
    address space and kind, its rank among the blocks of that space and kind in allocation
    order, and the offset. Block ids are the interpreter's own and differ from run to run (and
    a phase may allocate device blocks in between), so the raw bytes of a pointer would make
    two runs of one program differ; an integer is left as it is, whatever its bits, unless it is a
    pointer's address (`core.bitcast` of a pointer) stored unchanged, which is marked as a
    pointer is (verimim.interp.values.Address). `rank` is
    filled at the first block that holds a pointer, once per observation."""
    data = b.data
    if not b.pointers:
        return bytes(data)
    blocks = m.memory.blocks
    if not rank:
        seen: Counter[tuple[int, str]] = Counter()
        for bid in sorted(blocks):
            x = blocks[bid]
            rank[bid] = (x.space, _KINDS.index(x.kind) if x.kind in _KINDS else 255, seen[(x.space, x.kind)])
            seen[(x.space, x.kind)] += 1
    out = bytearray(data)
    for i in b.pointers:
        (word,) = _POINTER_WORD.unpack_from(data, i)
        hit = rank.get(word >> ADDR_SHIFT)
        if hit is not None:
            space, kind, k = hit
            _NAMED_POINTER.pack_into(out, i, space % 256, kind, k % 65536, (word & ((1 << ADDR_SHIFT) - 1)) % 2**32)
    return bytes(out)


def _has_token(args: list[Any]) -> bool:
    for a in args:
        if isinstance(a, Token):
            return True
        if isinstance(a, tuple) and any(isinstance(x, Token) for x in a):
            return True
    return False


def _trace(machine: Machine, effects: Counter[str]) -> None:
    """Count every operation on a memory token that changes state (writes, allocations, frees,
    copies, launches, synchronisations, stream operations) that the machine runs, by axiom.
    (Not by location: operations the World makes while β-reducing an immutable lambda have
    none, and the interpreter makes such copies itself when it applies one.)"""
    def wrap(annex: str, fn: Any) -> Any:
        def run(m: Any, th: Any, args: list[Any], node: Any) -> Any:
            if _has_token(args):
                effects[annex] += 1
            return fn(m, th, args, node)
        return run

    for annex, (arity, fn) in list(machine.semantics.items()):
        if annex not in OBSERVERS:
            machine.semantics[annex] = (arity, wrap(annex, fn))


class Observations:
    """Observations of programs for one argv (and schedule seed), by the identity of their
    Worlds: a phase whose output is its input (a checker that accepts) shows what its input
    showed, so that program is not run again. Worlds are never changed once a phase is done."""

    def __init__(self, argv: list[str], **options: Any) -> None:
        self.argv = argv
        self.options = options
        self._seen: dict[tuple[int, int], tuple[World, World | None, Observation]] = {}

    def record(self, host: World, device: World | None, obs: Observation) -> None:
        """What the caller observed of this program itself, with these options and argv."""
        self._seen[(id(host), id(device))] = (host, device, obs)

    def known(self, host: World, device: World | None = None) -> bool:
        return (id(host), id(device)) in self._seen

    def same_as(self, host: World, device: World | None, like_host: World, like_device: World | None) -> None:
        """Record that a program shows what an observed one showed: the caller has matched the
        two node for node (a phase whose output is a copy of its input), and a run depends on
        the nodes alone."""
        self.record(host, device, self._seen[(id(like_host), id(like_device))][2])

    def of(self, host: World, device: World | None = None) -> Observation:
        key = (id(host), id(device))
        hit = self._seen.get(key)
        if hit is not None:
            return hit[2]
        obs = observe(host, self.argv, device=device, **self.options)
        self._seen[key] = (host, device, obs)  # the Worlds are kept: their ids stay theirs
        return obs
