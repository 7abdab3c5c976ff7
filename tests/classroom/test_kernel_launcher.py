"""The course's python kernel (rlhf_course/classroom/kernel_launcher.py): its forked children's output pipe is a Unix
socket in a folder of the kernel's user, no loopback TCP port any local account could flood.  One kernel, started
as the classroom starts them: the ``python3`` kernel spec every server finds on its JUPYTER_PATH, over ipc."""
import inspect
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
import zmq
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbformat.v4 import new_code_cell, new_notebook

from rlhf_course.classroom import kernel_launcher
from rlhf_course.classroom.hub import Classroom, write_everyone_config, write_kernel_specs
from rlhf_course.classroom.server_env import ServerEnv

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60


def tcp_listening_inodes() -> set[str]:
    """Inodes of every listening TCP socket on this machine (IPv4 and IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in list(handle)[1:]:
                fields = line.split()
                if fields[3] == "0A":  # TCP_LISTEN
                    inodes.add(fields[9])
    return inodes


def socket_inodes(pid: int) -> set[str]:
    """Inodes of the sockets process ``pid`` holds open."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with_target = os.readlink(f"/proc/{pid}/fd/{fd}") if os.path.exists(f"/proc/{pid}/fd/{fd}") else ""
        if with_target.startswith("socket:["):
            found.add(with_target[len("socket:["):-1])
    return found


def tcp_listeners(pid: int) -> set[str]:
    return socket_inodes(pid) & tcp_listening_inodes()


def peak_resident_bytes(pid: int) -> int:
    """The process's peak resident memory (VmHWM), bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """The classroom's ``python3`` kernel over ipc, its connection file in a private runtime folder: (manager,
    client, runtime folder)."""
    base = tmp_path_factory.mktemp("kernel")
    runtime = base / "runtime"
    runtime.mkdir(mode=0o700)
    data = base / "data"
    write_kernel_specs(data, REPO)
    (base / "beside_the_notebook.py").write_text("ANSWER = 42\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(data))
        patch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
        # as a server's kernel: its connection file in the user's runtime folder
        manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(runtime / "kernel-ipc"),
                                connection_file=str(runtime / "kernel-1.json"))
        manager.start_kernel(cwd=str(base))
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=TIMEOUT)
        yield manager, client, runtime
    finally:
        client.stop_channels()
        manager.shutdown_kernel()
    assert not list(runtime.glob("kernel-pipe-*"))  # removed as the kernel exits


def run(client, code: str) -> str:
    """Run ``code`` in the kernel; what its cell printed (stdout), after checking it ran without error."""
    printed = []

    def hook(message):
        if message["msg_type"] == "stream" and message["content"]["name"] == "stdout":
            printed.append(message["content"]["text"])
    reply = client.execute_interactive(code, timeout=TIMEOUT, output_hook=hook)
    assert reply["content"]["status"] == "ok", reply["content"]
    return "".join(printed)


def test_every_server_s_python3_kernel_spec_is_the_launcher(tmp_path):
    write_kernel_specs(tmp_path / "data", REPO)
    spec = KernelSpecManager(kernel_dirs=[str(tmp_path / "data" / "kernels")]).get_kernel_spec("python3")
    assert spec.argv[1:3] == ["-m", "rlhf_course.classroom.kernel_launcher"]
    assert spec.argv[0] == "python"  # jupyter_client runs the server's own interpreter for it


def test_every_account_s_servers_and_commands_find_the_course_s_kernel_specs_first(tmp_path):
    room = Classroom(tmp_path, tmp_path / "base", "p_", ["a", "b"], 1, Path("/bin/true"))
    room.server = ServerEnv.__new__(ServerEnv)
    room.server.python, room.server.path = sys.executable, os.environ["PATH"]
    room.course_id, room.passwords, room.hub_dir = "c", {name: "p" for name in room.names}, tmp_path
    room.write_hub_config()
    environments = json.loads((tmp_path / "users.json").read_text())["environments"]
    assert set(environments) == set(room.names)
    assert {env["JUPYTER_PATH"] for env in environments.values()} == {str(room.jupyter_data)}
    assert room.instructor_env()["JUPYTER_PATH"] == str(room.jupyter_data)  # the instructor's nbgrader commands


@pytest.fixture
def short_tmp_path():
    """A temporary folder with a short path: a worker's pytest folder and a test's name alone can outgrow a Unix
    socket's 107 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="kp-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_pipe_s_folder_is_private_and_its_socket_path_fits(short_tmp_path, monkeypatch):
    tmp_path = short_tmp_path
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    connection = tmp_path / "connection"
    connection.mkdir(mode=0o700)
    assert Path(kernel_launcher.make_pipe_folder(str(connection))).parent == connection
    connection.chmod(0o770)  # others may write: they could move the folder away and put theirs in its place
    made = Path(kernel_launcher.make_pipe_folder(str(connection)))
    assert made.parent == runtime and stat.S_IMODE(made.stat().st_mode) == 0o700
    deep = runtime / ("d" * 100)
    deep.mkdir(mode=0o700)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(deep))
    made = Path(kernel_launcher.make_pipe_folder(str(deep)))  # too long for a Unix socket's path
    try:
        assert made.parent == Path(tempfile.gettempdir()) and stat.S_IMODE(made.stat().st_mode) == 0o700
        assert list(deep.iterdir()) == []  # the folder that did not fit is not left behind
    finally:
        shutil.rmtree(made)


