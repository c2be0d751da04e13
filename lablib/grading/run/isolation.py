"""The sandbox stage: a root-only step between the grader and the submission's process.

``python -m lablib.grading.run.isolation CONTROL_FD RESULT_FD MEMORY_MB`` reads a
length-prefixed JSON config from stdin (exactly, so the commands that follow stay in the
pipe for the child), then:

* new **network, IPC, UTS, mount and PID namespaces**: no network (a down loopback, no
  abstract sockets), private SysV shared memory capped to the scratch size and gone with
  the run, and a PID namespace whose first process is the submission's: when it ends,
  the kernel ends every process of the run, however it was forked or detached;
* a **new root file system**: an empty tmpfs (the run's scratch space, ``size`` capped)
  holding read-only bind mounts of the system folders (``/usr``, ``/etc``, ``/lib*``,
  ``/bin``, ``/sbin``, ``/sys``), of the Python install and of lablib, plus writable
  ``/tmp``, ``/var/tmp`` and ``/dev/shm`` inside the scratch tmpfs, a few device nodes and
  a fresh ``/proc`` (``hidepid=2``). Nothing else of the host exists for the child:
  no home folders, no submissions, no output or hidden-test folders, no other batch's
  files, no unix sockets of host services, no world-writable host folder. Folders the
  grader names (``mask``) are covered by empty read-only mounts even where they lie
  inside an exposed folder;
* an **unprivileged uid/gid** (one per child), no supplementary groups, ``RLIMIT_NPROC``;
* then ``exec`` of :mod:`lablib.grading.run.child`.

The stage reports what took effect, and the outer pid of the namespace's first process,
on CONTROL_FD, a pipe the child never holds; it then waits for the child and reports its
exit status there too. Every step that fails (a container without the capability, an
old kernel) is recorded in ``notes`` and the stage goes on with what it has.
"""

from __future__ import annotations

import ctypes
import errno
import ctypes.util
import json
import os
import shlex
import site
import struct
import sys
import sysconfig

__all__ = ["sandbox_possible", "needed_paths", "sandbox_main", "unreachable"]

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "sys")
DEVICES = ("null", "zero", "full", "random", "urandom")
#: pivot_root's system call number by machine (it has no libc wrapper).
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}.get(
    os.uname().machine, 155
)


def sandbox_possible() -> bool:
    """Whether the stage can run: root on Linux."""
    return hasattr(os, "getuid") and os.getuid() == 0 and sys.platform.startswith("linux")


def needed_paths(extra=(), masked=()) -> list[str]:
    """Folders (and module files) the child needs to see: the Python install, its site
    folders, lablib, and what is importable from the other ``sys.path`` / ``PYTHONPATH``
    entries, but for those inside a ``masked`` folder (the hidden tests' folder put on
    ``PYTHONPATH`` would otherwise bind the hidden tests' modules into the child's root).

    Only these (and the system folders) are bound into the child's root; a folder that
    holds them is not exposed as a whole.
    """
    from lablib._version import PACKAGE_DIR

    paths = [
        sys.base_prefix,
        sys.prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        str(PACKAGE_DIR),
    ]
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.append(sysconfig.get_path(key))
    paths += list(getattr(site, "getsitepackages", lambda: [])())
    # Entries that .pth files or PYTHONPATH added. A folder of installed distributions is
    # exposed whole; any other (a course folder on PYTHONPATH, a checkout) only by the
    # packages and modules it holds, never its other files (solutions, notebooks, data);
    # one that holds lablib (a checkout) not at all: its lablib folder is, above.
    cwd = os.path.realpath(os.getcwd())
    for entry in [*sys.path, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]:
        if (
            not entry
            or not os.path.isdir(entry)
            or os.path.realpath(entry) == cwd
            or os.path.isdir(os.path.join(entry, "lablib"))
        ):
            continue
        paths += [entry] if _holds_distributions(entry) else _importable(entry, masked)
    paths += list(extra)
    real = sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)})
    # a folder inside another exposed folder comes with it
    return [p for p in real if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in real)]


def _holds_distributions(folder: str) -> bool:
    """A site folder: named so, or holding installed distributions' metadata."""
    if os.path.basename(os.path.normpath(folder)) in ("site-packages", "dist-packages"):
        return True
    try:
        return any(name.endswith((".dist-info", ".egg-info")) for name in os.listdir(folder))
    except OSError:
        return False


