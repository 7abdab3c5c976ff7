"""Validate that waits for a busy machine and still stops a runaway cell.

nbgrader's Validate runs the notebook in a new kernel with nbclient, whose limits are wall-clock seconds: a
cell's reply (``Execute.timeout``), its output after the reply (``iopub_timeout``), the kernel's start
(``startup_timeout``).  On a machine a whole class loads, a correct cell that needs 2 CPU-seconds may get a
tenth of a core and take minutes: the wall-clock limit then calls correct work wrong ("Timeout waiting for
execute reply", and the visible test that follows fails with a NameError).

:class:`PatientExecute` replaces those limits by what the kernel itself does, read from ``/proc`` for the
kernel's process tree, every ``poll_seconds``:

* ``cpu_seconds``: CPU time one cell may use (all its processes and threads).  An endless loop computes,
  so it reaches this limit however busy the machine is, and is stopped with a message that says so;
* ``blocked_seconds``: wall time one cell may spend with no process of the kernel's running or waiting for a
  CPU (its main thread in state ``R``): a cell that sleeps or waits for input forever.  Waiting for a CPU (a busy machine, the
  user's cgroup quota) is never counted, so a busy machine never stops a cell;
* every ``notice_seconds`` of a cell's (or the kernel start's) wall time, a notice that it is still waiting,
  handed to ``on_wait`` (the server's Validate shows it in the student's JupyterLab) and logged.

The kernel's start waits the same way: as long as the kernel process lives and is not blocked, Validate
waits ("the kernel is still starting: the class is busy").

:class:`PatientValidator` is nbgrader's Validator with this preprocessor; a cell stopped by a limit is listed
among the failures with its reason (nbgrader lists only test cells, where the stop shows as a NameError).
"""
from __future__ import annotations

import asyncio
import glob
import os
import shlex
import traceback
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from jupyter_core.utils import ensure_async
from nbclient.util import run_hook, run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute
from nbgrader.validator import Validator
from nbgrader.apps.validateapp import ValidateApp
from traitlets import Float, default, validate

from rlhf_course.classroom.config import VALIDATE_BLOCKED_SECONDS, VALIDATE_CPU_SECONDS
from rlhf_course.classroom.submit_refusal import wrapped
from rlhf_course.course import notebooks, release_cells
from rlhf_course.i18n import ENGLISH, t

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # /proc/<pid>/stat's CPU times are in these, per second

# What a student reads, by the English text (rlhf_course/i18n.py's ZH table has each in Chinese)
STILL_STARTING = ("The kernel is still starting: the class is busy. Validate is waiting "
                  "({wall:.0f} s so far); nothing is wrong with your notebook.")
STILL_RUNNING = ("Validate is still running cell {cell} ({wall:.0f} s so far, {cpu:.1f} s of it computing): "
                 "the machine is busy, so it waits; nothing is wrong with your notebook.")
STILL_COMPUTING = "Validate is still running cell {cell} ({wall:.0f} s so far, {cpu:.1f} s of it computing)."
CPU_LIMIT = ("Stopped: this cell computed for {cpu:.0f} CPU-seconds without finishing (the limit is {limit:.0f}). "
             "An endless loop? A busy machine does not count: only the cell's own computing does.")
BLOCKED_LIMIT = ("Stopped: this cell waited {blocked:.0f} s for something other than the computer "
                 "(input(), sleep, a lock) without finishing (the limit is {limit:.0f} s).")
KERNEL_BLOCKED = ("Validate stopped: the kernel did not start; it waited {blocked:.0f} s for something other "
                  "than the computer (the limit is {limit:.0f} s).")
KERNEL_DIED = "Validate stopped: the kernel died while starting."
# For nbgrader's "You did not provide a response." (an answer still as released), in the edition's language
NO_RESPONSE = ("You did not provide a response: write your answer in this cell, in place of what the release put "
               "there, then Validate again.")
# Under a failed cell's traceback when it ends in the released stub's NotImplementedError, which has no message
NOT_WRITTEN_YET = ("A function this cell calls is not written yet: it still raises the release's NotImplementedError. "
                   "Replace `raise NotImplementedError()` in its answer cell with your code, run that cell, then this "
                   "one again.")
