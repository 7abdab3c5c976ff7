"""The class's CPU shares (rlhf_course/classroom/cpu_shares.py): while the training broker reports a process in a
classroom user's cgroup as a slot holder, that cgroup's CPU weight is raised, while the Validate queue's broker reports
one as a turn holder it is lowered, and each is given back when it is not reported any more; a holder outside the
class's cgroups is never touched.  Real cgroups (v2, or v1's cpu hierarchy, as the spawner makes
them) under a parent of the test's own; no hub, no broker (its own tests: test_training_broker.py; about 1 s)."""
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rlhf_course.classroom import cpu_shares
from rlhf_course.classroom.spawner import CGROUP_ROOT
from rlhf_course.classroom.cpu_shares import BOOSTED_WEIGHT, DEFAULT_WEIGHT, CpuShares
from tests.support.cgroups import cpu_quota, cpu_weight


def test_a_weight_outside_the_schedulers_range_is_refused():
    with pytest.raises(ValueError, match="1 to 10000"):
        CpuShares(training_weight=0)


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
    boost = CpuShares(parents=(class_cgroups,))
    processes = [Process(alice), Process(bob), Process(None)]
    a, b, outside = (p.pid for p in processes)
    try:
        assert boost.training(set()) == set() and cpu_weight(alice) == cpu_weight(bob) == DEFAULT_WEIGHT
        assert boost.training({a}) == {alice}
        assert (cpu_weight(alice), cpu_weight(bob)) == (BOOSTED_WEIGHT, DEFAULT_WEIGHT)
        assert boost.training({a, b}) == {alice, bob} and cpu_weight(bob) == BOOSTED_WEIGHT
        assert boost.training({b}) == {bob} and cpu_weight(alice) == DEFAULT_WEIGHT  # alice's slot ended
        processes[1].kill()  # a holder that died before the broker's report: its pid names no cgroup any more
        assert boost.training({b}) == set() and cpu_weight(bob) == DEFAULT_WEIGHT
        assert boost.training({outside}) == set()  # outside the class's cgroups: nothing to boost, nothing touched
        assert cpu_weight(alice) == cpu_weight(bob) == DEFAULT_WEIGHT
        boost.training({a})
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
    cpu_shares._write_quota(alice, "100000 100000")  # one core, as the spawner sets it
    cpu_shares._write_quota(bob, "50000 100000")  # half a core: below the holders' quota already
    boost = CpuShares(training_weight=10000, holder_cpus=0.85, parents=(class_cgroups,))
    processes = [Process(alice), Process(bob)]
    a, b = (p.pid for p in processes)
    try:
        assert boost.training({a, b}) == {alice, bob}
        assert (cpu_weight(alice), cpu_quota(alice)) == (10000, 0.85)
        assert (cpu_weight(bob), cpu_quota(bob)) == (10000, 0.5)
        assert boost.training({b}) == {bob}
        assert (cpu_weight(alice), cpu_quota(alice)) == (DEFAULT_WEIGHT, 1.0)
        boost.restore()
        assert (cpu_weight(bob), cpu_quota(bob)) == (DEFAULT_WEIGHT, 0.5)
    finally:
        for process in processes:
            process.kill()


def test_a_holders_quota_must_be_a_positive_number_of_cores():
    with pytest.raises(ValueError, match="positive number of cores"):
        CpuShares(holder_cpus=0)


def test_a_validate_holder_yields_while_it_holds_its_turn_and_a_training_one_keeps_the_trainings_weight(class_cgroups):
    """Validate's turn lowers the user's weight (it yields to the class's cells and trainings) and gives it back
    after; a user who trains while validating trains at the training's weight, and yields again once the training
    slot is freed while the Validate still runs."""
    alice, bob = class_cgroups / "alice", class_cgroups / "bob"
    shares = CpuShares(training_weight=DEFAULT_WEIGHT, validate_weight=10, parents=(class_cgroups,))
    processes = [Process(alice), Process(bob), Process(None)]
    a, b, outside = (p.pid for p in processes)
    try:
        assert shares.validating({a, b, outside}) == {alice, bob}
        assert cpu_weight(alice) == cpu_weight(bob) == 10
        assert shares.validating({b}) == {bob} and (cpu_weight(alice), cpu_weight(bob)) == (DEFAULT_WEIGHT, 10)
        shares.training({b})  # bob's lab takes a training slot while his Validate runs
        assert shares.yielding == set() and cpu_weight(bob) == DEFAULT_WEIGHT
        shares.training(set())  # his training is done, his Validate is not
        assert shares.yielding == {bob} and cpu_weight(bob) == 10
        shares.restore()
        assert cpu_weight(alice) == cpu_weight(bob) == DEFAULT_WEIGHT and shares.yielding == shares.boosted == set()
    finally:
        for process in processes:
            process.kill()


def test_a_boosted_trainer_who_validates_keeps_the_boost_and_its_quota_until_the_slot_is_freed(class_cgroups):
    alice = class_cgroups / "alice"
    cpu_shares._write_quota(alice, "100000 100000")
    shares = CpuShares(training_weight=10000, holder_cpus=0.85, validate_weight=10, parents=(class_cgroups,))
    process = Process(alice)
    try:
        shares.training({process.pid})
        shares.validating({process.pid})
        assert (cpu_weight(alice), cpu_quota(alice)) == (10000, 0.85)
        shares.training(set())
        assert (cpu_weight(alice), cpu_quota(alice)) == (10, 1.0)
        shares.validating(set())
        assert cpu_weight(alice) == DEFAULT_WEIGHT
    finally:
        process.kill()


def test_a_validate_weight_outside_the_schedulers_range_is_refused():
    with pytest.raises(ValueError, match="1 to 10000"):
        CpuShares(validate_weight=0)