HOLDS_A_PIPE_FOLDER = """import sys, time
from rlhf_course.classroom import kernel_launcher
print(kernel_launcher.make_pipe_folder(sys.argv[1]), flush=True)
time.sleep(300)
"""


def a_launcher_s_pipe_folder(connection: Path) -> tuple[subprocess.Popen, Path]:
    """A process that made its pipe's folder as the launcher does, and lives on: (the process, its folder, with a
    socket file in it as the kernel's pipe leaves)."""
    process = subprocess.Popen([sys.executable, "-c", HOLDS_A_PIPE_FOLDER, str(connection)], stdout=subprocess.PIPE,
                               text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    folder = Path(process.stdout.readline().strip())
    assert folder.parent == connection, folder
    with socket.socket(socket.AF_UNIX) as pipe:
        pipe.bind(str(folder / kernel_launcher.PIPE_NAME))
    return process, folder


def test_the_next_kernel_removes_a_killed_kernel_s_pipe_folder_and_never_a_live_one_s(short_tmp_path, monkeypatch):
    """A kernel killed (SIGKILL: out of memory, or a student's restart of a stuck kernel) runs no clean-up: the next
    kernel started beside it removes its folder, and only folders no live process holds."""
    runtime = short_tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    killed, killed_folder = a_launcher_s_pipe_folder(runtime)
    live, live_folder = a_launcher_s_pipe_folder(runtime)
    someone_else_s = runtime / "kernel-pipe-not-a-launcher-s"  # a folder the launcher did not make: never judged
    someone_else_s.mkdir(mode=0o700)
    try:
        killed.kill()
        killed.wait(timeout=TIMEOUT)
        made = Path(kernel_launcher.make_pipe_folder(str(runtime)))
        assert not killed_folder.exists()
        assert stat.S_ISSOCK((live_folder / kernel_launcher.PIPE_NAME).stat().st_mode)
        assert someone_else_s.is_dir() and made.is_dir()
        assert sorted(runtime.iterdir()) == sorted([made, live_folder, someone_else_s])
    finally:
        live.kill()
        live.wait(timeout=TIMEOUT)


def test_the_check_finds_a_tcp_listener():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert tcp_listeners(os.getpid())


def test_the_kernel_listens_on_no_tcp_port_and_its_pipe_is_in_a_private_folder(kernel):
    manager, client, runtime = kernel
    assert not tcp_listeners(manager.provisioner.process.pid)
    [pipe] = runtime.glob("kernel-pipe-*/pipe")  # beside the connection file
    assert stat.S_ISSOCK(pipe.stat().st_mode)
    assert stat.S_IMODE(pipe.parent.stat().st_mode) == 0o700 and pipe.parent.stat().st_uid == os.geteuid()


def test_the_kernel_offers_no_debugger_that_would_listen_on_a_tcp_port(kernel):
    """JupyterLab's debugger would make the kernel run debugpy.listen on a loopback TCP port any account can reach."""
    manager, client, _ = kernel
    info = client.kernel_info(reply=True, timeout=TIMEOUT)["content"]
    assert "debugger" not in info.get("supported_features", []), info
    client.control_channel.send(client.session.msg("debug_request", {"type": "request", "seq": 1,
                                                                     "command": "initialize", "arguments": {}}))
    reply = client.control_channel.get_msg(timeout=TIMEOUT)
    assert reply["msg_type"] == "debug_reply" and not reply["content"], reply["content"]
    time.sleep(0.5)
    assert not tcp_listeners(manager.provisioner.process.pid)


def test_forked_childrens_output_reaches_the_cell(kernel):
    _, client, _ = kernel
    printed = run(client, (
        "import multiprocessing, os\n"
        "child = multiprocessing.get_context('fork').Process(target=print, args=('from a multiprocessing child',))\n"
        "child.start(); child.join()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    print('from an os.fork child', flush=True)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "import time; time.sleep(0.5)\n"))  # the children's output comes through the IOPub thread, a moment later
    assert "from a multiprocessing child" in printed
    assert "from an os.fork child" in printed


def test_the_notebook_s_folder_is_still_on_the_kernel_s_path(kernel):
    _, client, _ = kernel  # the launcher takes it off while ipykernel imports; the shell puts it back
    assert run(client, "from beside_the_notebook import ANSWER\nprint(ANSWER)").strip() == "42"


def test_an_oversize_pipe_message_is_dropped_unread_and_the_kernel_lives(kernel):
    manager, client, runtime = kernel
    pid = manager.provisioner.process.pid
    [pipe] = runtime.glob("kernel-pipe-*/pipe")
    before = peak_resident_bytes(pid)
    size = kernel_launcher.PIPE_MAX_BYTES + 32 * 2**20
    context = zmq.Context()
    sender = context.socket(zmq.PUSH)
    sender.linger = 2000
    sender.connect(f"ipc://{pipe}")
    sender.send_multipart([os.urandom(16), b"x" * size])
    sender.close()
    context.term()  # the message is written (or its connection cut) before the kernel's memory is read
    time.sleep(0.5)
    assert peak_resident_bytes(pid) - before < 32 * 2**20  # never allocated: the kernel read its size only
    assert manager.is_alive()
    assert "from an os.fork child" in run(client, (
        "import os\npid = os.fork()\n"
        "if pid == 0:\n    print('from an os.fork child', flush=True)\n    os._exit(0)\n"
        "os.waitpid(pid, 0)\nimport time; time.sleep(0.5)\n"))


def test_a_killed_kernel_s_pipe_folder_goes_when_the_next_one_starts_and_a_live_kernel_s_stays(kernel, monkeypatch):
    """SIGKILL, as the out-of-memory killer or a restart of a stuck kernel sends it: the kernel's own clean-up never
    runs; the next kernel started in the same runtime folder removes its pipe's folder, and the live kernel's pipe
    still carries its forked children's output."""
    manager, client, runtime = kernel
    [live_pipe] = runtime.glob("kernel-pipe-*/pipe")
    monkeypatch.setenv("JUPYTER_PATH", str(runtime.parent / "data"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))

    def started(number: int) -> KernelManager:
        other = KernelManager(kernel_name="python3", transport="ipc", ip=str(runtime / f"kernel-ipc-{number}"),
                              connection_file=str(runtime / f"kernel-{number}.json"))
        other.start_kernel(cwd=str(runtime.parent))
        ready = other.client()
        ready.start_channels()
        try:
            ready.wait_for_ready(timeout=TIMEOUT)
        finally:
            ready.stop_channels()
        return other

    killed = started(2)
    [killed_folder] = {pipe.parent for pipe in runtime.glob("kernel-pipe-*/pipe")} - {live_pipe.parent}
    killed.provisioner.process.kill()
    killed.provisioner.process.wait(timeout=TIMEOUT)
    assert killed_folder.is_dir()  # nothing of the killed kernel's ran
    following = started(3)
    try:
        assert not killed_folder.exists()
        assert stat.S_ISSOCK(live_pipe.stat().st_mode)
        assert "from an os.fork child" in run(client, (
            "import os\npid = os.fork()\n"
            "if pid == 0:\n    print('from an os.fork child', flush=True)\n    os._exit(0)\n"
            "os.waitpid(pid, 0)\nimport time; time.sleep(0.5)\n"))
    finally:
        following.shutdown_kernel()
        killed.cleanup_resources()


def test_the_ipykernel_internals_the_launcher_relies_on_are_unchanged():
    """ipykernel is pinned; an upgrade that changes what the launcher replaces must be looked at, not run blind."""
    import ipykernel
    from ipykernel import iostream, kernelapp
    assert ipykernel.__version__ == kernel_launcher.IPYKERNEL_VERSION
    assert f"ipykernel=={kernel_launcher.IPYKERNEL_VERSION}" in (REPO / "requirements.txt").read_text().split()
    assert "IOPubThread(self.iopub_socket, pipe=True" in inspect.getsource(kernelapp.IPKernelApp.init_iopub)
    assert kernelapp.IOPubThread is iostream.IOPubThread  # the name init_iopub builds its thread from
    assert "self._setup_pipe_in()" in inspect.getsource(iostream.IOPubThread.__init__)
    handle = inspect.getsource(iostream.IOPubThread._handle_pipe_msg)
    assert "self._pipe_uuid" in handle and "self.send_multipart(msg[1:])" in handle
    child_send = inspect.getsource(iostream.IOPubThread._really_send)
    assert "self._setup_pipe_out()" in child_send and "[self._pipe_uuid, *msg]" in child_send
    assert 'bind_to_random_port("tcp://127.0.0.1")' in inspect.getsource(iostream.IOPubThread._setup_pipe_in)
    assert '"tcp://127.0.0.1:%i" % self._pipe_port' in inspect.getsource(iostream.IOPubThread._setup_pipe_out)
    from ipykernel import ipkernel, kernelbase  # where without_debugger's flag is read, at each use
    reads = "from .debugger import _is_debugpy_available"
    for reads_it in (ipkernel.IPythonKernel.__init__, ipkernel.IPythonKernel.do_debug_request,
                     ipkernel.IPythonKernel.dispatch_debugpy, kernelbase.Kernel.kernel_info.fget):
        assert reads in inspect.getsource(reads_it), reads_it


KERNEL_IS_THE_LAUNCHERS = '''import os, sys
from ipykernel.kernelapp import IPKernelApp
assert "rlhf_course.classroom.kernel_launcher" in open(f"/proc/{os.getpid()}/cmdline").read()
address = IPKernelApp.instance().iopub_thread._pipe_address
assert address.startswith("ipc://" + os.environ["JUPYTER_RUNTIME_DIR"] + "/kernel-pipe-"), address
'''


def test_validate_s_kernel_on_the_classroom_s_config_is_the_launcher_s(repo, tmp_path):
    """nbgrader's Validate, as a student's server runs it (the classroom's config and JUPYTER_PATH): its kernel
    (nbclient's, its connection file in /tmp) has its pipe in the user's runtime folder."""
    write_everyone_config(tmp_path / "everyone", repo)
    write_kernel_specs(tmp_path / "data", repo)
    test = {"nbgrader": {"grade": True, "grade_id": "launcher", "points": 1, "solution": False, "locked": True,
                         "schema_version": 3}}
    nb = new_notebook(cells=[new_code_cell(KERNEL_IS_THE_LAUNCHERS, metadata=test)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "check.ipynb")
    with tempfile.TemporaryDirectory(prefix="rt-") as runtime:  # short: a Unix socket's path has 107 bytes
        os.chmod(runtime, 0o700)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
        env.update(JUPYTER_CONFIG_PATH=str(tmp_path / "everyone"), JUPYTER_RUNTIME_DIR=runtime,
                   JUPYTER_CONFIG_DIR=str(tmp_path / "none"), JUPYTER_PATH=str(tmp_path / "data"))
        done = subprocess.run(["nbgrader", "validate", "check.ipynb"], cwd=tmp_path, env=env, text=True,
                              capture_output=True, timeout=120)
    assert "Success! Your notebook passes all the tests." in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
