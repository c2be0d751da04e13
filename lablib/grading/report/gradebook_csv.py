"""``grades.csv``: one row per submission: status, total, the points of each piece."""

from __future__ import annotations

import csv
import pathlib

from lablib.grading.report.base import Gradebook
from lablib.grading.report.text import num, status_text

__all__ = ["CsvGradebook"]


class CsvGradebook:
    """Writes ``grades.csv`` (columns: submission, status, score, max_score, each piece)."""

    name = "grades.csv"

    def write(self, out_dir: pathlib.Path, book: Gradebook) -> list[pathlib.Path]:
        path = pathlib.Path(out_dir) / "grades.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["submission", "status", "score", "max_score", *book.pieces])
            for r in book.results:
                scores = [num(r.pieces[p].score if p in r.pieces else 0.0) for p in book.pieces]
                writer.writerow([r.submission, status_text(r.status), num(r.score), num(r.max_score), *scores])
        return [path]
