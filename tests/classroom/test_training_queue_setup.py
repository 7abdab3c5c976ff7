"""make hub's training queue (rlhf_course/classroom/training_broker.py), fast (no hub): K from the machine's cores and
each user's CPU quota, the variables every server gets, the broker's socket (every account connects, none replaces
it), and the options checked before anything is made."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlhf_course.classroom.hub import Classroom, parse_arguments
from rlhf_course.classroom.training_broker import DEFAULT_MAX_HOLD, default_slots
from rlhf_course.lab import training_slots
from rlhf_course.lab.threads import usable_cpus
from tests.support.course import REPO
from tests.support.sockets import assert_a_socket_of_roots

CHP = ".cache/hub-proxy/node_modules/.bin/configurable-http-proxy"  # make hub's proxy: not built by a dry run


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


def test_the_hub_runs_the_broker_on_a_socket_of_roots_and_stops_it(tmp_path, socket_base):
    room = Classroom(tmp_path, socket_base, "p_", ["a"], 1, Path(sys.executable), training_slots=2)
    room.start_training_broker()
    socket_path = room.training_broker_socket
    assert_a_socket_of_roots(socket_path)
    queue = training_slots.TrainingQueue.from_environment(room.training_queue_env())
    with queue.slot(say=pytest.fail) as held:
        assert held is True and room.training_broker.holder_pids == {os.getpid()}
    room.remove()  # not created: only the broker (and nothing else) is stopped
    assert not socket_path.exists()
    with queue.slot(say=pytest.fail) as held:
        assert held is False  # no broker any more: train at once


def test_the_training_boost_is_a_lab_class_s_unless_told_otherwise(tmp_path):
    from rlhf_course.classroom.hub import LAB_BOOST_WEIGHT, parse_arguments
    from rlhf_course.classroom.cpu_shares import DEFAULT_WEIGHT
    assert classroom(tmp_path).training_boost_weight == DEFAULT_WEIGHT
    assert parse_arguments(["--proxy", "/bin/true"]).training_boost == LAB_BOOST_WEIGHT  # make hub: a lab class
    for kind in ("burst", "off"):
        assert parse_arguments(["--proxy", "/bin/true", "--class", kind]).training_boost == DEFAULT_WEIGHT
    assert parse_arguments(["--proxy", "/bin/true", "--training-boost", "500"]).training_boost == 500
    assert parse_arguments(["--proxy", "/bin/true", "--training-boost", "100"]).training_boost_cpus is None
    with pytest.raises(SystemExit):  # refused before anything is made
        parse_arguments(["--proxy", "/bin/true", "--training-boost", "0"])
    room = classroom(tmp_path, training_boost=DEFAULT_WEIGHT, training_slots=0)
    room.start_training_broker()  # no training slots: no broker, and the default weight: no boost
    assert room.training_broker is None and room.cpu_shares is None


def test_a_boosted_labs_quota_is_checked_before_anything_is_made(capsys):
    from rlhf_course.classroom.hub import parse_arguments
    args = parse_arguments(["--proxy", "/bin/true", "--training-boost", "10000", "--training-boost-cpus", "0.85"])
    assert (args.training_boost, args.training_boost_cpus) == (10000, 0.85)
    assert parse_arguments(["--proxy", "/bin/true", "--class", "off"]).training_boost_cpus is None
    for wrong, said in ((["--training-boost", "10000", "--training-boost-cpus", "0"], "positive number of cores"),
                        (["--training-hold", "0"], "--training-hold: a positive number of seconds"),
                        (["--class", "burst", "--training-boost-cpus", "0.85"], "needs --training-boost")):
        with pytest.raises(SystemExit):
            parse_arguments(["--proxy", "/bin/true", *wrong])
        assert said in capsys.readouterr().err


def test_make_hub_is_ready_for_a_class_by_default_and_each_variable_still_tunes_it():
    from rlhf_course.classroom.hub import HOLDERS_SHARE, LAB_BOOST_WEIGHT, class_defaults, parse_arguments
    from rlhf_course.classroom.cpu_shares import DEFAULT_WEIGHT, VALIDATE_WEIGHT
    # on the 2-core machine of bench/RESULTS.md, 2 slots of one core: the measured 0.85 core each, 0.3 left over
    assert class_defaults("lab", 2, 2, 1.0) == {"warm_kernels": True, "prestart": True,
                                               "training_boost": LAB_BOOST_WEIGHT, "training_boost_cpus": 0.85,
                                               "validate_weight": DEFAULT_WEIGHT}
    assert class_defaults("lab", 8, 4, 1.0)["training_boost_cpus"] == 1.0  # never above the user's own quota
    assert class_defaults("lab", 2, 4, 0.5)["training_boost_cpus"] == pytest.approx(HOLDERS_SHARE * 2 / 4, abs=0.01)
    assert class_defaults("lab", 2, 0, 1.0)["training_boost"] == DEFAULT_WEIGHT  # no queue: nothing to boost
    assert class_defaults("burst", 2, 2, 1.0) == {"warm_kernels": True, "prestart": True,
                                                 "training_boost": DEFAULT_WEIGHT, "training_boost_cpus": None,
                                                 "validate_weight": VALIDATE_WEIGHT}
    assert class_defaults("off", 2, 2, 1.0)["validate_weight"] == DEFAULT_WEIGHT
    assert not any(class_defaults("off", 2, 2, 1.0)[k] for k in ("warm_kernels", "prestart", "training_boost_cpus"))
    with pytest.raises(ValueError, match="lab, burst, off"):
        class_defaults("seminar", 2, 2, 1.0)
    args = parse_arguments(["--proxy", "/bin/true"])
    assert (args.klass, args.warm_kernels, args.prestart) == ("lab", True, True)
    args = parse_arguments(["--proxy", "/bin/true", "--no-warm-kernels", "--no-prestart", "--training-boost-cpus", "0.5"])
    assert (args.warm_kernels, args.prestart, args.training_boost_cpus) == (False, False, 0.5)
    args = parse_arguments(["--proxy", "/bin/true", "--class", "off", "--warm-kernels"])
    assert (args.warm_kernels, args.prestart) == (True, False)
    assert parse_arguments(["--proxy", "/bin/true"]).validate_weight == DEFAULT_WEIGHT  # a lab: its boost instead
    assert parse_arguments(["--proxy", "/bin/true", "--class", "burst"]).validate_weight == VALIDATE_WEIGHT
    assert parse_arguments(["--proxy", "/bin/true", "--class", "off"]).validate_weight == DEFAULT_WEIGHT
    assert parse_arguments(["--proxy", "/bin/true", "--validate-weight", "40"]).validate_weight == 40


def test_a_validate_weight_outside_the_schedulers_range_is_refused_before_anything_is_made(capsys):
    from rlhf_course.classroom.hub import parse_arguments
    with pytest.raises(SystemExit):
        parse_arguments(["--proxy", "/bin/true", "--validate-weight", "0"])
    assert "--validate-weight: a CPU weight is 1 to 10000" in capsys.readouterr().err


def test_one_keeper_weighs_both_queues_holders_and_none_without_a_weight(tmp_path, socket_base):
    room = Classroom(tmp_path, socket_base, "p_", ["a"], 1, Path(sys.executable), training_slots=1,
                     validate_slots=1, validate_weight=10)
    room.start_training_broker()
    room.start_validate_broker()
    try:
        assert room.cpu_shares is not None and room.cpu_shares.validate_weight == 10
        assert room.cpu_shares.training_weight == 100  # the burst: no boost, and still the training holders known
        assert room.training_broker.on_holders == room.cpu_shares.training
        assert room.validate_broker.on_holders == room.cpu_shares.validating
    finally:
        room.remove()
    plain = Classroom(tmp_path, socket_base, "q_", ["a"], 1, Path(sys.executable), training_slots=1, validate_slots=1)
    plain.start_training_broker()
    plain.start_validate_broker()
    try:
        assert plain.cpu_shares is None
    finally:
        plain.remove()


def test_make_hub_passes_the_class_and_its_switches():
    dry = subprocess.run(["make", "-n", "-o", ".venv/.installed-stamp", "-o", CHP, "hub", "HUB_STUDENTS=a",
                          "HUB_CLASS=burst", "HUB_WARM_KERNELS=0", "HUB_PRESTART=1", "HUB_VALIDATE_WEIGHT=25"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    words = " ".join(dry.replace("\\\n", " ").split())
    assert "--class burst" in words and "--no-warm-kernels" in words and " --prestart" in words, words
    assert "--validate-weight 25" in words, words
    dry = subprocess.run(["make", "-n", "-o", ".venv/.installed-stamp", "-o", CHP, "hub", "HUB_STUDENTS=a"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    words = " ".join(dry.replace("\\\n", " ").split())
    assert "--class lab" in words and "warm-kernels" not in words and "prestart" not in words, words
