"""People's grades of written answers, kept in SQLite beside the gradebook.

One database per grading output (``<out>/reviews.sqlite``): the rubric of each written
question, the items applied to each answer, the grader's adjustment and comment, and a
log of every change (who, when, what). Every change is its own transaction, committed
before the page hears back, so grading stops and resumes at any point, and two graders
(two pages, or two ``lablib review`` processes on one folder) work at once: SQLite's WAL
journal lets readers go on while one writer commits, and a writer waits for another
(``busy_timeout``) instead of failing.

A score is computed when read, never stored: the points of the applied items plus the
adjustment, kept within ``[0, points]``; editing an item's points re-scores every answer
it is applied to. An answer is graded once an item is applied or an adjustment given
(the rubric's "No answer." item gives 0 and grades it). Each grade remembers the digest
of the text it graded: when a regrade brings a changed answer, the grade is kept and
flagged ``stale`` until a person looks again. The review page sends the digest of the
text it showed, so a grade given to a text that a regrade replaced meanwhile is stored
against the text the grader saw, and is stale at once; an answer the gradebook has no
record of (its notebook could not be read) has the digest :data:`MISSING_DIGEST`, so a
grade given then is stale once the notebook is read.

The text each grade was given for is kept too (compressed, once per distinct text,
keyed by its digest): when a regrade changes an answer, the page shows what changed
since it was graded (:func:`word_diff`: lines, then sentences, words and single
characters within what changed, in at most :data:`DIFF_WORK` steps). A grader may flag
an answer for a second look (:meth:`ReviewStore.set_flag`); the flag is logged and
travels with the page's refresh like a grade, without touching the grade. Revealing an
answer's student to the instructor is a logged event (:meth:`ReviewStore.log_reveal`).

Every grade (one answer's) and every rubric item carries a version, the id of the log
entry of its last change. A change may name the version it was based on
(``versions=`` / ``version=``): when the row changed since, the change is refused with
:class:`ReviewConflict` inside the same transaction, so two graders never undo each other
unseen; the page reloads that row and says so.

Example::

    store = ReviewStore(out / "reviews.sqlite", lab)
    item = store.rubric("metric")[0]
    store.set_items("alice", "metric", [item.id], digest=answer.digest, grader="ta1")
    store.person_scores(["alice"], {"alice": {"metric": answer.digest}})
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import difflib
import hashlib
import json
import pathlib
import re
import secrets
import sqlite3
import zlib

from lablib.grading.results import PersonScore

__all__ = [
    "DB_NAME",
    "MISSING_DIGEST",
    "ReviewConflict",
    "ReviewError",
    "ReviewStore",
    "RubricRow",
    "TextDiff",
    "changes_since",
    "check_log_kept",
    "compare_texts",
    "text_digest",
    "word_diff",
]

#: The database's file name inside a grading output folder.
DB_NAME = "reviews.sqlite"
_SCHEMA_VERSION = "3"
#: The digest of an answer the gradebook holds no record of (the notebook could not be
#: read, or an older lablib graded it): a grade given to it is stale once there is a text.
MISSING_DIGEST = "missing"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rubric (
    id INTEGER PRIMARY KEY, question TEXT NOT NULL, points REAL NOT NULL, comment TEXT NOT NULL,
    position INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS grade (
    submission TEXT NOT NULL, question TEXT NOT NULL, adjustment REAL NOT NULL DEFAULT 0,
    comment TEXT NOT NULL DEFAULT '', digest TEXT NOT NULL DEFAULT '', grader TEXT NOT NULL DEFAULT '',
    updated TEXT NOT NULL, version INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (submission, question));
CREATE TABLE IF NOT EXISTS applied (
    submission TEXT NOT NULL, question TEXT NOT NULL, item INTEGER NOT NULL REFERENCES rubric(id),
    PRIMARY KEY (submission, question, item));
CREATE TABLE IF NOT EXISTS graded_text (digest TEXT PRIMARY KEY, text BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS flag (
    submission TEXT NOT NULL, question TEXT NOT NULL, grader TEXT NOT NULL, at TEXT NOT NULL,
    version INTEGER NOT NULL, PRIMARY KEY (submission, question));
CREATE TABLE IF NOT EXISTS flag_change (question TEXT NOT NULL, submission TEXT NOT NULL, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS event (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, grader TEXT NOT NULL, submission TEXT, question TEXT,
    what TEXT NOT NULL, detail TEXT NOT NULL);
"""


class ReviewError(ValueError):
    """A change the store refuses (unknown question or item, a value out of range); the
    message says what was given and what is expected."""


class ReviewConflict(ReviewError):
    """A change based on an old version of a grade or rubric item (another grader changed
    it since): nothing was changed.

    Attributes:
        question: the question.
        submissions: the answers whose grade changed since (empty for a rubric item).
        item: the rubric item that changed since, or None.
    """

    def __init__(self, message: str, question: str, submissions=(), item=None):
        super().__init__(message)
        self.question = question
        self.submissions = list(submissions)
        self.item = item


@dataclasses.dataclass(frozen=True)
class RubricRow:
    """One rubric item as stored: its id, question, points, comment, and on how many
    answers it is applied."""

    id: int
    question: str
    points: float
    comment: str
    uses: int = 0
    version: int = 0


