"""CPU accounting from Linux /proc for the benchmarks: the whole machine's time, and the CPU of
process trees (a server and its workers, PostgreSQL and its backends)."""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def host_cpu() -> tuple[int, int, int]:
    """(busy, steal, total) clock ticks of all CPUs since boot (/proc/stat). Steal is time the
    hypervisor gave this VM's virtual CPUs to someone else: it slows every case alike and
    explains a bad round."""
    with open("/proc/stat") as stat:
        # user nice system idle iowait irq softirq steal (guest time is counted in user already)
        fields = [int(value) for value in stat.readline().split()[1:9]]
    total = sum(fields)
    return total - fields[3] - fields[4], fields[7], total


def tree_pids(pid: int) -> list[int]:
    pids, stack = [], [pid]
    while stack:
        current = stack.pop()
        pids.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return pids


def cpu_seconds(roots: list[int], tree: bool = True) -> dict[int, float]:
    """User + system CPU of each process in the trees under `roots`, by pid; with `tree` False
    of the `roots` alone."""
    times = {}
    for root in roots:
        for pid in tree_pids(root) if tree else [root]:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            times[pid] = (int(fields[11]) + int(fields[12])) / _TICK
    return times
