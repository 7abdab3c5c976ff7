"""The course's private folders and who else could read them: the solutions and hidden tests must stay out of
every student's reach on a machine where students have accounts (a clone made under the usual umask, 022, is
world-readable).  `make hub` refuses such a checkout (:func:`rlhf_course.classroom.hub.check_checkout_private`);
a release to an exchange other accounts use names it (:func:`exposure_reason`)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

# solutions and hidden tests (a translated answer cell holds its solution)
PRIVATE_FOLDERS = ("source", "instructor", "i18n")


def readable_by_others(folder: Path) -> list[Path]:
    """What in ``folder`` an account that is neither its owner nor in its group could read: every
    folder above it searchable by others (o+x), and a file or folder there that others may read
    (o+r).  Empty when one folder on the way shuts others out."""
    folder = folder.resolve()
    if not all(os.stat(p).st_mode & stat.S_IXOTH for p in [*reversed(folder.parents), folder]):
        return []
    exposed = []
    for path, dirs, files in os.walk(folder):
        here = Path(path)
        for name in dirs[:]:
            mode = os.lstat(here / name).st_mode
            if mode & stat.S_IROTH:
                exposed.append(here / name)
            if not mode & stat.S_IXOTH:
                dirs.remove(name)  # nothing below it is reachable by others
        exposed += [here / name for name in files
                    if stat.S_ISREG(os.lstat(here / name).st_mode) and os.lstat(here / name).st_mode & stat.S_IROTH]
    if os.stat(folder).st_mode & stat.S_IROTH:
        exposed.insert(0, folder)
    return exposed


def exposed_folders(course_root: Path) -> dict[str, list[Path]]:
    """Each private folder of the course (:data:`PRIVATE_FOLDERS`) with what of it other accounts could read;
    only the folders something of which they could."""
    found = {name: readable_by_others(course_root / name) for name in PRIVATE_FOLDERS if (course_root / name).exists()}
    return {name: paths for name, paths in found.items() if paths}


def described(exposed: dict[str, list[Path]]) -> str:
    """``source/ (12 paths, e.g. /course/source); instructor/ (...)``"""
    return "; ".join(f"{name}/ ({len(paths)} paths, e.g. {paths[0]})" for name, paths in exposed.items())


def exposure_reason(course_root: Path, exchange_root: Path,
                     exposed: dict[str, list[Path]] | None = None) -> str | None:
    """What to tell the instructor who releases ``course_root`` into the exchange at ``exchange_root`` when other
    accounts could read its private folders (``exposed``, default: measured now), or None.  An exchange inside the
    course is `make lab`'s, one person's own checkout: None."""
    course_root, exchange_root = Path(course_root).resolve(), Path(exchange_root).resolve()
    if exchange_root.is_relative_to(course_root):
        return None
    exposed = exposed_folders(course_root) if exposed is None else exposed
    if not exposed:
        return None
    return (f"every account on this machine could read {course_root}'s {described(exposed)}: the solutions and "
            f"hidden tests, for any student with an account here.  Run `chmod o-rwx {course_root}` (the "
            f"submissions, the gradebook and the feedback below it are then private too).")
