"""The labs' torch threads fit the CPUs the process may really use (issue #37): its cgroup's CPU quota (v1 or v2,
its own or a parent's), its affinity, OMP_NUM_THREADS; a process in a real one-core cgroup (as `make hub`'s
spawner makes them, root only) counts one CPU."""
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from rlhf_course.classroom.spawner import UserCgroup
from rlhf_course.lab import threads


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_cgroup_v2_quota_its_own_or_a_parents(tmp_path):
    root = tree(tmp_path, {"cgroup.controllers": "cpu memory", "class/cpu.max": "150000 100000",
                           "class/alice/cpu.max": "max 100000"})
    assert threads.cgroup_cpu_limit(root, "0::/class/alice\n") == 1.5
    assert threads.usable_cpus(root, "0::/class/alice\n") == min(2, len(os.sched_getaffinity(0)))
    (root / "class" / "alice" / "cpu.max").write_text("50000 100000")
    assert threads.cgroup_cpu_limit(root, "0::/class/alice\n") == 0.5
    assert threads.usable_cpus(root, "0::/class/alice\n") == 1
    assert threads.cgroup_cpu_limit(root, "0::/elsewhere\n") is None


def test_cgroup_v1_quota(tmp_path):
    root = tree(tmp_path, {"cpu/class/bob/cpu.cfs_quota_us": "100000", "cpu/class/bob/cpu.cfs_period_us": "100000",
                           "cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"})
    assert threads.cgroup_cpu_limit(root, "4:memory:/class/bob\n2:cpu,cpuacct:/class/bob\n") == 1.0
    assert threads.usable_cpus(root, "2:cpu,cpuacct:/class/bob\n") == 1
    assert threads.cgroup_cpu_limit(root, "2:cpu,cpuacct:/\n") is None  # -1: no quota


def test_lab_threads_honour_the_environment(monkeypatch):
    monkeypatch.delenv("RLHF_LAB_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads.lab_threads() == 1
    monkeypatch.setenv("RLHF_LAB_THREADS", "3")  # the person's explicit choice wins
    assert threads.lab_threads() == 3


def test_a_process_in_a_one_core_cgroup_counts_one_cpu(repo):
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    cgroup = UserCgroup(f"threads-test-{uuid.uuid4().hex[:8]}")
    procs = cgroup.prepare(None, 1.0, None)
    if not procs:
        pytest.skip("root may make no cgroup here (a container)")
    try:
        def enter():
            for path in procs:
                Path(path).write_text(str(os.getpid()))
        env = {k: v for k, v in os.environ.items() if k not in ("RLHF_LAB_THREADS", "OMP_NUM_THREADS")}
        counted = subprocess.run(
            [sys.executable, "-c", "from rlhf_course.lab import threads; print(threads.usable_cpus(), "
             "threads.lab_threads())"], env=env, cwd=repo, preexec_fn=enter, capture_output=True, text=True)
        assert counted.stdout.split() == ["1", "1"], counted.stderr
    finally:
        cgroup.remove()