def text_digest(text: str) -> str:
    """The digest of an answer's text, as the gradebook computes it
    (:attr:`~lablib.grading.results.WrittenAnswer.digest`)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


#: Words, runs of spaces and single other characters: a diff keeps the text's own spacing.
_TOKENS = re.compile(r"\s+|\w+|[^\w\s]")
#: Coarser units compared first (after lines): sentences, then words or other characters
#: with the spaces after them.
_SENTENCES = re.compile(r"[^.!?]*[.!?]+\s*|[^.!?]+")
_UNITS = re.compile(r"\w+\s*|[^\w\s]\s*|\s+")
#: The most tokens of each text compared word by word (beyond, the rest is one change).
DIFF_TOKENS = 20_000
#: The most steps of comparison one diff may take (a step: one position looked at in
#: one of the texts; a million take under half a second); past it, the texts are too
#: different to compare word by word and their changed parts are shown whole. A sequence
#: matcher's cost grows with the square of a token's repeats: two texts of 10,000 random
#: commas and full stops took 50 s unbounded.
DIFF_WORK = 1_000_000
#: Unchanged text longer than this is shortened in a diff to its first and last
#: :data:`DIFF_CONTEXT` characters.
DIFF_CONTEXT = 160
#: The most characters a diff shows in all.
DIFF_CHARS = 50_000
#: What the page says when the texts are shown whole.
TOO_DIFFERENT = (
    "Too different (or too long) to compare word by word: the changed part of each text is "
    "shown whole."
)


@dataclasses.dataclass(frozen=True)
class TextDiff:
    """A diff of two texts (:func:`compare_texts`): its ``segments`` (as
    :func:`word_diff`'s), whether the changed part was compared word by word
    (``word_by_word``; False: the texts were too different or too long, and their changed
    parts are shown whole), and the steps of comparison it took (``work``)."""

    segments: list
    word_by_word: bool
    work: int


class _TooDifferent(Exception):
    """The diff's steps of comparison ran past :data:`DIFF_WORK`."""


class _Budget:
    """Steps of comparison left to one diff."""

    def __init__(self, steps: int):
        self.left = steps
        self.spent = 0

    def spend(self, steps: int) -> None:
        if steps > self.left:
            raise _TooDifferent
        self.left -= steps
        self.spent += steps


class _Matcher(difflib.SequenceMatcher):
    """A :class:`difflib.SequenceMatcher` that pays for each search from a
    :class:`_Budget` before making it: a search of ``a[alo:ahi]`` looks at each of those
    positions and at every position in ``b`` of each one's token (before ``bhi``), so it
    is charged that (an upper bound, from prefix sums) and refused past the budget."""

    def __init__(self, a: list, b: list, budget: _Budget):
        budget.spend(len(a) + len(b))  # the index of b, the prefix sums
        super().__init__(None, a, b, autojunk=False)
        self.budget = budget
        self.cost = [0]
        for token in a:
            self.cost.append(self.cost[-1] + 1 + len(self.b2j.get(token, ())))

    def find_longest_match(self, alo=0, ahi=None, blo=0, bhi=None):
        ahi = len(self.a) if ahi is None else ahi
        bhi = len(self.b) if bhi is None else bhi
        self.budget.spend(self.cost[ahi] - self.cost[alo] + 1)
        return super().find_longest_match(alo, ahi, blo, bhi)


def _split(text: str, level: int) -> list[str]:
    if level == 0:
        return text.splitlines(keepends=True)
    return (_SENTENCES, _UNITS, _TOKENS)[level - 1].findall(text)


def _compare(old: str, new: str, level: int, budget: _Budget) -> list[list]:
    """Raw segments of ``old`` against ``new``: lines first (level 0), then within changed
    lines sentences (1), within changed sentences words with their spaces (2), within
    changed words single tokens (3)."""
    a, b = _split(old, level), _split(new, level)
    raw: list[list] = []
    for op, i1, i2, j1, j2 in _Matcher(a, b, budget).get_opcodes():
        removed, added = "".join(a[i1:i2]), "".join(b[j1:j2])
        if op == "equal":
            raw.append(["=", removed])
        elif op == "replace" and level < 3:
            raw += _compare(removed, added, level + 1, budget)
        else:
            raw += [["-", removed], ["+", added]]
    return raw


def compare_texts(old: str, new: str, work: int = DIFF_WORK) -> TextDiff:
    """What changed from ``old`` (the text graded) to ``new`` (the text now), as
    :func:`word_diff` describes it, within ``work`` steps of comparison (past them, or
    past :data:`DIFF_TOKENS` changed tokens in either text, the changed parts are shown
    whole: ``word_by_word`` False)."""
    a, b = _TOKENS.findall(old or ""), _TOKENS.findall(new or "")
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    middle_a, middle_b = "".join(a[start : len(a) - end]), "".join(b[start : len(b) - end])
    whole = [["-", middle_a], ["+", middle_b]]
    budget = _Budget(work)
    compared = False
    if len(a) - end - start <= DIFF_TOKENS and len(b) - end - start <= DIFF_TOKENS:
        try:
            whole, compared = _compare(middle_a, middle_b, 0, budget), True
        except _TooDifferent:
            pass
    raw = [["=", "".join(a[:start])], *whole, ["=", "".join(a[len(a) - end :]) if end else ""]]
    return TextDiff(_shortened(raw), compared, budget.spent)


def word_diff(old: str, new: str) -> list[list]:
    """A word-level diff of ``old`` (the text graded) and ``new`` (the text now), as
    segments ``["=", text]`` (unchanged), ``["-", text]`` (removed), ``["+", text]``
    (added) and ``["…", n]`` (``n`` unchanged characters not shown). Plain text, meant
    to be shown as text (never as HTML). Bounded: :data:`DIFF_TOKENS` tokens and
    :data:`DIFF_WORK` steps compared, :data:`DIFF_CHARS` characters shown
    (:func:`compare_texts` says whether the texts were compared word by word)."""
    return compare_texts(old, new).segments


def _shortened(raw: list[list]) -> list[list]:
    """``raw`` segments merged, long unchanged text shortened, :data:`DIFF_CHARS` shown."""
    segments: list[list] = []
    for op, text in raw:
        if not text:
            continue
        if segments and segments[-1][0] == op:
            segments[-1][1] += text
        else:
            segments.append([op, text])
    out, shown = [], 0
    for k, (op, text) in enumerate(segments):
        if op == "=" and len(text) > 2 * DIFF_CONTEXT:
            head = text[:DIFF_CONTEXT] if k else ""
            tail = text[-DIFF_CONTEXT:] if k < len(segments) - 1 else ""
            parts = [["=", head]] if head else []
            parts.append(["…", len(text) - len(head) - len(tail)])
            parts += [["=", tail]] if tail else []
        else:
            parts = [[op, text]]
        for part in parts:
            if part[0] != "…":
                room = DIFF_CHARS - shown
                if room <= 0:
                    out.append(["…", len(part[1])])
                    continue
                if len(part[1]) > room:
                    out += [[part[0], part[1][:room]], ["…", len(part[1]) - room]]
                    shown = DIFF_CHARS
                    continue
                shown += len(part[1])
            out.append(part)
    return out


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class ReviewStore:
    """The people's grades of one lab's written answers (see the module's docstring).

    Args:
        path: the SQLite file (created with its tables when missing).
        lab: the :class:`~lablib.grading.spec.LabSpec`: its written questions, their
            points and the rubric a new question starts with.

    Raises:
        ReviewError: the file holds the reviews of another lab.
    """

    def __init__(self, path, lab):
        self.path = pathlib.Path(path)
        self.lab = lab
        self.questions = dict(lab.answers)
        with self._db() as db:
            for statement in filter(str.strip, _SCHEMA.split(";")):
                db.execute(statement)
            for table in ("grade", "rubric"):  # a schema 1 database: versions start at 0
                columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                if "version" not in columns:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN version INTEGER NOT NULL DEFAULT 0")
            db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (_SCHEMA_VERSION,))
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("lab", lab.name) != lab.name:
                raise ReviewError(
                    f"{self.path} holds the reviews of lab {meta['lab']!r}, not of {lab.name!r}: "
                    f"review the output folder of {lab.name!r}."
                )
            db.execute("INSERT OR IGNORE INTO meta VALUES ('lab', ?)", (lab.name,))
            db.execute("INSERT OR IGNORE INTO meta VALUES ('secret', ?)", (secrets.token_hex(16),))
            for q in self.questions.values():  # a question's rubric starts as the spec says, once
                started = db.execute(
                    "SELECT 1 FROM meta WHERE key = ?", (f"rubric:{q.id}",)
                ).fetchone()
                if not started:
                    for position, item in enumerate(q.rubric):
                        db.execute(
                            "INSERT INTO rubric (question, points, comment, position) VALUES (?, ?, ?, ?)",
                            (q.id, item.points, item.comment, position),
                        )
                    db.execute("INSERT INTO meta VALUES (?, ?)", (f"rubric:{q.id}", _now()))
            self.secret = db.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()[0]

    @contextlib.contextmanager
    def _db(self):
        """One connection, one transaction: committed on success, rolled back on error."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA busy_timeout=30000")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    # ------------------------------------------------------------------ checks

    def question(self, question: str):
        """The written question ``question`` of this lab.

        Raises:
            ReviewError: the lab has no such question (the message lists its questions).
        """
        if question not in self.questions:
            raise ReviewError(
                f"Lab {self.lab.name!r} has no written question {question!r}; its questions: "
                f"{sorted(self.questions) or 'none'}."
            )
        return self.questions[question]

    def _select(self, sql: str, params=()) -> list[tuple]:
        """The rows of one read-only query, in a transaction of its own."""
        with self._db() as db:
            return db.execute(sql, params).fetchall()

    @staticmethod
    def _log(db, grader, submission, question, what, detail) -> int:
        """Add a log entry; its id (the version of the rows it changes)."""
        return db.execute(
            "INSERT INTO event (at, grader, submission, question, what, detail) VALUES (?, ?, ?, ?, ?, ?)",
            (_now(), grader or "", submission, question, what, json.dumps(detail, sort_keys=True)),
        ).lastrowid

    @staticmethod
    def _points(value, what: str) -> float:
        try:
            points = float(value)
        except (TypeError, ValueError):
            raise ReviewError(f"{what} must be a number of points, got {value!r}.") from None
        if points != points or abs(points) > 1e6:
            raise ReviewError(f"{what} must be a finite number of points, got {value!r}.")
        return points

    # ------------------------------------------------------------------ rubric

    def rubric(self, question: str) -> list[RubricRow]:
        """The question's rubric items, in order, with how many answers use each."""
        self.question(question)
        rows = self._select(
            "SELECT r.id, r.points, r.comment, (SELECT COUNT(*) FROM applied a WHERE a.item = r.id), r.version "
            "FROM rubric r WHERE r.question = ? AND r.deleted = 0 ORDER BY r.position, r.id",
            (question,),
        )
        return [RubricRow(i, question, p, c, n, v) for i, p, c, n, v in rows]

    @staticmethod
    def _item_conflict(db, question, item, what: str) -> ReviewError:
        row = db.execute(
            "SELECT points, comment, deleted FROM rubric WHERE id = ? AND question = ?",
            (item, question),
        ).fetchone()
        if row is None:
            return ReviewError(
                f"Question {question!r} has no rubric item {item!r}; reload the page."
            )
        points, comment, deleted = row
        now = "deleted" if deleted else f"now {points:+g} {comment!r}"
        return ReviewConflict(
            f"Rubric item {item} was changed by another grader since you read it ({now}): "
            f"your {what} was not saved. The page shows the item as it is now; {what} it again "
            f"if you still want to.",
            question,
            item=item,
        )

    def save_item(
        self,
        question: str,
        points,
        comment: str,
        *,
        item: int | None = None,
        version: int | None = None,
        grader: str = "",
    ) -> RubricRow:
        """Add a rubric item (``item=None``) or change one; every answer it is applied to
        is re-scored.

        ``version``: the item's version the change is based on (None: not checked).

        Raises:
            ReviewConflict: the item changed since ``version`` (nothing was changed).
        """
        self.question(question)
        points = self._points(points, "A rubric item's points")
        comment = str(comment).strip()
        if not comment:
            raise ReviewError(
                "A rubric item needs a comment: the student reads it beside the points."
            )
        with self._db() as db:
            if item is None:
                position = db.execute(
                    "SELECT COALESCE(MAX(position), -1) + 1 FROM rubric WHERE question = ?",
                    (question,),
                ).fetchone()[0]
                item = db.execute(
                    "INSERT INTO rubric (question, points, comment, position) VALUES (?, ?, ?, ?)",
                    (question, points, comment, position),
                ).lastrowid
                event = self._log(
                    db,
                    grader,
                    None,
                    question,
                    "add item",
                    {"item": item, "points": points, "comment": comment},
                )
            else:
                old = db.execute(
                    "SELECT points, comment, version FROM rubric "
                    "WHERE id = ? AND question = ? AND deleted = 0",
                    (item, question),
                ).fetchone()
                if old is None or (version is not None and old[2] != version):
                    raise self._item_conflict(db, question, item, "edit")
                event = self._log(
                    db,
                    grader,
                    None,
                    question,
                    "edit item",
                    {"item": item, "before": list(old[:2]), "points": points, "comment": comment},
                )
                db.execute(
                    "UPDATE rubric SET points = ?, comment = ? WHERE id = ?",
                    (points, comment, item),
                )
            db.execute("UPDATE rubric SET version = ? WHERE id = ?", (event, item))
        return next(r for r in self.rubric(question) if r.id == item)

    def delete_item(
        self, question: str, item: int, *, version: int | None = None, grader: str = ""
    ) -> None:
        """Remove a rubric item that no answer uses (one in use is refused: remove it from
        those answers first, or set its points to 0).

        Raises:
            ReviewConflict: the item changed since ``version`` (None: not checked).
        """
        self.question(question)
        with self._db() as db:
            if version is not None:
                now = db.execute(
                    "SELECT version FROM rubric WHERE id = ? AND question = ? AND deleted = 0",
                    (item, question),
                ).fetchone()
                if now is None or now[0] != version:
                    raise self._item_conflict(db, question, item, "deletion")
            uses = db.execute("SELECT COUNT(*) FROM applied WHERE item = ?", (item,)).fetchone()[0]
            if uses:
                raise ReviewError(
                    f"Rubric item {item} is applied to {uses} answer(s): remove it from them first "
                    f"(or set its points to 0), so that no grade changes unseen."
                )
            changed = db.execute(
                "UPDATE rubric SET deleted = 1 WHERE id = ? AND question = ? AND deleted = 0",
                (item, question),
            )
            if not changed.rowcount:
                raise ReviewError(
                    f"Question {question!r} has no rubric item {item!r}; reload the page."
                )
            event = self._log(db, grader, None, question, "delete item", {"item": item})
            db.execute("UPDATE rubric SET version = ? WHERE id = ?", (event, item))

    # ------------------------------------------------------------------ grades

    def set_items(
        self, submission: str, question: str, items, *, digest: str = "", grader: str = ""
    ) -> None:
        """Make ``items`` (rubric item ids) the ones applied to one answer."""
        self.apply(
            [submission],
            question,
            {"items": list(items)},
            digest={submission: digest},
            grader=grader,
        )

    def apply(
        self,
        submissions,
        question: str,
        change: dict,
        *,
        digest=None,
        versions=None,
        grader: str = "",
        texts=None,
        item_versions=None,
    ) -> None:
        """Change the grade of one or many answers to ``question`` in one transaction.

        ``change`` holds any of: ``items`` (the applied item ids, replacing the current
        ones), ``add`` / ``remove`` (one item id to apply to / take from every answer),
        ``adjustment`` (points beyond the items), ``comment`` (the grader's words).
        ``digest``: submission -> the digest of the answer text graded (the one shown).
        ``versions``: submission -> the version of its grade the change is based on (0: no
        grade yet; a submission left out is not checked).
        ``texts``: digest -> the text of that digest (the text graded, kept for the diff a
        later change of the answer shows; a text whose digest differs is not kept).
        ``item_versions``: rubric item id -> the version of the item the grader read (its
        points and words when they chose it; an item left out is not checked).

        Raises:
            ReviewConflict: a grade changed since its version, or an item applied or taken
                away since the version read (another grader changed what it means; nothing
                was changed).
        """
        self.question(question)
        digest = digest or {}
        unknown = set(change) - {"items", "add", "remove", "adjustment", "comment"}
        if unknown:
            raise ReviewError(
                f"Unknown change {sorted(unknown)}; expected items, add, remove, adjustment, comment."
            )
        with self._db() as db:
            self._check_items(db, question, change, item_versions or {})
            self._check_versions(db, submissions, question, versions or {})
            for submission in submissions:
                graded = digest.get(submission, "")
                text = (texts or {}).get(graded)
                self._apply_one(db, submission, question, change, grader, graded, text)

    def _check_items(self, db, question: str, change: dict, item_versions: dict) -> None:
        """Every rubric item ``change`` names is a live item of ``question``, and one whose
        version the grader read (``item_versions``) has not changed since.

        Raises:
            ReviewConflict: an item changed since (its points or words).
        """
        valid = dict(
            db.execute(
                "SELECT id, version FROM rubric WHERE question = ? AND deleted = 0", (question,)
            ).fetchall()
        )
        wanted = [change[k] for k in ("add", "remove") if k in change]
        for item in wanted + list(change.get("items", [])):
            if item not in valid:
                raise ReviewError(
                    f"Rubric item {item!r} is not an item of question {question!r}; reload the page."
                )
            if item in item_versions and item_versions[item] != valid[item]:
                raise ReviewConflict(
                    f"Rubric item {item} was changed by someone else since you read it (its "
                    f"points or words): nothing was saved. The page shows it as it is now; "
                    f"apply it again if you still want to.",
                    question,
                    item=item,
                )

    def _check_versions(self, db, submissions, question: str, versions: dict) -> None:
        """No grade of ``submissions`` changed since the version the change is based on.

        Raises:
            ReviewConflict: naming those that did (nothing is changed).
        """
        moved = []
        for submission in submissions:
            if submission in versions:
                now = db.execute(
                    "SELECT version FROM grade WHERE submission = ? AND question = ?",
                    (submission, question),
                ).fetchone()
                if (now[0] if now else 0) != versions[submission]:
                    moved.append(submission)
        if moved:
            raise ReviewConflict(
                f"{len(moved)} of the {len(submissions)} answer(s) were graded by someone else "
                f"since you read them: nothing was saved. The page shows them as they are now; "
                f"grade them again if you still want to.",
                question,
                submissions=moved,
            )

    def _apply_one(self, db, submission, question, change, grader, graded, text) -> None:
        """``change`` applied to one answer's grade, the text graded kept (when ``text``
        is the text of digest ``graded``) and the change logged as the grade's version."""
        key = (submission, question)
        db.execute(
            "INSERT OR IGNORE INTO grade (submission, question, updated) VALUES (?, ?, ?)",
            (*key, _now()),
        )
        if "items" in change:
            db.execute("DELETE FROM applied WHERE submission = ? AND question = ?", key)
            for item in dict.fromkeys(change["items"]):
                db.execute("INSERT INTO applied VALUES (?, ?, ?)", (*key, item))
        if "add" in change:
            db.execute("INSERT OR IGNORE INTO applied VALUES (?, ?, ?)", (*key, change["add"]))
        if "remove" in change:
            db.execute(
                "DELETE FROM applied WHERE submission = ? AND question = ? AND item = ?",
                (*key, change["remove"]),
            )
        if "adjustment" in change:
            db.execute(
                "UPDATE grade SET adjustment = ? WHERE submission = ? AND question = ?",
                (self._points(change["adjustment"], "The adjustment"), *key),
            )
        if "comment" in change:
            db.execute(
                "UPDATE grade SET comment = ? WHERE submission = ? AND question = ?",
                (str(change["comment"]), *key),
            )
        if isinstance(text, str) and text_digest(text) == graded:
            db.execute(
                "INSERT OR IGNORE INTO graded_text VALUES (?, ?)",
                (graded, zlib.compress(text.encode("utf-8", "surrogatepass"), 6)),
            )
        event = self._log(db, grader, submission, question, "grade", {**change, "digest": graded})
        db.execute(
            "UPDATE grade SET digest = ?, grader = ?, updated = ?, version = ? "
            "WHERE submission = ? AND question = ?",
            (graded, grader or "", _now(), event, *key),
        )

    # ------------------------------------------------------------------ reading

    def person_scores(self, submissions, digests=None) -> dict[str, dict[str, PersonScore]]:
        """The people's grades of ``submissions``: name -> question id -> :class:`PersonScore`,
        for every written question (ungraded ones have ``graded=False``).

        ``digests``: name -> question -> the digest of the answer in the gradebook now;
        a grade given to another text is ``stale``.
        """
        digests = digests or {}
        with self._db() as db:
            grades = {
                (s, q): (a, c, d, g)
                for s, q, a, c, d, g in db.execute(
                    "SELECT submission, question, adjustment, comment, digest, grader FROM grade"
                )
            }
            applied: dict[tuple[str, str], list[tuple[float, str]]] = {}
            for s, q, p, c in db.execute(
                "SELECT a.submission, a.question, r.points, r.comment FROM applied a JOIN rubric r "
                "ON r.id = a.item ORDER BY r.position, r.id"
            ):
                applied.setdefault((s, q), []).append((p, c))
        out = {}
        for name in submissions:
            row = {}
            for q in self.questions.values():
                items = tuple(applied.get((name, q.id), ()))
                adjustment, comment, digest, grader = grades.get((name, q.id), (0.0, "", "", ""))
                graded = bool(items) or adjustment != 0
                score = (
                    min(max(sum(p for p, _ in items) + adjustment, 0.0), q.points)
                    if graded
                    else 0.0
                )
                now = digests.get(name, {}).get(q.id)
                stale = graded and bool(digest) and now is not None and digest != now
                row[q.id] = PersonScore(
                    q.id, score, q.points, items, comment, adjustment, graded, stale, grader
                )
            out[name] = row
        return out

    def answers(self, question: str, digests: dict) -> dict[str, dict]:
        """The grades of ``question``'s answers as the review page shows them: for each
        name of ``digests`` (name -> the digest of its answer now), ``items`` (applied
        item ids, in the rubric's order), ``adjustment``, ``comment``, ``score``,
        ``graded``, ``stale``, ``version`` (0: never graded), ``flagged`` (for a second
        look) and ``diff`` (stale, and the text graded is kept: a diff
        can be shown)."""
        points = self.question(question).points
        with self._db() as db:
            grades = {
                s: (a, c, d, v)
                for s, a, c, d, v in db.execute(
                    "SELECT submission, adjustment, comment, digest, version FROM grade WHERE question = ?",
                    (question,),
                )
            }
            flags = {
                row[0]
                for row in db.execute("SELECT submission FROM flag WHERE question = ?", (question,))
            }
            kept = {
                row[0]
                for row in db.execute(
                    "SELECT t.digest FROM graded_text t JOIN grade g ON g.digest = t.digest WHERE g.question = ?",
                    (question,),
                )
            }
            applied: dict[str, list[tuple[int, float]]] = {}
            for s, i, p in db.execute(
                "SELECT a.submission, r.id, r.points FROM applied a JOIN rubric r ON r.id = a.item "
                "WHERE a.question = ? ORDER BY r.position, r.id",
                (question,),
            ):
                applied.setdefault(s, []).append((i, p))
        out = {}
        for name, now in digests.items():
            items = applied.get(name, [])
            adjustment, comment, digest, version = grades.get(name, (0.0, "", "", 0))
            graded = bool(items) or adjustment != 0
            score = min(max(sum(p for _, p in items) + adjustment, 0.0), points) if graded else 0.0
            stale = graded and bool(digest) and digest != now
            out[name] = {
                "items": [i for i, _ in items],
                "adjustment": adjustment,
                "comment": comment,
                "score": score,
                "graded": graded,
                "stale": stale,
                "version": version,
                "flagged": name in flags,
                "diff": stale and digest in kept,
            }
        return out

    def version(self, question: str) -> int:
        """The latest version among ``question``'s grades and rubric items (0: none changed
        yet): what the page compares to find what changed since it last read."""
        with self._db() as db:
            return int(
                db.execute(
                    "SELECT MAX(COALESCE((SELECT MAX(version) FROM grade WHERE question = ?), 0), "
                    "COALESCE((SELECT MAX(version) FROM rubric WHERE question = ?), 0), "
                    "COALESCE((SELECT MAX(version) FROM flag_change WHERE question = ?), 0))",
                    (question, question, question),
                ).fetchone()[0]
            )

    def changed_since(self, question: str, since: int) -> tuple[set[str], bool]:
        """``(the submissions whose grade of question changed after version since, whether
        a rubric item did)``."""
        with self._db() as db:
            names = {
                row[0]
                for row in db.execute(
                    "SELECT submission FROM grade WHERE question = ? AND version > ? UNION "
                    "SELECT submission FROM flag_change WHERE question = ? AND version > ?",
                    (question, int(since), question, int(since)),
                )
            }
            rubric = (
                db.execute(
                    "SELECT 1 FROM rubric WHERE question = ? AND version > ? LIMIT 1",
                    (question, int(since)),
                ).fetchone()
                is not None
            )
        return names, rubric

    def set_flag(self, submissions, question: str, flagged: bool, *, grader: str = "") -> None:
        """Flag (``flagged=True``) or clear the flag of one or many answers to
        ``question`` for a second look, in one transaction; each change is logged. The
        grades are left as they are (their versions too: a flag never makes another
        grader's change a conflict)."""
        self.question(question)
        if not isinstance(flagged, bool):
            raise ReviewError(f"A flag is set (true) or cleared (false); got {flagged!r}.")
        with self._db() as db:
            for submission in submissions:
                now = (
                    db.execute(
                        "SELECT 1 FROM flag WHERE submission = ? AND question = ?",
                        (submission, question),
                    ).fetchone()
                    is not None
                )
                if now == flagged:
                    continue
                event = self._log(
                    db, grader, submission, question, "flag" if flagged else "unflag", {}
                )
                if flagged:
                    db.execute(
                        "INSERT INTO flag VALUES (?, ?, ?, ?, ?)",
                        (submission, question, grader or "", _now(), event),
                    )
                else:
                    db.execute(
                        "DELETE FROM flag WHERE submission = ? AND question = ?",
                        (submission, question),
                    )
                db.execute(
                    "INSERT INTO flag_change VALUES (?, ?, ?)", (question, submission, event)
                )

    def flagged(self, question: str | None = None) -> dict[str, list[str]]:
        """The answers flagged for a second look: question -> submissions (one question's
        with ``question``)."""
        rows = self._select(
            "SELECT question, submission FROM flag"
            + (" WHERE question = ?" if question else "")
            + " ORDER BY question, submission",
            (question,) if question else (),
        )
        out: dict[str, list[str]] = {}
        for q, s in rows:
            out.setdefault(q, []).append(s)
        return out

    def log_reveal(self, submission: str, question: str, *, grader: str = "") -> int:
        """Record that ``grader`` was shown the student of one answer (the review page's
        deliberate reveal); returns the log entry's id."""
        self.question(question)
        with self._db() as db:
            return self._log(db, grader, submission, question, "reveal", {})

    def graded_text(self, submission: str, question: str) -> tuple[str, str | None]:
        """``(digest, text)`` of the text ``submission``'s answer to ``question`` was last
        graded for; text None when it was not kept (an older lablib graded it, or the
        answer had no text record); ``("", None)`` when never graded."""
        with self._db() as db:
            row = db.execute(
                "SELECT g.digest, t.text FROM grade g LEFT JOIN graded_text t ON t.digest = g.digest "
                "WHERE g.submission = ? AND g.question = ?",
                (submission, question),
            ).fetchone()
        if row is None:
            return "", None
        return row[0], None if row[1] is None else zlib.decompress(row[1]).decode(
            "utf-8", "surrogatepass"
        )

    def events(self, limit: int = 1000) -> list[dict]:
        """The latest changes, newest first (who, when, what)."""
        rows = self._select(
            "SELECT at, grader, submission, question, what, detail FROM event "
            "ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        return [
            {
                "at": a,
                "grader": g,
                "submission": s,
                "question": q,
                "what": w,
                "detail": json.loads(d),
            }
            for a, g, s, q, w, d in rows
        ]

    def last_change(self) -> int:
        """The id of the latest change in the log (0: none): a gradebook records the last
        one it includes (``reviews_through``)."""
        with self._db() as db:
            return int(db.execute("SELECT COALESCE(MAX(id), 0) FROM event").fetchone()[0])

    def for_gradebook(self, results) -> tuple[dict[str, dict[str, PersonScore]], dict]:
        """``(person_scores of the rows, position)`` for the writers: a grade given to an
        answer whose text has changed since is ``stale`` (one graded while the gradebook
        had no record of the answer too, once it has). ``position``: the log's last
        change, read before the scores (a change committed between the two is counted
        as not included), as the gradebook records it: ``{"log": this log's id,
        "through": the change's id (0: none), "change": its digest}``."""
        digests = {
            r.submission: {
                q: r.answers[q].digest if q in r.answers else MISSING_DIGEST for q in self.questions
            }
            for r in results
        }
        with self._db() as db:
            position = _position(db)
        return self.person_scores([r.submission for r in results], digests), position


