"""Runs INSIDE the sandbox: the only place student code executes during trusted grading.

    python -m rlhf_course.grading.sandbox_runner      (cwd: the submission copy)

1. reads ``job.json`` (the setup cell, the student's answer cells, the notebook's name);
2. defines the student's functions by executing the setup cell and the answer cells;
3. answers requests on the protocol pipe: each request is one test case for one function, each
   reply the :class:`Observation` of that call (no judging happens here);
4. on the final request, executes the student's whole notebook (for the feedback they see) with
   an in-process IPython shell and writes it to ``executed.ipynb`` in the submission copy.

Frames are an 8-byte length and a ``torch.save`` payload.  The protocol uses private copies of
fds 0 and 1; the student's prints go to stderr (the sandbox log) so they cannot corrupt it.
"""
from __future__ import annotations

import io
import json
import os
import struct
import sys
import traceback

FEEDBACK_NOTEBOOK = "executed.ipynb"


def read_frame(stream) -> bytes | None:
    header = stream.read(8)
    if len(header) < 8:
        return None
    (size,) = struct.unpack("<Q", header)
    return stream.read(size)


def write_frame(stream, payload: bytes) -> None:
    stream.write(struct.pack("<Q", len(payload)) + payload)
    stream.flush()


def define_functions(job: dict) -> tuple[dict, dict]:
    """Execute the setup and answer cells; return the namespace and per-cell definition errors."""
    namespace: dict = {"__name__": "__main__"}
    exec(compile(job["setup"], "setup", "exec"), namespace)
    errors = {}
    for cell_id, source in job["answer_cells"].items():
        try:
            exec(compile(source, cell_id, "exec"), namespace)
        except BaseException as exc:  # SystemExit included: a cell must not end the run
            errors[cell_id] = f"{type(exc).__name__}: {exc}"
    return namespace, errors


def serve(job: dict, proto_in, proto_out) -> None:
    import torch

    from rlhf_course.grading.observe import Case, Observation, observe, to_wire

    namespace, errors = define_functions(job)
    while True:
        frame = read_frame(proto_in)
        if frame is None:
            return
        request = torch.load(io.BytesIO(frame), weights_only=True)
        if request["kind"] == "ping":  # the answer cells are defined: ready for calls
            write_frame(proto_out, b"ready")
            continue
        if request["kind"] == "finish":
            if job.get("execute_notebook"):
                execute_notebook(job["notebook"])
            write_frame(proto_out, b"done")
            return
        function = namespace.get(request["function"])
        if not callable(function):
            why = "; ".join(f"cell {k} raised {v}" for k, v in errors.items()) or "it is not defined"
            observation = Observation(error=f"{request['function']} is not available ({why})")
        else:
            case = Case(tuple(request["args"]), tuple(request["grad_wrt"]))
            observation = observe(function, case)
        write_frame(proto_out, to_wire(observation))


# ----------------------------------------------------------------------------- feedback notebook

def execute_notebook(name: str) -> None:
    """Run every code cell of the student's notebook in one IPython shell, recording outputs.

    Plain JSON in and out (nbformat's schema machinery costs more than the run itself)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    with open(name) as handle:
        nb = json.load(handle)
    shell = InteractiveShell.instance()
    shell.showtraceback = lambda *args, **kwargs: None  # errors are recorded as error outputs below
    count = 0
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        with capture_output(display=True) as captured:
            result = shell.run_cell(source, store_history=False, silent=False)
        count += 1
        cell["execution_count"], cell["outputs"] = count, _outputs(captured, result)
    with open(FEEDBACK_NOTEBOOK, "w") as handle:
        json.dump(nb, handle)


def _outputs(captured, result) -> list:
    outputs = []
    for stream in ("stdout", "stderr"):
        text = getattr(captured, stream)
        if text:
            outputs.append({"output_type": "stream", "name": stream, "text": text})
    for rich in captured.outputs:
        data = {k: v for k, v in rich.data.items() if k in ("text/plain", "text/html", "image/png")}
        if data:
            outputs.append({"output_type": "display_data", "data": data, "metadata": rich.metadata or {}})
    error = result.error_before_exec or result.error_in_exec
    if error is not None:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith("<ipython-input")
                  or "rlhf_course" in f.filename and "grading" not in f.filename]
        outputs.append({"output_type": "error", "ename": type(error).__name__, "evalue": str(error),
                        "traceback": traceback.format_list(frames) + traceback.format_exception_only(type(error), error)})
    return outputs


def main() -> int:
    # Private copies of the protocol pipes; everything the student prints goes to stderr.
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    with open("job.json") as handle:
        job = json.load(handle)
    serve(job, proto_in, proto_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
