"""The class's CPU shares: while a lab holds one of the training broker's slots its user's cgroup may weigh more in
the CPU scheduler, and while a student holds one of the Validate queue's turns their cgroup weighs less.

The training broker (rlhf_course/classroom/training_broker.py) lets K labs train at once so that each trains at
about its full quota; but the kernel's scheduler gives every busy user's cgroup an equal share (the same CPU
weight each), so while other students run their explorers, Validate or start their servers, a
slot holder trains at a fraction of its core and the queue behind it grows (bench/RESULTS.md, a lab session
of 40).  The brokers are this module's only input: after every change each reports the pids holding its slots
(:meth:`CpuShares.training`, :meth:`CpuShares.validating`); each holder's user cgroup under the classroom's
(``rlhf-classroom/<user>``) gets its weight, and a cgroup whose user holds nothing any more gets the default back.

* **Training** at ``training_weight`` (the boost; the default weight: none).  The user's quota (``cpu.max``) still
  bounds it: a boosted lab never has more than its own cores, it only has them first.  With ``holder_cpus`` the
  holder's quota is also lowered to that many cores while it holds its slot (and the user's own given back after):
  a weight high enough to give the holders their cores first also takes everything from the rest of the class
  while both slots are held, and the quota below a core is the share the holders cannot take from the others (on
  2 cores and K = 2 holders at 0.85 core each: 0.3 core left for everyone else's cells).
* **Validating** at ``validate_weight`` (below the default: Validate yields).  A Validate is a batch job that
  re-runs the whole notebook in a second kernel; at the same weight as a student's cell it takes the cores the
  trainings and the class's cells wait for (in a burst of 30, a training in its slot took 1.87x its time alone).
  Validate waits without failing (its limits count the kernel's own CPU time: patient_validate.py), so on a
  full machine it goes last, and on an idle one the weight changes nothing (weights only divide what is contended).
  The whole user's cgroup yields for its turn: a student who runs cells while their Validate runs waits too.  A
  user holding a training slot and a Validate turn at once trains at the training's weight.

Only root writes a cgroup's weight, and only the brokers grant a slot or a turn (one per user, for at most its
hold): a student who holds on purpose gets her own quota first for one turn, and no more.
cgroup v2's ``cpu.weight`` (default 100) or v1's ``cpu.shares`` (default 1024, the weight scaled alike), as the
spawner made the user's cgroup (rlhf_course/classroom/spawner.py: UserCgroup).
"""
from __future__ import annotations

import contextlib
from pathlib import Path

from rlhf_course.classroom.spawner import CGROUP_NAME, CGROUP_ROOT

DEFAULT_WEIGHT = 100  # cgroup v2's cpu.weight when nobody set it (v1: cpu.shares 1024)
BOOSTED_WEIGHT = 500  # a slot holder's when asked for (--training-boost): five other busy users' worth
VALIDATE_WEIGHT = 10  # a Validate turn holder's: a tenth of a student's cell (bench/RESULTS.md, a burst of 30)
CLASS_CGROUPS = (CGROUP_ROOT / CGROUP_NAME, CGROUP_ROOT / "cpu" / CGROUP_NAME)  # v2's, v1's cpu hierarchy's