def _position(db) -> dict:
    """The log's id and last change (id and digest), as a gradebook records them."""
    row = db.execute(f"SELECT {_EVENT_COLUMNS} FROM event ORDER BY id DESC LIMIT 1").fetchone()
    return {
        "log": _log_id(db),
        "through": int(row[0]) if row else 0,
        "change": _change_digest(row) if row else "",
    }


def _log_id(db) -> str:
    """Which log this is (a gradebook records it): derived from the secret every log has
    held since it was made, so a log made anew, or another folder's, has another, and a
    log of before (or its backup) has its own already. "" for a log without one."""
    secret = db.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()
    return hashlib.sha256(f"log:{secret[0]}".encode()).hexdigest()[:32] if secret else ""


#: A log entry's columns, in the order its digest reads them.
_EVENT_COLUMNS = "id, at, grader, submission, question, what, detail"


def _change_digest(row) -> str:
    """The digest of one log entry (its id, time, grader and change): another change
    stored under the same id (a log restored from a backup and written since) has
    another."""
    return hashlib.sha256(json.dumps(list(row)).encode()).hexdigest()[:32]


#: What to do where the log a gradebook was written from is not there as it was.
_RESTORE = (
    "Restore the review log grades.json was written from (reviews.sqlite, with its -wal "
    "file where there is one). Where that log is gone for good{move}, lablib export ships "
    "the grades grades.json holds, and commands that write grades.json again refuse (they "
    "would drop them) until you move grades.json away too, keeping it, and grade again."
)
_RESTORE_GONE = _RESTORE.format(move="")
_RESTORE_OTHER = (
    "grades.json holds the people's grades as they were when it was written. "
    + _RESTORE.format(move=" and this one is moved away")
)


