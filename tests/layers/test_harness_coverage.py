"""Every layer lablib exports goes through the harness (tests/layers/harness.py)."""

import importlib
import inspect

import lablib.layers
from lablib.backend import get_keras

keras = get_keras()

#: The test modules that declare harness CASES.
MODULES = (
    "test_graph_conv",
    "test_graph_attention",
    "test_readout",
    "test_positional",
    "test_transformer",
    "test_sparse_features",
)


def test_every_exported_layer_has_harness_cases():
    tested = {
        case.layer_class for module in MODULES for case in importlib.import_module(module).CASES
    }
    exported = {getattr(lablib.layers, name) for name in lablib.layers.__all__}
    layers = {
        value
        for value in exported
        if inspect.isclass(value) and issubclass(value, keras.layers.Layer)
    }
    assert layers, "no layer class found in lablib.layers"
    missing = sorted(cls.__name__ for cls in layers - tested)
    assert not missing, f"layers without harness cases: {missing}"
