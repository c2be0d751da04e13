"""Kernel-enforced limits for one attempt of a submission: a control group (cgroup).

The supervisor measures a run's memory (the resident memory of the run's uid plus its
scratch tmpfs) and kills it past the limit; what it cannot see (``memfd_create`` files
never mapped, a tmpfs mounted in a user namespace of the child's) the kernel's memory
controller counts: shmem, tmpfs and page cache pages are charged to the cgroup of the
process that touched them, and past ``memory.limit_in_bytes`` (v1) / ``memory.max`` (v2)
the kernel reclaims what it can and then kills a process of the group. The CPU
controller gives every attempt the same weight, so ``--jobs N`` submissions share the
cores fairly whatever each starts (60 busy loops of one submission cost its classmate at
most its fair share), and the pids controller caps its processes and threads.

One cgroup per attempt, made under the grader's own cgroup of each controller (v1: the
``memory``, ``cpu`` and ``pids`` hierarchies; v2: the unified one where its controllers
are delegated). The sandbox stage writes itself into it (``cgroup.procs``) before it
starts the child, so every process of the run is inside from its start. Where cgroups
cannot be had (not root, a container without delegation), :func:`create` returns the
reason and the run goes on with the supervisor's own measures; the grader notes it in
each submission's ``isolation`` record. Linux only; standard library only.
"""

from __future__ import annotations

import os
import signal
import time

__all__ = ["Cgroup", "create", "PIDS_MAX"]

#: Processes and threads one attempt may have (TensorFlow starts a few dozen threads).
PIDS_MAX = 1024
_V1 = "/sys/fs/cgroup"


def _own_paths() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out = {}
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(","):
                out[controller] = path
    return out


def own_memory_limit() -> int | None:
    """The memory limit of the cgroup this process runs in, in bytes (a container's, a
    service's), or None where there is none or it cannot be read (not Linux)."""
    try:
        own = _own_paths()
    except OSError:
        return None
    if "memory" in own:
        text = _read(
            os.path.join(_V1, "memory", own["memory"].lstrip("/"), "memory.limit_in_bytes")
        )
    elif "" in own:
        text = _read(os.path.join(_V1, own[""].lstrip("/"), "memory.max"))
    else:
        return None
    text = text.strip()
    if not text.isdigit() or int(text) >= 2**60:  # "max", or v1's "no limit" (near 2**63)
        return None
    return int(text)


def _write(path: str, value) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(str(value))


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError:
        return ""


#: A group whose peak usage came this close to its limit reached it (the kernel's own
#: counters are not kept everywhere: ``memory.failcnt`` stays 0 on some).
_NEAR_LIMIT = 2**20


