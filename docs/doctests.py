"""Run the ``>>>`` examples of the documented modules' docstrings, as the site shows them.

    python docs/doctests.py            # from the repository root, in the project's venv

The examples are written for a reader of the API reference, who has the package's names
at hand: each docstring runs with ``np``, ``keras`` (the active Keras, Keras 3 by
default) and every name of ``lablib.layers`` defined, with ``ELLIPSIS`` (``0.999...``).

``KNOWN_FAILURES`` lists the docstrings whose examples do not pass today, with the
reason; they are run and reported, and the check fails when one of them starts to
pass (take it off the list then) or when any other example fails.
"""

from __future__ import annotations

import doctest
import importlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

#: The modules of the API reference that hold ``>>>`` examples (the others have none).
MODULES = [
    "lablib.layers.attention",
    "lablib.layers.positional",
    "lablib.layers.transformer",
    "lablib.layers.graph_conv",
    "lablib.layers.graph_attention",
    "lablib.layers.readout",
    "lablib.layers.dropout",
    "lablib.graphs",
    "lablib.training",
    "lablib.data.reuters",
    "lablib.data.graph_dataset",
    "lablib.data.cora",
    "lablib.data.tu",
    "lablib.data.sources",
]

#: Docstring -> why its example fails today (the module is not changed from here).
KNOWN_FAILURES: dict = {}  # name -> why it fails; none today


def namespace() -> dict:
    import numpy as np

    import lablib.layers
    from lablib.backend import get_keras

    keras = get_keras()
    names = {name: getattr(lablib.layers, name) for name in lablib.layers.__all__}
    return {"np": np, "keras": keras, **names}


def main() -> int:
    extras = namespace()
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    passed, failed, known = [], [], []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for test in finder.find(module, module_name, globs={**vars(module), **extras}):
            if not test.examples:
                continue
            result = runner.run(
                test, out=(lambda text: None) if test.name in KNOWN_FAILURES else sys.stdout.write
            )
            if test.name in KNOWN_FAILURES:
                (known if result.failed else failed).append(test.name)
                if not result.failed:
                    print(f"{test.name}: passes now; take it off KNOWN_FAILURES")
            elif result.failed:
                failed.append(test.name)
            else:
                passed.append(test.name)
    for name in known:
        print(f"known failure: {name}: {KNOWN_FAILURES[name]}")
    print(
        f"docstring examples: {len(passed)} passed, {len(failed)} failed, "
        f"{len(known)} known failures"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
