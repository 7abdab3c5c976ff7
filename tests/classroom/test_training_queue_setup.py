"""make hub's training queue (rlhf_course/lab/training_slots.py), fast (no hub): K from the machine's cores and each
user's CPU quota, the variables every server gets, the folder's modes (students add tickets and lock slots,
never remove the slots)."""
import os
import stat
import sys
from pathlib import Path

import pytest

from rlhf_course.classroom.hub import Classroom
from rlhf_course.lab import training_slots
from rlhf_course.lab.threads import usable_cpus


def classroom(tmp_path, **kwargs) -> Classroom:
    return Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 1, Path(sys.executable), **kwargs)


def test_k_and_the_variables_every_server_gets(tmp_path):
    room = classroom(tmp_path, limits={"cpu_limit": 1.0})
    assert room.training_slots == max(1, usable_cpus())
    assert room.training_queue_env() == {"RLHF_TRAINING_SLOT_DIR": str(tmp_path / "base" / "training-slots"),
                                         "RLHF_TRAINING_SLOTS": str(room.training_slots)}
    queue = training_slots.TrainingQueue.from_environment(room.training_queue_env())
    assert (queue.folder, queue.slots) == (tmp_path / "base" / "training-slots", room.training_slots)
    assert classroom(tmp_path, training_slots=3, training_wait=60).training_queue_env()["RLHF_TRAINING_SLOT_WAIT"] == "60"
    assert classroom(tmp_path, training_slots=0).training_queue_env() == {}  # --training-slots 0: no queue


def test_the_queue_folder_is_sticky_and_its_slots_are_roots(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the hub makes it as root")
    folder = tmp_path / "training-slots"
    training_slots.create_folder(folder, 2)
    training_slots.create_folder(folder, 2)  # again: a restarted classroom
    assert stat.S_IMODE(folder.stat().st_mode) == 0o1777
    assert sorted(p.name for p in folder.iterdir()) == ["slot-0", "slot-1"]
    for slot in folder.iterdir():
        assert (slot.stat().st_uid, stat.S_IMODE(slot.stat().st_mode)) == (0, 0o644)


def test_the_training_boost_is_off_unless_asked_for(tmp_path):
    from rlhf_course.classroom.hub import argument_parser
    from rlhf_course.classroom.training_boost import DEFAULT_WEIGHT
    assert classroom(tmp_path).training_boost_weight == DEFAULT_WEIGHT
    assert argument_parser().parse_args(["--proxy", "/bin/true"]).training_boost == DEFAULT_WEIGHT
    assert argument_parser().parse_args(["--proxy", "/bin/true", "--training-boost", "500"]).training_boost == 500
    from rlhf_course.classroom.hub import parse_arguments
    assert parse_arguments(["--proxy", "/bin/true", "--training-boost", "500"]).training_boost == 500
    with pytest.raises(SystemExit):  # refused before anything is made
        parse_arguments(["--proxy", "/bin/true", "--training-boost", "0"])
    room = classroom(tmp_path, training_boost=DEFAULT_WEIGHT)
    room.start_training_boost()  # the default weight: no watcher at all
    assert room.training_boost is None


def test_a_boosted_labs_quota_is_checked_before_anything_is_made(capsys):
    from rlhf_course.classroom.hub import parse_arguments
    args = parse_arguments(["--proxy", "/bin/true", "--training-boost", "10000", "--training-boost-cpus", "0.85"])
    assert (args.training_boost, args.training_boost_cpus) == (10000, 0.85)
    assert parse_arguments(["--proxy", "/bin/true"]).training_boost_cpus is None
    for wrong, said in ((["--training-boost", "10000", "--training-boost-cpus", "0"], "positive number of cores"),
                        (["--training-boost-cpus", "0.85"], "needs --training-boost")):
        with pytest.raises(SystemExit):
            parse_arguments(["--proxy", "/bin/true", *wrong])
        assert said in capsys.readouterr().err
