"""The Python environment of the simulated server: one that every Unix user can run, wherever the
checkout is.

A checkout may live in a private folder (`mktemp -d`, /root): its `.venv` is then out of reach of
the instructor and the students `make hub` (and the exchange and hub tests) create, as it would be on a
real server.  So the classroom installs what a server has, in a world-readable place
(`/opt/rlhf-course-test`, or `RLHF_SERVER_ENV`):

* `base-<key>/`: a venv with the pinned `requirements.txt`, built by a Python interpreter every user
  can execute (this one's if it is reachable, else the system's python3.X of the same version).  It
  is built once and kept (minutes of pip otherwise; docs/classroom.md), keyed by the requirements and the
  interpreter;
* `run-*/venv`: per test session, a venv that sees `base-<key>`'s packages (and its `share`, `etc`:
  data and config files) and has this checkout's
  `rlhf_course` installed non-editable (a copy: the checkout itself is never read by the users).
  It is removed at the end of the session.
"""
import contextlib
import fcntl
import hashlib
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(os.environ.get("RLHF_SERVER_ENV", "/opt/rlhf-course-test"))
VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
LAYOUT = b"3"
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]


def everyone_can_run(path: Path) -> bool:
    """True if users other than root can execute `path` (every folder above it searchable)."""
    path = path.resolve()
    if not path.is_file() or not path.stat().st_mode & stat.S_IXOTH:
        return False
    return all(parent.stat().st_mode & stat.S_IXOTH for parent in path.parents)


def shared_interpreter() -> Path:
    """This Python (the one the checkout's venv was built from), runnable by every user: itself if
    they can reach it, else a copy of its installation (interpreter, libpython, standard library)."""
    own = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    if everyone_can_run(own):
        return own
    prefix = Path(sys.base_prefix)
    key = hashlib.sha256(str(prefix).encode()).hexdigest()[:8]
    copy = ROOT / f"python-{platform.python_version()}-{key}"
    interpreter = copy / "bin" / f"python{VERSION}"
    with _locked(copy):
        if (copy / ".complete").exists():
            return interpreter
        shutil.rmtree(copy, ignore_errors=True)
        with _umask():
            (copy / "bin").mkdir(parents=True)
            shutil.copy2(own, interpreter)
            (copy / "bin" / "python3").symlink_to(interpreter.name)
            lib = copy / "lib"
            shutil.copytree(prefix / "lib" / f"python{VERSION}", lib / f"python{VERSION}", symlinks=True,
                            ignore=lambda folder, names: [n for n in names if n in ("site-packages", "test")])
            (lib / f"python{VERSION}" / "site-packages").mkdir()
            for library in (prefix / "lib").glob("libpython*"):
                shutil.copy2(library, lib / library.name, follow_symlinks=False)
            runpath = subprocess.run(["readelf", "-d", str(interpreter)], capture_output=True, text=True).stdout
            if str(prefix) in runpath:  # a shared-library build: find libpython beside the copy
                if not shutil.which("patchelf"):
                    raise RuntimeError(f"{own} links {prefix}/lib by absolute path: copying it needs patchelf")
                _run("patchelf", "--set-rpath", "$ORIGIN/../lib", interpreter)
            _run("chmod", "-R", "go+rX", copy)
        (copy / ".complete").write_text(f"copy of {prefix}\n")
    return interpreter


def lock_folder() -> Path:
    """Where the build locks live: a folder only root can enter (0700, root's own, no link).  A lock
    file every account could open is a lock any account could take and hold, and every later
    `make hub` or test run would wait on it forever."""
    ROOT.mkdir(parents=True, exist_ok=True)
    ROOT.chmod(0o755)
    folder = ROOT / ".locks"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise RuntimeError(f"{folder} is not a folder of this account's own: remove it (it holds only build locks)")
    if stat.S_IMODE(info.st_mode) != 0o700:
        folder.chmod(0o700)
    return folder


@contextlib.contextmanager
def _locked(folder: Path):
    """Another test session (another checkout) may be building the same folder."""
    path = lock_folder() / f"{folder.name}.lock"
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def _umask():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _run(*command, **kwargs) -> None:
    proc = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed ({proc.returncode})\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")


