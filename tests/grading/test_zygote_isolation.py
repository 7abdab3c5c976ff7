"""Every submission is graded in a fresh sandbox forked from the zygote: two submissions in a row in the same
slot, the first leaving everything it can behind (files in /tmp and /submission, an IPython start-up file, a
SysV shared memory segment, a key in the uid's kernel keyring, a sys.modules entry, a builtins change, patched
torch functions, a background process and a thread that keep running); the second, honest, sees none of it and
is graded correctly, and the first's processes are gone before the second starts."""
from __future__ import annotations

import fcntl
import os

from pathlib import Path

import pytest

from rlhf_course.grading import batch, examples, trusted
from rlhf_course.grading.sandbox import sandbox
from rlhf_course.course.settings import Course
from tests.support.course import copy_course, leftover_sandbox_processes, needs_sandbox, release_course

pytestmark = needs_sandbox

MARK = "4242.5"  # the background process's argument: how the host finds it

POLLUTE = f'''

import builtins, ctypes, os, subprocess, sys, threading, time, types
for _path in ("/tmp/polluted", "/submission/polluted", "/dev/shm/polluted"):  # /dev/shm: not writable
    try:
        with open(_path, "w") as _handle:
            _handle.write("left by the previous submission")
    except OSError:
        pass
os.makedirs("/submission/.ipython/profile_default/startup", exist_ok=True)
with open("/submission/.ipython/profile_default/startup/00-polluted.py", "w") as _handle:
    _handle.write("import builtins; builtins.polluted = True")
ctypes.CDLL(None).shmget(0x5EED, 4096, 0o1000 | 0o666)  # IPC_CREAT
_keyring_calls = {{"x86_64": (248, 249), "aarch64": (217, 218)}}.get(os.uname().machine)
if _keyring_calls:  # add_key("user", ..., KEY_SPEC_USER_KEYRING): kept by the kernel for the uid
    ctypes.CDLL(None).syscall(_keyring_calls[0], b"user", b"polluted", b"hidden inputs", 13, ctypes.c_long(-4))
sys.modules["polluted_marker"] = types.ModuleType("polluted_marker")
builtins.polluted = True
torch.allclose = lambda *args, **kwargs: True
torch.clamp = lambda input, *args, **kwargs: input
subprocess.Popen(["sleep", "{MARK}"], start_new_session=True)
threading.Thread(target=time.sleep, args=({MARK},)).start()
'''

INSPECT = f'''

import builtins as _builtins, ctypes as _ctypes, os as _os, sys as _sys, threading as _threading
_seen = [p for p in ("/tmp/polluted", "/submission/polluted", "/dev/shm/polluted",
                     "/submission/.ipython/profile_default/startup/00-polluted.py") if _os.path.exists(p)]
_seen += ["sys.modules"] if "polluted_marker" in _sys.modules else []
_seen += ["builtins"] if hasattr(_builtins, "polluted") else []
_seen += ["torch.allclose"] if torch.allclose(torch.zeros(1), torch.ones(1)) else []
_seen += ["torch.clamp"] if torch.clamp(torch.tensor([5.0]), 0.0, 1.0).item() != 1.0 else []
_seen += ["sysv shm"] if _ctypes.CDLL(None).shmget(0x5EED, 0, 0) != -1 else []
_keyctl = {{"x86_64": 250, "aarch64": 219}}.get(_os.uname().machine)
if _keyctl and _ctypes.CDLL(None).syscall(_keyctl, _ctypes.c_long(10), _ctypes.c_long(-4), b"user", b"polluted",
                                           _ctypes.c_long(0)) > 0:
    _seen.append("a kernel key")  # keyctl(KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, ...)
_seen += ["a thread"] if [t for t in _threading.enumerate() if t is not _threading.main_thread()
                           and "History" not in type(t).__name__] else []  # IPython's own history thread
for _pid in [p for p in _os.listdir("/proc") if p.isdigit()]:
    try:
        if {MARK!r} in open(f"/proc/{{_pid}}/cmdline").read():
            _seen.append("a process")
    except OSError:
        pass
print("left behind:", _seen)
if _seen:
    raise RuntimeError(f"left behind by the previous submission: {{_seen}}")
'''