def _importable(folder: str, masked=()) -> list[str]:
    """What Python can import from ``folder``: its packages (folders with an
    ``__init__.py``) and modules (``.py`` and extension files), none of those that lie
    inside a ``masked`` folder (or are one)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    hidden = [os.path.realpath(m).rstrip("/") for m in masked]
    out = []
    for name in names:
        path = os.path.join(folder, name)
        real = os.path.realpath(path)
        if any(real == m or real.startswith(m + "/") for m in hidden):
            continue
        if os.path.isdir(path) and os.path.isfile(os.path.join(path, "__init__.py")):
            out.append(path)
        elif os.path.isfile(path) and name.endswith((".py", ".so", ".pyc")):
            out.append(path)
    return out


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class _Mounts:
    def __init__(self, libc):
        self.libc = libc

    def mount(self, src, target, fstype, flags, data=None):
        rc = self.libc.mount(
            src and src.encode(),
            target.encode(),
            fstype and fstype.encode(),
            ctypes.c_ulong(flags),
            data and data.encode(),
        )
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount {target}: {os.strerror(err)}")

    def bind_readonly(self, source, target):
        self.mount(source, target, None, MS_BIND | MS_REC)
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
        try:
            self.mount(None, target, None, flags)
        except OSError:
            # A mount inherited from a more privileged namespace keeps its locked flags.
            st = os.statvfs(target)
            keep = st.f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048)
            self.mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)


# seccomp: refuse the child
# * new user namespaces (unshare or clone with CLONE_NEWUSER; clone3, whose flags live in
#   memory a filter cannot read, answers ENOSYS so that libc falls back to clone);
# * the kernel's keyrings (add_key, request_key, keyctl) and POSIX message queues
#   (mq_open): objects that outlive a process and that no namespace the sandbox can make
#   always separates (keyrings never; message queues not where there is no IPC namespace,
#   a container without CAP_SYS_ADMIN). A keyring joined by name passed data between two
#   students' runs, between the attempts of one run (a hidden test's inputs kept for the
#   next attempt to print) and past the batch. Docker's default profile refuses the
#   keyrings too; nothing the child runs needs either;
# * every call of another ABI than the machine's own: a 64-bit process can still make
#   i386 calls (int 0x80), whose numbers differ (i386's keyctl is 288, its unshare 310),
#   and x86_64's x32 ABI shares x86_64's AUDIT_ARCH but numbers its calls from bit 30;
#   rules written for the machine's numbers would let either through. The sandbox's
#   Python uses neither (on aarch64 no call has such a number), so both answer ENOSYS.
# Classic BPF over struct seccomp_data (nr at 0, arch at 4, the low half of args[0] at 16
# on these little-endian machines).
_CLONE_NEWUSER = 0x10000000
_X32_SYSCALL_BIT = 0x40000000
_SYSCALLS = {  # machine: (AUDIT_ARCH_*, unshare, clone, clone3, refused outright)
    # refused: add_key, request_key, keyctl, mq_open
    "x86_64": (0xC000003E, 272, 56, 435, (248, 249, 250, 240)),
    "aarch64": (0xC00000B7, 97, 220, 435, (217, 218, 219, 180)),
}
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def syscall_filter(machine: str):
    """The BPF program of the child's seccomp filter on ``machine``
    (``os.uname().machine``; see the comment above ``_SYSCALLS``), as ``(code, jt, jf,
    k)`` tuples (jt/jf: instructions to skip); None for a machine whose numbers are not
    known. Written with labels, their jumps counted here."""
    if machine not in _SYSCALLS:
        return None
    arch, unshare, clone, clone3, refused = _SYSCALLS[machine]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    eperm, enosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    # (code, label if true, label if false, k): None goes on to the next instruction
    program = [
        (ld, None, None, 4),  # arch
        (jeq, None, "enosys", arch),  # another ABI (i386's int 0x80 from a 64-bit process)
        (ld, None, None, 0),  # the call's number
        (jge, "enosys", None, _X32_SYSCALL_BIT),  # x32's numbers
        (jeq, "enosys", None, clone3),
        *((jeq, "eperm", None, number) for number in refused),
        (jeq, "flags", None, unshare),
        (jeq, "flags", "allow", clone),
        ("flags", ld, None, None, 16),  # args[0], low half
        (jset, "eperm", "allow", _CLONE_NEWUSER),
        ("allow", ret, None, None, _RET_ALLOW),
        ("eperm", ret, None, None, eperm),
        ("enosys", ret, None, None, enosys),
    ]
    labels = {item[0]: pc for pc, item in enumerate(program) if isinstance(item[0], str)}
    out = []
    for pc, item in enumerate(program):
        code, true, false, k = item[1:] if isinstance(item[0], str) else item
        skip = [0 if to is None else labels[to] - pc - 1 for to in (true, false)]
        out.append((code, skip[0], skip[1], k))
    return out


def _install_syscall_filter(libc) -> str | None:
    """Install :func:`syscall_filter` for this process and what it starts (kept across
    exec); returns a note when it could not be."""
    program = syscall_filter(os.uname().machine)
    if program is None:
        return f"user namespaces, keyrings and message queues not refused: no filter for {os.uname().machine}"
    filters = (_SockFilter * len(program))(*[_SockFilter(*item) for item in program])
    fprog = _SockFprog(len(program), filters)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return (
            "user namespaces, keyrings and message queues not refused: no_new_privs failed "
            f"({os.strerror(ctypes.get_errno())})"
        )
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return (
            "user namespaces, keyrings and message queues not refused: seccomp failed "
            f"({os.strerror(ctypes.get_errno())})"
        )
    return None


def _mkdirs(path, mode=0o755):
    """``path`` and the folders above it that do not exist yet, each with ``mode``
    whatever the umask (``os.makedirs`` gives only the last one its mode: under umask 077
    the folders above a bound Python were closed to the run's uid)."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        os.makedirs(folder, mode=mode, exist_ok=True)
        os.chmod(folder, mode)
    if not missing:
        os.chmod(path, mode)


def _build_root(m: _Mounts, config: dict) -> int:
    """Fill ``config['root']`` (already a tmpfs) with what the child may see; returns the
    number of masked folders."""
    root = config["root"]
    for name in SYSTEM_DIRS:
        host = "/" + name
        inside = os.path.join(root, name)
        if os.path.islink(host):
            os.symlink(os.readlink(host), inside)
        elif os.path.isdir(host):
            _mkdirs(inside)
            m.bind_readonly(host, inside)
    for path in config["expose"]:
        inside = root + path
        if not os.path.lexists(inside):  # else already visible through a system folder
            if os.path.isfile(path):  # a module of a folder not exposed whole
                _mkdirs(os.path.dirname(inside))
                open(inside, "a").close()
            else:
                _mkdirs(inside)
            m.bind_readonly(path, inside)
    hidden = 0
    for path in config["mask"]:
        inside = root + path
        if os.path.isdir(inside):
            m.mount("tmpfs", inside, "tmpfs", MS_NOSUID | MS_NODEV, "size=4k,mode=711")
            for needed in config["expose"]:  # a needed folder inside a masked one stays
                if needed.startswith(path.rstrip("/") + "/"):
                    if os.path.isfile(needed):  # a module: a file to bind it on
                        _mkdirs(os.path.dirname(root + needed))
                        open(root + needed, "a").close()
                    else:
                        _mkdirs(root + needed)
                    m.bind_readonly(needed, root + needed)
            m.mount(
                None,
                inside,
                None,
                MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                "size=4k,mode=711",
            )
            hidden += 1
        elif os.path.isfile(inside):
            m.mount("/dev/null", inside, None, MS_BIND)
            hidden += 1
    for name in ("tmp", "var/tmp", "dev/shm"):
        _mkdirs(os.path.join(root, name), 0o1777)
    for name in DEVICES:
        node = os.path.join(root, "dev", name)
        open(node, "w").close()
        m.mount("/dev/" + name, node, None, MS_BIND)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, os.path.join(root, "dev", name))
    _mkdirs(os.path.join(root, "proc"))
    return hidden


