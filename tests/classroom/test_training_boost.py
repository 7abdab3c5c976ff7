"""The training boost (rlhf_course/classroom/training_boost.py): while the broker reports a process in a classroom
user's cgroup as a slot holder, that cgroup's CPU weight is raised, and given back when it is not reported any more;
a holder outside the class's cgroups is never touched.  Real cgroups (v2, or v1's cpu hierarchy, as the spawner makes
them) under a parent of the test's own; no hub, no broker (its own tests: test_training_broker.py; about 1 s)."""
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rlhf_course.classroom import training_boost
from rlhf_course.classroom.spawner import CGROUP_ROOT
from rlhf_course.classroom.training_boost import BOOSTED_WEIGHT, DEFAULT_WEIGHT, TrainingBoost
from tests.support.cgroups import cpu_quota, cpu_weight


def test_a_weight_outside_the_schedulers_range_is_refused():
    with pytest.raises(ValueError, match="1 to 10000"):
        TrainingBoost(weight=0)


@pytest.fixture
def class_cgroups():
    """A parent cgroup of the test's own (v2, else v1's cpu hierarchy) with two user cgroups, as the spawner makes."""
    if os.geteuid() != 0:
        pytest.skip("making cgroups needs root")
    v2 = (CGROUP_ROOT / "cgroup.controllers").is_file()
    parent = (CGROUP_ROOT if v2 else CGROUP_ROOT / "cpu") / f"rlhf-boost-test-{os.getpid()}"
    try:
        parent.mkdir()
        if v2:
            (parent / "cgroup.subtree_control").write_text("+cpu")
        for user in ("alice", "bob"):
            (parent / user).mkdir()
    except OSError as error:
        shutil.rmtree(parent, ignore_errors=True)
        pytest.skip(f"no cgroup with a CPU controller here: {error}")
    yield parent
    for cgroup in (parent / "alice", parent / "bob", parent):
        for pid in (cgroup / "cgroup.procs").read_text().split() if cgroup.is_dir() else []:
            subprocess.run(["kill", "-9", pid])
        for _ in range(50):
            try:
                cgroup.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)


class Process:
    """A process that sleeps in ``cgroup`` (or where the test runs): what the broker reports holding a slot."""

    def __init__(self, cgroup: Path | None):
        procs = cgroup / "cgroup.procs" if cgroup else None
        self.process = subprocess.Popen(["sleep", "60"],
                                        preexec_fn=(lambda: procs.write_text(str(os.getpid()))) if procs else None)
        self.pid = self.process.pid

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


def test_a_slot_holders_cgroup_weighs_more_while_it_is_reported(class_cgroups):
    alice, bob = class_cgroups / "alice", class_cgroups / "bob"
    boost = TrainingBoost(parents=(class_cgroups,))
    processes = [Process(alice), Process(bob), Process(None)]
    a, b, outside = (p.pid for p in processes)
    try:
        assert boost.hold(set()) == set() and cpu_weight(alice) == cpu_weight(bob) == DEFAULT_WEIGHT
        assert boost.hold({a}) == {alice}
        assert (cpu_weight(alice), cpu_weight(bob)) == (BOOSTED_WEIGHT, DEFAULT_WEIGHT)
        assert boost.hold({a, b}) == {alice, bob} and cpu_weight(bob) == BOOSTED_WEIGHT
        assert boost.hold({b}) == {bob} and cpu_weight(alice) == DEFAULT_WEIGHT  # alice's slot ended
        processes[1].kill()  # a holder that died before the broker's report: its pid names no cgroup any more
        assert boost.hold({b}) == set() and cpu_weight(bob) == DEFAULT_WEIGHT
        assert boost.hold({outside}) == set()  # outside the class's cgroups: nothing to boost, nothing touched
        assert cpu_weight(alice) == cpu_weight(bob) == DEFAULT_WEIGHT
        boost.hold({a})
        boost.restore()
        assert cpu_weight(alice) == DEFAULT_WEIGHT and boost.boosted == set()
    finally:
        for process in processes:
            process.kill()


def test_a_holders_quota_is_lowered_while_it_holds_its_slot_and_given_back(class_cgroups):
    """With ``holder_cpus`` the holder may use at most that many cores while it holds a slot (the share it leaves the
    rest of the class); its user's own quota comes back when the slot is freed, and a user whose own quota is already
    lower, or who has none to lower, is left as it was."""
    alice, bob = class_cgroups / "alice", class_cgroups / "bob"
    training_boost._write_quota(alice, "100000 100000")  # one core, as the spawner sets it
    training_boost._write_quota(bob, "50000 100000")  # half a core: below the holders' quota already
    boost = TrainingBoost(weight=10000, holder_cpus=0.85, parents=(class_cgroups,))
    processes = [Process(alice), Process(bob)]
    a, b = (p.pid for p in processes)
    try:
        assert boost.hold({a, b}) == {alice, bob}
        assert (cpu_weight(alice), cpu_quota(alice)) == (10000, 0.85)
        assert (cpu_weight(bob), cpu_quota(bob)) == (10000, 0.5)
        assert boost.hold({b}) == {bob}
        assert (cpu_weight(alice), cpu_quota(alice)) == (DEFAULT_WEIGHT, 1.0)
        boost.restore()
        assert (cpu_weight(bob), cpu_quota(bob)) == (DEFAULT_WEIGHT, 0.5)
    finally:
        for process in processes:
            process.kill()


def test_a_holders_quota_must_be_a_positive_number_of_cores():
    with pytest.raises(ValueError, match="positive number of cores"):
        TrainingBoost(holder_cpus=0)
