"""The seccomp filter of every sandbox: the system calls student code never needs and that widen what the
kernel exposes to it are answered ``EPERM`` without running.

Denied: creating namespaces (``unshare``; ``clone`` with any ``CLONE_NEW*`` flag, which the filter reads in
its first argument; ``clone3``, whose flags sit in memory a filter cannot read, answers ``ENOSYS`` so that
the C library falls back to ``clone``), ``setns``, mounting (``mount``, ``umount2``, ``pivot_root`` and the
new mount API), the kernel keyrings (``keyctl``, ``add_key``, ``request_key``: the zygote empties the
uid's keyrings before the filter is installed), ``bpf``, ``perf_event_open``, ``userfaultfd``,
``io_uring_*``, and ``ptrace`` with its relatives ``process_vm_readv``/``writev``.  A system call of
another ABI than the sandbox's own (32-bit calls on x86_64, x32) kills the process: the filter's numbers
are the native ABI's, and the sandbox's Python never makes any other.

The program is classic BPF (``struct sock_filter`` records, :func:`program`), installed by the zygote in
each sandbox after its last privileged step and after ``no_new_privs`` (:func:`install`); every process
the sandbox starts inherits it and none can remove it.  An architecture without a table here refuses to
start a sandbox (:class:`UnknownArchitecture`) rather than run one without the filter.
"""
from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

# Instruction classes and fields of classic BPF (linux/bpf_common.h), and seccomp's return values
# (linux/seccomp.h).
BPF_LD, BPF_JMP, BPF_RET = 0x00, 0x05, 0x06
BPF_W, BPF_ABS, BPF_K = 0x00, 0x20, 0x00
BPF_JEQ, BPF_JGE, BPF_JSET = 0x10, 0x30, 0x40
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6] (native byte order).
NR_OFFSET, ARCH_OFFSET, FIRST_ARG_OFFSET = 0, 4, 16
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
CLONE_NEW_ANY = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
X32_SYSCALL_BIT = 0x40000000

DENIED = ("unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig",
          "fsmount", "fspick", "mount_setattr", "keyctl", "add_key", "request_key", "bpf", "perf_event_open",
          "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace", "process_vm_readv",
          "process_vm_writev")


class Architecture:
    def __init__(self, audit_arch: int, numbers: dict[str, int], foreign_above: int | None = None):
        self.audit_arch = audit_arch  # AUDIT_ARCH_* of linux/audit.h: what seccomp_data.arch holds
        self.numbers = numbers  # system call numbers of the native ABI (asm/unistd_64.h, asm-generic/unistd.h)
        self.foreign_above = foreign_above  # numbers from here up belong to another ABI (x86_64's x32)


_MOUNT_API = {"open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
              "mount_setattr": 442}
_IO_URING = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
ARCHITECTURES = {
    "x86_64": Architecture(0xC000003E, {
        "clone": 56, "clone3": 435, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
        "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, **_MOUNT_API, **_IO_URING},
        foreign_above=X32_SYSCALL_BIT),
    "aarch64": Architecture(0xC00000B7, {
        "clone": 220, "clone3": 435, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41,
        "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, **_MOUNT_API, **_IO_URING}),
}


class UnknownArchitecture(RuntimeError):
    pass


def architecture(machine: str | None = None) -> Architecture:
    """The table of this machine (``os.uname().machine``), or :class:`UnknownArchitecture`."""
    machine = machine or os.uname().machine
    if machine not in ARCHITECTURES or sys.byteorder != "little":
        raise UnknownArchitecture(f"no seccomp filter for {machine} ({sys.byteorder}-endian): sandboxes refuse "
                                  f"to start without one (known: {', '.join(ARCHITECTURES)})")
    return ARCHITECTURES[machine]


def _statement(code: int, k: int) -> tuple:
    return (code, 0, 0, k)


def _jump(condition: int, k: int, if_true: str | int, if_false: str | int) -> tuple:
    return (BPF_JMP | condition | BPF_K, if_true, if_false, k)


def program(arch: Architecture) -> bytes:
    """The filter, as the kernel reads it: ``struct sock_filter {u16 code; u8 jt, jf; u32 k}`` records.
    Jump targets are written as labels (or 0: the next instruction) and resolved to forward offsets."""
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    code: list = [
        _statement(BPF_LD | BPF_W | BPF_ABS, ARCH_OFFSET),
        _jump(BPF_JEQ, arch.audit_arch, 0, "kill"),
        _statement(BPF_LD | BPF_W | BPF_ABS, NR_OFFSET),
    ]
    if arch.foreign_above is not None:
        code.append(_jump(BPF_JGE, arch.foreign_above, "kill", 0))
    code += [_jump(BPF_JEQ, arch.numbers[name], "deny", 0) for name in DENIED]
    code += [
        _jump(BPF_JEQ, arch.numbers["clone3"], "enosys", 0),
        _jump(BPF_JEQ, arch.numbers["clone"], 0, "allow"),
        _statement(BPF_LD | BPF_W | BPF_ABS, FIRST_ARG_OFFSET),  # clone's flags: the low half of its first argument
        _jump(BPF_JSET, CLONE_NEW_ANY, "deny", "allow"),
        ("allow", _statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)),
        ("deny", _statement(BPF_RET | BPF_K, eperm)),
        ("enosys", _statement(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | errno.ENOSYS)),
        ("kill", _statement(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)),
    ]
    labels = {entry[0]: index for index, entry in enumerate(code) if isinstance(entry[0], str)}
    records = []
    for index, entry in enumerate(code):
        op, jt, jf, k = entry[1] if isinstance(entry[0], str) else entry
        offsets = [labels[target] - index - 1 if isinstance(target, str) else target for target in (jt, jf)]
        assert all(0 <= offset < 256 for offset in offsets), "a jump out of classic BPF's reach"
        records.append(struct.pack("=HBBI", op, *offsets, k))
    return b"".join(records)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(machine: str | None = None) -> None:
    """Install the filter on this thread (and everything it starts); needs ``no_new_privs`` or CAP_SYS_ADMIN."""
    code = program(architecture(machine))
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter: {os.strerror(err)}")
