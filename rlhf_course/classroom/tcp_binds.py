"""A user's processes bind no TCP port but their server's (Landlock's network rules, Linux 6.7 and newer).

The machine's TCP ports are shared by every account: a student's two processes could bind all 28,232 ephemeral
ports, and then JupyterHub could choose no port for any server and the proxy open no connection to any server or to
the hub (``bench/port_hold.py``).  Linux counts no sockets per user, but Landlock (an unprivileged sandbox every
process may enter, kept across fork and exec) can allow a process tree to bind TCP to a list of ports only.  The
spawner puts each server in such a domain before the server becomes its user: the server binds the port the hub
chose for it, and nothing it starts (kernels, terminals, Validate's kernels: all on Unix sockets) binds any other,
nor port 0.  Outgoing connections, UDP and Unix sockets are left alone.

The three system calls have no wrapper in Python's standard library; their numbers are the same on every Linux
architecture (444, 445, 446: added after the tables were unified).  Where the kernel's Landlock has no network
rules (ABI < 4, or Landlock not enabled), :func:`bind_rules_supported` is false and the classroom says so.
"""
from __future__ import annotations

import ctypes
import os
import struct

LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1  # flag: return the ABI version instead of a ruleset
LANDLOCK_ACCESS_NET_BIND_TCP = 1 << 0
LANDLOCK_RULE_NET_PORT = 2
NETWORK_RULES_ABI = 4  # the first Landlock ABI with network rules (Linux 6.7)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def landlock_abi() -> int:
    """The running kernel's Landlock ABI version; 0 where Landlock is missing or disabled."""
    version = _libc.syscall(LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                            ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def bind_rules_supported() -> bool:
    """True where :func:`allow_tcp_binds_only_to` can be enforced."""
    return landlock_abi() >= NETWORK_RULES_ABI


def _check(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"landlock {what}: {os.strerror(number)}")
    return result


def allow_tcp_binds_only_to(port: int) -> None:
    """From now on this process, and every process it starts, may bind a TCP socket to ``port`` only: any other
    port, 0 (the kernel's choice) included, is refused with EACCES.  Needs root (CAP_SYS_ADMIN) or no_new_privs;
    the spawner calls it as root, before the server becomes its user.  Raises OSError where it cannot be enforced."""
    handled = struct.pack("=QQ", 0, LANDLOCK_ACCESS_NET_BIND_TCP)  # handled_access_fs (none), handled_access_net
    attributes = ctypes.create_string_buffer(handled, len(handled))
    ruleset = _check(_libc.syscall(LANDLOCK_CREATE_RULESET, attributes, ctypes.c_size_t(len(handled)),
                                   ctypes.c_uint32(0)), "create_ruleset")
    try:
        allowed = struct.pack("=QQ", LANDLOCK_ACCESS_NET_BIND_TCP, port)  # allowed_access, port
        rule = ctypes.create_string_buffer(allowed, len(allowed))
        _check(_libc.syscall(LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(LANDLOCK_RULE_NET_PORT), rule,
                             ctypes.c_uint32(0)), "add_rule")
        _check(_libc.syscall(LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)), "restrict_self")
    finally:
        os.close(ruleset)
