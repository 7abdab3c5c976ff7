"""tests/durations.json from measured runs: each test file's seconds, which tests/conftest.py reads to start the
slowest files first.

    rm -f /tmp/cpu.jsonl && RLHF_TEST_CPU_LOG=/tmp/cpu.jsonl make test && python bench/durations.py /tmp/cpu.jsonl

`make test` gives each of its two workers one file at a time, so a long file that starts last runs on alone at
the end; started slowest first, the two workers end together.  A file's seconds are the wall seconds of its tests
(fixtures' set-up and teardown included) in a whole run with two workers, summed; with several logs (one run each),
their mean.  Its CPU seconds (of the worker and the processes it waited for) are kept beside them, for the reader:
they do not depend on what else the machine is doing.  Run it again when a file's cost changes much, and commit
the result.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "durations.json"


def per_file(log: Path) -> tuple[dict[str, dict[str, float]], list[float]]:
    """Seconds and CPU seconds per file; the 1-minute load averages the log recorded."""
    files: dict[str, dict[str, float]] = defaultdict(lambda: {"seconds": 0.0, "cpu": 0.0})
    loads = []
    for line in log.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            file = files[row["test"].split("::", 1)[0]]
            file["seconds"] += row["wall"]
            file["cpu"] += row["cpu"]
            if "load" in row:
                loads.append(row["load"])
    return files, loads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", type=Path, nargs="+", help="RLHF_TEST_CPU_LOG files, one whole run each")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    measured_runs = [per_file(log) for log in args.logs]
    runs = [files for files, _ in measured_runs]
    loads = [load for _, run_loads in measured_runs for load in run_loads]
    names = sorted({name for run in runs for name in run})
    files = {}
    for name in names:
        measured = [run[name] for run in runs if name in run]
        files[name] = {key: round(sum(m[key] for m in measured) / len(measured), 1) for key in ("seconds", "cpu")}
    files = dict(sorted(files.items(), key=lambda item: (-item[1]["seconds"], item[0])))
    about = ("Each test file's wall seconds in a whole run on two workers (tests/conftest.py starts the slowest "
             "first) and its CPU seconds; written by python bench/durations.py from RLHF_TEST_CPU_LOG files.")
    lines = [f"  {json.dumps(name)}: {json.dumps(measured)}" for name, measured in files.items()]
    args.out.write_text("{\n" + f' "about": {json.dumps(about)},\n'
                        + f' "mean_load_average": {json.dumps(round(sum(loads) / len(loads), 2) if loads else None)},\n'
                        + ' "files": {\n' + ",\n".join(lines) + "\n }\n}\n")
    total = sum(f["seconds"] for f in files.values())
    print(f"{len(files)} files, {total:.0f} s of tests ({total / 2:.0f} s on two workers at best) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
