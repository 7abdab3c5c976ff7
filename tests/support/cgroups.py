"""What a cgroup's CPU files say, read as the kernel writes them (v2, or v1's cpu hierarchy), for the tests of the
training boost: an account of its own, not the boost's readers."""
from __future__ import annotations

import contextlib
from pathlib import Path

V1_SHARES_PER_WEIGHT = 1024 / 100  # v1's cpu.shares default (1024) is v2's cpu.weight default (100)


def cpu_weight(cgroup: Path) -> int | None:
    """The cgroup's CPU weight on v2's scale (v1's cpu.shares / 10.24), or None (no such cgroup)."""
    with contextlib.suppress(OSError):
        return int((cgroup / "cpu.weight").read_text())
    with contextlib.suppress(OSError):
        return round(int((cgroup / "cpu.shares").read_text()) / V1_SHARES_PER_WEIGHT)
    return None


def cpu_quota(cgroup: Path) -> float | None:
    """The cgroup's CPU quota in cores (v2's ``cpu.max``, v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``), or
    None (no quota, or no such cgroup)."""
    with contextlib.suppress(OSError):
        quota, period = (cgroup / "cpu.max").read_text().split()
        return None if quota == "max" else int(quota) / int(period)
    with contextlib.suppress(OSError):
        quota = int((cgroup / "cpu.cfs_quota_us").read_text())
        return None if quota == -1 else quota / int((cgroup / "cpu.cfs_period_us").read_text())
    return None