def user_cgroup(pid: int, parents: tuple[Path, ...] = CLASS_CGROUPS, root: Path = CGROUP_ROOT) -> Path | None:
    """The classroom user cgroup (``<parent>/<user>``, v2's or v1's cpu hierarchy's) the process runs in, or
    None (not one of the class's)."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            cgroup = root / path.lstrip("/")
        elif "cpu" in controllers.split(","):
            cgroup = root / "cpu" / path.lstrip("/")
        else:
            continue
        if cgroup.parent in parents:
            return cgroup
    return None


def check_weight(weight: int) -> None:
    """A ValueError unless ``weight`` is one the scheduler takes (cgroup v2's cpu.weight range)."""
    if not 1 <= weight <= 10000:
        raise ValueError(f"a CPU weight is 1 to 10000 (cgroup v2's cpu.weight; no boost: {DEFAULT_WEIGHT}), "
                         f"not {weight}")


def check_holder_cpus(cpus: float | None) -> None:
    """A ValueError unless ``cpus`` is None (the holder keeps its quota) or a positive number of cores."""
    if cpus is not None and not cpus > 0:
        raise ValueError(f"a holder's quota is a positive number of cores (none: keep the user's own), not {cpus}")


class CpuShares:
    """Training slot holders' cgroups at ``training_weight`` (and, with ``holder_cpus``, at most that many cores),
    Validate turn holders' at ``validate_weight``, everyone else's at the default (see the module's docstring)."""

    def __init__(self, training_weight: int = BOOSTED_WEIGHT, holder_cpus: float | None = None,
                 validate_weight: int = DEFAULT_WEIGHT, parents: tuple[Path, ...] = CLASS_CGROUPS):
        check_weight(training_weight)
        check_weight(validate_weight)
        check_holder_cpus(holder_cpus)
        self.training_weight, self.holder_cpus, self.validate_weight = training_weight, holder_cpus, validate_weight
        self.parents = parents
        self.boosted: set[Path] = set()  # the training holders' cgroups
        self.yielding: set[Path] = set()  # the Validate holders' cgroups that hold no training slot
        self._validators: set[Path] = set()
        self._own_quota: dict[Path, str] = {}  # a boosted cgroup's quota as the spawner set it, given back after

    def training(self, holder_pids: set[int]) -> set[Path]:
        """The training slots are held by these processes now: weigh their users' cgroups, give the others their
        weight back; the training holders' cgroups now (a holder outside the class's cgroups is left alone)."""
        holders = self._cgroups(holder_pids)
        for cgroup in self.boosted - holders:
            self._unboost(cgroup)
        for cgroup in holders - self.boosted:
            self._boost(cgroup)
        self.boosted = {c for c in holders if c.is_dir()}
        self._settle_validators()
        return self.boosted

    def validating(self, holder_pids: set[int]) -> set[Path]:
        """The Validate turns are held by these processes now: their users' cgroups yield (unless training), the
        others get their weight back; the yielding cgroups now."""
        self._validators = self._cgroups(holder_pids)
        self._settle_validators()
        return self.yielding

    def restore(self) -> None:
        self.training(set())
        self.validating(set())

    def _cgroups(self, pids: set[int]) -> set[Path]:
        return {cgroup for cgroup in (user_cgroup(pid, self.parents) for pid in pids) if cgroup}

    def _settle_validators(self) -> None:
        yielding = self._validators - self.boosted
        for cgroup in self.yielding - yielding - self.boosted:
            _set_weight(cgroup, DEFAULT_WEIGHT)
        for cgroup in yielding - self.yielding:
            _set_weight(cgroup, self.validate_weight)
        self.yielding = {c for c in yielding if c.is_dir()}

    def _boost(self, cgroup: Path) -> None:
        _set_weight(cgroup, self.training_weight)
        own = _read_quota(cgroup) if self.holder_cpus is not None else None
        if own is not None:
            self._own_quota[cgroup] = own
            cores, period = _cores(own), int(own.split()[1])
            if cores is None or cores > self.holder_cpus:  # a user whose own quota is lower keeps theirs
                _write_quota(cgroup, f"{int(period * self.holder_cpus)} {period}")

    def _unboost(self, cgroup: Path) -> None:
        _set_weight(cgroup, DEFAULT_WEIGHT)  # a Validate holder's yield is set again by _settle_validators
        self.yielding.discard(cgroup)
        own = self._own_quota.pop(cgroup, None)
        if own is not None:
            _write_quota(cgroup, own)


def _set_weight(cgroup: Path, weight: int) -> None:
    with contextlib.suppress(OSError):  # the user's server stopped meanwhile: its cgroup is gone
        if (cgroup / "cpu.weight").exists():
            (cgroup / "cpu.weight").write_text(str(weight))
        else:
            (cgroup / "cpu.shares").write_text(str(weight * 1024 // DEFAULT_WEIGHT))


def _cores(quota_text: str) -> float | None:
    """A quota as ``_read_quota`` gives it (``<quota> <period>``) in cores, or None (no quota)."""
    quota, period = quota_text.split()
    return None if quota in ("max", "-1") else int(quota) / int(period)


def _read_quota(cgroup: Path) -> str | None:
    """The quota as "<quota> <period>" (microseconds; quota "max" or "-1": none), whichever version wrote it."""
    with contextlib.suppress(OSError):
        return (cgroup / "cpu.max").read_text().strip()
    with contextlib.suppress(OSError):
        return (f"{(cgroup / 'cpu.cfs_quota_us').read_text().strip()} "
                f"{(cgroup / 'cpu.cfs_period_us').read_text().strip()}")
    return None


def _write_quota(cgroup: Path, text: str) -> None:
    with contextlib.suppress(OSError):  # the user's server stopped meanwhile: its cgroup is gone
        if (cgroup / "cpu.max").exists():
            (cgroup / "cpu.max").write_text(text)
        else:
            (cgroup / "cpu.cfs_quota_us").write_text(text.split()[0])

