"""Runs INSIDE the sandbox: the only place student code executes during trusted grading.

    :func:`main`, in a fresh sandbox forked by the slot's zygote (:mod:`zygote`; cwd /submission), or
    python -m rlhf_course.grading.sandbox.sandbox_runner      (in a sandbox of its own, :func:`sandbox.bwrap_command`)

The sandbox's first process is a small *supervisor* that never runs student code.  It holds the
protocol pipes, makes itself non-dumpable (so no process of the same uid can open its file
descriptors through ``/proc`` or ptrace it), has torch imported (by the zygote it was forked from,
once per slot), and forks a child for each piece of student work; a child closes the protocol pipes
before any student code runs and talks to the supervisor over a pipe of its own, whose replies the
supervisor caps and relays.

1. ``job``: the setup cell, the student's answer cells and notebook arrive over the pipe
   (nothing the grader writes ever lies in a folder the student can write);
2. ``feedback``: a first child runs the student's whole notebook (the copy they see as feedback),
   *before* any hidden input enters the sandbox; afterwards every leftover process of the
   student's is killed, so the feedback can never show a hidden test's inputs;
3. ``define``: a second child executes the setup and answer cells and reports which raised;
4. ``call``: each request is one test case for one function, each reply the
   :class:`~rlhf_course.grading.sandbox.observe.Observation` of that call (no judging happens here).

The frames, kinds and the job's layout are :mod:`protocol`'s: the job is JSON, a call plain data the
supervisor relays untouched (:func:`~rlhf_course.grading.sandbox.observe.decode_call` in the child).
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import traceback

from rlhf_course.grading.sandbox.protocol import (CALL, DEFINE, FAILED, FEEDBACK, JOB, NOTEBOOK, OBSERVATION, READY,
                                           decode_job, defined_reply, read_frame, write_frame)
from rlhf_course.i18n import t

PR_SET_DUMPABLE = 4


# ----------------------------------------------------------------------------- children

class Child:
    """A forked process running ``target(request_fd, reply_fd)``; the supervisor's pipes
    (``keep_closed``) are closed in it before the target runs."""

    def __init__(self, target, keep_closed: tuple[int, ...]):
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: nothing of the supervisor's stays reachable
            code = 0
            try:
                for fd in (*keep_closed, down_w, up_r):
                    os.close(fd)
                target(down_r, up_w)
            except BaseException:  # noqa: BLE001 - whatever happens, never return into the supervisor
                code = 1
            finally:
                os._exit(code)
        os.close(down_r)
        os.close(up_w)
        self.requests, self.replies = down_w, up_r

    def status(self) -> str:
        try:
            pid, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return "it is gone"
        if os.WIFSIGNALED(status):
            return f"it was killed by signal {os.WTERMSIG(status)}"
        return f"it exited with status {os.WEXITSTATUS(status)}"


def kill_leftovers() -> None:
    """Kill every other process of this uid in the sandbox (bwrap's own are root's)."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


# ----------------------------------------------------------------------------- student work

def define_functions(job: dict) -> tuple[dict, dict]:
    """Execute the setup and answer cells; return the namespace and per-cell definition errors."""
    namespace: dict = {"__name__": "__main__"}
    exec(compile(job["setup"], "setup", "exec"), namespace)
    errors = {}
    for cell_id, source in job["answer_cells"].items():
        try:
            exec(compile(source, cell_id, "exec"), namespace)
        except BaseException as exc:  # SystemExit included: a cell must not end the run
            errors[cell_id] = f"{type(exc).__name__}: {exc}"[:2000]
    return namespace, errors


def serve_calls(job: dict, requests: int, replies: int) -> None:
    """The child that runs the answer cells, then one test case per request."""
    from rlhf_course.grading.sandbox.observe import Case, Observation, decode_call, observe, to_wire

    namespace, errors = define_functions(job)
    write_frame(replies, defined_reply(errors))
    while True:
        frame = read_frame(requests)
        if frame is None:
            return
        name, args, grad_wrt = decode_call(frame)
        function = namespace.get(name)
        if not callable(function):
            why = "; ".join(t("cell {cell} raised {error}", cell=k, error=v) for k, v in errors.items())
            why = why or t("it is not defined")
            observation = Observation(error=t("{name} is not available ({why})", name=name, why=why),
                                      error_type="NameError")
        else:
            observation = observe(function, Case(tuple(args), tuple(grad_wrt)))
        write_frame(replies, OBSERVATION + to_wire(observation))


