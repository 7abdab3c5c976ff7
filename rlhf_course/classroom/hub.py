"""A classroom on one machine (`make hub`, as root): real Unix accounts for an instructor and students,
the course's shared exchange, the course directory owned by the instructor, and a JupyterHub that
spawns each user's JupyterLab as that user, from a Python environment every user can run.

    python -m rlhf_course.classroom [--port 8000] [--students alice bob carol] [--base /srv/rlhf-classroom]

prints the hub's address and one random password per account, then runs the hub until interrupted;
on Ctrl-C (or SIGTERM) it stops every server and removes the accounts and the classroom folder; an unplanned
stop (the hub not coming back, a crash) stops the servers and keeps them, for ``python -m rlhf_course.classroom
remove --base <base>`` to remove.  tests/classroom drives
the same command in a browser; tests/exchange uses the same accounts (:mod:`accounts`).

What goes where (a real server puts the same files in /etc/jupyter, see the README):

* `<base>/home/<user>/`: homes, 0700; the course in the instructor's home, `course/` (nbgrader_config.py,
  source/, instructor/, release/, the gradebook), owned by the instructor and the instructors' group;
* `<base>/exchange/`: the nbgrader exchange (rlhf_course/exchange/: root 0755, inbound 3733);
* `<base>/jupyter/everyone/`: on every user's JUPYTER_CONFIG_PATH (the instructor's too): jupyter_config.json
  and nbgrader_config.py, every kernel over Unix sockets in its user's private runtime folder
  (rlhf_course/classroom/spawner.py, rlhf_course/classroom/private_kernels.py);
* `<base>/jupyter/data/`: first on every user's JUPYTER_PATH: the `python3` kernel spec, the course's launcher
  (rlhf_course/classroom/kernel_launcher.py: a kernel's forked children's output over a Unix socket of its own);
* `<base>/jupyter/student/`: the students' Jupyter config, on their servers' JUPYTER_CONFIG_PATH:
  nbgrader_config.py (the exchange and Validate's limits: rlhf_course/classroom/config.py), labconfig/
  (jupyter/student/labconfig: no instructor plugins) and jupyter_server_config.json (the Formgrader's and course
  list's server extensions disabled);
* `<base>/hub/`: root only (0700): the hub's config, database, cookie secret, logs and `accounts.json`; the hub's
  own log, `jupyterhub.log`, is its alone: each user's server (and its kernels) writes to `hub/servers/<user>.log`
  (root's, 0600), opened by the hub for that server (rlhf_course/classroom/spawner.py); the hub and the proxy
  write theirs (`jupyterhub.log`, `proxy.log`) through pipes of the classroom's, each set aside as `.1` past its
  bound (rlhf_course/classroom/bounded_log.py: a student's loop of requests makes them write as fast as they answer);
* `<base>/training-queue/broker.sock`: the machine's training queue, a broker of the classroom's (root)
  that grants K slots, one per user at most, each for `--training-hold` seconds at most
  (rlhf_course/classroom/training_broker.py; the labs' side: rlhf_course/lab/training_slots.py); with
  `--training-boost W`, a lab holding a slot weighs W in the CPU scheduler (rlhf_course/classroom/cpu_shares.py);
* `<base>/validate-queue/broker.sock`: the class's Validate queue, a broker of the same kind: K Validates run at
  once (`--validate-slots`, the machine's cores unless told), the others wait their turn and their Validate
  dialog says their place (rlhf_course/classroom/validate_queue.py); a student holding a turn weighs
  `--validate-weight` in the CPU scheduler (a burst's 10: Validate yields to the class's cells and trainings);
* `<base>/lab-cache/`: root's, read by every user (RLHF_LAB_CACHE): the lab's SFT policy and reward model,
  trained once for the class (rlhf_course/lab/shared_stages.py) while the hub starts, for the labs' setting
  (`--lab-setting`, every server's RLHF_LAB_SETTING: quick unless told).
* `<base>/first-figures/`: root's, read by every user (RLHF_FIRST_FIGURES): the explorers' first figures, rendered
  from the reference answers in both languages while the hub starts (rlhf_course/classroom/first_figures.py): a kernel
  whose function draws the reference's picture sends that PNG instead of rendering it.

The hub may stop and start again mid-class (a crash, an upgrade, `kill <pid in hub/jupyterhub.pid>`): the
classroom starts it again; the users' servers and kernels run on (`JupyterHub.cleanup_servers = False`), behind
a proxy the classroom runs itself, which outlives the hub, so their pages keep working meanwhile.  Servers idle
for `--idle-timeout` seconds are stopped by jupyterhub-idle-culler, a service of the hub: their memory
returns, their files stay, and the next login starts the server again.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import pwd
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

from rlhf_course import COURSE_ROOT, copy_course_files
from rlhf_course.classroom import hub_requests, validate_queue
from rlhf_course.classroom.accounts import User, add_account, remove_accounts, stop_processes
from rlhf_course.classroom.bounded_log import KEEP_BYTES as LOG_KEEP_BYTES, BoundedLog, mark, tail
from rlhf_course.classroom.prestart import SERVER_LOGS, TOKEN_FILE, hub_config as prestart_hub_config
from rlhf_course.classroom.server_env import ServerEnv
from rlhf_course.classroom.spawner import (DEFAULT_CPUS, account_name, port_listeners, remove_user_resources,
                                          thread_environment)
from rlhf_course.classroom.cpu_shares import (BOOSTED_WEIGHT, DEFAULT_WEIGHT, VALIDATE_WEIGHT, CpuShares,
                                              check_holder_cpus, check_weight)
from rlhf_course.classroom.training_broker import DEFAULT_MAX_HOLD, SOCKET_NAME, SlotBroker, default_slots
from rlhf_course.course.private_files import PRIVATE_FOLDERS, described, exposed_folders  # noqa: F401 (tests)
from rlhf_course.first_figures import VARIABLE as FIRST_FIGURES_VARIABLE
from rlhf_course.i18n import cjk_font
from rlhf_course.lab import SETTINGS

IDLE_TIMEOUT = 3600  # seconds: a class's break keeps the student's kernel; a student gone home frees the memory
SERVER_START_SECONDS = 900  # a user's server's start and its first answer, on a busy machine
KERNEL_INFO_SECONDS = 900  # a notebook's kernel's start (jupyter_server's kernel_info_timeout: 60 s by default)
CLASSES = ("lab", "burst", "off")  # what make hub prepares the machine for (HUB_CLASS, --class)
LAB_BOOST_WEIGHT = 10000  # a lab session's training-slot holders' CPU weight (bench/RESULTS.md, lab sessions of 40)
HOLDERS_SHARE = 0.85  # of the machine's cores, what the slot holders may use together while boosted: the rest
                      # (0.3 of 2 cores) is always the other students' (bench/RESULTS.md: their cells' p95 1.22 s)
MARKER = ".rlhf-classroom"  # the classroom removes its folder on exit: only one it made itself
READY = "ready"  # in the hub's folder, once the class may log in: from then on an unplanned stop keeps everything
STUDENT_SERVER_EXTENSIONS_OFF = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list")


def course_id(repo: Path) -> str:
    """The course's id in the exchange: ``CourseDirectory.course_id`` of the course's configuration (its
    nbgrader_config.py sets it, from RLHF_COURSE_ID or its default), read as nbgrader reads it.  Loading that
    file adds the course to this process's PYTHONPATH (for nbgrader's kernels): the environment is restored."""
    from rlhf_course.course.settings import course_config
    saved = dict(os.environ)
    try:
        found = course_config(repo).CourseDirectory.get("course_id", "")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if not found:
        raise SystemExit(f"{repo / 'nbgrader_config.py'} sets no c.CourseDirectory.course_id: the exchange needs one")
    return found


def class_defaults(kind: str, cores: int, slots: int, user_cpus: float) -> dict:
    """What ``--class`` sets when its own options are not given: ``lab`` (a lab session: students arrive, train,
    Validate) warm kernels, the roster's servers pre-started in the background, and the training-slot holders
    boosted to weight LAB_BOOST_WEIGHT with HOLDERS_SHARE of the ``cores`` among the ``slots`` (at most each user's
    ``user_cpus``); ``burst`` (the class presses Run All together) the same without the boost, which would take the
    CPU from everyone's cells and Validate, and with a Validate turn's holder at VALIDATE_WEIGHT instead (Validate
    yields to the trainings and cells; the lab's boost already puts its trainings first, and a lab's Validates would
    only wait longer: bench/RESULTS.md); ``off`` none of it (a laptop, the tests)."""
    if kind not in CLASSES:
        raise ValueError(f"no class {kind!r}; known: {', '.join(CLASSES)}")
    ready = kind != "off"
    boost = kind == "lab" and slots > 0
    return {"warm_kernels": ready, "prestart": ready,
            "training_boost": LAB_BOOST_WEIGHT if boost else DEFAULT_WEIGHT,
            "training_boost_cpus": round(min(user_cpus, HOLDERS_SHARE * cores / slots), 2) if boost else None,
            "validate_weight": VALIDATE_WEIGHT if kind == "burst" else DEFAULT_WEIGHT}


def check_checkout_private(repo: Path, make_private: bool = False) -> None:
    """The checkout's solutions and hidden tests must be out of the students' reach: the hub's command
    line names the checkout, and a clone made under the usual umask (022) is world-readable."""
    exposed = exposed_folders(repo)
    if not exposed:
        return
    if make_private:
        repo.chmod(repo.stat().st_mode & ~0o007)
        print(f"made {repo} private to its owner and group (chmod o-rwx), as --make-checkout-private asked",
              flush=True)
        return check_checkout_private(repo)
    shown = described(exposed)
    raise SystemExit(
        f"every account on this machine, the students' too, could read this checkout's {shown}: "
        f"the solutions and hidden tests.  Run `chmod o-rwx {repo}` (or `make hub HUB_MAKE_PRIVATE=1`, "
        f"which does it), then make hub again.")


# Every user's nbgrader (Validate; the instructor's Formgrader too): nbgrader's kernels' sockets, and Validate's
# limits, which wait for a busy machine (rlhf_course/classroom/config.py).
EVERYONE_NBGRADER_CONFIG = """\
from rlhf_course.classroom import config
from rlhf_course.classroom.private_kernels import ipc_prefix
c = get_config()
c.KernelManager.ip = ipc_prefix()  # nbgrader's Execute: its kernels' sockets
config.validate_limits(c)
"""


def students_nbgrader_config(exchange_root: Path, course_id: str) -> str:
    """The students' nbgrader_config.py (``<base>/jupyter/student``): every student's settings, for this exchange
    and course (rlhf_course/classroom/config.py)."""
    return ("from rlhf_course.classroom import config\n"
            f"config.student(get_config(), {str(exchange_root)!r}, {course_id!r})\n")


def write_everyone_config(folder: Path, repo: Path) -> None:
    """The Jupyter config on every user's JUPYTER_CONFIG_PATH (``<base>/jupyter/everyone``)."""
    folder.mkdir(parents=True)
    # Every kernel over Unix sockets in its user's 0700 runtime folder, not TCP on loopback, where any
    # local account may subscribe to its IOPub and hear it.  Read by the servers and by nbgrader's
    # Validate (both load jupyter_config from JUPYTER_CONFIG_PATH); Validate's kernels (nbclient's)
    # need their sockets named by absolute path (rlhf_course/classroom/private_kernels.py).
    (folder / "jupyter_config.json").write_text(json.dumps(
        {"KernelManager": {"transport": "ipc"},
         "NotebookClient": {"kernel_manager_class": "rlhf_course.classroom.private_kernels.PrivateKernelManager"}},
        indent=1))
    # the course's server extension (the Formgrader's pages rendered off the server; a no-op without it)
    (folder / "jupyter_server_config.d").mkdir(parents=True, exist_ok=True)
    shutil.copy2(repo / "jupyter" / "server" / "rlhf_course.json",
                 folder / "jupyter_server_config.d" / "rlhf_course.json")
    (folder / "nbgrader_config.py").write_text(EVERYONE_NBGRADER_CONFIG)


