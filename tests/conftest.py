"""Shared test set-up.

Keras mode: one Python process runs either Keras 3 or tf_keras. Tests marked
``legacy`` need ``TF_USE_LEGACY_KERAS=1`` from the start; a plain ``pytest`` run
deselects them and ``tests/layers/test_legacy_mode.py`` runs them in a child process, so the
one README command covers both modes.

Devices: tests marked ``distributed`` need several logical CPU devices, which
TensorFlow can only be given before it initialises its devices. With
``LABLIB_TEST_LOGICAL_CPUS=N`` (N >= 2) this file splits the CPU into N logical devices
before any test runs and keeps only those tests; otherwise they are deselected and
``tests/layers/test_distribute.py`` runs them in a child process.
"""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


def _logical_cpus() -> int:
    value = os.environ.get("LABLIB_TEST_LOGICAL_CPUS", "").strip()
    return int(value) if value.isdigit() else 0


if _logical_cpus() >= 2:
    import tensorflow as tf

    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration()] * _logical_cpus(),
    )


@pytest.fixture(scope="session", autouse=True)
def full_float32_on_gpus():
    """The layer tests compare with NumPy references at float32 tolerances (down to 1e-5
    relative). On Ampere and later NVIDIA GPUs TensorFlow would run float32 matrix
    products in TensorFloat-32 by default (relative errors near 1e-3), so on a GPU these
    tests turn TF32 off: the same tolerances then hold on a CPU and on any GPU, and no
    test needs a looser GPU tolerance. (TF32 is a speed setting of the card, not part of
    what the layers compute.) A CPU ignores the switch. The probes' own switch
    (``lablib.backend.full_float32``) is used, which never imports TensorFlow: the test modules have chosen their Keras mode and
    imported it at collection."""
    from lablib.backend import full_float32

    with full_float32():
        yield


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "distributed: needs LABLIB_TEST_LOGICAL_CPUS>=2 (run by tests/layers/test_distribute.py "
        "in its own process)",
    )


def _legacy() -> bool:
    return os.environ.get("TF_USE_LEGACY_KERAS", "").strip().lower() in {"1", "true", "yes", "on"}


def pytest_collection_modifyitems(config, items):
    legacy = _legacy()
    distributed = _logical_cpus() >= 2
    keep, drop = [], []
    for item in items:
        wanted = (item.get_closest_marker("legacy") is not None) == legacy and (
            item.get_closest_marker("distributed") is not None
        ) == distributed
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    """The real datasets beside the project (../shared/data), or LABLIB_DATA_DIR, as an
    absolute path: kernels and child processes given it work in other folders."""
    path = pathlib.Path(os.path.abspath(os.environ.get("LABLIB_DATA_DIR", SHARED_DATA)))
    if not path.is_dir():
        pytest.fail(
            f"Test data folder {path} not found: put the course's shared/ folder beside "
            f"the project or set LABLIB_DATA_DIR to a folder holding reuters/, molecules/, cora/."
        )
    return path
