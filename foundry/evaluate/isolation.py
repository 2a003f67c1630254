"""Operating-system isolation of a candidate's worker, applied in the forked child before
any candidate code runs, when the judge runs as root (or has CAP_SYS_ADMIN):

- a private mount namespace in which every filesystem is read-only except the job's temp
  dir and the kernel build caches (so a candidate cannot rewrite the judge's code, the
  task files, installed packages, the judge's cached baselines and verdicts, or anything
  that is imported later by the judge);
- a private network namespace (no network);
- no capabilities at all and no_new_privs (so it cannot undo the above, cannot read or
  write the memory or environment of the judge's processes through /proc, and cannot
  regain privileges through setuid binaries).

Without the privileges the child keeps only the process-level sandbox (process group,
limits, clean environment); `available()` says which applies. Linux only.
"""

from __future__ import annotations

import ctypes
import errno
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38
_CAPSET = {"x86_64": 126, "aarch64": 91}
# mounts that stay writable: devices (GPUs, /dev/null, shared memory) and procfs
KEEP_WRITABLE = ("/dev", "/dev/pts", "/dev/shm", "/proc")


class IsolationError(OSError):
    pass


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        e = ctypes.get_errno()
        raise IsolationError(e, f"{what}: {os.strerror(e)}")


def available() -> bool:
    """Whether this process may create namespaces (root / CAP_SYS_ADMIN on Linux)."""
    if not os.path.exists("/proc/self/mountinfo"):
        return False
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << 21))  # CAP_SYS_ADMIN
    except OSError:
        pass
    return False


def _mount_points() -> list[tuple[str, set]]:
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            point = parts[4].encode().decode("unicode_escape")
            out.append((point, set(parts[5].split(","))))
    return out


def isolate(writable: list[str]) -> None:
    """Enter the isolation described above; raises IsolationError if a step fails."""
    libc = _libc()
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare")
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    keep = {os.path.realpath(w) for w in writable if os.path.isdir(w)}
    for w in sorted(keep):
        _check(libc.mount(w.encode(), w.encode(), None, MS_BIND, None), f"bind {w}")
    keep |= set(KEEP_WRITABLE)
    for point, opts in _mount_points():
        if point in keep or "ro" in opts:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        flags |= (MS_NOSUID if "nosuid" in opts else 0) | (MS_NODEV if "nodev" in opts else 0) \
            | (MS_NOEXEC if "noexec" in opts else 0)
        if libc.mount(None, point.encode(), None, flags, None) != 0:
            e = ctypes.get_errno()
            if e not in (errno.ENOENT, errno.EACCES):
                raise IsolationError(e, f"read-only remount of {point}: {os.strerror(e)}")
    drop_capabilities()


def drop_capabilities() -> None:
    libc = _libc()
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    nr = _CAPSET.get(os.uname().machine)
    if nr is None:
        raise IsolationError(errno.ENOSYS, "capset: unknown architecture")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2): all zero
    _check(libc.syscall(nr, header, data), "capset")