def write_kernel_specs(folder: Path, repo: Path) -> None:
    """The kernel specs every user's servers, Validate and nbgrader find first on their JUPYTER_PATH (``<base>/jupyter/
    data``): ``python3`` runs rlhf_course/classroom/kernel_launcher.py, whose forked children's output reaches the
    kernel over a Unix socket in the user's runtime folder, not a loopback TCP port any account could flood."""
    shutil.copytree(repo / "jupyter" / "kernels", folder / "kernels")


def default_validate_slots() -> int:
    """K for the Validate queue: as many Validates as the machine has cores, at least one (a Validate is mostly
    one process computing: its kernel)."""
    from rlhf_course.lab.threads import usable_cpus
    return max(1, usable_cpus())


def started_broker(socket_path: Path, slots: int, max_hold: float, on_holders=None,
                   name: str = "training-broker") -> SlotBroker:
    """A slot broker of root's (in this process) on ``socket_path``, in a folder of root's every account may search
    and none may write (nobody plants or replaces the socket), started."""
    folder = socket_path.parent
    folder.mkdir(mode=0o755, exist_ok=True)
    folder.chmod(0o755)
    return SlotBroker(socket_path, slots, max_hold, on_holders, name=name).start()


def free_port() -> int:
    """A loopback TCP port free now, chosen by the kernel among the ordinary ones (any account may bind it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


UNPRIVILEGED_PORT_START = Path("/proc/sys/net/ipv4/ip_unprivileged_port_start")
LOWEST_INTERNAL_PORT = 512  # below it, the well-known services' ports


def unprivileged_port_start(setting: Path = UNPRIVILEGED_PORT_START) -> int:
    """The lowest TCP port any account may bind (net.ipv4.ip_unprivileged_port_start; 1024 on a kernel without the
    setting): the ports below it are root's only (CAP_NET_BIND_SERVICE)."""
    try:
        return int(setting.read_text())
    except (OSError, ValueError):
        return 1024


def privileged_ports_refused(setting: Path = UNPRIVILEGED_PORT_START) -> str | None:
    """Why the classroom cannot have ports only root may bind here (None: it can)."""
    if os.geteuid() != 0:
        return "the classroom does not run as root"
    start = unprivileged_port_start(setting)
    if start <= LOWEST_INTERNAL_PORT:
        return f"{setting} is {start}: every account may bind the ports from {start} up"
    return None


@functools.cache
def named_service_ports() -> frozenset[int]:
    """The ports from LOWEST_INTERNAL_PORT to 1023 a service is known by (/etc/services, through the resolver's
    getservbyport): a daemon may start on one later."""
    named = set()
    for port in range(LOWEST_INTERNAL_PORT, 1024):
        with contextlib.suppress(OSError):
            socket.getservbyport(port, "tcp")
            named.add(port)
    return frozenset(named)


def root_only_port(exclude=(), setting: Path = UNPRIVILEGED_PORT_START) -> int:
    """A loopback TCP port only root may bind (below ``unprivileged_port_start``, above the well-known services'
    and named by none in /etc/services), free now (bound once, as root), not in ``exclude``.  OSError when none is
    (PermissionError: this process may not bind them)."""
    import random
    candidates = [port for port in range(LOWEST_INTERNAL_PORT, unprivileged_port_start(setting))
                  if port not in exclude and port not in named_service_ports()]
    random.shuffle(candidates)
    for port in candidates:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
                return port
            except PermissionError:
                raise
            except OSError:  # in use
                continue
    raise OSError(f"no free port between {LOWEST_INTERNAL_PORT} and {unprivileged_port_start(setting) - 1}")