def unreachable(paths, private_root: bool = False, access=os.access) -> str | None:
    """Why this process (after its uid drop) cannot use one of ``paths`` (the Python it
    is about to run, its standard library, lablib), or None when it can: the path and
    the first folder on the way that it may not enter. Without a private root the child
    sees the host's folders with their own permissions, and a Python installed under a
    folder closed to other users (``/root``, mode 700: pyenv's default) cannot start;
    with one, a path the grader did not bind (``private_root``) is missing."""
    for path in paths:
        path = str(path)
        wanted = os.R_OK | (os.X_OK if os.path.isdir(path) or path == sys.executable else 0)
        if access(path, wanted):
            continue
        parts = os.path.abspath(path).split(os.sep)
        closed = next(
            (
                os.sep.join(parts[:i]) or os.sep
                for i in range(2, len(parts) + 1)
                if not access(os.sep.join(parts[:i]) or os.sep, os.X_OK)
            ),
            path,
        )
        if private_root:
            return (
                f"the submission's user (uid {os.getuid()}) cannot use {path}: {closed} is not in the "
                f"sandbox's root file system (it holds the system folders, the Python install, its site "
                f"folders and lablib): run the grader with the Python interpreter itself, not a link to it "
                f"from a folder outside those"
            )
        return (
            f"the submission's user (uid {os.getuid()}) cannot use {path}: {closed} is closed to other "
            f"users. With no private root file system the child sees the host's folders as they are: "
            f"install the grader's Python and lablib where every user may read them (/usr/local, /opt, "
            f"a venv outside /root), or let the sandbox make its own root (CAP_SYS_ADMIN, no chroot)"
        )
    return None


