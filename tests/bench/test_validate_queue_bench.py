"""bench/validate_queue.py: its Validates pressed at once run K at a time through the real broker, the waiters told
their places; without a queue, all at once.  About 2 s."""
from bench.validate_queue import press_at_once
from rlhf_course.classroom import training_broker


def test_the_bench_runs_k_at_a_time_and_says_the_places():
    real_credentials = training_broker.peer_credentials
    queued = press_at_once(students=4, work=0.05, slots=1)
    assert len(queued.seconds) == 4 and queued.most_at_once == 1
    assert max(queued.places_said) == 2 and min(queued.places_said) == 0  # the last pressed: 2 ahead, then 0
    assert training_broker.peer_credentials is real_credentials  # the broker's own, given back
    at_once = press_at_once(students=4, work=0.3, slots=0)
    assert at_once.places_said == [] and at_once.most_at_once > 1
