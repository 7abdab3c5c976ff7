"""The training boost (rlhf_course/classroom/training_boost.py): while a process in a classroom user's cgroup holds
a training slot, that cgroup's CPU weight is raised, and given back when the slot is freed, released or its holder
killed; a holder outside the class's cgroups is never touched.  Real cgroups (v2, or v1's cpu hierarchy, as the
spawner makes them) under a parent of the test's own; no hub (about 1 s)."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from rlhf_course.classroom import training_boost
from rlhf_course.classroom.spawner import CGROUP_ROOT
from rlhf_course.classroom.training_boost import BOOSTED_WEIGHT, DEFAULT_WEIGHT, TrainingBoost, cpu_weight
from rlhf_course.lab import training_slots

LOCKS = """\
1: FLOCK  ADVISORY  WRITE 4242 fe:01:1234 0 EOF
1: -> FLOCK  ADVISORY  WRITE 4343 fe:01:1234 0 EOF
2: POSIX  ADVISORY  WRITE 4444 fe:01:5678 0 EOF
3: FLOCK  ADVISORY  READ 4545 0a:1f:99 0 EOF
"""


def test_the_granted_flock_holders_are_read_from_proc_locks():
    assert training_boost.locked_inodes(LOCKS) == {(0xfe, 0x01, 1234): 4242, (0x0a, 0x1f, 99): 4545}
    assert training_boost.locked_inodes("garbage\n\n1: FLOCK ADVISORY WRITE x y\n") == {}


def test_a_weight_outside_the_schedulers_range_is_refused():
    with pytest.raises(ValueError, match="1 to 10000"):
        TrainingBoost([], weight=0)


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


@pytest.fixture
def slots():
    base = Path(tempfile.mkdtemp(prefix="boost-slots-"))
    training_slots.create_folder(base / "slots", 2)
    yield [training_slots.slot_path(base / "slots", index) for index in range(2)]
    shutil.rmtree(base, ignore_errors=True)


class Holder:
    """A process in ``cgroup`` (or left where it is) that takes a slot's lock when told, and frees it when told."""

    def __init__(self, slot: Path, cgroup: Path | None):
        code = textwrap.dedent(f"""
            import fcntl, os, sys
            for line in sys.stdin:
                if line.startswith("take"):
                    fd = os.open({str(slot)!r}, os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX)
                else:
                    fcntl.flock(fd, fcntl.LOCK_UN); os.close(fd)
                print("done", flush=True)
            """)
        procs = cgroup / "cgroup.procs" if cgroup else None
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            preexec_fn=(lambda: procs.write_text(str(os.getpid()))) if procs else None)

    def tell(self, what: str) -> None:
        self.process.stdin.write(what + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline() == "done\n"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


def test_a_slot_holders_cgroup_weighs_more_until_the_slot_is_freed(class_cgroups, slots):
    alice, bob = class_cgroups / "alice", class_cgroups / "bob"
    boost = TrainingBoost(slots, parents=(class_cgroups,))
    holders = [Holder(slots[0], alice), Holder(slots[1], bob), Holder(slots[1], None)]
    try:
        assert boost.step() == set() and cpu_weight(alice) == cpu_weight(bob) == DEFAULT_WEIGHT
        holders[0].tell("take")
        assert boost.step() == {alice}
        assert (cpu_weight(alice), cpu_weight(bob)) == (BOOSTED_WEIGHT, DEFAULT_WEIGHT)
        holders[1].tell("take")
        assert boost.step() == {alice, bob} and cpu_weight(bob) == BOOSTED_WEIGHT
        holders[0].tell("free")  # the training ended: the weight goes back
        assert boost.step() == {bob} and cpu_weight(alice) == DEFAULT_WEIGHT
        holders[1].kill()  # a killed kernel's slot is free, and its weight given back
        assert boost.step() == set() and cpu_weight(bob) == DEFAULT_WEIGHT
        holders[2].tell("take")  # a holder outside the class's cgroups: nothing to boost, nothing touched
        assert boost.step() == set() and cpu_weight(alice) == cpu_weight(bob) == DEFAULT_WEIGHT
    finally:
        for holder in holders:
            holder.kill()


def test_the_watcher_boosts_on_its_own_and_restores_when_stopped(class_cgroups, slots):
    alice = class_cgroups / "alice"
    holder = Holder(slots[0], alice)
    boost = TrainingBoost(slots, weight=300, parents=(class_cgroups,), every=0.05).start()
    try:
        holder.tell("take")
        for _ in range(100):
            if cpu_weight(alice) == 300:
                break
            time.sleep(0.05)
        assert cpu_weight(alice) == 300
    finally:
        boost.stop()
        holder.kill()
    assert cpu_weight(alice) == DEFAULT_WEIGHT and boost.boosted == set()


def test_a_holders_quota_is_lowered_while_it_holds_its_slot_and_given_back(class_cgroups, slots):
    """With ``holder_cpus`` the holder may use at most that many cores while it holds a slot (the share it leaves the
    rest of the class); its user's own quota comes back when the slot is freed, and a user whose own quota is already
    lower, or who has none to lower, is left as it was."""
    alice, bob = class_cgroups / "alice", class_cgroups / "bob"
    training_boost._write_quota(alice, "100000 100000")  # one core, as the spawner sets it
    training_boost._write_quota(bob, "50000 100000")  # half a core: below the holders' quota already
    boost = TrainingBoost(slots, weight=10000, holder_cpus=0.85, parents=(class_cgroups,))
    holders = [Holder(slots[0], alice), Holder(slots[1], bob)]
    try:
        holders[0].tell("take")
        holders[1].tell("take")
        assert boost.step() == {alice, bob}
        assert (cpu_weight(alice), training_boost.cpu_quota(alice)) == (10000, 0.85)
        assert (cpu_weight(bob), training_boost.cpu_quota(bob)) == (10000, 0.5)
        holders[0].tell("free")
        assert boost.step() == {bob}
        assert (cpu_weight(alice), training_boost.cpu_quota(alice)) == (DEFAULT_WEIGHT, 1.0)
        boost.restore()
        assert (cpu_weight(bob), training_boost.cpu_quota(bob)) == (DEFAULT_WEIGHT, 0.5)
    finally:
        for holder in holders:
            holder.kill()


def test_a_holders_quota_must_be_a_positive_number_of_cores():
    with pytest.raises(ValueError, match="positive number of cores"):
        TrainingBoost([], holder_cpus=0)
