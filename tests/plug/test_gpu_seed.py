"""gpu.mim against the seed document (../shared/seed/gpu-plugin.txt), which is normative.

1. Verbatim: walking gpu.mim and the seed side by side, every code line of gpu.mim is the next
   code line of the seed and every `///` line is the next prose line; nothing is left over.
2. Same meaning: the seed's code lines, elaborated on their own as plugin `gpu` in a fresh
   World, declare exactly the annexes gpu.mim declares, with identical types (compared as
   printed canonical Mim, since nodes of two Worlds are not comparable by identity).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED
from verimim.frontend.loader import PLUGIN_DIR, Loader
from verimim.ir.defs import MutLam
from verimim.ir.world import World
from verimim.printer import show

SEED = SHARED / "seed" / "gpu-plugin.txt"
GPU_MIM = PLUGIN_DIR / "gpu.mim"

# Every name the seed declares (PLUGINS.md lists them); the test fails if one is lost.
SEED_NAMES = """addr_space_global addr_space_shared addr_space_const addr_space_local GlobalM SharedM
ConstM LocalM GlobalPtr SharedPtr ConstPtr LocalPtr Stream default_stream init deinit auto_init
auto_deinit stream_init stream_deinit stream_sync with_streams alloc.block alloc.asyn free.block
free.asyn copy_to_device.block copy_to_device.asyn copy_to_host.block copy_to_host.asyn
alloc_copy.block alloc_copy.asyn buf_alloc_copy buf_copy_to_host launch sync_work_items
synced_scope check_addr_spaces_repl host_malloc2gpualloc_repl mem_checks remove_double_syncs
split_apply lower_btensor_map_reduce host_specific_phases device_specific_phases""".split()


def seed_lines() -> list[str]:
    if not SEED.is_file():
        pytest.skip("../shared/seed is not present")
    lines = [ln.rstrip() for ln in SEED.read_text(encoding="utf-8").splitlines() if ln.strip()]
    # The rendered document ends with the plugin's version number, which is not Mim.
    if lines and lines[-1].replace(".", "").isdigit():
        lines.pop()
    return lines


def split_gpu_mim() -> list[tuple[str, str]]:
    """gpu.mim's non-blank lines as (kind, text): kind "doc" for `///` lines, else "code"."""
    out = []
    for ln in GPU_MIM.read_text(encoding="utf-8").splitlines():
        if not ln.strip():
            continue
        stripped = ln.strip()
        if stripped.startswith("///"):
            text = stripped[3:]
            out.append(("doc", text[1:] if text.startswith(" ") else text))
        else:
            out.append(("code", ln.rstrip()))
    return out


def test_gpu_mim_is_the_seed_verbatim() -> None:
    seed = seed_lines()
    ours = split_gpu_mim()
    assert len(ours) == len(seed), f"gpu.mim has {len(ours)} non-blank lines, the seed {len(seed)}"
    for i, ((kind, text), expected) in enumerate(zip(ours, seed)):
        assert text == expected, f"line {i + 1} ({kind}): {text!r} != seed {expected!r}"


def annex_types(world: World) -> dict[str, str]:
    out = {}
    for name, value in world.annexes.items():
        if not name.startswith("gpu."):
            continue
        t = value.pi if isinstance(value, MutLam) else world.type_of(value)
        out[name] = show(t)
    return out


def plugin_dir_with_gpu(tmp_path: Path, gpu_text: str) -> Path:
    """A copy of the plugin directory whose gpu.mim is `gpu_text`."""
    d = tmp_path / "plug"
    d.mkdir()
    for f in PLUGIN_DIR.glob("*.mim"):
        (d / f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
    (d / "gpu.mim").write_text(gpu_text, encoding="utf-8")
    return d


def test_seed_and_gpu_mim_declare_the_same_names_and_types(tmp_path: Path) -> None:
    # The seed's code lines without any of gpu.mim's documentation stand in for gpu.mim.
    doc_lines = {text for kind, text in split_gpu_mim() if kind == "doc"}
    code = [ln for ln in seed_lines() if ln not in doc_lines]
    w_seed = World()
    seed_dir = plugin_dir_with_gpu(tmp_path, "\n".join(code) + "\n")
    Loader(w_seed, [], plugin_dir=seed_dir).elaborate("plugin gpu;", "<seed>", plugin=None)
    w_ours = World()
    Loader(w_ours, []).elaborate("plugin gpu;", "<ours>", plugin=None)
    seed_types = annex_types(w_seed)
    ours = annex_types(w_ours)
    assert set(ours) == set(seed_types)
    assert ours == seed_types
    for name in SEED_NAMES:
        assert f"gpu.{name}" in ours, name


def test_a_changed_type_is_noticed(tmp_path: Path) -> None:
    """The comparison above can fail: a gpu.mim whose `stream_sync` returns one token less differs."""
    text = GPU_MIM.read_text(encoding="utf-8").replace(
        "axm stream_sync: [mem.M 0, GlobalM, Stream] → [mem.M 0, GlobalM];",
        "axm stream_sync: [mem.M 0, GlobalM, Stream] → mem.M 0;")
    assert text != GPU_MIM.read_text(encoding="utf-8")
    w_bad = World()
    Loader(w_bad, [], plugin_dir=plugin_dir_with_gpu(tmp_path, text)).elaborate("plugin gpu;", "<bad>", plugin=None)
    w_ours = World()
    Loader(w_ours, []).elaborate("plugin gpu;", "<ours>", plugin=None)
    assert annex_types(w_bad)["gpu.stream_sync"] != annex_types(w_ours)["gpu.stream_sync"]
