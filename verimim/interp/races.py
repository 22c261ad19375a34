"""Data-race detection for one kernel launch (SEMANTICS.md "Races").

Two accesses by different work-items to the same byte, at least one a write, race unless both
are in the same group and a barrier that both passed lies between them. Epochs count the
barriers a group has passed, so "separated" means: same group, different epoch. Global memory
has no barrier across groups. A write-write race in which every write stores the same byte is
benign (`W-BENIGN-RACE`, reported once per launch); any other race is `E-RACE`.

Per byte the tracker keeps, for the group's current epoch, the writers (item → byte) and
readers, and, across groups, which groups wrote (with the byte) or read it at all: enough to
decide every conflict in constant time per access.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from verimim.diagnostics import Loc, Related
from verimim.interp.values import RuntimeFault


@dataclass
class _ByteState:
    # Same-group bookkeeping, per group: (epoch, {item: (byte or -1 if it wrote several, loc)}, {item: loc})
    groups: dict[int, tuple[int, dict[int, tuple[int, Loc | None]], dict[int, Loc | None]]] = field(default_factory=dict)
    # Cross-group bookkeeping: group → (first byte written, loc, wrote different bytes?)
    wgroups: dict[int, tuple[int, Loc | None, bool]] = field(default_factory=dict)
    rgroups: dict[int, Loc | None] = field(default_factory=dict)


@dataclass
class Access:
    item: int
    group: int
    epoch: int
    write: bool
    loc: Loc | None


class RaceTracker:
    def __init__(self) -> None:
        self.bytes: dict[tuple[int, int], _ByteState] = {}
        self.benign: tuple[str, Loc | None, tuple[Related, ...]] | None = None

    def access(self, block_id: int, label: str, offset: int, data: bytes | None, size: int,
               acc: Access) -> None:
        """Record an access of `size` bytes at `offset` (data: the bytes written, or None for a read)."""
        for k in range(size):
            byte = data[k] if data is not None else None
            self._one(block_id, label, offset + k, byte, acc)

    def _one(self, block_id: int, label: str, off: int, byte: int | None, acc: Access) -> None:
        key = (block_id, off)
        st = self.bytes.get(key)
        if st is None:
            st = self.bytes[key] = _ByteState()
        g, item = acc.group, acc.item
        where = f"byte {off} of `{label}`"
        # Conflicts with other groups: never separated.
        for og, (obyte, oloc, mixed) in st.wgroups.items():
            if og == g:
                continue
            if byte is None:
                self._race(f"work-item {item} of group {g} reads {where}, which group {og} writes",
                           acc.loc, oloc)
            if mixed or obyte != byte:
                self._race(f"work-items of groups {g} and {og} write different values to {where}",
                           acc.loc, oloc)
            self._benign(where, acc.loc, oloc)
        if byte is not None:
            for og, oloc in st.rgroups.items():
                if og != g:
                    self._race(f"work-item {item} of group {g} writes {where}, which group {og} reads",
                               acc.loc, oloc)
        # Conflicts within the group: only in the same epoch (no barrier in between).
        cur = st.groups.get(g)
        if cur is None or cur[0] != acc.epoch:
            cur = (acc.epoch, {}, {})
            st.groups[g] = cur
        _, writers, readers = cur
        for oitem, (obyte, oloc) in writers.items():
            if oitem == item:
                continue
            if byte is None:
                self._race(f"work-item {item} reads {where} that work-item {oitem} of the same group "
                           f"writes, with no barrier in between", acc.loc, oloc)
            if obyte != byte:
                self._race(f"work-items {item} and {oitem} of group {g} write different values to "
                           f"{where} with no barrier in between", acc.loc, oloc)
            self._benign(where, acc.loc, oloc)
        if byte is not None:
            for oitem, oloc in readers.items():
                if oitem != item:
                    self._race(f"work-item {item} writes {where} that work-item {oitem} of the same "
                               f"group reads, with no barrier in between", acc.loc, oloc)
        # Record.
        if byte is None:
            readers.setdefault(item, acc.loc)
            st.rgroups.setdefault(g, acc.loc)
        else:
            mine = writers.get(item)
            # An item that wrote different values to this byte in this epoch: -1 differs from
            # any byte, so a same-value write of another item still races with the other write.
            writers[item] = (byte if mine is None or mine[0] == byte else -1, acc.loc)
            prev = st.wgroups.get(g)
            if prev is None:
                st.wgroups[g] = (byte, acc.loc, False)
            elif prev[0] != byte and not prev[2]:
                st.wgroups[g] = (prev[0], prev[1], True)

    @staticmethod
    def _race(message: str, loc: Loc | None, other: Loc | None) -> None:
        raise RuntimeFault("E-RACE", message, loc, (Related(_other("access", loc, other), other),))

    def _benign(self, where: str, loc: Loc | None, other: Loc | None) -> None:
        if self.benign is None:
            self.benign = (f"benign write-write race on {where}: the work-items that write it store the same value",
                           loc, (Related(_other("write", loc, other), other),))


def _other(what: str, loc: Loc | None, other: Loc | None) -> str:
    """The related note of a race: where the other work-item's access is — or that it is this
    same statement (both work-items ran it), which a second snippet would only repeat."""
    return f"the other {what} is this same statement, run by the other work-item" if other == loc \
        else f"the other {what}"