def changes_since(path, through: int, position: dict | None = None) -> int:
    """How many changes to the people's grades the review log at ``path`` holds after
    change ``through`` (0 when there is no log; revealing a student, which changes no
    grade, is not counted): a gradebook that does not include them is out of date.
    ``position``: the gradebook's ``reviews_log`` (:meth:`ReviewStore.for_gradebook`),
    where it has one: the log must be that log, and still hold that change.

    Raises:
        ReviewError: the file is there but cannot be read as a review log (damaged, empty,
            or another file under its name): never read as "no changes", which would let
            a gradebook without the latest written grades pass as current. Or it is
            another log than the gradebook's (made anew, copied from another folder), or
            it no longer holds change ``through`` as the gradebook included it (restored
            from an older backup, its last changes lost with its -wal file): its ids
            then name other changes, and counting after ``through`` would miss them.
            Or ``through`` is not a change's number.
    """
    path = pathlib.Path(path)
    book = path.parent / "grades.json"
    if isinstance(through, bool) or not isinstance(through, int) or through < 0:
        raise ReviewError(
            f"{book}: reviews_through is {str(through)[:40]!r}; expected the number of the "
            f"review log's last change it includes (0: none), as lablib writes it. Restore "
            f"grades.json from a backup, or set it by hand to the number lablib wrote."
        )
    if position is not None and not isinstance(position, dict):
        raise ReviewError(
            f"{book}: reviews_log is {str(position)[:60]!r}; expected an object "
            f'{{"log", "through", "change"}}, as lablib writes it. Restore grades.json from a '
            f"backup, or delete that key by hand (the log is then checked by its change "
            f"number only)."
        )
    if not path.is_file():
        return 0
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error as exc:
        raise ReviewError(_unreadable_log(path, exc)) from None
    try:
        _check_position(db, path, through, position or {})
        return int(
            db.execute(
                "SELECT COUNT(*) FROM event WHERE id > ? AND what != 'reveal'", (through,)
            ).fetchone()[0]
        )
    except sqlite3.DatabaseError as exc:
        raise ReviewError(_unreadable_log(path, exc)) from None
    finally:
        db.close()


