"""Failure signatures: what makes two failing programs "the same bug" in a campaign.

A signature is (kind, code, phase, where): the oracle's failure kind (`spec`, `diff`,
`internal`, `false-positive`, `missed-defect`, `roundtrip`, or the campaign's `hang` / `crash`),
the diagnostic code involved, the phase or oracle stage where it failed, and for an exception
the innermost verimim frame. Messages are left out on purpose: they name program-specific
values (results, line numbers) that differ between programs hitting one bug.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from types import TracebackType
from typing import Any

# A module of verimim (editable or installed: the package maps phases/, smt/, fuzz/, runtime/
# into verimim.*); frames of Python, Hypothesis or Z3 are not where verimim failed.
_OWN = "verimim."
# The runner's frame that runs one phase: its `phase` local (a Phase, which has a `name`) or
# its `name` local says which phase was running.
_PHASE_FRAME = "_run_phase"


@dataclass(frozen=True)
class Signature:
    kind: str
    code: str = ""
    phase: str = ""
    where: str = ""

    @property
    def key(self) -> str:
        """A stable directory name: readable parts, and a hash so that distinct ones never meet."""
        parts = [p for p in (self.kind, self.code, self.phase, self.where) if p]
        slug = re.sub(r"[^A-Za-z0-9.\-]+", "_", "_".join(parts))[:80].strip("_")
        digest = hashlib.sha1("\x00".join((self.kind, self.code, self.phase, self.where)).encode()).hexdigest()[:8]
        return f"{slug}-{digest}"

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "code": self.code, "phase": self.phase, "where": self.where}

    @staticmethod
    def from_json(obj: dict[str, Any]) -> "Signature":
        return Signature(obj.get("kind", ""), obj.get("code", ""), obj.get("phase", ""), obj.get("where", ""))


def of_verdict(verdict: Any) -> Signature | None:
    """The signature of a failed `check_generated` verdict; None when it passed."""
    if verdict.ok:
        return None
    return Signature(verdict.kind, verdict.code, verdict.phase, verdict.where)


def crash_site(exc: BaseException) -> tuple[str, str]:
    """(phase being run, `ExcType@module:function` of the innermost verimim frame) of an exception."""
    phase, where = "", ""
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        module = str(frame.f_globals.get("__name__", ""))
        if frame.f_code.co_name == _PHASE_FRAME:
            local = frame.f_locals
            named = getattr(local.get("phase"), "name", None)
            phase = named if isinstance(named, str) else local["name"] if isinstance(local.get("name"), str) else phase
        if module.startswith(_OWN):
            where = f"{module}:{frame.f_code.co_name}"
        tb = tb.tb_next
    return phase, f"{type(exc).__name__}@{where}" if where else type(exc).__name__