# A grade cell grading will take from the release rather than from the student's copy (release_cells.changes)
RESTORED_CELL = {
    release_cells.EDITED:
        "Cell {position} ({grade_id}), which begins \"{first_line}\", is locked, and your copy of it was changed.",
    release_cells.DELETED:
        "Cell {position} of the release ({grade_id}), which begins \"{first_line}\", is missing from your notebook "
        "(deleted).",
    release_cells.METADATA_EDITED:
        "The nbgrader metadata of cell {position} ({grade_id}), which begins \"{first_line}\", was changed (its "
        "points, or whether it is locked, graded or an answer).",
    release_cells.TYPE_CHANGED:
        "Cell {position} ({grade_id}), which begins \"{first_line}\", is an answer cell turned into a cell of "
        "another type: your text in it will not be graded.",
}
# How to get the release's cell back: JupyterLab cannot open the exchange's copy (outside its folder), and a copy of
# it in the assignment's folder would replace the student's notebook (same name) and be submitted with it: a copy
# beside that folder, under a name of its own, made with one command (release_copy_command)
GRADED_AS_RELEASED = ("Grading will use the release's version of this cell, not yours. To get it back, copy the "
                      "released notebook beside your assignment's folder (in a Terminal: {copy_command}), open "
                      "{copy_name} in JupyterLab, copy the cell, and paste it in its place in your notebook.")
GRADED_WITH_RELEASED_METADATA = (
    "Your text in this answer cell is graded, with the release's nbgrader metadata, not yours. To get that back, "
    "copy the released notebook beside your assignment's folder (in a Terminal: {copy_command}), open {copy_name} "
    "in JupyterLab, copy the cell, paste it in its place in your notebook, and move your text into it.")
# An answer cell turned into another type: its text is not graded until it is back in an answer cell of the release's
GRADED_WITHOUT_YOUR_TEXT = (
    "Grading will use the release's version of this cell, not yours. To have your text graded, copy the released "
    "notebook beside your assignment's folder (in a Terminal: {copy_command}), open {copy_name} in JupyterLab, copy "
    "the cell, paste it in its place in your notebook, and move your text into it.")
RESTORED_HEADING = "Grading will take {count} cell(s) from the release, not from your notebook:"  # `nbgrader validate`
# nbgrader's Validator's own sentences under a failed cell (Validator._extract_error: an answer left as released, a
# test cell of partial credit), said in the edition's language; any other error is the cell's own output
NBGRADER_SAYS = ("You did not provide a response.", "Partial credit; passed some but not all of the tests")
# Above each notice in JupyterLab's Validate dialog, in place of nbgrader's "The source of the following cell has
# changed, but it should not have!" (false of a deleted cell and of an answer cell whose text is graded)
TAKEN_FROM_RELEASE = "Grading will take this cell from the release, not from your notebook:"
METADATA_TAKEN_FROM_RELEASE = ("Grading will take this answer cell's nbgrader metadata from the release; your text "
                               "in it is graded:")
FIRST_LINE_CHARS = 80  # of a cell's first line, quoted to name the cell


@dataclass(frozen=True)
class Usage:
    """A sample of a process tree: CPU time in seconds (all processes, threads and reaped children) and
    whether the main thread of any of its processes runs or waits for a CPU (state R)."""
    cpu_seconds: float
    runnable: bool


def _children(pid: int) -> list[int]:
    pids, found = [pid], []
    while pids:
        parent = pids.pop()
        for task in _listdir(f"/proc/{parent}/task"):
            try:
                with open(f"/proc/{parent}/task/{task}/children") as listing:
                    kids = [int(p) for p in listing.read().split()]
            except OSError:
                continue
            found += kids
            pids += kids
    return found


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _stat_fields(path: str) -> list[str] | None:
    """The fields of a /proc stat file after the command's name (which may hold spaces), or None if gone."""
    try:
        with open(path) as stat:
            text = stat.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def tree_usage(pid: int) -> Usage:
    """:class:`Usage` of process ``pid`` and its descendants, now.  Runnable: the main thread of one of them is
    (the thread a cell runs in; a kernel's other threads wake now and then for its messages, and on a busy
    machine each wake-up waits for a CPU too, which says nothing of the cell)."""
    ticks, runnable = 0, False
    for member in [pid, *_children(pid)]:
        fields = _stat_fields(f"/proc/{member}/stat")
        if fields is None:
            continue
        ticks += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
        runnable = runnable or fields[0] == "R"
    return Usage(ticks / CLOCK_TICKS, runnable)


