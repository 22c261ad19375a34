"""Verdicts of `check` as a user reads them: one per phase, two per launched kernel (races and
barrier divergence), and, in a program that launches nothing, one per stream pair left
undecided or found racing (`from_stream_diagnostics`), each with a status of spec/CLI.md.

The JSON has carried these all along; the text output used to say `FILE: ok` even when half of
them were `unknown`. Here they become lines for the ones short of `proved`, a closing count of
every status, and — with `--strict` — an error per verdict that is neither proved nor skipped.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from verimim.diagnostics import Diagnostic, Loc

# The order of the summary: strongest first, as a user scans it.
STATUS_ORDER = ("proved", "bounded", "validated", "unknown", "refuted", "rejected", "skipped")
# Statuses that need no attention: everything else is printed and fails `--strict`.
SETTLED = frozenset({"proved", "skipped"})
# Statuses that come with their own error diagnostic (E-SPEC, E-RACE, the checker's code): their
# verdict line would only repeat it.
DIAGNOSED = frozenset({"refuted", "rejected"})
# The kernel verdicts of spec/CLI.md's `kernels` entries, in the order they are printed.
KERNEL_ASPECTS = (("races", "races"), ("divergence", "barrier divergence"))


@dataclass(frozen=True)
class Verdict:
    """One status a check reached: `subject` names what it is about, as a user would say it."""

    subject: str
    status: str
    detail: str = ""
    loc: Loc | None = None

    @property
    def settled(self) -> bool:
        return self.status in SETTLED

    def line(self) -> str:
        where = f"{self.loc}: " if self.loc is not None and self.loc.line else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{where}{self.subject}: {self.status}{detail}"


def _phase_subject(entry: Mapping[str, Any]) -> str:
    side = entry.get("side")
    return f"phase `{entry['name']}`" + (f" ({side})" if side else "")


def from_report_data(file: str, data: Mapping[str, Any]) -> list[Verdict]:
    """The verdicts of a `check` report's data, phases in pipeline order, then kernels."""
    out = [Verdict(_phase_subject(p), p["status"], p.get("detail") or "") for p in data.get("phases") or []]
    for k in data.get("kernels") or []:
        launch = k.get("launch") or {}
        loc = Loc(file, launch.get("line") or 0, launch.get("col") or 0) if launch else None
        for key, what in KERNEL_ASPECTS:
            status = k.get(key)
            if isinstance(status, str):
                out.append(Verdict(f"kernel `{k['name']}` {what}", status, k.get("detail") or "", loc))
    return out


# How a launch-less program's unsettled verdict on races between streams begins: it has no
# `kernels` entry to carry it, so it is a note, "races between streams: STATUS, …: why".
STREAM_NOTE = "races between streams"


def stream_note(status: str, settled: str, why: str) -> str:
    """The message of such a note (`settled`: what the status does and does not show)."""
    return f"{STREAM_NOTE}: {status}, {settled}: {why}"


def of_check(file: str, data: Mapping[str, Any], diagnostics: Iterable[Diagnostic]) -> list[Verdict]:
    """Every verdict of a `check` report: its phases', each launch's, and the races between
    streams of a program without launches, which has only diagnostics to say them (what its
    summaries count)."""
    return from_report_data(file, data) + from_stream_diagnostics(diagnostics, launches=bool(data.get("kernels")))


def from_stream_diagnostics(diagnostics: Iterable[Diagnostic], launches: bool) -> list[Verdict]:
    """The verdicts on races between streams that a program launching no kernel has only as
    diagnostics (it has no `kernels` entry to carry them: verimim.smt.kernel_streams): an
    `unknown` or `bounded` one as a note (failing --strict), and a race found as an E-RACE error,
    each a `refuted` verdict — a run that exits 1 for a race counts it. With launches, the
    entries carry these (a host access against a pending copy refutes every launch's races)."""
    out = []
    for d in diagnostics:
        if d.code != "E-RACE":
            continue
        if d.severity == "note" and d.message.startswith(STREAM_NOTE + ": "):
            status = d.message[len(STREAM_NOTE) + 2:].split(",", 1)[0]
            out.append(Verdict(STREAM_NOTE, status, d.message.split(": ", 2)[-1], d.loc))
        elif d.severity == "error" and not launches:
            out.append(Verdict(STREAM_NOTE, "refuted", d.message, d.loc))
    return out


def summary(verdicts: Iterable[Verdict]) -> str:
    """`10 proved, 1 bounded, 1 unknown, 2 skipped` — every status that occurs, in STATUS_ORDER."""
    counts = Counter(v.status for v in verdicts)
    known = [f"{counts[s]} {s}" for s in STATUS_ORDER if counts[s]]
    other = [f"{n} {s}" for s, n in sorted(counts.items()) if s not in STATUS_ORDER]
    return ", ".join(known + other) or "no verdicts"


def attention(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """The verdicts a user must read about that no diagnostic reports: bounded, validated, unknown."""
    return [v for v in verdicts if not v.settled and v.status not in DIAGNOSED]


def strict_diagnostics(file: str, verdicts: Iterable[Verdict]) -> list[Diagnostic]:
    """`--strict`: every verdict short of proved/skipped is an error (exit 1). A refuted or
    rejected one already has its own diagnostic with the real code; it is not reported twice."""
    out = []
    for v in attention(verdicts):
        detail = f" ({v.detail})" if v.detail else ""
        out.append(Diagnostic("E-UNPROVED", f"{v.subject} is {v.status}, not proved{detail}; --strict "
                              f"accepts only proved or skipped", v.loc or Loc(file)))
    return out
