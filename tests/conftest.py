"""Shared test set-up.

Keras mode: one Python process runs either Keras 3 or tf_keras. Tests marked
``legacy`` need ``TF_USE_LEGACY_KERAS=1`` from the start; a plain ``pytest`` run
deselects them and ``tests/test_legacy_mode.py`` runs them in a child process, so the
one README command covers both modes.
"""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


def _legacy() -> bool:
    return os.environ.get("TF_USE_LEGACY_KERAS", "").strip().lower() in {"1", "true", "yes", "on"}


def pytest_collection_modifyitems(config, items):
    legacy = _legacy()
    keep, drop = [], []
    for item in items:
        (keep if (item.get_closest_marker("legacy") is not None) == legacy else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    """The real datasets beside the project (../shared/data), or LABLIB_DATA_DIR."""
    path = pathlib.Path(os.environ.get("LABLIB_DATA_DIR", SHARED_DATA))
    if not path.is_dir():
        pytest.fail(
            f"Test data folder {path} not found: put the course's shared/ folder beside "
            f"the project or set LABLIB_DATA_DIR to a folder holding reuters/, molecules/, cora/."
        )
    return path


@pytest.fixture
def mixed_float16():
    """Run a test under the ``mixed_float16`` policy of the active Keras, then restore float32."""
    from lablib.backend import get_keras

    keras = get_keras()
    keras.mixed_precision.set_global_policy("mixed_float16")
    yield
    keras.mixed_precision.set_global_policy("float32")
