"""Whether one account holding the machine's ephemeral ports stops the classroom's new connections.

    sudo .venv/bin/python bench/port_hold.py               # the holders as a shell of hers would run them
    sudo .venv/bin/python bench/port_hold.py --as-a-server  # the holders inside a server's Landlock domain, as the
                                                            # classroom starts everything of hers (tcp_binds.py)

Runs in a network namespace of its own (``unshare --net``: its own loopback, so nothing else on the machine is
touched): ``nobody`` binds every port of ``net.ipv4.ip_local_port_range`` it can, in two processes (each within the
usual 20,000 open files), as a student's two processes of her 256 could; then root tries what the classroom does
with a new connection: JupyterHub's ``random_port`` (a bind to port 0, for a server it starts) and a connect to a
listener on loopback (the proxy reaching a server, the hub reaching the proxy).  Prints what each did, and the
ports held.  A second or two.
"""
from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys

HOLDER = r"""
import resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
for port in range(int(sys.argv[1]), int(sys.argv[2])):
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", port))
        held.append(s)
    except OSError:
        s.close()
print(len(held), flush=True)
time.sleep(60)
"""


def in_namespace(as_a_server: bool) -> None:
    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    middle = (low + high) // 2
    server_port = 8888  # the port the hub would have chosen for her server
    preexec = None
    if as_a_server:
        from rlhf_course.classroom.tcp_binds import allow_tcp_binds_only_to
        preexec = functools.partial(allow_tcp_binds_only_to, server_port)
    holders = [subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3",
                                 "-c", HOLDER, str(start), str(end)], stdout=subprocess.PIPE, text=True, cwd="/",
                                preexec_fn=preexec)
               for start, end in ((low, middle), (middle, high + 1))]
    try:
        held = sum(int(holder.stdout.readline()) for holder in holders)
        print(f"nobody holds {held} of the {high - low + 1} ephemeral ports ({low}-{high})"
              + (f", inside a server's Landlock domain (port {server_port} allowed)" if as_a_server else ""))
        listener = socket.socket()
        listener.bind(("127.0.0.1", 5000))
        listener.listen()
        trials = {"root binds port 0 (JupyterHub's random_port, a server's port)":
                  lambda: socket.socket().bind(("127.0.0.1", 0)),
                  "root connects to a loopback listener (the proxy to a server)":
                  lambda: socket.create_connection(("127.0.0.1", 5000), timeout=2)}
        for what, trial in trials.items():
            try:
                trial()
                print(f"{what}: works")
            except OSError as error:
                print(f"{what}: refused ({error})")
    finally:
        for holder in holders:
            holder.kill()


def main() -> None:
    if os.geteuid() != 0:
        raise SystemExit("run it as root: it makes a network namespace and runs the holder as nobody")
    as_a_server = "--as-a-server" in sys.argv
    if "--inside" in sys.argv:
        in_namespace(as_a_server)
        return
    subprocess.run(["unshare", "--net", "sh", "-c", f"ip link set lo up 2>/dev/null; {sys.executable} "
                    f"{os.path.abspath(__file__)} --inside{' --as-a-server' if as_a_server else ''}"], check=True)


if __name__ == "__main__":
    main()