def internal_ports(count: int, exclude=(), refused: str | None = None) -> tuple[list[int], str | None]:
    """``count`` different loopback ports for the classroom's root processes to listen on, none in ``exclude``,
    and a warning when they are ordinary ports (``refused``, or :func:`privileged_ports_refused`, says why): any
    account may then take one while its process restarts."""
    refused = refused or privileged_ports_refused()
    ports: list[int] = []
    if not refused:
        try:
            while len(ports) < count:
                ports.append(root_only_port({*exclude, *ports}))
        except OSError as error:
            refused, ports = f"no port below {unprivileged_port_start()} could be had ({error})", []
    if refused:
        while len(ports) < count:
            port = free_port()
            if port not in exclude and port not in ports:
                ports.append(port)
        return ports, (f"WARNING: the hub's own port and the proxy's API port are ordinary ports any account may "
                       f"bind ({refused}): a student who binds one while the hub or the proxy restarts receives "
                       f"the logins (their passwords) or the proxy's token.  Run make hub as root on a machine "
                       f"whose {UNPRIVILEGED_PORT_START} is above {LOWEST_INTERNAL_PORT} (1024 by default).")
    return ports, None


def open_files_to_the_hard_limit(pid: int) -> None:
    """The hub's or the proxy's process ``pid`` (just started): as many open files as its hard limit allows.  Each
    holds a descriptor for every connection any account opens to it: at the usual soft limit (1024), one student
    holding 1,500 idle connections left none for a classmate's request (tests/classroom/test_hub_requests.py).
    Set from here (root may), not in the child before it runs: this process has threads (the brokers)."""
    with contextlib.suppress(ProcessLookupError):
        hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)[1]
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (hard, hard))


