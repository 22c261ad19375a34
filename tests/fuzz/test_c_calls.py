"""The generator's C calls (`c_calls`): programs declare C functions in both of upstream's forms,
the oracle runs them, and what they print is part of what every target must agree on."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from verimim.fuzz.strategies import check_generated, programs
from verimim.plug import c_interp

# curried kernels and λ branch targets hit open compiler gaps (tests/fuzz/test_strategies.py KNOWN_BUGS)
NO_GAPS = dict(curried=False, lam_targets=False)
SETTINGS = settings(max_examples=20, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


def test_generated_c_calls_cover_both_forms_and_pass_the_oracle() -> None:
    seen: set[str] = set()

    @SETTINGS
    @given(programs(max_kernels=1, max_ops=2, streams=False, with_streams=False, buffers=False, **NO_GAPS))
    def run(p: Any) -> None:
        calls = {f for f in p.features_used if f.startswith("c.")}
        seen.update(calls)
        if calls:
            assert "ccon " in p.text  # the declaration is in the program's text
            v = check_generated(p, verify=False, schedules=1)
            assert v.ok, (v.kind, v.message)
    run()
    assert {"c.cfun", "c.ccon"} <= seen


def test_oracle_compares_what_c_calls_print(monkeypatch: pytest.MonkeyPatch) -> None:
    # A target that prints something else (same result) must be a `diff` failure.
    runs = [0]

    def drifting(real: Any) -> Any:
        def sem(c: c_interp.Call, a: list[object]) -> object:
            runs[0] += 1
            if runs[0] > 1:
                c.write(b"?")
            return real(c, a)
        return sem
    for name in ("println_i32", "print_integer", "putchar", "printf", "atoi"):
        monkeypatch.setitem(c_interp.SEMANTICS, name, drifting(c_interp.SEMANTICS[name]))
    failures: list[str] = []

    @SETTINGS
    @given(programs(max_kernels=1, max_ops=2, streams=False, with_streams=False, buffers=False, **NO_GAPS))
    def run(p: Any) -> None:
        if any(f.startswith("c.") for f in p.features_used):
            runs[0] = 0
            v = check_generated(p, verify=False, schedules=1)
            failures.append(v.kind)
    run()
    assert failures and set(failures) == {"diff"}