class Cgroup:
    """The cgroup folders of one attempt (one per v1 controller, or one v2 folder)."""

    def __init__(self, folders: dict[str, str], version: int, memory_bytes: int):
        self.folders = folders
        self.version = version
        self.memory_bytes = memory_bytes

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes itself into to join."""
        return [os.path.join(folder, "cgroup.procs") for folder in self.folders.values()]

    def describe(self) -> str:
        what = (
            f"memory {self.memory_bytes // 2**20} MB counting page cache, shmem, memfd and tmpfs; "
            f"equal CPU weight per submission; at most {PIDS_MAX} processes and threads"
        )
        return f"kernel limits: cgroup v{self.version} ({what})"

    def usage(self) -> int:
        """Bytes the memory controller charges to the group now (0 when unknown)."""
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        text = _read(os.path.join(self.folders.get("memory", ""), name)).strip()
        return int(text) if text.isdigit() else 0

    def oom_cause(self) -> str:
        """Why the kernel killed a process of the group for memory, if it did: ``"limit"``
        (the group reached its own limit), ``"outside"`` (an OOM kill while the group
        stayed under its limit: the machine, or a parent group, ran out of memory,
        whatever the submission used), or ``""`` (no OOM kill).

        The group's ``oom_kill`` counts its processes killed by any OOM killer; v2's
        ``oom`` counts the times its own limit was reached, v1's ``memory.failcnt`` (and
        ``memory.memsw.failcnt``) the times its usage hit the limit. Some v1 kernels keep
        no such count: a peak usage (``memory.max_usage_in_bytes``) within
        :data:`_NEAR_LIMIT` of the limit counts as reached too (not on v2, where the page
        cache alone brings ``memory.peak`` to the limit and ``oom`` is kept). A kill is the student's
        wherever their limit may have caused it (on an older kernel without ``oom_kill``,
        wherever the limit was reached)."""
        folder = self.folders.get("memory", "")
        text = _read(
            os.path.join(folder, "memory.oom_control" if self.version == 1 else "memory.events")
        )
        counts = {}
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                counts[key] = int(value)
        if self.version == 1:  # the memory limit, or memory and swap's (set alike)
            peak = _read(os.path.join(folder, "memory.max_usage_in_bytes")).strip()
            reached = peak.isdigit() and int(peak) >= self.memory_bytes - _NEAR_LIMIT
            fails = [
                _read(os.path.join(folder, name)).strip()
                for name in ("memory.failcnt", "memory.memsw.failcnt")
            ]
            reached = reached or any(f.isdigit() and int(f) > 0 for f in fails)
            if "oom_kill" not in counts:
                return "limit" if reached else ""
        else:  # v2 counts its own limit's OOMs ("oom") apart from any kill ("oom_kill")
            reached = counts.get("oom", 0) > 0
        if counts.get("oom_kill", 0) == 0:
            return ""
        return "limit" if reached else "outside"

    def pids(self) -> set[int]:
        out = set()
        for path in self.procs_files:
            for line in _read(path).split():
                if line.isdigit():
                    out.add(int(line))
        return out

    def destroy(self) -> None:
        """Kill whatever is left in the group and remove its folders."""
        for _ in range(50):
            left = self.pids()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)
        for folder in self.folders.values():
            for _ in range(50):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def create(name: str, memory_mb: float) -> tuple[Cgroup | None, str]:
    """A new cgroup ``name`` under this process's own, with the attempt's limits.

    Returns:
        ``(Cgroup, "")``, or ``(None, reason)`` when cgroups cannot be had here (the
        reason is the note the gradebook records).
    """
    memory_bytes = int(memory_mb * 2**20)
    made: dict[str, str] = {}
    try:
        own = _own_paths()
        if os.path.isdir(os.path.join(_V1, "memory")) and "memory" in own:
            for controller in ("memory", "cpu", "pids"):
                if controller not in own or not os.path.isdir(os.path.join(_V1, controller)):
                    continue
                folder = os.path.join(_V1, controller, own[controller].lstrip("/"), name)
                os.mkdir(folder, 0o755)
                made[controller] = folder
            group = Cgroup(made, 1, memory_bytes)
            _write(os.path.join(made["memory"], "memory.limit_in_bytes"), memory_bytes)
            try:  # no swap past the limit either, where swap accounting is on
                _write(os.path.join(made["memory"], "memory.memsw.limit_in_bytes"), memory_bytes)
            except OSError:
                pass
            if "cpu" in made:
                _write(os.path.join(made["cpu"], "cpu.shares"), 1024)
            if "pids" in made:
                _write(os.path.join(made["pids"], "pids.max"), PIDS_MAX)
            return group, ""
        if os.path.isfile(os.path.join(_V1, "cgroup.controllers")) and "" in own:
            parent = os.path.join(_V1, own[""].lstrip("/"))
            enabled = _read(os.path.join(parent, "cgroup.subtree_control")).split()
            if "memory" not in enabled:
                return None, (
                    "no kernel limits: the cgroup v2 memory controller is not delegated to the "
                    "grader's cgroup; the grader's own memory and time measures apply"
                )
            folder = os.path.join(parent, name)
            os.mkdir(folder, 0o755)
            made["memory"] = folder
            group = Cgroup({"memory": folder}, 2, memory_bytes)
            _write(os.path.join(folder, "memory.max"), memory_bytes)
            for key, value in (("memory.swap.max", 0), ("cpu.weight", 100), ("pids.max", PIDS_MAX)):
                try:
                    _write(os.path.join(folder, key), value)
                except OSError:
                    pass
            return group, ""
        return (
            None,
            "no kernel limits: no cgroup hierarchy found; the grader's own memory and time measures apply",
        )
    except (OSError, KeyError, ValueError) as exc:
        for folder in made.values():
            try:
                os.rmdir(folder)
            except OSError:
                pass
        return None, (
            f"no kernel limits: cgroups unavailable ({type(exc).__name__}: {exc}); the grader's own "
            f"memory and time measures apply"
        )
