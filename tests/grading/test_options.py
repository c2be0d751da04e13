"""Grading options declared once (GradeOptions) and a lab resolved once (find_lab)."""

import pytest

from grading_paths import FIXTURE_LAB
from lablib.cli import build_parser
from lablib.grading.options import GradeOptions
from lablib.labs import Lab, UnknownLab, find_lab


def test_options_are_checked_and_changed_by_name():
    options = GradeOptions(hidden_dirs=["hidden"], jobs=2)
    assert options.hidden_dirs == ("hidden",) and options.workers == 2
    assert GradeOptions.of(options, force=True).force and not options.force
    with pytest.raises(TypeError, match=r"Unknown grading option\(s\) \['memory'\]; the options"):
        GradeOptions.of(options, memory=10)
    with pytest.raises(ValueError, match=r"GradeOptions\(timeout=0\): expected a positive number"):
        GradeOptions(timeout=0)
    with pytest.raises(ValueError, match="jobs=-1"):
        GradeOptions(jobs=-1)
    with pytest.raises(TypeError, match="takes a list of folders"):
        GradeOptions(hidden_dirs="hidden")
    with pytest.raises(TypeError):
        GradeOptions(("hidden",))  # by keyword only
    limits = GradeOptions(timeout=5, memory_mb=100, isolate=False).limits
    assert (limits.timeout, limits.memory_mb, limits.isolate) == (5, 100, False)


def test_the_command_line_takes_its_defaults_and_help_from_the_options():
    grade = build_parser()._subparsers._group_actions[0].choices["grade"]
    actions = {a.dest: a for a in grade._actions}
    assert actions["timeout"].default == GradeOptions.default("timeout")
    assert actions["memory"].default == GradeOptions.default("memory_mb")
    assert actions["timeout"].help == GradeOptions.help("timeout")
    assert actions["fresh"].help == GradeOptions.help("fresh")


def test_a_lab_is_resolved_once_into_a_lab():
    lab1 = find_lab("lab1")
    assert lab1.name == "lab1_attention" and find_lab(lab1) is lab1
    own = find_lab(FIXTURE_LAB)
    assert isinstance(own, Lab) and own.spec and own.name == "lab0_fixture" and own.short == "lab0"
    with pytest.raises(UnknownLab, match="Unknown lab 'lab99'"):
        find_lab("lab99")
    with pytest.raises(FileNotFoundError, match="does not exist; pass a lab name"):
        find_lab("nowhere/lab7.py")


def test_jobs_zero_and_numpy_numbers_are_taken_as_before():
    """0 jobs meant one per CPU core, and NumPy numbers were accepted, before GradeOptions."""
    import numpy as np

    assert GradeOptions(jobs=0).jobs is None
    assert GradeOptions(jobs=np.int64(2)).jobs == 2
    options = GradeOptions(timeout=np.int64(30), memory_mb=np.float32(512))
    assert options.timeout == 30.0 and options.memory_mb == 512.0
    for bad in (dict(jobs=-1), dict(jobs=1.5), dict(timeout=0), dict(timeout=True)):
        with pytest.raises(ValueError, match="GradeOptions"):
            GradeOptions(**bad)