class Watch:
    """A cell's (or a kernel start's) account: wall, CPU and blocked seconds since it began, from samples of
    the kernel's process tree (blocked: the sampled intervals in which no thread was runnable)."""

    def __init__(self, pid: int | None):
        self.pid = pid
        self.began = time.monotonic()
        self.cpu_at_start = tree_usage(pid).cpu_seconds if pid else 0.0
        self.cpu = self.blocked = 0.0
        self._last = self.began

    @property
    def wall(self) -> float:
        return time.monotonic() - self.began

    @property
    def waiting_for_cpu(self) -> float:
        """Seconds the kernel was runnable but not running: what a busy machine costs it."""
        return max(0.0, self.wall - self.cpu - self.blocked)

    def sample(self) -> None:
        now = time.monotonic()
        if self.pid:
            usage = tree_usage(self.pid)
            self.cpu = usage.cpu_seconds - self.cpu_at_start
            if not usage.runnable:
                self.blocked += now - self._last
        self._last = now


class KernelStartStopped(RuntimeError):
    """The kernel did not start for a reason other than a busy machine (it died, or it was blocked)."""


class PatientExecute(Execute):
    cpu_seconds = Float(VALIDATE_CPU_SECONDS, help="CPU-seconds (the kernel's processes and threads) one cell may "
                                                   "use before it is stopped; a busy machine does not count"
                        ).tag(config=True)
    blocked_seconds = Float(VALIDATE_BLOCKED_SECONDS, help="seconds one cell (or the kernel's start) may spend with "
                                                           "no process of the kernel's running or waiting for a CPU"
                            ).tag(config=True)
    notice_seconds = Float(20, help="every so many seconds of a wait, a notice that Validate is still waiting"
                           ).tag(config=True)
    poll_seconds = Float(0.5, help="seconds between two samples of the kernel's processes").tag(config=True)

    def __init__(self, *args, on_wait: Callable[[str, dict], None] | None = None, language: str = ENGLISH,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.on_wait = on_wait or (lambda english, fields: None)
        self.language = language
        self.stopped: dict[int, str] = {}  # cell index -> why it was stopped, in the student's language

    # The wall-clock limits give way to the limits above, whatever the config says (nbclient applies the config
    # again as each notebook starts): the reply waits as long as the kernel computes or waits for a CPU, and a
    # kernel that replied always sends the rest of its output, however late.
    @validate("timeout")
    def _no_wall_clock_limit(self, proposal):
        return None

    @validate("iopub_timeout")
    def _output_after_the_reply(self, proposal):
        return max(proposal["value"] or 0, int(self.blocked_seconds))

    def _kernel_pid(self) -> int | None:
        provisioner = getattr(self.km, "provisioner", None)
        process = getattr(provisioner, "process", None)
        return getattr(process, "pid", None)

    def _notify(self, english: str, **fields) -> None:
        self.log.debug("%s", english.format(**fields))
        self.on_wait(english, fields)

    async def async_start_new_kernel_client(self):
        """nbclient's, with a start that waits while the kernel process lives and is not blocked."""
        self.kc = self.km.client()
        await ensure_async(self.kc.start_channels())
        watch = Watch(self._kernel_pid())
        try:
            while True:
                try:
                    await ensure_async(self.kc.wait_for_ready(timeout=self.notice_seconds))
                    break
                except RuntimeError:
                    if not await ensure_async(self.km.is_alive()):
                        raise KernelStartStopped(t(KERNEL_DIED, self.language)) from None
                    watch.sample()
                    if watch.blocked > self.blocked_seconds:
                        raise KernelStartStopped(t(KERNEL_BLOCKED, self.language, blocked=watch.blocked,
                                                   limit=self.blocked_seconds)) from None
                    self._notify(STILL_STARTING, wall=watch.wall)
        except Exception:
            await self._async_cleanup_kernel()
            raise
        self.kc.allow_stdin = False
        await run_hook(self.on_notebook_start, notebook=self.nb)
        return self.kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # nbclient's sync name, bound to this one

    async def async_execute_cell(self, cell: NotebookNode, cell_index: int, execution_count: int | None = None,
                                 store_history: bool = True) -> NotebookNode:
        if cell.cell_type != "code" or not cell.source.strip():
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        watcher = asyncio.ensure_future(self._watch(cell_index))
        try:
            cell = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        finally:
            watcher.cancel()
        if cell_index in self.stopped:
            self._replace_interrupt(cell, self.stopped[cell_index])
        return cell

    execute_cell = run_sync(async_execute_cell)  # what nbconvert's preprocess calls, bound to this one

    async def _watch(self, cell_index: int) -> None:
        """Sample the kernel while the cell runs; interrupt it at a limit (again at each further limit's worth,
        should the cell survive an interrupt); tell every ``notice_seconds`` that it is still waiting."""
        watch = Watch(self._kernel_pid())
        cpu_limit, blocked_limit, next_notice = self.cpu_seconds, self.blocked_seconds, self.notice_seconds
        while True:
            await asyncio.sleep(self.poll_seconds)
            watch.sample()
            reason = None
            if watch.cpu > cpu_limit:
                reason = t(CPU_LIMIT, self.language, cpu=watch.cpu, limit=self.cpu_seconds)
                cpu_limit += self.cpu_seconds
            elif watch.blocked > blocked_limit:
                reason = t(BLOCKED_LIMIT, self.language, blocked=watch.blocked, limit=self.blocked_seconds)
                blocked_limit += self.blocked_seconds
            if reason:
                self.log.warning("cell %d: %s", cell_index + 1, reason)
                self.stopped[cell_index] = reason
                await ensure_async(self.km.interrupt_kernel())
            elif watch.wall > next_notice:
                busy = watch.waiting_for_cpu > watch.wall / 2  # most of the cell's time went waiting for a CPU
                self._notify(STILL_RUNNING if busy else STILL_COMPUTING, cell=cell_index + 1, wall=watch.wall,
                             cpu=watch.cpu)
                next_notice += self.notice_seconds

    @staticmethod
    def _replace_interrupt(cell: NotebookNode, reason: str) -> None:
        """The interrupt's KeyboardInterrupt, in the cell's outputs, becomes the reason it was stopped."""
        lines = wrapped(f"CellStopped: {reason}", 80).split("\n")  # whole in nbgrader validate's 90 columns
        error = NotebookNode(output_type="error", ename="CellStopped", evalue=reason, traceback=lines)
        interrupts = [i for i, out in enumerate(cell.outputs)
                      if out.output_type == "error" and out.get("ename") == "KeyboardInterrupt"]
        for i in reversed(interrupts):
            del cell.outputs[i]
        cell.outputs.append(error)


def edition_language(nb: NotebookNode) -> str:
    """The language of a notebook's edition (make release writes it in the metadata; English: none)."""
    return nb.metadata.get("rlhf_course", {}).get("edition", ENGLISH)


def released_notebook(config, notebook_path: str) -> Path | None:
    """The released copy of a student's notebook, where Fetch took it from: the exchange's
    ``<root>/<course id>/outbound/<assignment>/<notebook>``, the assignment being the notebook's folder (as Fetch
    names it); None when the configuration names no course or that file is not there."""
    from nbgrader.exchange.default.exchange import Exchange
    root = config.get("Exchange", {}).get("root") or Exchange.class_traits()["root"].default_value
    course_id = config.get("CourseDirectory", {}).get("course_id")
    if not isinstance(root, str) or not isinstance(course_id, str) or not course_id:
        return None
    path = Path(notebook_path).resolve()
    released = Path(root) / course_id / "outbound" / path.parent.name / path.name
    return released if released.is_file() else None


def is_released_copy(nb: NotebookNode) -> bool:
    """Whether ``nb`` is a released notebook or a student's copy of one: nbgrader's release wrote a checksum in its
    grade cells (the instructor's source notebooks have none, and differ from the release by design)."""
    return any("checksum" in notebooks.nbgrader_metadata(cell) for cell in nb.cells)


def release_copy(notebook_path: str | Path, release: Path) -> tuple[str, str]:
    """The command that copies ``release`` beside the student's assignment folder, and the copy's name there: outside
    the folder Submit sends, under a name no notebook of the assignment has (``<assignment>_released_<notebook>``)."""
    notebook = Path(notebook_path).resolve()
    name = f"{notebook.parent.name}_released_{release.name}"
    return f"cp {shlex.quote(str(release))} {shlex.quote(str(notebook.parent.parent / name))}", name


def restored_cell_notices(nb: NotebookNode, release_nb: NotebookNode, release: Path, language: str,
                          notebook_path: str | Path) -> list[str]:
    """What Validate says of each grade cell grading will take from the release rather than from ``nb`` (the
    student's notebook), compared as grading compares them (:func:`release_cells.release_cell_changes`): the cell
    by position, grade id and first line, why, and how to get the release's back from ``release`` (an answer's
    text moved into it, where grading would leave that text out or take the release's metadata)."""
    released = notebooks.cells_by_grade_id(release_nb)
    notices = []
    for gid, (index, kinds) in release_cells.release_cell_changes(nb, release_nb).items():
        fields = {"position": index + 1, "grade_id": gid, "first_line": _first_line(released[gid].source)}
        said = [t(RESTORED_CELL[kind], language, **fields) for kind in kinds]
        answer_kept = _answer_text_kept(kinds, released[gid])
        closing = (GRADED_WITH_RELEASED_METADATA if answer_kept
                   else GRADED_WITHOUT_YOUR_TEXT if release_cells.TYPE_CHANGED in kinds else GRADED_AS_RELEASED)
        command, name = release_copy(notebook_path, release)
        between = " " if language == ENGLISH else ""  # Chinese sentences follow each other without a space
        notices.append(between.join(said + [t(closing, language, copy_command=command, copy_name=name)]))
    return notices


def restored_cell_headings(nb: NotebookNode, release_nb: NotebookNode, language: str) -> list[str]:
    """The heading above each of :func:`restored_cell_notices`, in the same order: what grading takes from the
    release (the cell, or only an answer cell's metadata)."""
    released = notebooks.cells_by_grade_id(release_nb)
    return [t(METADATA_TAKEN_FROM_RELEASE if _answer_text_kept(kinds, released[gid]) else TAKEN_FROM_RELEASE, language)
            for gid, (_, kinds) in release_cells.release_cell_changes(nb, release_nb).items()]


def _answer_text_kept(kinds: list[str], released_cell: NotebookNode) -> bool:
    """Whether grading keeps the student's text of a changed cell: an answer cell whose metadata alone changed."""
    return kinds == [release_cells.METADATA_EDITED] and release_cells.is_students_cell(released_cell)


def _first_line(source: str) -> str:
    line = next((line.strip() for line in source.split("\n") if line.strip()), "")
    return line if len(line) <= FIRST_LINE_CHARS else line[:FIRST_LINE_CHARS - 3] + "..."


class PatientValidator(Validator):
    """nbgrader's Validator with :class:`PatientExecute`; a cell stopped by a limit counts as failed.  A copy of a
    released notebook (:func:`is_released_copy`) whose released notebook is found (:func:`released_notebook`) is
    compared with it as grading compares it: a locked
    cell edited or deleted, nbgrader metadata edited or an answer cell's type changed is reported as nbgrader
    reports a changed cell (``{"changed": [{"source": ...}]}``), each with what grading will do and how to get the
    release's cell back (:func:`restored_cell_notices`), and nothing is run; otherwise the notebook runs, and
    nbgrader's own checksum comparison, which a space at a line's end fails, is not made.  nbgrader's own sentence
    under a failed cell ("You did not provide a response.": :data:`NBGRADER_SAYS`) is in the edition's language."""

    def __init__(self, *args, on_wait: Callable[[str, dict], None] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.on_wait = on_wait
        self.stopped_cells: list[int] = []
        self.language = ENGLISH  # the notebook's edition's, once it runs
        self.compared_with_release = False
        self.told_restored = False  # the last validate() reported cells grading takes from the release
        self.restored_headings: list[str] = []  # then, the heading of each (restored_cell_headings)

    def validate(self, filename: str) -> dict:
        self.compared_with_release = self.told_restored = False
        self.restored_headings = []
        release = released_notebook(self.config, filename)
        if release is not None:
            try:
                nb, release_nb = notebooks.read(Path(filename)), notebooks.read(release)
            except Exception:  # nbgrader's own reading below says what is wrong with the student's
                nb = None
            if nb is not None and is_released_copy(nb):
                self.language = edition_language(nb)
                notices = restored_cell_notices(nb, release_nb, release, self.language, filename)
                if notices:
                    self.told_restored = True
                    self.restored_headings = restored_cell_headings(nb, release_nb, self.language)
                    return {"changed": [{"source": notice} for notice in notices]}
                self.compared_with_release = True
        return super().validate(filename)

    def _get_changed_cells(self, nb: NotebookNode) -> list:
        return [] if self.compared_with_release else super()._get_changed_cells(nb)

    # `nbgrader validate`'s printing of those cells: a heading in the edition's language, each notice whole (nbgrader
    # cuts a changed cell's every line at its width, which would cut a notice's sentences), wrapped to the width in
    # display columns (a CJK character takes two, a Latin one one), the released notebook's path whole, to copy
    def _print_num_changed(self, num_changed: int) -> None:
        if not self.told_restored:
            return super()._print_num_changed(num_changed)
        self.stream.write(wrapped(t(RESTORED_HEADING, self.language, count=num_changed), self.width))

    def _print_changed(self, source: str) -> None:
        if not self.told_restored:
            return super()._print_changed(source)
        self.stream.write("\n" + "=" * self.width + "\n")
        self.stream.write(wrapped(source, self.width) + "\n\n")

    def _preprocess(self, nb: NotebookNode) -> NotebookNode:
        from nbgrader import utils
        resources: dict = {}
        with utils.setenv(NBGRADER_VALIDATING="1", NBGRADER_EXECUTION="validate"):
            for step in (CheckCellMetadata, ClearOutput):
                nb, resources = step(parent=self).preprocess(nb, resources)
            self.language = edition_language(nb)
            execute = PatientExecute(parent=self, on_wait=self.on_wait, language=self.language)
            nb, resources = execute.preprocess(nb, resources)
        self.stopped_cells = sorted(execute.stopped)
        return nb

    def _extract_error(self, cell: NotebookNode) -> str:
        """nbgrader's text of a failed cell, its own sentences (:data:`NBGRADER_SAYS`) in the edition's language, its
        "no response" with what to do, and under a traceback that ends in NotImplementedError (the released stub's,
        which has no message) what that means and what to do; each sentence wrapped to the lines `nbgrader validate`
        prints whole (it cuts a longer one short)."""
        columns = self.width - len(self.indent) - 3
        error = super()._extract_error(cell)
        if error == NBGRADER_SAYS[0]:
            error = wrapped(t(NO_RESPONSE, self.language), columns)
        elif error in NBGRADER_SAYS:
            error = wrapped(t(error, self.language), columns)
        if cell.cell_type == "code" and any(output.output_type == "error" and output.get("ename") == "NotImplementedError"
                                            for output in cell.outputs):
            error += "\n\n" + wrapped(t(NOT_WRITTEN_YET, self.language), columns)
        return error

    def _get_failed_cells(self, nb: NotebookNode) -> list[NotebookNode]:
        failed = super()._get_failed_cells(nb)
        stopped = [nb.cells[i] for i in self.stopped_cells if nb.cells[i] not in failed]
        return stopped + failed


class PatientValidateApp(ValidateApp):
    """``python -m rlhf_course.classroom.patient_validate NOTEBOOK...``: ``nbgrader validate`` (its config, its
    options, its report) with :class:`PatientValidator`; the notices of a wait are printed as they come."""
    name = "rlhf-course-validate"

    @default("classes")
    def _classes_default(self):
        return [*super()._classes_default(), PatientExecute]

    def start(self):
        if not self.extra_args:
            self.fail("Must provide path to notebook:\npython -m rlhf_course.classroom.patient_validate NOTEBOOK")
        validator = PatientValidator(parent=self, on_wait=lambda english, fields: print(
            t(english, validator.language, **fields), flush=True))
        for filename in [found for pattern in self.extra_args for found in sorted(glob.glob(pattern))]:
            try:
                validator.validate_and_print(filename)
            except Exception:
                self.log.error(traceback.format_exc())
                self.fail(f"nbgrader encountered a fatal error while trying to validate '{filename}'")


if __name__ == "__main__":
    PatientValidateApp.launch_instance()