def reachable_masks(masked, access=os.access) -> str | None:
    """Why this process (after its uid drop, with no private root) must not run a
    submission: the folders the grader hides (hidden tests, a spec given by path, the
    output folder, the submissions' folders: classmates' notebooks) that it may enter or
    list, all of them named so that one fix closes them, or None. Without a private root
    only the folders' permissions keep the submission's code from reading the hidden tests
    or copying a classmate's answer at grading time."""
    open_ = [p for p in masked if os.path.isdir(p) and (access(p, os.X_OK) or access(p, os.R_OK))]
    if not open_:
        return None
    named = ", ".join(open_)
    closing = " ".join(shlex.quote(p) for p in open_)
    return (
        f"the submission's user (uid {os.getuid()}) can open {named}, which the grader "
        f"hides from submissions (hidden tests, a spec folder, the output folder or the "
        f"submissions' folders), and the sandbox has no private root file system to hide "
        f"{'them' if len(open_) > 1 else 'it'} (a container without CAP_SYS_ADMIN, a "
        f"chroot): close {'them' if len(open_) > 1 else 'it'} to other users "
        f"(chmod o-rwx {closing}; the grader's Python must lie outside), or let the "
        f"sandbox make its own root"
    )


def _write(fd, obj):
    data = json.dumps(obj).encode()
    os.write(fd, struct.pack(">I", len(data)) + data)


def _read_config() -> dict:
    """The length-prefixed JSON config on stdin, read exactly (the commands that follow
    stay in the pipe for the child)."""
    (size,) = struct.unpack(">I", os.read(0, 4))
    raw = b""
    while len(raw) < size:
        raw += os.read(0, size - len(raw))
    return json.loads(raw)


def _join_cgroups(config: dict, notes: list[str]) -> None:
    """Into the attempt's cgroup first: every process started from here is counted by the
    kernel's memory, CPU and process limits (lablib/grading/run/cgroups.py)."""
    for procs in config.get("cgroup_procs", []):
        try:
            with open(procs, "w", encoding="ascii") as f:
                f.write(str(os.getpid()))
        except OSError as exc:
            notes.append(f"could not join the cgroup {procs}: {exc.strerror}")


def _unshare(libc, notes: list[str], isolation: dict) -> None:
    """New network, IPC, UTS, mount and PID namespaces (each one that fails is a note)."""
    for flag, what in (
        (CLONE_NEWNET, "network"),
        (CLONE_NEWIPC, "ipc"),
        (CLONE_NEWUTS, "uts"),
        (CLONE_NEWNS, "mount"),
        (CLONE_NEWPID, "pid"),
    ):
        if libc.unshare(flag) != 0:
            notes.append(f"no {what} namespace: {os.strerror(ctypes.get_errno())}")
        elif what == "network":
            isolation["network"] = "none (new network namespace)"
        elif what == "pid":
            isolation["processes"] = "private (new PID namespace: the run's processes end with it)"


