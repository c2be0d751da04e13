"""A griffe extension for the API reference: lablib's docstrings as Python shows them.

Two things in lablib's docstrings read differently in the source than at run time, and
the site shows what ``help()`` shows:

* a few layer docstrings are templates: ``{weight_options}`` (filled by
  ``lablib.layers._common.register``) and ``{common}`` (filled at the end of
  ``lablib/layers/transformer.py``). For those objects the docstring is taken from the
  imported object (``__doc__``), which imports TensorFlow once, at build time;
* cross references written in Sphinx's roles (``:func:`causal_mask```, ``:class:``,
  ``:mod:`` ...) become inline code, so they read as names instead of raw markup;
* ``>>>`` examples written flush with the docstring's text (after ``Example:``, not in an
  indented section) are fenced as a Python console session; Markdown would read their
  ``>>>`` as quotes.

Nothing here changes the package; a docstring without either is left as griffe read it.
"""

from __future__ import annotations

import importlib
import inspect
import re

import griffe

#: A template placeholder left in a docstring's source: ``{weight_options}``, ``{common}``.
_TEMPLATE = re.compile(r"^\{[a-z_]+\}$", re.M)
#: A Sphinx role: ``:func:`name```, ``:class:`~lablib.layers.GraphConv```, ``:data:`X```.
_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):`~?([^`]+)`")

logger = griffe.get_logger("griffe_lablib")


def _runtime_docstring(obj: griffe.Object) -> str | None:
    """The docstring of the imported object behind ``obj`` (None when it cannot be had)."""
    module_path = obj.module.path
    try:
        value = importlib.import_module(module_path)
        for part in obj.path[len(module_path) + 1:].split("."):
            value = getattr(value, part)
    except Exception as error:  # the build goes on; the warning fails a strict build
        logger.warning("could not import %s to fill its docstring template: %s", obj.path, error)
        return None
    doc = getattr(value, "__doc__", None)
    return inspect.cleandoc(doc) if doc else None


def _fence_examples(text: str) -> str:
    """Fence each run of ``>>>`` lines at the docstring's left margin, with its output."""
    out, in_block = [], False
    for line in text.split("\n"):
        if not in_block and line.startswith(">>>"):
            out.append("```pycon")
            in_block = True
        elif in_block and not line.strip():
            out.append("```")
            in_block = False
        out.append(line)
    if in_block:
        out.append("```")
    return "\n".join(out)


class LablibDocstrings(griffe.Extension):
    """Fill template docstrings from the imported object; Sphinx roles as code; fence examples."""

    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        docstring = obj.docstring
        if docstring is None:
            return
        text = docstring.value
        if _TEMPLATE.search(text):
            filled = _runtime_docstring(obj)
            if filled is not None:
                text = filled
        text = _fence_examples(_ROLE.sub(r"``\1``", text))
        if text != docstring.value:
            obj.docstring = griffe.Docstring(
                text, lineno=docstring.lineno, endlineno=docstring.endlineno,
                parent=obj, parser=docstring.parser, parser_options=docstring.parser_options)
