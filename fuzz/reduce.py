"""A Mim-aware delta reducer (in the manner of C-Reduce) for failing campaign programs.

It works on the text that `dump_world` prints: a candidate is made by one local rewrite, put
back into canonical form by re-elaborating and printing it (so it type-checks and round-trips,
which the oracle requires), and kept when the oracle still fails with the same signature. The
rewrites, largest first:

  skip a call      `f ... ((m0, m1, m4), k)`  ->  `k (m0, m1, m4)`   (a launch, with_streams, ...:
                   the kernel and everything only it used disappear when the text is printed)
  pick a branch    `(f, t)#c (args)`          ->  `t (args)` / `f (args)`
  bypass a let     `let x = op (a, b, c);`    ->  drop it, `x#i` -> the i-th argument, `x` -> one
                   of them (a store's result is its memory argument, a load's `#0` too)
  hoist operand    `core.wrap.add @n 0 (a, b)` -> `a` / `b`  (any annex applied to a tuple)
  shrink literal   `37I16` -> `0I16`, `4` -> `0` / `1`

Declarations that no longer have a use vanish on their own: the printer prints what the
externals reach. The reducer stops at a fixed point or when its time budget is spent.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_OPEN = {"(": ")", "[": "]", "«": "»", "‹": "›", "{": "}"}
_CLOSE = set(_OPEN.values())
_LET = re.compile(r"^(\s*)let (\w+) = (.*);$")
# A typed integer literal (`37I16`), or a Nat literal compared in a loop condition (`(i, 4)`
# of `core.ncmp.l`): other bare numbers are mostly sizes inside types, where a change is a
# type error that costs an elaboration to find out.
_LITS = (re.compile(r"(?<![\w.@#])(\d+)I\d+(?![\w.])"), re.compile(r"core\.ncmp\.\w+ \(\w+, (\d+)\)"))


@dataclass(frozen=True)
class Reduction:
    text: str
    size_before: int
    size_after: int
    lines_before: int
    lines_after: int
    tries: int
    accepted: int
    seconds: float
    status: str  # "fixpoint" (no rewrite keeps the failure), "budget" (time ran out), "not reproducible"
    args: tuple[str, ...] = ()  # the program arguments of the reduced program (choices may change them)


class Budget:
    """The time a reduction may take. A check (the oracle on one candidate, seconds for a large
    program) is begun only while the typical one so far (the median) still fits in what is
    left, so the budget is overrun by one check's deviation from the median, not by a whole
    check begun at its last moment. Shared by the stages of one reduction (choices, then text),
    which learn the cost of a check from each other."""

    def __init__(self, seconds: float) -> None:
        self.start = time.monotonic()
        self.seconds = seconds
        self._costs: list[float] = []

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.start)

    def spent(self) -> bool:
        """Whether no typical check fits in the time left."""
        costs = sorted(self._costs)
        return self.left() <= (costs[len(costs) // 2] if costs else 0.0)

    def timed(self, keeps: Callable[[str], bool]) -> Callable[[str], bool]:
        """`keeps`, each call's time recorded."""
        def timed_keeps(text: str) -> bool:
            t0 = time.monotonic()
            try:
                return keeps(text)
            finally:
                self._costs.append(time.monotonic() - t0)
        return timed_keeps