def _mount_root(m: _Mounts, config: dict, notes: list[str], isolation: dict) -> str | None:
    """The new root: a scratch tmpfs with the read-only system folders (:func:`_build_root`);
    its path, or None where there is no mount namespace or a mount fails (a note)."""
    if any(n.startswith("no mount") for n in notes):
        return None
    scratch_mb = int(config["tmpfs_mb"])
    try:
        m.mount(None, "/", None, MS_REC | MS_PRIVATE)
        m.mount(
            "tmpfs", config["root"], "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_mb}m,mode=755"
        )
        hidden = _build_root(m, config)
    except OSError as exc:
        notes.append(f"no private root file system: {exc}")
        return None
    isolation["filesystem"] = (
        f"new root: system folders and the Python install read-only, private /tmp, "
        f"/var/tmp and /dev/shm ({scratch_mb} MB in all); {hidden} grader folder(s) masked"
    )
    return config["root"]


def _pivot_into(libc, m: _Mounts, new_root: str, scratch_mb: int, notes: list[str]) -> str:
    """The first process's root becomes the scratch tmpfs (a fresh /proc, the old root
    detached, SysV shared memory capped); returns the work folder made there."""
    try:
        m.mount(
            "proc",
            os.path.join(new_root, "proc"),
            "proc",
            MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "hidepid=2",
        )
    except OSError as exc:
        notes.append(f"no /proc: {exc}")
    old = os.path.join(new_root, ".old-root")
    os.mkdir(old)
    if libc.syscall(_PIVOT_ROOT, new_root.encode(), old.encode()) != 0:
        raise OSError(ctypes.get_errno(), "pivot_root failed")
    os.chdir("/")
    libc.umount2(b"/.old-root", MNT_DETACH)
    os.rmdir("/.old-root")
    workdir = "/tmp/work"
    os.mkdir(workdir, 0o700)
    for name, value in (("shmmax", scratch_mb << 20), ("shmall", scratch_mb << 8), ("shmmni", 64)):
        try:
            with open(f"/proc/sys/kernel/{name}", "w") as f:
                f.write(str(value))
        except OSError:
            notes.append(f"kernel.{name} not set")
    return workdir


_PR_SET_PDEATHSIG = 1


def die_with_parent(libc=None) -> bool:
    """Have the kernel SIGKILL this process when the thread that started it ends: the
    grader killed (SIGKILL, its own out-of-memory kill) never leaves a submission's run
    going on without the limits only the grader enforces. Linux only; False where it
    could not be set. Cleared by a change of uid: call it again after one."""
    import signal

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = libc or _libc()
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _drop_privileges(libc, workdir: str, uid: int, notes: list[str]) -> str | None:
    """RLIMIT_NPROC, the work folder given to ``uid``, umask 077, then no groups, gid and
    uid dropped, and no new user namespaces or keyrings (seccomp); returns why those were
    refused, or None."""
    import resource

    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (1024, 1024))
    except (ValueError, OSError):
        notes.append("RLIMIT_NPROC not set")
    os.chown(workdir, uid, uid)
    # the run's own: without a private root the work folder is a host folder, which the
    # grader made 0755 (the isolation stage mounts over it where it can); closed here so
    # that another submission's run, graded beside this one under its own uid, can
    # neither list nor read what this one writes there
    os.chmod(workdir, 0o700)
    # and what it makes anywhere else: without a private root /tmp is the host's, shared
    # with that run; a file the run saves there (a model, a cache) is its own, 0600, unless
    # its code opens it explicitly
    os.umask(0o077)
    os.chdir(workdir)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if not die_with_parent(libc):  # again: the change of uid cleared it
        notes.append("not set to end with the grader (PR_SET_PDEATHSIG refused)")
    refused = _install_syscall_filter(libc)
    if refused:
        notes.append(refused)
    return refused


