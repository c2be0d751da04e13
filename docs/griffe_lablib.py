"""A griffe extension for the API reference: lablib's docstrings read as the site shows them.

* cross references written in Sphinx's roles (``:func:`causal_mask```, ``:class:``,
  ``:mod:`` ...) become inline code, so they read as names instead of raw markup;
* ``>>>`` examples written flush with the docstring's text (after ``Example:``, not in an
  indented section) are fenced as a Python console session; Markdown would read their
  ``>>>`` as quotes.

(The layers' docstrings were templates filled at import time until the layers wrote
their arguments out; the extension no longer imports anything.) Nothing here changes the
package; a docstring without either is left as griffe read it.
"""

from __future__ import annotations

import re

import griffe

#: A Sphinx role: ``:func:`name```, ``:class:`~lablib.layers.GraphConv```, ``:data:`X```.
_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):`~?([^`]+)`")


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
    """Sphinx roles as code; fence flush examples."""

    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        docstring = obj.docstring
        if docstring is None:
            return
        text = _fence_examples(_ROLE.sub(r"``\1``", docstring.value))
        if text != docstring.value:
            obj.docstring = griffe.Docstring(
                text,
                lineno=docstring.lineno,
                endlineno=docstring.endlineno,
                parent=obj,
                parser=docstring.parser,
                parser_options=docstring.parser_options,
            )
