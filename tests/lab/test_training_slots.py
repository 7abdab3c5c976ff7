"""A lab's side of the machine's training queue (rlhf_course/lab/training_slots.py): it waits for the broker's grant
and tells the notebook its place, in the notebook's language; it trains at once where no broker is configured or
reachable, and after the longest wait without a move; refused (her other training holds her one ticket), it waits
for that one, then takes its turn.  The broker here is a script of the broker's lines, or the real one in this
process (its own tests, with real accounts: tests/classroom/test_training_broker.py)."""
import os
import re
import threading
import time
from pathlib import Path

import pytest

from rlhf_course import i18n
from rlhf_course.classroom import training_broker
from rlhf_course.classroom.training_broker import SlotBroker
from rlhf_course.lab import training_slots
from rlhf_course.lab.training_slots import TrainingQueue, training_slot

from tests.support.scripted_broker import ScriptedBroker


@pytest.fixture
def scripted():
    brokers = []
    yield lambda script: brokers.append(ScriptedBroker(script)) or brokers[-1]
    for broker in brokers:
        broker.close()


def test_no_broker_configured_or_reachable_is_no_queue_and_no_wait(monkeypatch, tmp_path):
    monkeypatch.delenv(training_slots.BROKER_VARIABLE, raising=False)
    assert TrainingQueue.from_environment() is None
    assert TrainingQueue.from_environment({training_slots.BROKER_VARIABLE: "/q", training_slots.MAX_WAIT_VARIABLE: "x"}) is None
    queue = TrainingQueue.from_environment({training_slots.BROKER_VARIABLE: "/srv/q.sock",
                                            training_slots.MAX_WAIT_VARIABLE: "60"})
    assert (queue.broker, queue.max_wait) == (Path("/srv/q.sock"), 60.0)
    for configured in (None, TrainingQueue(tmp_path / "no-broker.sock")):  # a laptop; a hub whose broker is gone
        said = []
        started = time.monotonic()
        with training_slot(configured, say=said.append) as held:
            assert held is False
        assert said == [] and time.monotonic() - started < 0.1


def test_a_free_slot_is_taken_at_once_and_freed_when_the_training_ends(scripted):
    broker = scripted([(0, "granted 2 180")])
    said = []
    with TrainingQueue(broker.path).slot(say=said.append) as held:
        assert held is True and broker.closed_at is None
    time.sleep(0.1)
    assert said == [] and broker.closed_at is not None  # nothing to say; the connection closed with the block


def test_the_lab_waits_its_turn_and_tells_its_place_in_both_languages(scripted):
    for language, lines in ((i18n.ENGLISH, ["Waiting for a training slot: 2 ahead (the machine trains 2 at a time)",
                                            "Waiting for a training slot: 0 ahead (the machine trains 2 at a time)",
                                            "Got a training slot after 1 s: training now"]),
                            (i18n.CHINESE, ["正在等待训练名额：前面还有 2 个训练任务在等待（本机最多同时运行 2 个）",
                                            "正在等待训练名额：前面还有 0 个训练任务在等待（本机最多同时运行 2 个）",
                                            "等待 1 秒后获得训练名额：开始训练"])):
        broker = scripted([(0, "queued 2 2"), (0.2, "queued 0 2"), (0, "queued 0 2"), (0.5, "granted 2 180")])
        said = []
        started = time.monotonic()
        with i18n.speaking(language):
            with TrainingQueue(broker.path).slot(say=said.append) as held:
                assert held is True and 0.6 < time.monotonic() - started < 1.5
        assert said == lines  # a place said once, however often the broker repeats it


def test_a_queue_that_moves_is_waited_for_past_the_cap_and_a_stalled_one_is_left(scripted):
    # the place improves every 0.2 s, five times: a whole wait of 1.2 s, four times the 0.3 s cap, and never 0.3 s still
    broker = scripted([(0, "queued 4 1"), (0.2, "queued 3 1"), (0.2, "queued 2 1"), (0.2, "queued 1 1"),
                       (0.2, "queued 0 1"), (0.2, "granted 1 180")])
    said = []
    started = time.monotonic()
    with TrainingQueue(broker.path, max_wait=0.3).slot(say=said.append) as held:
        assert held is True and time.monotonic() - started >= 1.0
    assert re.fullmatch(r"Got a training slot after [12] s: training now", said[-1]), said
    # the place moves twice, then stands still: left 0.3 s after its last move, the whole wait said
    broker = scripted([(0, "queued 2 1"), (0.2, "queued 1 1"), (0.2, "queued 1 1")])
    said = []
    started = time.monotonic()
    with TrainingQueue(broker.path, max_wait=0.3).slot(say=said.append) as held:
        assert held is False and 0.5 <= time.monotonic() - started < 1.2
    assert re.fullmatch(r"The training queue has not moved for 0 s \(you waited [12] s\): training now without a slot",
                        said[-1]), said


def test_nobody_waits_past_the_cap_in_both_languages(scripted):
    for language, waited in (
            (i18n.ENGLISH, "The training queue has not moved for 0 s (you waited 0 s): training now without a slot"),
            (i18n.CHINESE, "训练队列已有 0 秒没有前进（你共等待了 0 秒）：不再等待，不占名额直接开始训练")):
        with i18n.speaking(language):
            broker = scripted([(0, "queued 0 1")])
            said = []
            started = time.monotonic()
            with TrainingQueue(broker.path, max_wait=0.3).slot(say=said.append) as held:
                assert held is False and 0.3 <= time.monotonic() - started < 1.0
                time.sleep(0.1)
                assert broker.closed_at is not None  # its ticket is given back before it trains
            assert said[-1] == waited


@pytest.fixture
def one_student(monkeypatch):
    """Every connection to a broker is the same student's (one uid): her requests share her one ticket."""
    monkeypatch.setattr(training_broker, "peer_credentials", lambda connection: (os.getpid(), 50_700, 0))


def test_a_refused_training_waits_for_her_other_one_then_takes_its_turn_in_both_languages(one_student, tmp_path):
    """Her other training holds her one ticket for longer than the stalled queue's cap (0.3 s): the refused one
    says so, never trains without a slot, and has its own the moment the other gives the ticket back."""
    broker = SlotBroker(tmp_path / "broker.sock", 1, 60, name="training-broker").start()
    try:
        for language, refused, got in (
                (i18n.ENGLISH, "Another training of yours holds your place in the queue: this one waits for it to "
                               "end, then takes its turn", r"Got a training slot after [123] s: training now"),
                (i18n.CHINESE, "你的另一个训练任务占着你在队列中的位置：本次训练等它结束后再排队",
                 r"等待 [123] 秒后获得训练名额：开始训练")):
            queue = TrainingQueue(broker.path, max_wait=0.3, retry_seconds=0.05)
            other = queue.slot(say=pytest.fail)
            assert other.__enter__() is True
            said, outcome = [], {}

            def train():
                with i18n.speaking(language):
                    started = time.monotonic()
                    with queue.slot(say=said.append) as held:
                        outcome.update(held=held, seconds=time.monotonic() - started)

            training = threading.Thread(target=train)
            training.start()
            time.sleep(1.0)
            assert said == [refused] and not outcome  # still waiting, past the cap: her own ticket is no stall
            other.__exit__(None, None, None)
            training.join(5)
            assert outcome["held"] is True and 1.0 <= outcome["seconds"] < 3.0  # 1 s, but for a loaded machine
            assert said[0] == refused and re.fullmatch(got, said[1]) and len(said) == 2, said
    finally:
        broker.stop()
