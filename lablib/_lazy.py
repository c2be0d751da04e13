"""Lazy exports for a package's ``__init__``: names resolve on first access (PEP 562).

``lablib.layers`` and ``lablib.data`` import their modules on first use, so importing
the package never imports TensorFlow (a notebook must choose the Keras mode first).
"""

import importlib


def lazy_exports(package: str, modules: dict, namespace: dict):
    """Returns ``(__getattr__, __dir__, __all__)`` for a package whose ``modules`` maps each
    submodule to the names it exports (``{"attention": ("causal_mask", ...)}``).

    A resolved name is cached in ``namespace`` (the package's ``globals()``), so the
    import happens once.
    """
    exports = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__, sorted(exports)
