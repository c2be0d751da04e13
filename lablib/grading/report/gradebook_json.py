"""``grades.json``: everything about every submission, for scripts.

Its layout, and the one place that reads it back, is the stored gradebook's
(:mod:`lablib.grading.gradebook.store`): this writer only hands the gradebook to it.
"""

from __future__ import annotations

import pathlib

from lablib.grading.gradebook import Gradebook, GradebookFolder

__all__ = ["JsonGradebook"]


class JsonGradebook:
    """Writes ``grades.json``: the lab's pieces and every submission in full."""

    name = "grades.json"

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]:
        return [GradebookFolder(out_dir).write(book)]