def check_log_kept(path, stored: dict) -> None:
    """Before the gradebook ``stored`` (``grades.json`` as read) is written again, or its
    people's grades are read or added to: where it holds people's grades (a written answer
    graded), the log they came from is at ``path`` (:func:`changes_since`'s checks), not
    missing or empty. Writing the gradebook from no log, or from a log made anew, would
    drop every one of them.

    Raises:
        ReviewError: it is missing, empty, damaged, another log, or lost that change.
    """
    path = pathlib.Path(path)
    entries = stored.get("submissions") if isinstance(stored.get("submissions"), list) else []
    graded = sum(
        1
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("written"), dict)
        for score in entry["written"].values()
        if isinstance(score, dict) and score.get("graded")
    )
    through = stored.get("reviews_through", 0)
    state = "missing" if not path.is_file() else "empty" if path.stat().st_size == 0 else ""
    if state and not graded:  # nothing a person gave would be dropped
        return
    if state:
        raise ReviewError(
            f"{path.parent / 'grades.json'} holds the people's grades of {graded} written "
            f"answer(s), from the review log's change {through}, and {path} is {state}: "
            f"going on from no log (writing grades.json again, grading, reading or importing "
            f"the people's grades) would drop every one of them. Nothing was written. "
            f"{_RESTORE_GONE}"
        )
    changes_since(path, through, stored.get("reviews_log"))  # the log there is the one


