"""The campaign's Dask cluster (verimim.fuzz.cluster): a GPU campaign's local workers each see
one GPU of their own (checked through the environment CUDA reads; no GPU needed)."""
from __future__ import annotations

import os

import pytest

from verimim.fuzz.cluster import connect, gpu_ids


def _visible() -> str | None:
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def test_each_local_worker_sees_its_own_gpu() -> None:
    cluster = connect(workers=2, gpus=("7", "9"))
    try:
        seen = cluster.client.run(_visible)
    finally:
        cluster.close()
    assert sorted(seen.values()) == ["7", "9"]


def test_gpu_ids_follow_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5")
    assert gpu_ids() == ("2", "5")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_ids() == ()

