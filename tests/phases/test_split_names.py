"""The external names `gpu.split_apply` gives kernels (phases.split.device_names)."""
from __future__ import annotations

from tests.conftest import PROGRAMS
from verimim import driver


def test_a_kernel_keeps_a_name_that_another_kernels_suffix_would_take() -> None:
    report = driver.check(str(PROGRAMS / "valid" / "kernels_named_like_a_suffix.mim"), [])
    assert report.exit_code == 0, [d.render() for d in report.diagnostics]
    names = [k["name"] for k in report.data["kernels"]]
    assert names == ["k", "k_2", "k_1"], names  # in launch order: launch_a's k, launch_b's k, k_1