def _check_position(db, path: pathlib.Path, through: int, position: dict) -> None:
    """Raise :class:`ReviewError` where the log is not the one ``position`` names, or
    does not hold change ``through`` as it was."""
    log = _log_id(db)  # "" for a database without a secret: no log lablib made
    if position.get("log") and log != position["log"]:
        raise ReviewError(
            f"{path} is not the review log grades.json was written from (it was made anew, "
            f"or copied from another folder). {_RESTORE_OTHER}"
        )
    if through == 0:
        return
    row = db.execute(f"SELECT {_EVENT_COLUMNS} FROM event WHERE id = ?", (through,)).fetchone()
    if row is None:
        last = db.execute("SELECT COALESCE(MAX(id), 0) FROM event").fetchone()[0]
        raise ReviewError(
            f"{path} holds the people's grades up to change {last}, and grades.json includes "
            f"change {through}: the log lost its latest changes (restored from an older "
            f"backup, or its -wal file lost). {_RESTORE_OTHER}"
        )
    if position.get("change") and _change_digest(row) != position["change"]:
        raise ReviewError(
            f"Change {through} of {path} is not the change grades.json includes under that "
            f"number: the log was restored from an older backup and written since. {_RESTORE_OTHER}"
        )


def _unreadable_log(path: pathlib.Path, exc: Exception) -> str:
    """What to do about a review log SQLite cannot read: a damaged file (or another file
    under its name) is restored or moved away; anything else (a folder this user may
    not write, where a log in WAL mode keeps its ``-shm`` file; a lock) is fixed where it is."""
    code = getattr(exc, "sqlite_errorcode", None)
    damaged = (
        code in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB (codes: Python 3.11+)
        or (code is None and any(w in str(exc) for w in ("not a database", "malformed")))
        or "no such table" in str(exc)  # an empty file, or a database of something else
    )
    if damaged:
        advice = (
            "Restore it from a backup; where none is left and grades.json already holds "
            "every grade given (its reviews_through), move it away: lablib export then "
            "ships those, and commands that write grades.json again refuse (they would "
            "drop them) until you also move grades.json away, keeping it, and grade again."
        )
    else:
        advice = (
            "Run the command as a user who may read and write that folder (SQLite keeps "
            "the log's -wal and -shm files beside it), or when no review page is writing "
            "it, then again."
        )
    return (
        f"{path} cannot be read as the written answers' review log (SQLite says: {exc}); "
        f"the people's grades are in it. {advice}"
    )