def size(text: str) -> tuple[int, int]:
    """(characters, non-blank lines) of a program, the plugin header left out."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("plugin ")]
    return sum(len(ln) + 1 for ln in lines), len(lines)


# ============================================================================ term structure


def _close_at(s: str, i: int) -> int:
    """Index of the bracket closing the one that opens at s[i]."""
    depth: list[str] = []
    for j in range(i, len(s)):
        c = s[j]
        if c in _OPEN:
            depth.append(_OPEN[c])
        elif c in _CLOSE:
            if depth and c == depth[-1]:
                depth.pop()
                if not depth:
                    return j
    return -1


def split_top(s: str, sep: str) -> list[str]:
    """Split at `sep` outside brackets."""
    out, depth, cur = [], 0, []
    for c in s:
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        if c == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur))
    return [x.strip() for x in out]


def _args(group: str) -> list[str]:
    """The top-level elements of a parenthesised group `(a, b, c)`; one element for `(a)`."""
    return split_top(group[1:-1], ",") if group.startswith("(") and group.endswith(")") else [group]


def _apps(line: str) -> Iterator[tuple[int, int, list[str]]]:
    """Every application `head @… … (group)` in a line: (start, end, its space-separated items),
    where the items are taken at one bracket level (a tuple element, or the whole right-hand side)."""
    spans: list[tuple[int, int]] = []
    m = _LET.match(line)
    if m:
        spans.append((m.start(3), m.end(3)))
    else:
        spans.append((len(line) - len(line.lstrip()), len(line)))
    for i, c in enumerate(line):  # the elements of every group
        if c == "(":
            j = _close_at(line, i)
            if j < 0:
                continue
            spans.extend(_split_spans(line, i + 1, j))
    for a, b in spans:
        items = split_top(line[a:b], " ")
        if len(items) >= 2 and "." in items[0] and items[-1].startswith("("):
            yield a, b, items


def _split_spans(s: str, a: int, b: int) -> Iterator[tuple[int, int]]:
    depth, start = 0, a
    for i in range(a, b):
        c = s[i]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == "," and depth == 0:
            yield _strip(s, start, i)
            start = i + 1
    yield _strip(s, start, b)


def _strip(s: str, a: int, b: int) -> tuple[int, int]:
    while a < b and s[a] == " ":
        a += 1
    while b > a and s[b - 1] == " ":
        b -= 1
    return a, b


# ============================================================================ rewrites


def _skip_calls(lines: list[str]) -> Iterator[list[str]]:
    for n, line in enumerate(lines):
        if _LET.match(line) or not line.strip() or line.strip() in ("where", "end;") or line.lstrip().startswith(("con ", "fun ", "lam ", "plugin ")):
            continue
        indent = line[: len(line) - len(line.lstrip())]
        items = split_top(line.strip(), " ")
        last = _args(items[-1]) if len(items) >= 2 else []
        if len(last) == 2 and re.fullmatch(r"\w+", last[1]):
            yield lines[:n] + [f"{indent}{last[1]} {last[0] if last[0].startswith('(') else '(' + last[0] + ')'}"] + lines[n + 1:]


def _pick_branches(lines: list[str]) -> Iterator[list[str]]:
    for n, line in enumerate(lines):
        m = re.match(r"^(\s*)\((\w+), (\w+)\)#", line)
        if not m or _LET.match(line):
            continue
        items = split_top(line.strip(), " ")
        if len(items) != 2:
            continue
        for target in (m.group(3), m.group(2)):
            yield lines[:n] + [f"{m.group(1)}{target} {items[1]}"] + lines[n + 1:]


def _bypass_lets(lines: list[str]) -> Iterator[list[str]]:
    for n in range(len(lines) - 1, -1, -1):  # last first: later lets use earlier ones
        m = _LET.match(lines[n])
        if not m:
            continue
        name, rhs = m.group(2), m.group(3)
        items = split_top(rhs, " ")
        args = _args(items[-1]) if len(items) >= 2 else [rhs]
        rest = lines[:n] + lines[n + 1:]
        proj = re.compile(rf"\b{name}#(\d+)(?:_\d+)?\b")  # `x#1` or, typed, `x#1_2`
        bare = re.compile(rf"\b{name}\b(?!#)")
        # A load's value: a literal of the loaded type (`mem.load @(I32, 0)`), its memory: the
        # memory argument; anything else: the argument in the same position.
        loaded = re.match(r"mem\.load @\((I\d+|Nat|Bool), \d+\)", rhs)
        value = {"Nat": "0", "Bool": "ff"}.get(loaded.group(1), f"0{loaded.group(1)}") if loaded else None
        for k in range(len(args)):
            out = []
            for ln in rest:
                def project(mm: re.Match[str]) -> str:
                    i = int(mm.group(1))
                    if value is not None and i == 1:
                        return value
                    return _paren(args[i]) if i < len(args) else mm.group(0)
                ln = proj.sub(project, ln)
                out.append(bare.sub(lambda _: _paren(args[k]), ln))
            yield out
            if not bare.search("\n".join(rest)):
                break  # only projections: the other k give the same text


def _paren(arg: str) -> str:
    return arg if re.fullmatch(r"[\w.#]+|\(.*\)", arg) else f"({arg})"


# Operations of the core plugin whose operands have the type of their result (`@n` is the
# width: `Idx n`), and the comparisons (`Bool` results): an application of one can be replaced
# by an operand or by a literal of that type without breaking the types around it.
_SAME_TYPE = re.compile(r"core\.(wrap|nat|shr|bit2|extrema)\.\w+")
_COMPARE = re.compile(r"core\.(icmp|ncmp)\.\w+")


def _literal(width: str | None) -> str | None:
    if width is None:
        return "0"  # Nat
    n = int(width)
    bits = n.bit_length() - 1
    return f"0I{bits}" if n == 2 ** bits and bits in (8, 16, 32, 64) else f"0_{n}"


def _hoist_operands(lines: list[str]) -> Iterator[list[str]]:
    for n, line in enumerate(lines):
        seen: set[tuple[int, int]] = set()
        for a, b, items in _apps(line):
            if (a, b) in seen:
                continue
            seen.add((a, b))
            head = items[0]
            width = next((i[1:] for i in items[1:] if re.fullmatch(r"@\d+", i)), None)
            if _COMPARE.fullmatch(head):
                replacements = ["ff", "tt"]
            elif _SAME_TYPE.fullmatch(head):
                replacements = [r for r in [_literal(width)] if r] + [_paren(x) for x in _args(items[-1]) if x]
            else:
                continue
            for rep in replacements:
                yield lines[:n] + [line[:a] + rep + line[b:]] + lines[n + 1:]


def _shrink_literals(lines: list[str]) -> Iterator[list[str]]:
    for n, line in enumerate(lines):
        for m in (m for lit in _LITS for m in lit.finditer(line)):
            value, a, b = int(m.group(1)), m.start(1), m.end(1)
            for smaller in sorted({0, 1, value // 2} - {value}):
                if smaller < value:
                    yield lines[:n] + [line[:a] + f"{smaller}" + line[b:]] + lines[n + 1:]


PASSES: tuple[tuple[str, Callable[[list[str]], Iterator[list[str]]]], ...] = (
    ("skip a call", _skip_calls),
    ("pick a branch", _pick_branches),
    ("bypass a let", _bypass_lets),
    ("hoist an operand", _hoist_operands),
    ("shrink a literal", _shrink_literals),
)


# ============================================================================ choices


Choices = tuple[object, ...]


def _simplest(c: object) -> object:
    return False if isinstance(c, bool) else type(c)() if isinstance(c, (int, float, str, bytes)) else c


def _simpler(c: object) -> list[object]:
    """Values to try in place of choice c, simplest first: the type's zero (Hypothesis replays
    a value its draw does not allow as the draw's simplest), then half of an integer (a count
    of operations or loop trips that the failure needs above its minimum)."""
    simple = _simplest(c)
    out = [] if c == simple and type(c) is type(simple) else [simple]
    if isinstance(c, int) and not isinstance(c, bool) and abs(c) > 2:
        out.append(c // 2 if c > 0 else -(-c // 2))
    return out


def _rank(c: object) -> float:
    if isinstance(c, (str, bytes)):
        return float(len(c))
    if isinstance(c, (bool, int, float)):
        if c != c:  # NaN: the largest, so that it compares (and shrinking still ends)
            return float("inf")
        return abs(float(c)) * 2 + (1 if c < 0 else 0)
    return 0.0


def _order(cs: Choices) -> tuple[int, tuple[float, ...]]:
    """A shortlex order on choice sequences, like Hypothesis's (shorter, then simpler choice by choice):
    a kept candidate is strictly smaller in it, so shrinking ends."""
    return len(cs), tuple(_rank(c) for c in cs)


def shrink_choices(choices: Choices, original: str, regenerate: Callable[[Choices], tuple[str, Choices] | None],
                   keeps: Callable[[str], bool], budget: float | Budget) -> tuple[Choices, str | None, int, int, bool]:
    """Shrink the generator's choice sequence before the text: each choice in turn is set to a
    simpler value (`_simpler`), and kept when the regenerated program is smaller (a shorter
    text, or as long with choices smaller in shortlex order) and still fails the same way.
    Early choices decide the structure (the defect kind, how many kernels, groups, operations), so one kept choice
    can remove whole kernels, and every program made this way is well-typed by construction.
    Passes repeat while one keeps a choice (a kept choice re-aligns the ones after it).

    `original` is the text `choices` generate. Returns (choices, the program text or None if
    nothing was kept, tries, kept, whether the
    budget ran out before a pass kept nothing). `budget`: seconds, or a Budget shared with
    the stage after this one."""
    clock = budget if isinstance(budget, Budget) else Budget(budget)
    keeps = clock.timed(keeps)
    best, text, tries, kept = choices, None, 0, 0
    # smaller: a shorter program, or as long with simpler choices (so shrinking ends)
    best_key = (size(original)[0], _order(choices))
    progress = True
    while progress:
        progress = False
        i = 0
        while i < len(best):
            for value in _simpler(best[i]):
                if clock.spent():
                    return best, text, tries, kept, True
                out = regenerate(best[:i] + (value,) + best[i + 1:])
                if out is None:
                    continue
                key = (size(out[0])[0], _order(out[1]))
                if key >= best_key:
                    continue
                tries += 1
                if keeps(out[0]):
                    text, best, best_key, kept, progress = out[0], out[1], key, kept + 1, True
                    break
            i += 1
    return best, text, tries, kept, False


# ============================================================================ the reducer


def reduce_text(text: str, keeps: Callable[[str], bool], canon: Callable[[str], str | None],
                budget_s: float | Budget = 60.0, known_to_fail: bool = False) -> Reduction:
    """Reduce `text` while `keeps(candidate)` (the same failure) holds, for at most `budget_s`
    (seconds, or a Budget shared with the stage before). `known_to_fail`: `keeps(text)` holds
    already (the stage before found so): it is not checked again.

    `canon(t)` is t re-elaborated and printed, or None when t does not type-check."""
    clock = budget_s if isinstance(budget_s, Budget) else Budget(budget_s)
    start = time.monotonic()
    keeps = clock.timed(keeps)
    tries = accepted = 0
    seen = {text}
    best = text
    status = "fixpoint"
    if not known_to_fail and not keeps(text):
        return reduction(text, text, 1, 0, start, "not reproducible")
    progress = True
    while progress:
        progress = False
        for _name, rewrite in PASSES:
            # After a kept rewrite the pass goes on from the same position of the new text's
            # candidates: those before it were just refused and would mostly be refused again
            # (the outer loop, to a fixed point, gives them another chance).
            pos = 0
            while True:
                cands = list(rewrite(best.splitlines()))
                kept = False
                for i in range(pos, len(cands)):
                    if clock.spent():
                        return reduction(text, best, tries, accepted, start, "budget")
                    raw = "\n".join(cands[i]) + "\n"
                    if raw in seen:
                        continue
                    seen.add(raw)
                    cand = canon(raw)
                    if cand is None or cand in seen or size(cand)[0] >= size(best)[0]:
                        continue
                    seen.add(cand)
                    tries += 1
                    if keeps(cand):
                        best, accepted, progress, kept, pos = cand, accepted + 1, True, True, i
                        break
                if not kept:
                    break
    return reduction(text, best, tries, accepted, start, status)


def reduction(original: str, best: str, tries: int, accepted: int, start: float, status: str,
              args: tuple[str, ...] = ()) -> Reduction:
    """The Reduction of `original` to `best`, begun at `start` (time.monotonic())."""
    (b, lb), (a, la) = size(original), size(best)
    return Reduction(best, b, a, lb, la, tries, accepted, round(time.monotonic() - start, 2), status, args)