class Classroom:
    def __init__(self, repo: Path, base: Path, prefix: str, students: list[str], port: int, proxy: Path,
                 make_checkout_private: bool = False, limits: dict | None = None,
                 idle_timeout: int = IDLE_TIMEOUT, training_slots: int | None = None,
                 training_wait: float | None = None, warm_kernels: bool = False,
                 training_boost: int = DEFAULT_WEIGHT, lab_setting: str = "quick",
                 training_boost_cpus: float | None = None, training_hold: float = DEFAULT_MAX_HOLD,
                 validate_slots: int | None = None, validate_weight: int = DEFAULT_WEIGHT):
        self.repo, self.base, self.prefix, self.port, self.proxy = repo, base, prefix, port, Path(proxy)
        self.make_checkout_private = make_checkout_private
        self.limits = limits or {}  # ClassroomSpawner's traits: mem_limit, cpu_limit, process_limit, file_size_limit
        self.idle_timeout = idle_timeout  # seconds before an idle server is stopped; 0: never
        # the machine's training queue (training_broker.py): K labs train at once; 0: no queue
        self.training_slots = self.default_training_slots() if training_slots is None else training_slots
        self.training_wait = training_wait  # seconds a lab waits with its place still (None: the lab's default)
        self.training_hold = training_hold  # seconds a lab holds its slot at most
        self.training_broker_socket = base / "training-queue" / SOCKET_NAME
        self.training_broker: SlotBroker | None = None
        # a slot holder's cgroup cpu.weight while it trains (cpu_shares.py); the default weight (100): none
        self.training_boost_weight = training_boost
        self.training_boost_cpus = training_boost_cpus  # and its quota while it trains (None: the user's own)
        # a Validate turn holder's cgroup cpu.weight while it validates; the default weight (100): no yield
        self.validate_weight = validate_weight
        # both weights' keeper, one for both brokers (a student training and validating at once trains at the
        # training's weight); none when both are the default
        weighted = (training_boost, validate_weight) != (DEFAULT_WEIGHT, DEFAULT_WEIGHT)
        self.cpu_shares = CpuShares(training_boost, training_boost_cpus, validate_weight) if weighted else None
        # the class's Validate queue (validate_queue.py): K Validates at once, each a second kernel; 0: no queue
        self.validate_slots = default_validate_slots() if validate_slots is None else validate_slots
        self.validate_broker_socket = base / validate_queue.SOCKET_FOLDER / SOCKET_NAME
        self.validate_broker: SlotBroker | None = None
        self.warm_kernels = warm_kernels  # each student's server starts a kernel with the imports done (warm_kernels.py)
        # ports only root may bind: a student looping on bind() while the hub restarts could otherwise take the
        # hub's (the proxy sends it every login) or the proxy API's (the hub sends it the proxy's token)
        (self.hub_port, self.proxy_api_port), self.port_warning = internal_ports(2, exclude={port})
        self.proxy_token = secrets.token_hex(32)  # the hub's key to the proxy's routes (environment only)
        self.proxy_process: subprocess.Popen | None = None
        # the hub's and the proxy's logs, written through pipes of the classroom's: each set aside past this bound
        self.log_keep_bytes = LOG_KEEP_BYTES
        self.logs: dict[str, BoundedLog] = {}
        self.lab_cache = base / "lab-cache"
        self.lab_setting = lab_setting  # the length of every student's lab (RLHF_LAB_SETTING), trained for in lab_cache
        self.lab_cache_process: subprocess.Popen | None = None
        self.first_figures = base / "first-figures"
        self.first_figures_process: subprocess.Popen | None = None
        self.instructor_name = f"{prefix}instructor"
        self.student_names = [f"{prefix}{s}" for s in students]
        self.group = f"{prefix}instructors"
        self.hub_dir = base / "hub"
        self.exchange = base / "exchange"
        self.student_config = base / "jupyter" / "student"
        self.everyone_config = base / "jupyter" / "everyone"
        self.jupyter_data = base / "jupyter" / "data"
        self.course = base / "home" / self.instructor_name / "course"
        self.url = f"http://127.0.0.1:{port}"
        self.server: ServerEnv | None = None
        self.process: subprocess.Popen | None = None
        self.created = False  # accounts and folder are ours to remove
        self.course_id = ""  # the course's CourseDirectory.course_id, read by create()

    @property
    def names(self) -> list[str]:
        return [self.instructor_name, *self.student_names]

    def user(self, name: str) -> User:
        return User(name, self.base / "home" / name, self.server)

    # -- set-up ---------------------------------------------------------------------------------
    def create(self) -> None:
        if os.geteuid() != 0:
            raise SystemExit("make hub needs root: it creates Unix accounts and runs each server as its user")
        if not self.proxy.exists():
            raise SystemExit(f"configurable-http-proxy not found at {self.proxy} (make hub installs it)")
        if self.base.exists() and not (self.base / MARKER).exists():
            raise SystemExit(f"{self.base} exists and is not a classroom folder: choose another (--base, HUB_BASE)")
        self.refuse_a_kept_class()
        check_checkout_private(self.repo, self.make_checkout_private)
        self.course_id = course_id(self.repo)
        self.created = True
        self.remove_accounts()  # left by an interrupted run
        remove_user_resources(self.names)
        shutil.rmtree(self.base, ignore_errors=True)
        self.base.mkdir(parents=True)
        self.base.chmod(0o755)
        (self.base / MARKER).write_text("made by python -m rlhf_course.classroom; removed when it stops\n")
        self.server = ServerEnv(self.repo)
        subprocess.run(["groupadd", self.group], check=True)
        add_account(self.instructor_name, self.base / "home" / self.instructor_name, self.group)
        for name in self.student_names:
            add_account(name, self.base / "home" / name)
        instructor = self.user(self.instructor_name)
        (self.base / "home").chmod(0o755)

        self.exchange.mkdir()
        os.chown(self.exchange, instructor.uid, instructor.gid)
        self.exchange.chmod(0o755)
        self.course.mkdir()
        copy_course_files(self.course, self.repo)
        for path in [self.course, *self.course.rglob("*")]:
            os.chown(path, instructor.uid, instructor.gid, follow_symlinks=False)
        # `make release` as the instructor: release/ and the gradebook's record of the assignment.
        # Releasing it to the exchange is the Formgrader's Release button.
        instructor.run(self.server.python, "-m", "rlhf_course.grading", "release", cwd=self.course,
                       env=self.instructor_env())

        write_everyone_config(self.everyone_config, self.repo)
        write_kernel_specs(self.jupyter_data, self.repo)
        self.student_config.mkdir(parents=True)
        (self.student_config / "nbgrader_config.py").write_text(students_nbgrader_config(self.exchange, self.course_id))
        shutil.copytree(self.repo / "jupyter" / "student" / "labconfig", self.student_config / "labconfig")
        server_app = {"jpserver_extensions": {name: False for name in STUDENT_SERVER_EXTENSIONS_OFF}}
        # a kernel that imports torch while the class does may take minutes to answer: jupyter_server's default
        # (60 s) then tells JupyterLab the kernel never became alive
        kernels = {"kernel_info_timeout": KERNEL_INFO_SECONDS}
        if self.warm_kernels:  # a kernel with the notebook's imports done, waiting for the first notebook
            server_app["kernel_manager_class"] = "rlhf_course.classroom.warm_kernels.WarmKernelManager"
        (self.student_config / "jupyter_server_config.json").write_text(json.dumps(
            {"ServerApp": server_app, "MappingKernelManager": kernels}, indent=1))
        subprocess.run(["chmod", "-R", "go+rX", str(self.base / "jupyter")], check=True)

        self.passwords = {name: secrets.token_urlsafe(12) for name in self.names}
        self.hub_dir.mkdir(mode=0o700)
        self.start_training_broker()
        self.start_validate_broker()
        token = self.hub_dir / TOKEN_FILE  # `prestart`'s key to the hub's API (root's, as the folder)
        token.touch(mode=0o600)
        token.write_text(secrets.token_hex(32))
        self.fill_lab_cache()
        self.render_first_figures()
        self.write_hub_config()

    def refuse_a_kept_class(self) -> None:
        """A base folder a class ran in (its hub was ready) and that was not removed by Ctrl-C holds the
        students' work and the gradebook: make hub never wipes it, the instructor removes it (:func:`remove_classroom`)."""
        if (self.hub_dir / READY).exists():
            raise SystemExit(f"{self.base} holds a class that stopped without Ctrl-C: its accounts, their homes (the "
                             f"students' work) and the course's gradebook are kept there.  Copy what you need, then "
                             f"remove it all: {remove_command(self.base)} (or choose another --base)")

    def lab_threads(self) -> int:
        """The torch threads the students' labs train with: their quota's cores (the spawner's OMP_NUM_THREADS),
        at most two and the CPUs here (rlhf_course/lab/threads.py)."""
        from rlhf_course.lab.threads import LAB_MAX_THREADS, usable_cpus
        cpus = self.limits.get("cpu_limit", DEFAULT_CPUS) or usable_cpus()
        return max(1, min(LAB_MAX_THREADS, math.ceil(cpus - 1e-9), usable_cpus()))

    def default_training_slots(self) -> int:
        """K: as many labs as this machine's cores train at each user's full CPU quota, at least one."""
        from rlhf_course.lab.threads import usable_cpus
        return default_slots(usable_cpus(), self.limits.get("cpu_limit", DEFAULT_CPUS))

    def training_queue_env(self) -> dict[str, str]:
        """What every server needs to find the queue (none when it is off)."""
        from rlhf_course.lab import training_slots
        if not self.training_slots:
            return {}
        env = {training_slots.BROKER_VARIABLE: str(self.training_broker_socket)}
        if self.training_wait is not None:
            env[training_slots.MAX_WAIT_VARIABLE] = str(self.training_wait)
        return env

    def validate_queue_env(self) -> dict[str, str]:
        """What every server needs to find the Validate queue (none when it is off)."""
        return {validate_queue.QUEUE_VARIABLE: str(self.validate_broker_socket)} if self.validate_slots else {}

    def fill_lab_cache(self) -> None:
        """The lab's first two stages, trained once for the whole class, in the background: a lab run before
        they are ready trains them itself (and writes nothing: the folder is root's)."""
        self.lab_cache.mkdir()
        self.lab_cache.chmod(0o755)  # root's: students read it, none writes what another loads
        self.lab_cache_process = subprocess.Popen(
            self.lab_cache_command(),
            env={"PATH": self.server.path, "LANG": "C.UTF-8", **thread_environment(self.lab_threads())},
            stdout=open(self.hub_dir / "lab-cache.log", "w"), stderr=subprocess.STDOUT,
            start_new_session=True)

    def lab_cache_command(self) -> list[str]:
        """What trains the class's two stages: the labs' setting, at the thread count their kernels train with."""
        return [self.server.python, "-m", "rlhf_course.lab.shared_stages", str(self.lab_cache),
                "--threads", str(self.lab_threads()), "--setting", self.lab_setting]

    def render_first_figures(self) -> None:
        """The explorers' first figures, rendered once for the class in the background (seconds): a kernel that
        draws before they are written renders its own, as without them."""
        self.first_figures.mkdir()
        self.first_figures.chmod(0o755)  # root's: students read it, none writes what another shows
        self.first_figures_process = subprocess.Popen(
            self.first_figures_command(), env={"PATH": self.server.path, "LANG": "C.UTF-8", **thread_environment(1)},
            stdout=open(self.hub_dir / "first-figures.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)

    def first_figures_command(self) -> list[str]:
        """What renders them: the servers' Python (its matplotlib, its fonts), from the checkout's reference answers."""
        return [self.server.python, "-m", "rlhf_course.classroom.first_figures", str(self.first_figures),
                "--course", str(self.repo)]

    def kernel_specs_env(self) -> dict:
        """Every user's kernels are the course's (:func:`write_kernel_specs`): JUPYTER_PATH comes before the user's own
        and the environment's kernel specs."""
        return {"JUPYTER_PATH": str(self.jupyter_data)}

    def instructor_env(self) -> dict:
        env = {"RLHF_EXCHANGE_ROOT": str(self.exchange), "RLHF_COURSE_ID": self.course_id,
               "JUPYTER_CONFIG_PATH": str(self.everyone_config), **self.kernel_specs_env()}
        if os.environ.get("RLHF_DUE_DATE"):
            env["RLHF_DUE_DATE"] = os.environ["RLHF_DUE_DATE"]
        return env

    def write_hub_config(self) -> None:
        base_env = {"PATH": self.server.path, "LANG": "C.UTF-8", "RLHF_LAB_CACHE": str(self.lab_cache),
                    FIRST_FIGURES_VARIABLE: str(self.first_figures),
                    "RLHF_LAB_SETTING": self.lab_setting, **self.kernel_specs_env(),
                    **self.training_queue_env(), **self.validate_queue_env()}
        environments = {self.instructor_name: {**base_env, **self.instructor_env()}}
        for name in self.student_names:
            environments[name] = {**base_env,
                                  "JUPYTER_CONFIG_PATH": f"{self.student_config}:{self.everyone_config}"}
        folders = {self.instructor_name: str(self.course)}
        folders.update({name: str(self.base / "home" / name) for name in self.student_names})
        settings = {"passwords": self.passwords, "environments": environments, "folders": folders}
        (self.hub_dir / "users.json").write_text(json.dumps(settings, indent=1))
        (self.hub_dir / "jupyterhub_config.py").write_text(f"""\
# Written by `python -m rlhf_course.classroom` (make hub) for this run.
import json
c = get_config()
users = json.load(open({str(self.hub_dir / 'users.json')!r}))
c.JupyterHub.bind_url = {self.url!r}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {self.hub_port}
# The hub may restart mid-class: the users' servers run on, and the proxy, which the classroom starts itself
# (its token in the environment), keeps routing to them meanwhile; the new hub finds both again.
c.JupyterHub.cleanup_servers = False
c.ConfigurableHTTPProxy.should_start = False
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.proxy_api_port}"
c.JupyterHub.db_url = "sqlite:///{self.hub_dir}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = {str(self.hub_dir / 'jupyterhub_cookie_secret')!r}
c.JupyterHub.authenticator_class = "rlhf_course.classroom.auth.PasswordTableAuthenticator"
c.PasswordTableAuthenticator.passwords = users["passwords"]
c.Authenticator.allowed_users = set(users["passwords"])
c.Authenticator.admin_users = set()
# Each user's JupyterLab runs as that user (setuid from root), from the shared environment, in a cgroup
# of its own (memory, processes, CPU) and under rlimits (rlhf_course/classroom/spawner.py).
c.JupyterHub.spawner_class = "rlhf_course.classroom.spawner.ClassroomSpawner"
for trait, value in {self.limits!r}.items():
    setattr(c.ClassroomSpawner, trait, value)
# Each server's stdout and stderr: its user's own log, not the hub's (which every login's name is in)
c.ClassroomSpawner.log_folder = {str(self.hub_dir / SERVER_LOGS)!r}
c.Spawner.default_url = "/lab"
c.Spawner.env_keep = []
# A server's start on a machine a class loads may take minutes (30 at once: bench/RESULTS.md); the page says
# meanwhile that the server is starting (JupyterHub's spawn-pending page): wait rather than fail.
c.Spawner.start_timeout = {SERVER_START_SECONDS}
c.Spawner.http_timeout = {SERVER_START_SECONDS}


def per_user(spawner):
    name = spawner.user.name
    spawner.environment = dict(users["environments"][name])
    spawner.notebook_dir = users["folders"][name]
    # nbgrader (the Formgrader) reads nbgrader_config.py from the server's working folder: the course's
    spawner.cmd = ["env", "-C", users["folders"][name], {self.server.python!r}, "-m", "jupyterhub.singleuser"]


c.Spawner.pre_spawn_hook = per_user
{self.culler_config()}{prestart_hub_config(self.hub_dir / TOKEN_FILE)}{hub_requests.hub_config()}""")
        accounts = {"url": self.url, "course": str(self.course), "exchange": str(self.exchange),
                    "python": self.server.python, "path": self.server.path,
                    "instructor": self.instructor_name, "students": self.student_names,
                    "passwords": self.passwords, "homes": {n: str(self.base / "home" / n) for n in self.names},
                    "prefix": self.prefix, "idle_timeout": self.idle_timeout}
        (self.hub_dir / "accounts.json").write_text(json.dumps(accounts, indent=1))

    def culler_config(self) -> str:
        """jupyterhub-idle-culler as a service of the hub (restarted with it): every server idle (no activity
        the hub hears of: the proxy's traffic, the server's own reports) for ``idle_timeout`` seconds is
        stopped, checked every minute (every quarter of the idle time if shorter).  Stopping a server never
        removes its user or files."""
        if not self.idle_timeout:
            return ""
        every = max(1, min(60, self.idle_timeout // 4))
        command = [self.server.python, "-m", "jupyterhub_idle_culler", f"--timeout={self.idle_timeout}",
                   f"--cull-every={every}"]
        return f"""
# Idle servers stopped: their memory comes back, their files stay (python -m rlhf_course.classroom --idle-timeout)
c.JupyterHub.services = [{{"name": "idle-culler", "command": {command!r}}}]
c.JupyterHub.load_roles = [{{"name": "idle-culler", "services": ["idle-culler"],
                             "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}}]
"""

    # -- running ----------------------------------------------------------------------------------
    def start(self, timeout: float = 120) -> None:
        """The proxy (once: it outlives the hub), then the hub; back when the hub answers."""
        if self.proxy_process is None or self.proxy_process.poll() is not None:
            self.start_proxy()
        env = {"PATH": self.server.path, "LANG": "C.UTF-8", "HOME": str(self.hub_dir),
               "CONFIGPROXY_AUTH_TOKEN": self.proxy_token}
        self.process = self.popen_logged(
            "jupyterhub.log",
            [self.server.python, "-m", "rlhf_course.classroom.hub_requests", "-f", str(self.hub_dir / "jupyterhub_config.py")],
            cwd=self.hub_dir, env=env)
        # replaced whole, never rewritten in place: `kill $(cat jupyterhub.pid)` right as the hub restarts reads
        # the old number or the new one, not an empty file
        written = self.hub_dir / "jupyterhub.pid.new"
        written.write_text(f"{self.process.pid}\n")
        os.replace(written, self.hub_dir / "jupyterhub.pid")
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                self.log("jupyterhub.log").wait(timeout=5)  # its last lines, unless its culler holds the pipe on
                raise SystemExit(f"JupyterHub exited ({self.process.returncode}); the end of "
                                 f"{self.hub_dir}/jupyterhub.log:\n{self.log_tail('jupyterhub.log')}")
            if self.hub_answers():
                return
            time.sleep(0.5)
        raise SystemExit(f"JupyterHub did not answer within {timeout:.0f} s; see {self.hub_dir}/jupyterhub.log")

    def public_port_warning(self) -> str | None:
        """Why the classroom's own address (``--port``, HUB_PORT: the instructor's choice, kept) may be taken: an
        ordinary port any account may bind while the proxy is down (it restarts only if it died).  The health check
        then refuses another account's listener there, but the logins sent meanwhile are hers."""
        start = unprivileged_port_start()
        if self.port < start or os.geteuid() != 0:
            return None
        return (f"note: the classroom's address, port {self.port} (--port, HUB_PORT), is one any account may bind "
                f"(from {start} up): should the proxy die, a student who binds it first receives the logins.  A "
                f"port below {start} (e.g. HUB_PORT=800) is root's only.")

    def hub_answers(self) -> bool:
        """Whether the hub answers its health check through the proxy now.  An answer is believed only if every
        listener on the classroom's port and on the hub's is the classroom's (root's, or this process's account):
        SystemExit, naming the accounts, if another account's socket answered in their place."""
        try:
            urllib.request.urlopen(f"{self.url}/hub/health", timeout=2)
        except OSError:
            return False
        trusted = {0, os.geteuid()}
        for role, port in (("the classroom's address", self.port), ("the hub's own port", self.hub_port)):
            owners = port_listeners(port)
            if owners - trusted or not owners & trusted:
                strangers = ", ".join(sorted(account_name(uid) for uid in owners - trusted)) or "nobody we know"
                raise SystemExit(f"port {port} ({role}) is held by another account ({strangers}), not the "
                                 f"classroom: the answer there is not the hub's, and it is not believed")
        return True

    def start_first(self, tries: int = 3) -> None:
        """The classroom's first start.  The hub's and the proxy API's loopback ports were chosen free when the
        classroom was made, a minute before (accounts, the lab's cache): a process that took one since makes the
        proxy or the hub exit at once; then both start again on new ports (no server runs yet to lose)."""
        for attempt in range(1, tries + 1):
            marks = {name: mark(self.hub_dir / name) for name in ("jupyterhub.log", "proxy.log")}
            try:
                return self.start()
            except SystemExit:
                taken = any(word in self.log_tail(name, since=mark) for name, mark in marks.items()
                            for word in ("EADDRINUSE", "Address already in use"))
                if attempt == tries or not taken:
                    raise
            print(f"a port of the hub's was taken meanwhile (try {attempt} of {tries}); new ports", flush=True)
            if self.proxy_process is not None and self.proxy_process.poll() is None:
                self.proxy_process.terminate()
                self.proxy_process.wait(timeout=30)
            (self.hub_port, self.proxy_api_port), self.port_warning = internal_ports(
                2, exclude={self.port, self.hub_port, self.proxy_api_port})
            self.write_hub_config()

    def log(self, name: str) -> BoundedLog:
        """The hub's folder's log ``name`` (``jupyterhub.log``, ``proxy.log``): set aside as ``name.1`` past
        ``log_keep_bytes``, the one before dropped (rlhf_course/classroom/bounded_log.py)."""
        path = self.hub_dir / name
        if name not in self.logs or self.logs[name].path != path:
            self.logs[name] = BoundedLog(path, self.log_keep_bytes)
        return self.logs[name]

    def popen_logged(self, name: str, argv: list[str], **popen) -> subprocess.Popen:
        """``argv`` started in a session of its own, its stdout and stderr a pipe to the log ``name``."""
        output = self.log(name).pipe()
        try:
            process = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, **popen)
        finally:
            os.close(output)  # the child holds its own copy: the log's keeper ends when the child's last copy does
        open_files_to_the_hard_limit(process.pid)
        return process

    def log_tail(self, name: str, since: tuple[int, int] = (0, 0), lines: int = 30) -> str:
        """The last lines a log in the hub's folder gained after ``since`` (a ``mark``), across its set-aside."""
        return tail(self.hub_dir / name, since, lines)

    def start_proxy(self) -> None:
        """configurable-http-proxy on the classroom's address, its routes' API on loopback for the hub (as
        JupyterHub would start it, but the classroom's child: it serves the users' servers while the hub
        restarts; the hub adds its own route and the servers' when it starts)."""
        hub = f"http://127.0.0.1:{self.hub_port}"
        port = self.url.rsplit(":", 1)[1]
        self.proxy_process = self.popen_logged(
            "proxy.log",
            [str(self.proxy), "--ip", "127.0.0.1", "--port", port, "--api-ip", "127.0.0.1",
             "--api-port", str(self.proxy_api_port), "--default-target", hub, "--error-target", f"{hub}/hub/error"],
            cwd=self.hub_dir, env={"PATH": os.environ.get("PATH", ""), "CONFIGPROXY_AUTH_TOKEN": self.proxy_token})

    def prestart_in_background(self) -> threading.Thread:
        """Start every student's server, a few at a time, while the hub serves (``--prestart``): the class finds
        them running.  The outcome is printed and written to ``<base>/hub/prestarted`` when all have started."""
        from rlhf_course.classroom.prestart import HubAPI, prestart, report
        from rlhf_course.lab.threads import usable_cpus
        api = HubAPI(self.url, (self.hub_dir / TOKEN_FILE).read_text().strip())

        def run():
            began = time.perf_counter()
            print(f"starting the {len(self.student_names)} students' servers in the background, "
                  f"{usable_cpus()} at a time (--prestart)", flush=True)
            try:
                outcomes = prestart(api, self.student_names, usable_cpus(), SERVER_START_SECONDS)
                said = f"{report(outcomes)}\nin {time.perf_counter() - began:.1f} s"
            except Exception as error:  # the hub serves on: a student's login starts their server as without it
                said = f"the background start of the servers stopped: {type(error).__name__}: {error}"
            print(said, flush=True)
            with contextlib.suppress(OSError):
                (self.hub_dir / "prestarted").write_text(said + "\n")

        thread = threading.Thread(target=run, name="prestart", daemon=True)
        thread.start()
        return thread

    def supervise(self, quick_exits: int = 3, quick: float = 30) -> None:
        """Start the hub again whenever it exits, until it exits ``quick_exits`` times in a row within
        ``quick`` seconds of its start (a hub that cannot start: its log says why)."""
        failures = 0
        while True:
            started = time.time()
            # polled, not Popen.wait(): the classroom stops on a signal whose handler raises, and one raised inside
            # Popen.wait() can leave its waitpid lock taken, so that stop()'s wait for the hub blocks forever
            while self.process.poll() is None:
                time.sleep(0.5)
            failures = failures + 1 if time.time() - started < quick else 0
            if failures >= quick_exits:
                print(f"JupyterHub exited ({self.process.returncode}) {failures} times in a row; "
                      f"see {self.hub_dir}/jupyterhub.log", flush=True)
                return
            print(f"JupyterHub exited ({self.process.returncode}); starting it again: the servers and kernels "
                  f"ran on", flush=True)
            self.stop_cullers()  # a hub that died cannot stop its culler: the next hub starts its own
            try:
                self.start()
            except SystemExit as failed:  # it exited again while starting: counted as a quick exit above
                print(failed, flush=True)
                continue
            print("JupyterHub is back", flush=True)

    def stop(self) -> None:
        """The hub, its culler, then the proxy.  The users' servers outlive the hub (cleanup_servers = False):
        :meth:`remove` stops them with their accounts."""
        for process in (self.process, self.proxy_process):
            if process and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            if process is self.process:
                self.stop_cullers()

    def stop_cullers(self) -> list[int]:
        """Stop this classroom's jupyterhub-idle-culler processes left by a hub that did not stop them (killed,
        crashed: JupyterHub starts a service in a session of its own, so the hub's process group is not
        its); another classroom's culler runs another environment's Python and is left alone."""
        if not self.server:
            return []
        stopped = []
        for pid, argv in _processes():
            if argv[:3] == [self.server.python, "-m", "jupyterhub_idle_culler"]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                    stopped.append(pid)
        return stopped

    def remove_accounts(self) -> None:
        remove_accounts(self.names, self.group)

    def start_training_broker(self) -> None:
        """The queue's broker (root's, in this process), its socket in a folder of root's every account may
        search; with a boost, slot holders weigh ``training_boost_weight`` in the CPU scheduler while they train."""
        if not self.training_slots:
            return
        self.training_broker = started_broker(self.training_broker_socket, self.training_slots, self.training_hold,
                                              self.cpu_shares.training if self.cpu_shares else None)

    def start_validate_broker(self) -> None:
        """The Validate queue's broker (root's, in this process), its socket in a folder of root's every account
        may search."""
        if not self.validate_slots:
            return
        self.validate_broker = started_broker(self.validate_broker_socket, self.validate_slots,
                                              validate_queue.MAX_HOLD,
                                              self.cpu_shares.validating if self.cpu_shares else None,
                                              name="validate-broker")

    def stop_services(self) -> None:
        """Everything of the classroom's own that runs: the brokers, the hub, the proxy and the background jobs."""
        if self.training_broker:
            self.training_broker.stop()  # reports no holders: the boost gives every weight back
        if self.validate_broker:
            self.validate_broker.stop()
        self.stop()
        for process in (self.lab_cache_process, self.first_figures_process):
            if process and process.poll() is None:
                process.kill()
                process.wait()

    def remove(self) -> None:
        """The end of a trial (Ctrl-C, SIGTERM): everything stopped, the accounts, their homes and the folder removed."""
        self.stop_services()
        if not self.created:
            return
        self.remove_accounts()
        remove_user_resources(self.names)
        if self.server:
            self.server.remove()
        shutil.rmtree(self.base, ignore_errors=True)

    def keep(self, reason: str) -> str:
        """An unplanned stop (``reason``): the brokers, the hub, the proxy, the background jobs and every user's
        server stop; the accounts, their homes and the base folder stay.  What is kept and the command that
        removes it are printed and appended to the hub's log; returned too."""
        self.stop_services()
        stop_processes(self.names)
        said = (f"the classroom stopped unplanned ({reason}): the hub, the proxy and every user's server are "
                f"stopped, and nothing is removed.\n"
                f"kept: the accounts {', '.join(self.names)} and their homes in {self.base / 'home'} (the students' "
                f"work; the course, its gradebook and the collected submissions in {self.course}), the exchange "
                f"{self.exchange}, and {self.base} itself (the hub's logs in {self.hub_dir}).\n"
                f"make hub refuses this folder until it is removed.  Copy what you need first (the course folder "
                f"holds the grades), then remove it all, as root, from the checkout:\n  {remove_command(self.base)}")
        print(said, flush=True)
        self.log("jupyterhub.log").write(f"\n{time.strftime('%Y-%m-%d %H:%M:%S')} {said}\n")
        return said

    def summary(self) -> str:
        # every released assignment and edition with submissions
        grade = (f"cd {self.repo} && RLHF_EXCHANGE_ROOT={self.exchange} .venv/bin/python "
                 f"-m rlhf_course.grading grade --course-root={self.course}")
        lines = [f"JupyterHub: {self.url}  (accounts for this run only; Ctrl-C stops the hub and removes them; "
                 f"an unplanned stop keeps them and says how to remove them)",
                 "", f"  {'account':<24} password"]
        lines += [f"  {name:<24} {self.passwords[name]}" for name in self.names]
        lines += ["", f"instructor: {self.instructor_name} (Formgrader: {self.url}/user/{self.instructor_name}/formgrader)",
                  f"course directory: {self.course}", f"exchange: {self.exchange}",
                  f"trusted grading after Collect (as root, like `sudo make grade`):", f"  {grade}",
                  f"labs training at once: {self.training_slots} (the others wait their turn; --training-slots), "
                  f"each for {self.training_hold:g} s at most (--training-hold)"
                  + (f", each at CPU weight {self.training_boost_weight} while it trains (--training-boost)"
                     if self.training_boost_weight != DEFAULT_WEIGHT else "")
                  + (f" and at most {self.training_boost_cpus:g} cores (--training-boost-cpus)"
                     if self.training_boost_weight != DEFAULT_WEIGHT and self.training_boost_cpus is not None else "")
                  if self.training_slots else "labs train whenever they are run (no training queue)",
                  f"Validates running at once: {self.validate_slots} (the others wait their turn and are told their "
                  f"place; --validate-slots), each holding its turn for {validate_queue.MAX_HOLD:g} s at most"
                  + (f", at CPU weight {self.validate_weight} while it runs (--validate-weight)"
                     if self.validate_weight != DEFAULT_WEIGHT else "")
                  if self.validate_slots else "Validates run whenever they are pressed (no Validate queue)",
                  f"the labs' setting: {self.lab_setting} (--lab-setting; their SFT policy and reward model trained "
                  f"once for the class into {self.lab_cache})",
                  f"the explorers' first figures: rendered from the reference into {self.first_figures} "
                  f"(a student whose function draws the same picture is sent it; "
                  f"log: {self.hub_dir}/first-figures.log)",
                  f"students' servers started before the class (as root): cd {self.repo} && .venv/bin/python "
                  f"-m rlhf_course.classroom prestart --base {self.base}",
                  f"idle servers stopped after {self.idle_timeout} s (files kept; the next login starts them)"
                  if self.idle_timeout else "idle servers are never stopped (--idle-timeout 0)",
                  f"the hub restarts by itself if it stops (kill $(cat {self.hub_dir}/jupyterhub.pid)): "
                  f"servers and kernels run on"]
        if cjk_font() is None:  # the Chinese edition's figures would fall back to English labels
            lines += ["", "no Chinese font on this machine: the Chinese edition's figures show English labels until "
                          "one is installed (Debian: apt-get install fonts-noto-cjk), then restart the hub"]
        return "\n".join(lines)


def _processes() -> list[tuple[int, list[str]]]:
    """Every process this machine shows, as (pid, argv); those gone while read are skipped."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")[:-1]
                found.append((int(entry.name), [os.fsdecode(arg) for arg in argv]))
    return found


EXAMPLES = """\
examples (rlhf-classroom is python -m rlhf_course.classroom; as root, from the checkout: sudo's PATH has no .venv/bin):
  sudo make hub                                # the Makefile's way: its proxy, port 8000, alice, bob and carol
  sudo .venv/bin/rlhf-classroom --proxy .cache/hub-proxy/node_modules/.bin/configurable-http-proxy --students ann ben
  sudo .venv/bin/rlhf-classroom --proxy PROXY --class burst   # a class that runs everything at once: no boost
  sudo .venv/bin/rlhf-classroom --proxy PROXY --memory 2G --cpus 0.5 --idle-timeout 0   # small servers, never stopped
  sudo .venv/bin/rlhf-classroom prestart --hold-until 14:00   # the running hub's students' servers, before the class
  sudo .venv/bin/rlhf-classroom remove --base /srv/rlhf-classroom   # a classroom kept after an unplanned stop
"""


def argument_parser() -> argparse.ArgumentParser:
    """make hub's options (`python -m rlhf_course.classroom --help`), with :data:`EXAMPLES` after them."""
    parser = argparse.ArgumentParser(prog="python -m rlhf_course.classroom", description=__doc__.split("\n\n")[0],
                                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--base", type=Path, default=Path("/srv/rlhf-classroom"))
    parser.add_argument("--prefix", default="rlhf_", help="prefix of the account names")
    parser.add_argument("--students", nargs="+", default=["alice", "bob", "carol"])
    parser.add_argument("--proxy", type=Path, required=True, help="the configurable-http-proxy executable")
    parser.add_argument("--repo", type=Path, default=COURSE_ROOT)
    parser.add_argument("--make-checkout-private", action="store_true",
                        help="chmod o-rwx the checkout when other accounts could read its source/ or instructor/ "
                             "(without it, make hub refuses to start then)")
    parser.add_argument("--memory", default=None, help="memory of each user's server and kernels together "
                        "(e.g. 4G; default ClassroomSpawner.mem_limit)")
    parser.add_argument("--cpus", type=float, default=None, help="CPU cores each user's processes may use together")
    parser.add_argument("--processes", type=int, default=None, help="processes (and threads) per user")
    parser.add_argument("--file-size", default=None, help="largest file a user's process may write (e.g. 1G)")
    parser.add_argument("--training-slots", type=int, default=None,
                        help="labs that train at once on this machine, the others wait their turn (default: the "
                             "cores over each user's CPU quota, at least 1; 0: no queue)")
    parser.add_argument("--training-wait", type=float, default=None,
                        help="seconds a lab waits for a training slot without its place moving, then trains anyway "
                             "(default 180)")
    parser.add_argument("--training-hold", type=float, default=DEFAULT_MAX_HOLD,
                        help=f"seconds a lab holds its training slot at most: then the next in the queue has it, and "
                             f"the lab trains on without it (default {DEFAULT_MAX_HOLD:g})")
    parser.add_argument("--validate-slots", type=int, default=None,
                        help="Validates that run at once on this machine (each runs the notebook in a second "
                             "kernel), the others wait their turn, told their place (default: the cores, at least "
                             "1; 0: no queue)")
    parser.add_argument("--validate-weight", type=int, default=None,
                        help=f"the CPU weight (everyone else: {DEFAULT_WEIGHT}) of a student whose Validate holds its "
                             f"turn, while it runs: below {DEFAULT_WEIGHT}, Validate yields to the class's cells and "
                             f"trainings and waits, told so (default: {VALIDATE_WEIGHT} for a burst; "
                             f"{DEFAULT_WEIGHT}, no yield, for a lab, whose boost puts its trainings first, and off)")
    parser.add_argument("--class", dest="klass", choices=CLASSES, default="lab",
                        help="what the hub is ready for, unless the options below say otherwise: lab (default; warm "
                             "kernels, the roster's servers pre-started in the background, training-slot holders "
                             f"boosted to weight {LAB_BOOST_WEIGHT} on {HOLDERS_SHARE:g} of the cores), burst (the "
                             "same without the boost, Validate yielding instead: the class runs all at once), off "
                             "(none of it)")
    parser.add_argument("--training-boost", type=int, default=None,
                        help=f"the CPU weight (cgroup v2 cpu.weight, v1 cpu.shares scaled alike; everyone else: "
                             f"{DEFAULT_WEIGHT}) of a lab holding a training slot, while it holds it, e.g. "
                             f"{BOOSTED_WEIGHT} (default: the class's, {LAB_BOOST_WEIGHT} for a lab, else "
                             f"{DEFAULT_WEIGHT}: no boost; it takes the CPU from the other students' cells and "
                             f"Validate: bench/RESULTS.md)")
    parser.add_argument("--training-boost-cpus", type=float, default=None,
                        help="with --training-boost: the CPU cores a lab holding a training slot may use while it "
                             "holds it, below its user's quota, so that the holders leave the rest of the class a "
                             "share (default: a lab's, 0.85 of the cores among the slots, 0.85 on 2 cores and 2 "
                             "slots; else the user's own quota)")
    parser.add_argument("--idle-timeout", type=int, default=IDLE_TIMEOUT,
                        help="seconds without activity after which a user's server is stopped (its files stay; "
                             "the next login starts it again); 0: never")
    parser.add_argument("--lab-setting", choices=SETTINGS, default="quick",
                        help="the length of the labs every student runs (RLHF_LAB_SETTING on every server: quick, "
                             "full, or smoke, a few steps); make hub trains their SFT policy and reward model for it "
                             "once for the class")
    parser.add_argument("--warm-kernels", action=argparse.BooleanOptionalAction, default=None,
                        help="each student's server starts a python kernel as it starts, imports torch, matplotlib and "
                             "the course's modules there, and hands it to the first notebook opened "
                             "(rlhf_course/classroom/warm_kernels.py; default: on for a lab or a burst)")
    parser.add_argument("--prestart", action=argparse.BooleanOptionalAction, default=None,
                        help="once the hub is ready, start every student's server in the background (the hub's "
                             "prestart, rlhf_course/classroom/prestart.py; default: on for a lab or a burst)")
    return parser


def parse_arguments(argv=None) -> argparse.Namespace:
    """make hub's options, checked before anything is made."""
    parser = argument_parser()
    args = parser.parse_args(argv)
    from rlhf_course.lab.threads import usable_cpus
    user_cpus = args.cpus or DEFAULT_CPUS
    slots = args.training_slots if args.training_slots is not None else default_slots(usable_cpus(), user_cpus)
    chosen = class_defaults(args.klass, usable_cpus(), slots, user_cpus)
    if args.training_boost is None:  # the class's boost, with its holders' share unless one is given
        args.training_boost = chosen["training_boost"]
        if args.training_boost_cpus is None:
            args.training_boost_cpus = chosen["training_boost_cpus"]
    for option in ("warm_kernels", "prestart", "validate_weight"):
        if getattr(args, option) is None:
            setattr(args, option, chosen[option])
    for option, check in (("training_boost", check_weight), ("validate_weight", check_weight),
                          ("training_boost_cpus", check_holder_cpus)):
        try:
            check(getattr(args, option))
        except ValueError as wrong:
            parser.error(f"--{option.replace('_', '-')}: {wrong}")
    for option in ("training_slots", "validate_slots"):
        if (getattr(args, option) or 0) < 0:
            parser.error(f"--{option.replace('_', '-')}: a number of slots, 0 or more, not {getattr(args, option)}")
    if not args.training_hold > 0:
        parser.error(f"--training-hold: a positive number of seconds, not {args.training_hold:g}")
    if args.training_boost_cpus is not None and args.training_boost == DEFAULT_WEIGHT:
        parser.error("--training-boost-cpus lowers a boosted lab's quota: it needs --training-boost")
    return args


def stop_once_on_signals() -> None:
    """SIGTERM or SIGINT raises KeyboardInterrupt in the main thread, once: the handler ignores both before it
    raises, so the next ones (make passes its own SIGTERM on; a test's killpg reaches make and this process alike)
    cannot cut the clean-up that follows (seen: a second SIGTERM raised inside the clean-up's first line, and the
    classroom's accounts were left behind).  A handler, not an inherited SIG_IGN (a shell's background job, a test
    runner's worker): the hub and its idle culler are stopped with SIGINT, and an ignored one made each stop wait
    JupyterHub's 30 s interrupt_timeout."""
    def stop(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


class TerminalClosed(Exception):
    """SIGHUP: the instructor's terminal (an ssh session) went away, which is not the instructor's stop."""


def stop_on_hangup() -> None:
    """SIGHUP raises :class:`TerminalClosed` (an unplanned stop) unless it is ignored already (``nohup make hub``)."""
    def hung_up(signum, frame):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        raise TerminalClosed("the terminal closed (SIGHUP)")

    if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
        signal.signal(signal.SIGHUP, hung_up)


def ignore_stop_signals() -> None:
    """The clean-up runs to its end (stop_once_on_signals)."""
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)


def run_classroom(classroom: Classroom, klass: str, prestart: bool, on_ending=ignore_stop_signals) -> None:
    """Make the classroom, start its hub, announce it and keep the hub running; then end it.  The instructor's stop
    (Ctrl-C, SIGTERM: KeyboardInterrupt) ends the trial and removes everything, as does a failure before the class
    was announced (nothing of anyone's yet); any other end once it was (the hub failing to come back, a crash, the
    terminal closing) keeps the accounts, homes and folder (:meth:`Classroom.keep`).  ``on_ending`` runs first."""
    for warning in (classroom.port_warning, classroom.public_port_warning()):
        if warning:
            print(warning, flush=True)
    started = time.time()
    announced = False
    ending: str | None = "the classroom's process failed"
    try:
        classroom.create()
        classroom.start_first()
        print(classroom.summary(), flush=True)
        print(f"ready for a {klass} class (--class; HUB_CLASS=lab|burst|off): warm kernels "
              f"{'on' if classroom.warm_kernels else 'off'}, the students' servers "
              f"{'started now, in the background' if prestart else 'started at their login'}", flush=True)
        print(f"\nready in {time.time() - started:.0f} s", flush=True)
        (classroom.hub_dir / READY).write_text(classroom.url)
        announced = True
        if prestart:
            classroom.prestart_in_background()
        classroom.supervise()
        ending = "JupyterHub did not come back: it exited again at each start"
    except KeyboardInterrupt:
        ending = None
    except BaseException as error:
        ending = f"{type(error).__name__}: {error}"
        raise
    finally:
        on_ending()
        if ending is None or not announced:
            print("stopping the hub and removing the classroom's accounts", flush=True)
            classroom.remove()
        else:
            classroom.keep(ending)


def remove_command(base: Path) -> str:
    """The command that removes a kept classroom (:func:`remove_classroom`), as root from the checkout."""
    return f"sudo .venv/bin/python -m rlhf_course.classroom remove --base {base}"


def remove_classroom(base: Path) -> list[str]:
    """A classroom's folder kept after an unplanned stop, removed: every process of the accounts whose home is in
    ``<base>/home`` stopped, the accounts and their group deleted, their cgroups and runtime folders, then ``base``.
    Refused for a folder the classroom did not make, or while its hub runs.  The accounts' names."""
    base = base.resolve()
    if not (base / MARKER).exists():
        raise SystemExit(f"{base} is not a classroom folder (no {MARKER} in it): nothing removed")
    hub_config = str(base / "hub" / "jupyterhub_config.py")
    running = [pid for pid, argv in _processes() if hub_config in argv]
    if running:
        raise SystemExit(f"a classroom still runs on {base} (its hub: pid {', '.join(map(str, running))}): its "
                         f"Ctrl-C stops and removes it; nothing removed")
    names = sorted(entry.pw_name for entry in pwd.getpwall() if Path(entry.pw_dir).parent == base / "home")
    group = None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        group = f"{json.loads((base / 'hub' / 'accounts.json').read_text())['prefix']}instructors"
    stop_processes(names)
    remove_accounts(names, group)
    remove_user_resources(names)
    shutil.rmtree(base)
    print(f"removed the accounts {', '.join(names) or '(none)'}, their homes"
          f"{f', the group {group}' if group else ''} and {base}", flush=True)
    return names


def remove_main(argv: list[str]) -> int:
    """``python -m rlhf_course.classroom remove --base B``: :func:`remove_classroom`."""
    parser = argparse.ArgumentParser(prog="python -m rlhf_course.classroom remove",
                                     description="Remove a classroom kept after an unplanned stop: its accounts, "
                                                 "their homes (the students' work, the gradebook) and its folder.")
    parser.add_argument("--base", type=Path, required=True, help="the classroom's folder (make hub's HUB_BASE)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("removing a classroom's accounts needs root")
    remove_classroom(args.base)
    return 0


def main(argv=None) -> None:
    args = parse_arguments(argv)
    limits = {trait: value for trait, value in (("mem_limit", args.memory), ("cpu_limit", args.cpus),
              ("process_limit", args.processes), ("file_size_limit", args.file_size)) if value is not None}
    classroom = Classroom(args.repo.resolve(), args.base.resolve(), args.prefix, args.students,
                          args.port or free_port(), args.proxy.resolve(), args.make_checkout_private, limits,
                          args.idle_timeout, args.training_slots, args.training_wait, args.warm_kernels,
                          training_boost=args.training_boost, lab_setting=args.lab_setting,
                          training_boost_cpus=args.training_boost_cpus, training_hold=args.training_hold,
                          validate_slots=args.validate_slots, validate_weight=args.validate_weight)
    stop_once_on_signals()
    stop_on_hangup()
    run_classroom(classroom, args.klass, args.prestart)