def _first_process(
    libc,
    m: _Mounts,
    config: dict,
    new_root: str | None,
    report_w: int,
    result_fd: int,
    memory_mb: float,
) -> None:
    """The namespace's first process: finish the root, drop root, report, exec the child
    (never returns)."""
    notes: list[str] = []
    workdir = config["root"]
    private_root = False
    try:
        if new_root is not None:
            workdir = _pivot_into(libc, m, new_root, int(config["tmpfs_mb"]), notes)
            private_root = True  # this process's root is now the scratch tmpfs
        # read as root: sysconfig loads its data lazily, from a folder the uid may not open
        stdlib = sysconfig.get_path("stdlib")
        refused = _drop_privileges(libc, workdir, int(config["uid"]), notes)
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        blocked = unreachable([sys.executable, stdlib, package], private_root)
        if blocked:
            raise RuntimeError(blocked)
        exposed = None if private_root else reachable_masks(config["mask"])
        if exposed:  # nothing hides it: the submission's code could read it (fail closed)
            raise RuntimeError(exposed)
        _write(
            report_w,
            {
                "ok": True,
                "uid": os.getuid(),
                "notes": notes,
                "syscalls_filtered": refused is None,
                "private_root": private_root,
            },
        )
    except BaseException as exc:  # noqa: BLE001 - reported, then the run ends
        _write(report_w, {"ok": False, "notes": notes + [f"sandbox failed: {exc}"]})
        os._exit(120)
    os.close(report_w)
    env = dict(config["env"], HOME=workdir, TMPDIR=workdir)
    try:
        os.execve(
            sys.executable,
            [sys.executable, "-m", "lablib.grading.run.child", str(result_fd), str(memory_mb)],
            env,
        )
    finally:
        os._exit(127)


def _read_report(report_r: int) -> dict:
    """What the first process reported (every byte, until it exec-ed or ended)."""
    data = b""
    while chunk := os.read(report_r, 65536):
        data += chunk
    os.close(report_r)
    if len(data) <= 4:
        return {"ok": False, "notes": ["sandbox gave no report"]}
    try:
        return json.loads(data[4:])
    except ValueError:
        return {"ok": False, "notes": ["sandbox gave an unreadable report"]}


def sandbox_main(control_fd: int, result_fd: int, memory_mb: float) -> None:
    """Entry point of the stage (see the module docstring).

    The privileged steps (cgroup, namespaces, mounts, then in the namespace's first
    process the new root, the uid drop and the exec) run in this order in one process
    tree; each is one function, called here top to bottom, which is how they are reviewed.
    """
    libc = _libc()
    die_with_parent(libc)  # the grader gone, this stage goes, and the namespace with it
    os.umask(0o022)  # the folders it makes are the run's to enter, whatever the grader's umask
    config = _read_config()
    m = _Mounts(libc)
    notes: list[str] = []
    _join_cgroups(config, notes)
    isolation = {
        "uid": 0,
        "network": "shared",
        "filesystem": "shared",
        "processes": "shared",
        "notes": notes,
    }
    _unshare(libc, notes, isolation)
    new_root = _mount_root(m, config, notes, isolation)
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(report_r)
        os.close(control_fd)
        _first_process(libc, m, config, new_root, report_w, result_fd, memory_mb)
    os.close(report_w)
    os.close(result_fd)
    os.close(0)
    report = _read_report(report_r)
    notes += report.get("notes", [])
    isolation["uid"] = report.get("uid", 0)
    if report.get("syscalls_filtered"):
        isolation["processes"] += (
            "; no new user namespaces, no kernel keyrings or message queues (seccomp)"
        )
    # scratch_tmpfs: the child's root is the tmpfs this stage mounted (size scratch_mb), the
    # only file system whose use the grader may count as the run's memory.
    scratch = bool(new_root is not None and report.get("ok") and report.get("private_root"))
    _write(
        control_fd,
        {
            "event": "isolation",
            "init_pid": pid,
            "ok": bool(report.get("ok")),
            "scratch_tmpfs": scratch,
            "scratch_mb": int(config["tmpfs_mb"]),
            **isolation,
        },
    )
    _, status = os.waitpid(pid, 0)
    _write(control_fd, {"event": "exit", "status": status})
    os.close(control_fd)
    os._exit(0)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(
            "usage: python -m lablib.grading.run.isolation CONTROL_FD RESULT_FD MEMORY_MB "
            "(started by the grader, not by hand)"
        )
    sandbox_main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
