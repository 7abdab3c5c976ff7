"""bench/host_speed.py, the host's speed printed beside the suite's time (.ci/run, bench/suite_cpu.py): the median
of its runs, as a ratio to the reference hour's.  The work itself is timed, not tested (its figures:
bench/RESULTS.md, "Host speed")."""
from bench import host_speed


def test_the_speed_is_the_median_run_over_the_reference_hours(monkeypatch, capsys):
    runs = iter([3.0, 1.0, 2.0])
    monkeypatch.setattr(host_speed, "seconds_of_work", lambda: next(runs))
    seconds, ratio = host_speed.measure(repeat=3)
    assert seconds == 2.0 and ratio == 2.0 / host_speed.REFERENCE_SECONDS
    runs = iter([host_speed.REFERENCE_SECONDS * 1.25])
    monkeypatch.setattr("sys.argv", ["host_speed.py", "--repeat", "1"])
    host_speed.main()
    assert capsys.readouterr().out.strip().endswith(", 1.25x the reference hour's")