def _marked_processes() -> list[int]:
    found = []
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if MARK.encode() in handle.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_nothing_of_a_submission_reaches_the_next_one_in_its_slot(tmp_path, monkeypatch):
    course = copy_course(tmp_path / "course")
    release_course(course)
    course_handle = Course.at(course)
    answers = examples.answers_for(course_handle, ())
    examples.write_submission(course_handle, "a_polluter", {**answers, "ppo_answer": answers["ppo_answer"] + POLLUTE})
    examples.write_submission(course_handle, "b_honest", {**answers, "ppo_answer": answers["ppo_answer"] + INSPECT})
    starts = []  # (student, slot, the polluter's processes alive on the host when it started)
    start = trusted.Sandbox.start

    def recording_start(self):
        who = "b_honest" if "left behind" in self.job["answer_cells"]["ppo_answer"] else "a_polluter"
        started = start(self)
        starts.append((who, self.slot, _marked_processes()))
        return started

    monkeypatch.setattr(trusted.Sandbox, "start", recording_start)
    zygotes = []  # each zygote process started meanwhile
    launch = sandbox.Zygote._launch

    def counted_launch(self, cache_directory):
        launch(self, cache_directory)
        zygotes.append(self.process)

    monkeypatch.setattr(sandbox.Zygote, "_launch", counted_launch)

    def the_last_slot(preferred: int) -> tuple[int, int]:
        # both submissions in one slot, waiting for it if another test's sandbox holds it: the property is about
        # the next submission in the same slot, which a busy machine's free-slot fallback would otherwise dodge
        slot = sandbox.SLOT_COUNT - 1
        sandbox.SLOT_LOCKS.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(sandbox.SLOT_LOCKS / f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return slot, fd

    monkeypatch.setattr(sandbox, "claim_slot", the_last_slot)
    sandbox.ZYGOTE.stop()  # one started by an earlier test in this process
    results = {r.student: r for r in batch.grade_all(course_handle, workers=1, show_progress=False, export=False)}

    polluter, honest = results["a_polluter"], results["b_honest"]
    seen = honest.executed_notebook.partition("left behind:")[2][:300]
    assert seen.startswith(" []"), f"the honest submission saw:{seen}"
    assert honest.state == "graded" and honest.score == honest.max_score, [
        (c.grade_id, c.message) for c in honest.cells.values() if c.score < c.points]
    # the polluter really did pollute its own sandbox: its patched torch.clamp cost it PPO's clipping checks
    assert polluter.score < polluter.max_score
    assert "left behind:" not in (polluter.executed_notebook or "")
    assert [who for who, _, _ in starts] == ["a_polluter", "b_honest"], starts  # one sandbox each
    assert len({slot for _, slot, _ in starts}) == 1, starts  # the same slot ...
    assert len(zygotes) == 1  # ... forked by the same zygote
    assert starts[1][2] == [], f"the polluter's processes were still running: {starts}"
    assert _marked_processes() == []
    assert leftover_sandbox_processes() == {}


@pytest.mark.parametrize("what", ["/tmp", "/submission"])
def test_each_sandbox_gets_empty_writable_folders(what):
    """The folders a sandbox may write are fresh and empty, whatever the one before in the slot wrote."""
    job = {"setup": "", "answer_cells": {"look": f"import os\nraise SystemExit(repr(sorted(os.listdir({what!r}))))"},
           "notebook_name": "n.ipynb", "notebook_json": '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}',
           "notebook_cap": 1 << 20, "reply_cap": 1 << 20}
    writer = dict(job, answer_cells={"write": f"open({what!r} + '/left', 'w').write('x')"})
    with sandbox.Sandbox(writer, slot=0).start() as box:
        assert box.define() == {}
    with sandbox.Sandbox(job, slot=0).start() as box:
        seen = box.define()["look"]
    # /tmp holds the read-only font list's folder, and the environment's when it lies under /tmp (a CI clone)
    kept = {Path(p).relative_to("/tmp").parts[0] for p in sandbox.under_tmp()}
    expected = repr(sorted({"matplotlib"} | kept)) if what == "/tmp" else "[]"
    assert seen == f"SystemExit: {expected}", seen
