"""Checks of the sockets the classroom's brokers listen on."""
import stat
from pathlib import Path


def assert_a_socket_of_roots(socket_path: Path) -> None:
    """The broker's socket every account may connect to, in a folder of root's none but root may write: nobody
    plants or replaces it."""
    folder = socket_path.parent
    assert (folder.stat().st_uid, stat.S_IMODE(folder.stat().st_mode)) == (0, 0o755)
    assert stat.S_ISSOCK(socket_path.stat().st_mode) and stat.S_IMODE(socket_path.stat().st_mode) == 0o666
