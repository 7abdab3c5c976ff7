"""The course's python kernel: ipykernel, with its subprocess-output pipe on a Unix socket no other account can reach.

    python -m rlhf_course.classroom.kernel_launcher -f {connection_file}

(the ``python3`` kernel spec the classroom gives every server, ``jupyter/kernels/python3``).

A kernel's forked children (``multiprocessing``, ``os.fork()``) cannot write to its IOPub socket: ipykernel
sends their output over a PULL socket of the kernel's, which ipykernel 7.4.0 binds on a random loopback TCP port
whatever the kernel's transport (``IOPubThread._setup_pipe_in``; the children connect to it in
``_setup_pipe_out``).  Any local account can connect there: one oversize message makes the kernel allocate it
and die in its cgroup's memory limit, small ones fill the server's log with "Bad pipe message".  ipykernel has no
setting for it, so this launcher replaces those two methods (the rest of ``IOPubThread`` is ipykernel's):

* the socket is ``ipc://<folder>/pipe``, the folder a fresh one of the kernel's own (``mkdtemp``: 0700) in its
  connection file's folder or the user's runtime folder (the classroom's are private: rlhf_course/classroom/
  spawner.py), in /tmp when neither is this account's alone or the path is longer than a Unix socket's; removed
  when the kernel exits, or, when it was killed (SIGKILL runs no clean-up), by the next kernel started there: each
  kernel holds a lock on its folder's ``alive`` file while it lives (:func:`remove_dead_pipe_folders`);
* a message (one frame) longer than :data:`PIPE_MAX_BYTES` disconnects its sender, unread (``zmq.MAXMSGSIZE``);
* the kernel offers no debugger: JupyterLab's debugger makes the kernel run ``debugpy.listen`` on a loopback TCP
  port, where any local account could attach and run code as the student.  The kernel says so in its
  ``kernel_info`` (no ``debugger`` feature), and JupyterLab shows no debugger for it.

It relies on ipykernel 7.4.0's internals (:data:`IPYKERNEL_VERSION`): ``ipykernel.kernelapp.IPKernelApp.init_iopub``
builds ``IOPubThread`` (the name in ``ipykernel.kernelapp``) with ``pipe=True``, whose ``__init__`` calls
``_setup_pipe_in``, which sets ``_pipe_uuid`` and ``_pipe_in`` (read by ``_handle_pipe_msg``); a forked child calls
``_setup_pipe_out`` for a ``(context, PUSH socket)`` pair.  tests/classroom/test_kernel_launcher.py fails when any
of it changes.
"""
from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import stat
import sys
import tempfile

IPYKERNEL_VERSION = "7.4.0"
# a frame the pipe accepts: far above what a cell's output shows; a child's single write larger than this is lost
PIPE_MAX_BYTES = 64 * 2**20
SOCKET_PATH_MAX = 107  # bytes in a Unix socket's path (sun_path, less its terminating NUL)
PIPE_NAME = "pipe"
PIPE_FOLDER_PREFIX = "kernel-pipe-"
# In a pipe's folder: the file its kernel holds an exclusive flock on for as long as it (or a forked child) lives.
# It gets this name only once locked, so a folder whose lock is free is a dead kernel's, never a starting one's.
ALIVE_NAME = "alive"
_held_locks: list[int] = []  # the open files holding this process's locks: closed only when the process ends


def private_folder(parent: str) -> bool:
    """True if ``parent`` is a folder of this account's own that no one else may write to (nobody can move what is
    made in it away, nor put their own in its place)."""
    try:
        info = os.lstat(parent)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def make_pipe_folder(connection_folder: str) -> str:
    """A new 0700 folder of this account's for the pipe's socket: in ``connection_folder`` (a server's kernels') or
    else the Jupyter runtime folder (nbclient's kernels have their connection file in /tmp) when it is private and
    the socket's path fits, else in the temporary folder (``/tmp``: sticky, so it stays ours)."""
    from jupyter_core.paths import jupyter_runtime_dir
    parents = [folder for folder in (connection_folder, jupyter_runtime_dir()) if private_folder(folder)]
    for parent in [*parents, tempfile.gettempdir()]:
        remove_dead_pipe_folders(parent)
        folder = tempfile.mkdtemp(prefix=PIPE_FOLDER_PREFIX, dir=parent)
        if len(os.fsencode(os.path.join(folder, PIPE_NAME))) <= SOCKET_PATH_MAX:
            _hold_alive_lock(folder)
            return folder
        os.rmdir(folder)
    raise RuntimeError(f"no folder for the kernel's output pipe: {connection_folder} and {tempfile.gettempdir()} "
                       f"are too long for a Unix socket's path ({SOCKET_PATH_MAX} bytes)")


