"""How many CPUs this process may really use, and so how many threads torch should train with.

``os.cpu_count()`` (and torch's default thread count) is the machine's: on the hub each user's processes
share a CPU quota of their own (rlhf_course/classroom/spawner.py: a cgroup's ``cpu.max``, 1 core by default),
and a process may be pinned to fewer cores (``taskset``, a cpuset).  Two torch threads under a one-core
quota run in turn, each throttled while the other spins in OpenMP's barrier: slower than one thread alone
(bench/RESULTS.md).
"""
from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
LAB_MAX_THREADS = 2  # the tiny LM gains nothing from more (bench/demo.py measures one against two)


def _cgroup_paths(proc_cgroup: str) -> dict[str, str]:
    """/proc/self/cgroup's lines, ``hierarchy:controllers:path``, as {controller: path}; v2's as {"": path}."""
    paths = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                paths[controller] = parts[2]
    return paths


def _quotas_v2(folder: Path, root: Path):
    """``cpu.max`` of the cgroup and each parent up to the root: ``"max 100000"`` or ``"50000 100000"``."""
    while True:
        with_quota = folder / "cpu.max"
        if with_quota.is_file():
            quota, period = with_quota.read_text().split()[:2]
            if quota != "max":
                yield int(quota), int(period)
        if folder == root or root not in folder.parents:
            return
        folder = folder.parent


def _quotas_v1(folder: Path, root: Path):
    """``cpu.cfs_quota_us`` (-1: none) and ``cpu.cfs_period_us`` of the cgroup and each parent."""
    while True:
        quota_file, period_file = folder / "cpu.cfs_quota_us", folder / "cpu.cfs_period_us"
        if quota_file.is_file() and period_file.is_file():
            quota = int(quota_file.read_text())
            if quota > 0:
                yield quota, int(period_file.read_text())
        if folder == root or root not in folder.parents:
            return
        folder = folder.parent


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> float | None:
    """The CPU quota of this process's cgroup in cores (the tightest of it and its parents), or None."""
    try:
        paths = _cgroup_paths(proc_cgroup if proc_cgroup is not None else Path("/proc/self/cgroup").read_text())
    except OSError:
        return None
    quotas = []
    try:
        if (root / "cgroup.controllers").is_file() and "" in paths:  # v2 only
            quotas += _quotas_v2(root / paths[""].lstrip("/"), root)
        else:
            if "cpu" in paths and (root / "cpu").is_dir():  # v1 (cpu,cpuacct: "cpu" is its link)
                quotas += _quotas_v1(root / "cpu" / paths["cpu"].lstrip("/"), root / "cpu")
            if "" in paths and (root / "unified" / "cgroup.controllers").is_file():  # hybrid: v2 beside v1
                quotas += _quotas_v2(root / "unified" / paths[""].lstrip("/"), root / "unified")
    except (OSError, ValueError):
        return None
    return min((quota / period for quota, period in quotas), default=None)


def usable_cpus(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> int:
    """The CPUs this process may use at once: those it may run on (its affinity), at most its cgroup's
    quota rounded up (1.5 cores: 2), at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit(root, proc_cgroup)
    if limit is not None:
        cpus = min(cpus, math.ceil(limit - 1e-9))
    return max(1, cpus)


def lab_threads() -> int:
    """The labs' torch threads: ``RLHF_LAB_THREADS`` if set, else the usable CPUs, at most two and at most
    ``OMP_NUM_THREADS`` (the hub's spawner sets it from the user's quota)."""
    if os.environ.get("RLHF_LAB_THREADS"):
        return int(os.environ["RLHF_LAB_THREADS"])
    threads = min(LAB_MAX_THREADS, usable_cpus())
    if os.environ.get("OMP_NUM_THREADS", "").isdigit() and int(os.environ["OMP_NUM_THREADS"]) > 0:
        threads = min(threads, int(os.environ["OMP_NUM_THREADS"]))
    return threads