def run_feedback(job: dict, requests: int, replies: int) -> None:
    """The child that runs the student's whole notebook and sends it back as JSON."""
    os.close(requests)
    with open(job["notebook_name"], "w") as handle:
        handle.write(job["notebook_json"])
    # One frame, not "until EOF": processes the student left behind may hold the pipe open.
    write_frame(replies, execute_notebook(job["notebook_json"]))


def execute_notebook(notebook_json: str) -> bytes:
    """Run every code cell of the notebook in one IPython shell, recording outputs.

    Plain JSON in and out (nbformat's schema machinery costs more than the run itself)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from traitlets.config import Config

    dumps = json.dumps  # bound before the student's cells can replace it
    nb = json.loads(notebook_json)
    config = Config()
    # No history: cells run with store_history=False, and its SQLite file and saving thread cost more than the run.
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
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
    return dumps(nb).encode()


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


# ----------------------------------------------------------------------------- the supervisor

def supervise(proto_in: int, proto_out: int) -> None:
    frame = read_frame(proto_in)
    if frame is None or frame[:1] != JOB:
        return
    job = decode_job(frame[1:])
    # Everything the children need is imported here, once, before any fork.
    import IPython.core.interactiveshell  # noqa: F401
    import IPython.utils.capture  # noqa: F401
    import torch  # noqa: F401
    import rlhf_course.grading.sandbox.observe  # noqa: F401
    write_frame(proto_out, READY)
    keep_closed = (proto_in, proto_out)
    calls: Child | None = None
    fed_back = False
    while True:
        frame = read_frame(proto_in)
        if frame is None:
            return
        kind = frame[:1]
        if kind == FEEDBACK and calls is None and not fed_back:
            fed_back = True
            child = Child(lambda r, w: run_feedback(job, r, w), keep_closed)
            os.close(child.requests)
            try:
                data = read_frame(child.replies, job["notebook_cap"]) or b""
            except ValueError:
                data = None
            os.close(child.replies)
            os.kill(child.pid, signal.SIGKILL)
            status = child.status()
            kill_leftovers()  # nothing of the feedback run survives into the graded calls
            if data is None:
                write_frame(proto_out, FAILED + b"the executed notebook is larger than the feedback limit")
            elif not data:
                write_frame(proto_out, FAILED + f"the notebook run ended early: {status}".encode())
            else:
                write_frame(proto_out, NOTEBOOK + data)
        elif kind == DEFINE and calls is None:
            calls = Child(lambda r, w: serve_calls(job, r, w), keep_closed)
            _relay(calls, None, proto_out, 64 * 1024)
        elif kind == CALL and calls is not None:
            try:
                write_frame(calls.requests, frame[1:])
            except OSError:
                pass  # the child is gone: reported below
            _relay(calls, None, proto_out, job["reply_cap"])
        else:
            write_frame(proto_out, FAILED + f"request {kind!r} out of order".encode())


def _relay(child: Child, _unused, proto_out: int, cap: int) -> None:
    """One reply from the child to the grader, capped; a dead child is reported, not relayed."""
    try:
        reply = read_frame(child.replies, cap + 1)
    except ValueError as exc:
        os.kill(child.pid, signal.SIGKILL)
        write_frame(proto_out, FAILED + f"the student's process sent an oversized reply ({exc})".encode())
        return
    if reply is None:
        write_frame(proto_out, FAILED + f"the process running the student's code died: {child.status()}".encode())
        return
    write_frame(proto_out, reply)


def main() -> int:
    # Private copies of the protocol pipes; everything printed goes to stderr (the sandbox log).
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # Non-dumpable: processes of the same uid (the student's) cannot open /proc/<us>/fd or ptrace us.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    # `python -m` puts the working folder first on sys.path: the student's files must never
    # shadow a module the supervisor imports.
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    try:
        supervise(proto_in, proto_out)
    except Exception as exc:  # tell the grader, briefly; the log has the rest
        traceback.print_exc()
        try:
            write_frame(proto_out, FAILED + f"{type(exc).__name__}: {exc}"[:1000].encode())
        except OSError:
            pass
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
