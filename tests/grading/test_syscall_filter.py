"""The sandbox's seccomp program (``isolation.syscall_filter``) read by a small classic-BPF
interpreter, on every machine it is written for: new user namespaces and the kernel's
keyrings refused, clone3 sent back to clone, everything else allowed. The program's jumps
are counted by hand; this is what checks them, on any machine (the sandbox itself needs
root: tests/grading/test_execute.py runs it)."""

from __future__ import annotations

import errno

import pytest

from lablib.grading.run.isolation import _CLONE_NEWUSER, _RET_ALLOW, _RET_ERRNO, _SYSCALLS
from lablib.grading.run.isolation import syscall_filter

EPERM, ENOSYS = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS


def run_bpf(program, arch: int, nr: int, arg0: int = 0) -> int:
    """The verdict of ``program`` for one system call: the classic BPF subset it uses
    (load word at an offset, jump if equal, if greater or equal, if bits set, return)."""
    data = {0: nr, 4: arch, 16: arg0 & 0xFFFFFFFF}
    acc, pc = 0, 0
    for _ in range(len(program) + 1):
        code, jt, jf, k = program[pc]
        if code == 0x20:
            acc, pc = data[k], pc + 1
        elif code == 0x15:
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x35:
            pc += 1 + (jt if acc >= k else jf)
        elif code == 0x45:
            pc += 1 + (jt if acc & k else jf)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"instruction {pc}: code {code:#x} not interpreted")
    raise AssertionError("the program ran past its end")


@pytest.mark.parametrize("machine", sorted(_SYSCALLS))
def test_the_filter_refuses_user_namespaces_keyrings_and_queues_only(machine):
    program = syscall_filter(machine)
    arch, unshare, clone, clone3, keyrings = _SYSCALLS[machine]
    assert len(keyrings) == 4
    jumps = [
        (pc, jt, jf) for pc, (code, jt, jf, _) in enumerate(program) if code in (0x15, 0x35, 0x45)
    ]
    assert all(pc + 1 + max(jt, jf) < len(program) for pc, jt, jf in jumps)
    for nr in keyrings:  # add_key, request_key, keyctl, mq_open: whatever their arguments
        assert run_bpf(program, arch, nr) == EPERM
        assert run_bpf(program, arch, nr, _CLONE_NEWUSER) == EPERM
    assert run_bpf(program, arch, clone3) == ENOSYS
    for nr in (unshare, clone):
        assert run_bpf(program, arch, nr, _CLONE_NEWUSER | 0x11) == EPERM
        assert run_bpf(program, arch, nr, 0x11) == _RET_ALLOW  # a thread, a fork, a mount ns
    for nr in (0, 1, 2, 3, 39, 60, 231, 247, 251):  # read, write, open, close, getpid, exit...
        assert run_bpf(program, arch, nr, _CLONE_NEWUSER) == _RET_ALLOW
    for nr in (288, 310, 3, 4, 120):  # i386 (int 0x80 from a 64-bit process): keyctl, unshare...
        assert run_bpf(program, 0x40000003, nr) == ENOSYS
    for nr in (*keyrings, unshare, clone, 0, 1):  # x86_64's x32 ABI: same arch, numbers + 2**30
        assert run_bpf(program, arch, 0x40000000 | nr, 0) == ENOSYS


def test_an_unknown_machine_has_no_filter():
    assert syscall_filter("riscv64") is None
