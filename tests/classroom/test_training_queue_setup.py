"""make hub's training queue (rlhf_course/classroom/training_broker.py), fast (no hub): K from the machine's cores and
each user's CPU quota, the variables every server gets, the broker's socket (every account connects, none replaces
it), and the options checked before anything is made."""
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from rlhf_course.classroom.hub import Classroom, parse_arguments
from rlhf_course.classroom.training_broker import DEFAULT_MAX_HOLD, default_slots
from rlhf_course.lab import training_slots
from rlhf_course.lab.threads import usable_cpus


def classroom(tmp_path, **kwargs) -> Classroom:
    return Classroom(tmp_path, tmp_path / "base", "p_", ["a"], 1, Path(sys.executable), **kwargs)


def test_k_from_the_cores_and_each_users_quota():
    assert default_slots(2, 1.0) == 2
    assert default_slots(8, 1.5) == 5
    assert default_slots(2, 4.0) == 1
    assert default_slots(4, None) == 4


def test_k_and_the_variables_every_server_gets(tmp_path):
    room = classroom(tmp_path, limits={"cpu_limit": 1.0})
    socket_path = tmp_path / "base" / "training-queue" / "broker.sock"
    assert room.training_slots == max(1, usable_cpus())
    assert room.training_queue_env() == {"RLHF_TRAINING_BROKER": str(socket_path)}
    queue = training_slots.TrainingQueue.from_environment(room.training_queue_env())
    assert (queue.broker, queue.max_wait) == (socket_path, training_slots.DEFAULT_MAX_WAIT)
    assert classroom(tmp_path, training_slots=3, training_wait=60).training_queue_env()["RLHF_TRAINING_SLOT_WAIT"] == "60"
    assert classroom(tmp_path, training_slots=0).training_queue_env() == {}  # --training-slots 0: no queue
    assert classroom(tmp_path).training_hold == DEFAULT_MAX_HOLD
    assert parse_arguments(["--proxy", "/bin/true", "--training-hold", "90"]).training_hold == 90


def test_the_hub_runs_the_broker_on_a_socket_of_roots_and_stops_it(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the hub runs it as root")
    base = Path(tempfile.mkdtemp(prefix="rlhf-queue-setup-"))  # a short path: a socket's is at most 107 bytes
    try:
        room = Classroom(tmp_path, base, "p_", ["a"], 1, Path(sys.executable), training_slots=2)
        room.start_training_broker()
        socket_path = room.training_broker_socket
        folder = socket_path.parent
        assert (folder.stat().st_uid, stat.S_IMODE(folder.stat().st_mode)) == (0, 0o755)  # nobody plants or replaces
        assert stat.S_ISSOCK(socket_path.stat().st_mode) and stat.S_IMODE(socket_path.stat().st_mode) == 0o666
        queue = training_slots.TrainingQueue.from_environment(room.training_queue_env())
        with queue.slot(say=pytest.fail) as held:
            assert held is True and room.training_broker.holder_pids == {os.getpid()}
        room.remove()  # not created: only the broker (and nothing else) is stopped
        assert not socket_path.exists()
        with queue.slot(say=pytest.fail) as held:
            assert held is False  # no broker any more: train at once
    finally:
        shutil.rmtree(base, ignore_errors=True)


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
    room = classroom(tmp_path, training_boost=DEFAULT_WEIGHT, training_slots=0)
    room.start_training_broker()  # no training slots: no broker, and the default weight: no boost
    assert room.training_broker is None and room.training_boost is None


def test_a_boosted_labs_quota_is_checked_before_anything_is_made(capsys):
    from rlhf_course.classroom.hub import parse_arguments
    args = parse_arguments(["--proxy", "/bin/true", "--training-boost", "10000", "--training-boost-cpus", "0.85"])
    assert (args.training_boost, args.training_boost_cpus) == (10000, 0.85)
    assert parse_arguments(["--proxy", "/bin/true"]).training_boost_cpus is None
    for wrong, said in ((["--training-boost", "10000", "--training-boost-cpus", "0"], "positive number of cores"),
                        (["--training-hold", "0"], "--training-hold: a positive number of seconds"),
                        (["--training-boost-cpus", "0.85"], "needs --training-boost")):
        with pytest.raises(SystemExit):
            parse_arguments(["--proxy", "/bin/true", *wrong])
        assert said in capsys.readouterr().err
