"""Lazy exports for a package's ``__init__``: names resolve on first access (PEP 562);
and a third-party module imported when first used (:func:`defer_import`).

``lablib.layers`` and ``lablib.data`` import their modules on first use, so importing
the package never imports TensorFlow (a notebook must choose the Keras mode first).
"""

import importlib
import importlib.util
import sys
import types


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


def defer_import(name: str, functions: tuple = ()) -> bool:
    """Puts a stand-in for the module ``name`` in ``sys.modules`` that imports the real
    module the first time it is used: a call of one of ``functions`` (which ``from name
    import f`` takes without using the module) or any other attribute asked of it. For a
    third-party module that is slow to import and that another module imports eagerly but
    seldom uses. Returns False, doing nothing, when ``name`` is imported already or is not
    installed."""
    if name in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    stand_in = types.ModuleType(name, f"Stands in for {name} until it is used.")
    stand_in.__spec__ = spec
    if spec.submodule_search_locations is not None:  # a package: its submodules import
        stand_in.__path__ = list(spec.submodule_search_locations)

    def real():
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]
        return importlib.import_module(name)

    def forwarding(function: str):
        def call(*args, **kwargs):
            return getattr(real(), function)(*args, **kwargs)

        call.__name__ = call.__qualname__ = function
        return call

    for function in functions:
        setattr(stand_in, function, forwarding(function))

    def __getattr__(attribute: str):
        if attribute.startswith("__"):  # what the import system and tools probe for
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        return getattr(real(), attribute)

    stand_in.__getattr__ = __getattr__
    sys.modules[name] = stand_in
    return True