def _site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{VERSION}" / "site-packages"


def base_env(repo: Path) -> Path:
    """The shared venv with the pinned requirements (built on first use, then reused)."""
    interpreter = shared_interpreter()
    requirements = (repo / "requirements.txt").read_bytes()
    # LAYOUT: bumped when what a base holds changes (2: with byte-code caches; 3: console scripts of a venv reached
    # through a link run the base's python), so older ones are rebuilt
    key = hashlib.sha256(requirements + str(interpreter).encode() + LAYOUT).hexdigest()[:12]
    venv = ROOT / f"base-{key}"
    with _locked(venv):
        if (venv / ".complete").exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)  # an interrupted build
        with _umask():
            _run(interpreter, "-m", "venv", "--without-pip", venv)
            if not copy_pinned_packages(repo, venv):
                _run(*PIP, "--python", venv / "bin" / "python", "install", "-r", repo / "requirements.txt")
            _run("chmod", "-R", "go+rX", venv)
        (venv / ".complete").write_text(f"{interpreter}\n")
    return venv


def pinned_versions(requirements: Path) -> dict[str, str]:
    """``name==version`` lines of a requirements file, by canonical name."""
    from packaging.utils import canonicalize_name
    pins = {}
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            if not version or any(c in name for c in "<>=!~;[@ "):
                raise ValueError(f"{requirements}: not a plain pin: {line!r}")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _installed_here() -> dict[str, str]:
    """The distributions in this venv's site-packages, the folder the copy takes, and only there: ``sys.path`` may
    hold other folders (setuptools' vendored packages, which pytest's plugins put on it, have their own
    packaging, zipp and platformdirs), and their older versions made the copy refuse and pip install everything."""
    from importlib import metadata

    from packaging.utils import canonicalize_name
    return {canonicalize_name(d.metadata["Name"]): d.version
            for d in metadata.distributions(path=[str(_site_packages(Path(sys.prefix)))])}


def _link_or_copy(source: str, target: str) -> None:
    """A hard link where both lie on one file system (pip replaces files, never edits them in place:
    neither side sees the other's later installs), else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def copy_pinned_packages(repo: Path, venv: Path) -> bool:
    """Fill ``venv`` with a copy of this environment's packages when they are exactly the pinned
    requirements (the checkout's `.venv`, installed by `make` from the same file): the same files pip
    would unpack, in seconds instead of minutes.  This checkout's own editable install stays out (the
    session venv installs a copy of the package).  False, and nothing copied, when this environment is
    not a venv of the same Python with exactly those pins; then pip installs them."""
    if sys.prefix == sys.base_prefix:
        return False
    pins = pinned_versions(repo / "requirements.txt")
    installed = {name: version for name, version in _installed_here().items() if name != "rlhf-course"}
    from packaging.specifiers import SpecifierSet
    if any(name not in installed or not SpecifierSet(f"=={version}").contains(installed[name], prereleases=True)
           for name, version in pins.items()):  # "==2.13.0" holds for torch's 2.13.0+cpu, as for pip
        return False
    own = Path(sys.prefix)

    # The byte-code caches come too: the users cannot write to this folder, so without them every
    # process of theirs would compile its imports from source again (torch's too: docs/classroom.md has the
    # figures).  Python checks each cache against its source's size and mtime, both kept.
    def outside(folder, names):  # this checkout's editable install
        return [n for n in names if n.startswith(("__editable__", "rlhf_course-"))]
    shutil.copytree(_site_packages(own), _site_packages(venv), symlinks=True, dirs_exist_ok=True, ignore=outside,
                    copy_function=_link_or_copy)
    for folder in ("share", "etc", "include"):
        if (own / folder).is_dir():
            shutil.copytree(own / folder, venv / folder, symlinks=True, dirs_exist_ok=True,
                            copy_function=_link_or_copy)
    # console scripts (nbgrader, jupyter, alembic, ...): the same files with this venv's python
    for script in (own / "bin").iterdir():
        target = venv / "bin" / script.name
        if target.exists() or target.is_symlink() or script.is_symlink() or not script.is_file():
            continue
        data = console_script_for(script.read_bytes(), own, venv)
        if data is None:
            continue  # activate scripts and the like: the new venv has its own
        target.write_bytes(data)
        target.chmod(script.stat().st_mode & 0o777)
    return True


def console_script_for(data: bytes, own: Path, venv: Path) -> bytes | None:
    """A console script of the venv ``own`` as ``venv``'s: its ``#!`` names ``venv``'s python.  The script's
    ``#!`` may name ``own`` by another path than ``sys.prefix`` (a venv reached through a symbolic link, e.g. a git
    worktree's ``.venv`` linked to the main checkout's): both are resolved.  None for a script that names ``own``
    elsewhere than in its ``#!`` (activate and the like)."""
    first, newline, rest = data.partition(b"\n")
    if first.startswith(b"#!"):
        named = Path(first[2:].strip().decode(errors="replace"))
        if named.name.startswith("python") and named.parent.resolve() == (own / "bin").resolve():
            return b"#!" + str(venv / "bin" / "python").encode() + newline + rest
    if str(own).encode() in data or str(own.resolve()).encode() in data:
        return None
    return data