def _hold_alive_lock(folder: str) -> None:
    """Lock the folder's ``alive`` file for the rest of this process's life (and its forked children's): the lock is
    taken under another name, then the file renamed, so that no one finds ``alive`` unlocked while we live."""
    unnamed = os.path.join(folder, ALIVE_NAME + ".new")
    lock = os.open(unnamed, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.rename(unnamed, os.path.join(folder, ALIVE_NAME))
    _held_locks.append(lock)


def _owner_is_gone(folder: str) -> bool:
    """True if the process that made ``folder`` and every child it forked have ended: its ``alive`` lock is free.
    False while it lives, and for a folder with no ``alive`` file (one still starting, or not a launcher's)."""
    try:
        lock = os.open(os.path.join(folder, ALIVE_NAME), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(lock)
    return True


def remove_dead_pipe_folders(parent: str) -> None:
    """Remove this account's pipe folders in ``parent`` whose kernel is gone: one killed runs no clean-up of its
    own, and a student's restart of a stuck kernel kills it."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(PIPE_FOLDER_PREFIX):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and _owner_is_gone(entry.path):
            shutil.rmtree(entry.path, ignore_errors=True)


def _remover(folder: str, owner_pid: int):
    def remove() -> None:
        if os.getpid() == owner_pid:  # a forked child exiting through sys.exit runs this too
            shutil.rmtree(folder, ignore_errors=True)
    return remove


def private_pipe_thread_class():
    """ipykernel's ``IOPubThread`` with its subprocess pipe on a Unix socket in :attr:`pipe_folder`, capped."""
    import zmq
    from ipykernel.iostream import IOPubThread
    from zmq.eventloop.zmqstream import ZMQStream

    class PrivatePipeIOPubThread(IOPubThread):
        pipe_folder: str = ""  # set by the kernel app before it builds the thread

        def _setup_pipe_in(self):
            """The PULL socket the kernel's forked children send their output to: ipc, in a private folder."""
            if not self.pipe_folder:
                raise RuntimeError("PrivatePipeIOPubThread.pipe_folder is not set: start it with PrivatePipeKernelApp")
            ctx = self.socket.context
            self._pipe_uuid = os.urandom(16)  # still checked: the same account's other kernels could connect
            pipe_in = ctx.socket(zmq.PULL)
            pipe_in.linger = 0
            pipe_in.setsockopt(zmq.MAXMSGSIZE, PIPE_MAX_BYTES)
            self._pipe_address = "ipc://" + os.path.join(self.pipe_folder, PIPE_NAME)
            pipe_in.bind(self._pipe_address)
            self._pipe_in = ZMQStream(pipe_in, self.io_loop)
            self._pipe_in.on_recv(self._handle_pipe_msg)

        def _setup_pipe_out(self):
            """In a forked child: a new context (the parent's does not survive a fork) and a PUSH socket to the pipe."""
            ctx = zmq.Context()
            pipe_out = ctx.socket(zmq.PUSH)
            pipe_out.linger = 3000  # ipykernel's: 3 s for a send to complete before it is discarded
            pipe_out.connect(self._pipe_address)
            return ctx, pipe_out

    return PrivatePipeIOPubThread


def kernel_app_class():
    """ipykernel's ``IPKernelApp``, building :func:`private_pipe_thread_class`'s thread for its IOPub."""
    from ipykernel import kernelapp

    thread_class = private_pipe_thread_class()

    class PrivatePipeKernelApp(kernelapp.IPKernelApp):
        def init_iopub(self, context):
            thread_class.pipe_folder = make_pipe_folder(os.path.dirname(self.abs_connection_file))
            atexit.register(_remover(thread_class.pipe_folder, os.getpid()))
            kernelapp.IOPubThread = thread_class  # the name init_iopub builds its thread from
            super().init_iopub(context)

    return PrivatePipeKernelApp


def main() -> None:
    """Start the kernel, as ``python -m ipykernel_launcher`` does."""
    # as ipykernel_launcher: the working folder off sys.path while ipykernel imports (IPython's shell puts it back
    # for the notebook's imports)
    if sys.path and (sys.path[0] == "" or os.path.abspath(sys.path[0]) == os.getcwd()):
        del sys.path[0]
    without_debugger()
    kernel_app_class().launch_instance()


def without_debugger() -> None:
    """No debugpy in this kernel: ipykernel reads ``ipykernel.debugger._is_debugpy_available`` when it builds the
    kernel, answers ``kernel_info`` and dispatches a ``debug_request``."""
    from ipykernel import debugger
    debugger._is_debugpy_available = False


if __name__ == "__main__":
    main()
