"""A memory operation a kernel nested in a host function takes from outside it (it uses host
values only) is no capture `gpu.split_apply` may hand to the host (phases.kernel_captures)."""
from __future__ import annotations

import pytest

from tests.conftest import PROGRAMS
from verimim import driver


def _first_error(path: str) -> tuple[int, str, str]:
    report = driver.check(path, [])
    errors = [d for d in report.diagnostics if d.severity == "error"]
    where = f"{errors[0].loc.line}:{errors[0].loc.col}" if errors and errors[0].loc else ""
    return report.exit_code, errors[0].code if errors else "", where


@pytest.mark.parametrize("name, code, where", [
    # a host load the kernel alone demands: run stops the work-item there
    ("nested_kernel_reads_a_captured_host_pointer.mim", "E-ADDR-SPACE", "21:23"),
    # a global load with the host's token: the split made it a host read of device memory
    ("nested_kernel_loads_with_the_hosts_token.mim", "E-MEM-CROSSING", "22:23"),
    # the host's token itself, captured
    ("nested_kernel_returns_the_hosts_token.mim", "E-MEM-CROSSING", "15:5"),
])
def test_a_kernel_only_effect_on_host_values_is_rejected(name: str, code: str, where: str) -> None:
    assert _first_error(str(PROGRAMS / "phase_errors" / name)) == (1, code, where)


def test_the_twin_with_the_kernels_own_token_is_accepted() -> None:
    report = driver.check(str(PROGRAMS / "valid" / "nested_kernel_loads_with_its_own_token.mim"), [])
    assert report.exit_code == 0, [d.render() for d in report.diagnostics]
