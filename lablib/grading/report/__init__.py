"""Reports: one writer per output format, all behind one small interface.

Each writer (:class:`~.base.Writer`: a ``name`` and ``write(out_dir, book)``) turns the
same :class:`~lablib.grading.gradebook.Gradebook` into its files; a new format is one
module with one class. Writers only write: the stored gradebook is read back through
:class:`~lablib.grading.gradebook.GradebookFolder`, never through a report.

=========================  ======================================================
writer                     writes
=========================  ======================================================
:class:`CsvGradebook`      ``grades.csv``
:class:`JsonGradebook`     ``grades.json``
:class:`MarkdownFeedback`  ``feedback/<stem>.md`` (what each student reads)
:class:`HtmlFeedback`      ``feedback/<stem>.html``
:class:`InstructorViews`   ``instructor/<stem>.md`` (submissions that are not ok)
:class:`ClassSummary`      ``summary.json``, ``summary.html``
:class:`GradescopeResults` ``results.json`` (Gradescope's run adds it)
=========================  ======================================================

What students may see of a result, and every status's wording, live in :mod:`.text`.

Example::

    from lablib.grading.report import write_reports
    write_reports("out", lab, results)          # the DEFAULT_WRITERS
"""

from __future__ import annotations

import pathlib

from lablib.grading.gradebook import Gradebook
from lablib.grading.report.base import Writer
from lablib.grading.report.feedback_html import HtmlFeedback
from lablib.grading.report.feedback_markdown import MarkdownFeedback
from lablib.grading.report.gradebook_csv import CsvGradebook
from lablib.grading.report.gradebook_json import JsonGradebook
from lablib.grading.report.gradescope import GradescopeResults
from lablib.grading.report.instructor import InstructorViews
from lablib.grading.report.summary import ClassSummary

__all__ = [
    "Writer",
    "DEFAULT_WRITERS",
    "write_reports",
    "write_book",
    "CsvGradebook",
    "JsonGradebook",
    "MarkdownFeedback",
    "HtmlFeedback",
    "InstructorViews",
    "ClassSummary",
    "GradescopeResults",
]

#: What ``lablib grade`` writes.
DEFAULT_WRITERS: tuple[Writer, ...] = (
    JsonGradebook(),  # first: what later commands read (export, report, review) is never behind
    CsvGradebook(),
    MarkdownFeedback(),
    HtmlFeedback(),
    InstructorViews(),
    ClassSummary(),
)


def write_book(out_dir, book: Gradebook, writers=None) -> dict[str, list[pathlib.Path]]:
    """Write every report of ``book`` under ``out_dir`` (created) with ``writers``
    (default :data:`DEFAULT_WRITERS`); returns writer name -> the paths it wrote."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return {
        writer.name: writer.write(out, book)
        for writer in (DEFAULT_WRITERS if writers is None else writers)
    }


def write_reports(out_dir, lab, results, writers=None, **book) -> dict[str, list[pathlib.Path]]:
    """Write every report of ``results`` under ``out_dir``: the
    :class:`~lablib.grading.gradebook.Gradebook` of ``Gradebook.of(lab, results, **book)``,
    written by :func:`write_book`.

    Args:
        out_dir: the output folder (created).
        lab: the :class:`~lablib.grading.spec.LabSpec` graded.
        results: the :class:`~lablib.grading.results.SubmissionResult` of each submission.
        writers: the :class:`Writer` objects to run (default :data:`DEFAULT_WRITERS`).
        **book: keyword-only, those of :meth:`~lablib.grading.gradebook.Gradebook.of`:

            * ``roster``: a :class:`~lablib.grading.gradebook.roster.Roster`: the gradebook
              then names each row's student and lists what matched nothing.
            * ``skipped``: ``(path, reason)`` of the paths given that were not graded (the
              class summary lists them).
            * ``person``: the people's grades of the written answers (submission ->
              question id -> :class:`~lablib.grading.results.PersonScore`), from
              ``lablib review``.
            * ``reviews_through``: the review log's last change included in ``person``,
              and ``reviews_log``: which log and which change that is.
            * ``late_policy``: a :class:`~lablib.grading.gradebook.late.LatePolicy`: each
              row's penalty is taken from its total (submission times from the roster or
              the files).
            * ``similarity``: the similarity hints (``{"pairs", "identical"}``) for the
              summary.
            * ``kept``: what the output folder keeps for later regrades (the layout, the
              roster's copy), written in ``grades.json`` with the rows; default: what it
              keeps already.

    Returns:
        Writer name -> the paths it wrote.
    """
    return write_book(out_dir, Gradebook.of(lab, results, **book), writers)