LABEXTENSION = Path("jupyter", "labextension", "rlhf-course-deadlines")  # prebuilt, committed


def _linked_share(base: Path, share: Path, labextension: Path) -> None:
    """``share`` as links to ``base``'s files, but for share/jupyter/labextensions, a folder of its own holding
    links to the base's lab extensions and a copy of ``labextension`` (the shared base is built once for many
    sessions; the course's extension is this checkout's)."""
    extensions = share / "jupyter" / "labextensions"
    extensions.mkdir(parents=True)
    # (folder of the base, the same folder here, the one item in it made here rather than linked)
    for folder, here, own in ((base, share, "jupyter"), (base / "jupyter", share / "jupyter", "labextensions"),
                              (base / "jupyter" / "labextensions", extensions, labextension.name)):
        for item in (folder.iterdir() if folder.is_dir() else ()):
            if item.name != own:
                (here / item.name).symlink_to(item)
    shutil.copytree(labextension, extensions / labextension.name)


class ServerEnv:
    """This session's environment: `python` and a `PATH` for the simulated users."""

    def __init__(self, repo: Path):
        self.base = base_env(repo)
        for stale in ROOT.glob("run-*"):  # left by a session that was killed
            if time.time() - stale.stat().st_mtime > 86400:
                shutil.rmtree(stale, ignore_errors=True)
        with _umask():
            self.folder = Path(tempfile.mkdtemp(prefix="run-", dir=ROOT))
            self.folder.chmod(0o755)
            self.venv = self.folder / "venv"
            _run(shared_interpreter(), "-m", "venv", "--without-pip", self.venv)
            # the shared packages, as site-packages of this venv (their own .pth files included)
            (_site_packages(self.venv) / "_rlhf_server_base.pth").write_text(
                f"import site; site.addsitedir({str(_site_packages(self.base))!r})\n")
            # and their data and config files (nbconvert's templates, Jupyter's extension config), with the
            # course's lab extension from this checkout (the Assignment List's deadlines)
            if (self.base / "etc").exists():
                (self.venv / "etc").symlink_to(self.base / "etc")
            _linked_share(self.base / "share", self.venv / "share", repo / LABEXTENSION)
            # the course package from this checkout, non-editable, built from a copy
            source = self.folder / "src"
            shutil.copytree(repo / "rlhf_course", source / "rlhf_course",
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            shutil.copy2(repo / "pyproject.toml", source / "pyproject.toml")
            # built with the base's pinned setuptools (--no-build-isolation): nothing fetched from an index
            _run(*PIP, "--python", self.venv / "bin" / "python", "install", "--no-deps", "--no-build-isolation",
                 "--no-index", source)
            shutil.rmtree(source)
            # its byte code too (pip leaves it out under PYTHONDONTWRITEBYTECODE; the users cannot write it)
            _run(self.venv / "bin" / "python", "-m", "compileall", "-q", _site_packages(self.venv) / "rlhf_course")
            _run("chmod", "-R", "go+rX", self.folder)
        self.python = str(self.venv / "bin" / "python")
        self.path = f"{self.venv / 'bin'}:{self.base / 'bin'}:/usr/local/bin:/usr/bin:/bin"

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
