"""``lablib review``: grade one written question across the whole class, in a local page.

The page shows one question at a time: its text and the model answer, then every
student's answer, anonymised ("Answer 7") and shuffled (the same order for every grader,
a different one per question), rendered as in the notebook. Beside them, the question's
rubric: reusable items (points and a comment the student reads), applied with a click or
a number key to the focused answer or to every selected one at once, editable while
grading (an item's new points re-score every answer it is on). Each change is stored in
``<out>/reviews.sqlite`` (:mod:`.store`) before the page hears back: closing the page or
the process loses nothing, and two graders can work at once.

Who can reach it. The server is the standard library's, bound to 127.0.0.1 only, and
answers only requests addressed to localhost (no DNS rebinding). Each run makes a random
token (as Jupyter does); the address it prints carries it (``/?token=...``), the page
keeps it in its tab's ``sessionStorage`` (one origin: this port) and sends it with every
API request (``Authorization: Bearer``); a request without it is refused (401), with
another (403). Changes are JSON POSTs from the page itself (a foreign ``Origin`` is
refused, and so is a form's ``text/plain``). The log names the grader the server was
started for (``--grader``), never a name a request carries. Students' names never reach
the page: answers travel under a per-question token.

What a student's text can do there: nothing. It is rendered by :mod:`.render` (an
allowlist sanitiser after every step: no script, style, form, frame, image, ``id`` or
``class``), put in a shadow root of its own (the page's lookups, forms, labels and
styles never cross it, and the page holds references to its own fields), under a CSP
that refuses inline script and style, frames, form posts, ``<base>`` and every load
from elsewhere.

Bounded answers. The question's list of answers carries no text; the page fetches the
first :data:`PREVIEW_CHARS` characters of the answers it shows (a page of
:data:`PAGE_SIZE`, a few at a time), and the whole of one on "show all". Every read the
page repeats names the version it has: only what changed since comes back.

Unreadable notebooks. A row whose notebook could not be read (or that holds no record of
the answer) is not among a question's answers to grade: the page counts and lists them
apart (anonymised, with the reason), and no grade can be given to them.

What changed since graded. The store keeps the text each grade was given for; an answer
changed since (a regrade) shows a word-level diff against it (:func:`.store.compare_texts`,
bounded in its work, kept for each pair of texts, sent as plain segments and drawn as
text, never as HTML).

Second looks, filters, the student's name. A grader flags answers for a second look
(logged); the page filters the answers by state, flag, rubric item or score. Names never
reach the page, with one exception the instructor starts the server for
(``reveal=True``, ``lablib review --reveal``): a deliberate request for one answer's
student, recorded in the log with the grader's name, answered with that student only: the
identity resolved at grading (its name, id and e-mail; :func:`revealed_student`), else the
row's roster student.

Grades bound to what was seen. Each grade carries the digest of the answer text the page
showed and the version of the grade it was based on: a grade of a text a regrade replaced
is kept against the text seen and flagged stale; a grade changed by someone else since is
refused (409), and the page reloads it and says so. Rubric edits likewise.

Example::

    app = ReviewApp("grades/lab2", load_lab("lab2"))
    server = make_server(app, port=0)
    print(server.url); server.serve_forever()
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import http.server
import json
import os
import pathlib
import re
import secrets
import threading
import urllib.parse

from lablib.grading.gradebook import GradebookError, GradebookFolder
from lablib.grading.notebook import (
    ANSWER_BEGIN_RE,
    answer_tag,
    cell_source,
    read_notebook,
    written_answers,
)
from lablib.grading.report.text import status_text
from lablib.grading.results import Kind
from lablib.grading.review.render import readable, render_answer, render_markdown
from lablib.grading.review.store import (
    DB_NAME,
    MISSING_DIGEST,
    TOO_DIFFERENT,
    ReviewConflict,
    ReviewError,
    ReviewStore,
    check_log_kept,
    compare_texts,
)

__all__ = [
    "PAGE_SIZE",
    "PREVIEW_CHARS",
    "ReviewApp",
    "ReviewServer",
    "make_server",
    "question_prompts",
]

PAGE_DIR = pathlib.Path(__file__).with_name("page")
_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/review.js": ("review.js", "text/javascript; charset=utf-8"),
    "/review.css": ("review.css", "text/css; charset=utf-8"),
}
#: Request bodies larger than this are refused (a page's request is a few hundred bytes).
MAX_BODY = 256 * 1024
#: An answer's first characters shown in the list; the rest on "show all".
PREVIEW_CHARS = 3000
#: Answers shown at once (the page has a pager); the page asks for their text a few at a time.
PAGE_SIZE = 50
#: The most answers one request for texts may name.
MAX_TEXTS = 50
#: What the page's responses say about an answer without a record in the gradebook.
_NO_RECORD = (
    "no answer recorded: the notebook could not be read (see its status), or it was graded by an "
    "older lablib (grade it again)"
)
#: The fields of each change the page sends (any other is refused).
_FIELDS = {
    "grade": {
        "action",
        "question",
        "answers",
        "seen",
        "versions",
        "items",
        "add",
        "remove",
        "item_version",
        "adjustment",
        "comment",
    },
    "item": {"action", "question", "id", "version", "points", "comment"},
    "delete-item": {"action", "question", "id", "version"},
    "flag": {"action", "question", "answers", "flagged"},
    "reveal": {"action", "question", "answer"},
    "write": {"action", "question"},
}
#: The page's security headers (see the module's docstring).
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'none'; "
    "font-src 'none'; media-src 'none'; object-src 'none'; frame-src 'none'; child-src 'none'; "
    "worker-src 'none'; manifest-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def question_prompts(template, questions) -> dict[str, str]:
    """Each written question's text in the released lab: what its answer cell says before
    the ``BEGIN ANSWER`` marker, after the nearest markdown cell above it (within three
    cells, code cells skipped) when that text is short (``**Your answer:**`` below the
    question)."""
    cells = list((template or {}).get("cells", []))
    prompts = {}
    for index, cell in enumerate(cells):
        source = cell_source(cell)
        lines = source.split("\n")
        ids = [
            m.group(1)
            for m in (ANSWER_BEGIN_RE.match(line.strip()) for line in lines)
            if m and m.group(1)
        ]
        tag = answer_tag(cell) or (ids[0] if ids else None)
        if tag not in questions or tag in prompts:
            continue
        before = []
        for line in lines:
            if ANSWER_BEGIN_RE.match(line.strip()):
                break
            before.append(line)
        text = "\n".join(before).strip()
        if len(text) < 400:  # "Your answer:" alone: the question is the markdown above (code aside)
            above = next(
                (
                    c
                    for c in reversed(cells[max(0, index - 3) : index])
                    if c.get("cell_type") == "markdown"
                ),
                None,
            )
            if above is not None:
                text = (cell_source(above).strip() + "\n\n" + text).strip()
        prompts[tag] = text
    return prompts


def revealed_student(identity, student) -> dict:
    """What a reveal shows of a gradebook row's student: ``{"name", "student_id", "email"}``.

    The identity resolved at grading (``grades.json``'s ``identity``,
    :mod:`lablib.grading.gradebook.identity`: the roster's student matched then, or, without a match,
    what the LMS download says) when it names someone (a name, a student id or an e-mail):
    its name (with a Gradescope group's other submitters), its student id (else the LMS's
    own id, named: "Canvas user id 184001", "Moodle participant 7300017") and e-mail. Else
    the row's roster ``student`` field (a gradebook written before identities were kept).
    ``{}`` when neither names anyone (the page then shows the submission's name).
    """

    def text(data, key) -> str:
        return str(data.get(key) or "").strip() if isinstance(data, dict) else ""

    identity = identity if isinstance(identity, dict) else {}
    if any(text(identity, k) for k in ("name", "student_id", "email")):
        name = text(identity, "name")
        others = [
            text(o, "name") or text(o, "student_id") or text(o, "email") or text(o, "key")
            for o in identity.get("others") or ()
            if isinstance(o, dict)
        ]
        others = [o for o in others if o]
        if others:
            name = f"{name or '?'} (a group with {', '.join(others)})"
        number = text(identity, "student_id")
        if not number and text(identity, "lms_id"):
            number = f"Canvas user id {text(identity, 'lms_id')}"
        if not number and text(identity, "participant_id"):
            number = f"Moodle participant {text(identity, 'participant_id')}"
        return {"name": name, "student_id": number, "email": text(identity, "email")}
    if any(text(student, k) for k in ("name", "student_id", "email")):
        return {k: text(student, k) for k in ("name", "student_id", "email")}
    return {}


def _answer_tokens(body: dict, what: str) -> list[str]:
    """The answers a request changes: its ``answers``, a non-empty list of the page's
    tokens (a :class:`ReviewError` naming ``what`` asks for it otherwise)."""
    tokens = body.get("answers")
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise ReviewError(
            f"A {what} names the answers it changes (a non-empty list of the page's tokens)."
        )
    return tokens


class _RenderCache:
    """Rendered answers by (digest, limit), the least recently used dropped past
    ``max_chars`` characters in all (rendering a long answer of formulas is the page's
    slowest step; graders go back and forth). ``size``: a value's characters (default
    ``len``)."""

    def __init__(self, max_chars: int = 64 * 1024 * 1024, size=len):
        self.max_chars = max_chars
        self.size = size
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key, make):
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = make()
        with self._lock:
            if key not in self._items:
                self._items[key] = value
                self._size += self.size(value)
                while self._size > self.max_chars and len(self._items) > 1:
                    _, old = self._items.popitem(last=False)
                    self._size -= self.size(old)
        return value


def _diff_size(diff) -> int:
    """The characters a cached diff holds (its segments' text, 16 for each segment)."""
    return sum(16 + (len(text) if isinstance(text, str) else 0) for _, text in diff.segments)


class ChangeRefused(Exception):
    """A change refused with ``status`` (409: based on an old version); ``payload`` is
    what the page shows instead (the rows as they are now)."""

    def __init__(self, status: int, payload: dict):
        super().__init__(payload.get("error", ""))
        self.status = status
        self.payload = payload


class ReviewApp:
    """What the page asks and changes, without HTTP (tested directly).

    Args:
        out_dir: the grading output of one lab (``grades.json``; ``reviews.sqlite`` is
            created there).
        lab: its :class:`~lablib.grading.spec.LabSpec` (with written questions).
        template: the released lab notebook (the questions' text), or None.
        solution: the solution notebook (the model answers), or None.
        grader: the name recorded with each change (the person this server's token
            belongs to; a request cannot name another).
        on_write: called by "Write the gradebook"; returns a message (the CLI passes
            :func:`lablib.grading.grade.rewrite_reports`).
        preview_chars: an answer's characters shown before "show all".
        reveal: whether the page may ask for one answer's student (the instructor's
            server; each reveal is logged with ``grader``).

    Raises:
        ReviewError: the lab has no written question, or ``out_dir`` holds no gradebook
            of this lab.
    """

    def __init__(
        self,
        out_dir,
        lab,
        *,
        template=None,
        solution=None,
        grader: str = "",
        on_write=None,
        preview_chars: int = PREVIEW_CHARS,
        reveal: bool = False,
    ):
        if not lab.answers:
            raise ReviewError(
                f"Lab {lab.name!r} has no written answers to review (its spec declares none with "
                f"lab.answer(...))."
            )
        self.out = pathlib.Path(out_dir)
        self.lab = lab
        self.grader = grader
        self.on_write = on_write
        self.preview_chars = int(preview_chars)
        self.reveal = bool(reveal)
        self.generation = 0
        self._lock = threading.Lock()
        self._stamp = None
        self._rows: dict = {}
        self._digests: dict = {}
        self._orders: dict = {}
        self._unreadable: dict = {}
        self._students: dict = {}
        self._replaced: dict = {}
        self._renders = _RenderCache()
        self._diffs = _RenderCache(16 * 1024 * 1024, size=_diff_size)
        self._load()
        # before a log is made: one that is gone would otherwise start anew, empty, and
        # the page would show every answer the gradebook holds people's grades of as
        # ungraded (its write then refused)
        check_log_kept(self.out / DB_NAME, GradebookFolder(self.out).read())
        self.store = ReviewStore(self.out / DB_NAME, lab)
        template_nb = read_notebook(template)[0] if template else None
        prompts = question_prompts(template_nb, lab.answers)
        model = {}
        if solution:
            model = {
                q: a.text
                for q, a in written_answers(read_notebook(solution)[0], lab.answers).items()
            }
        self.prompts = {
            q: {
                "prompt": render_markdown(prompts.get(q, "")),
                "model": render_markdown(model[q]) if model.get(q) else "",
            }
            for q in lab.answers
        }

    # ------------------------------------------------------------ the gradebook's rows

    def _load(self) -> None:
        """(Re)read grades.json when it changed (a regrade while the page is open); call
        with ``self._lock`` held or before the server starts."""
        path = self.out / "grades.json"
        try:
            stat = path.stat()
        except OSError:
            raise ReviewError(
                f"{self.out} holds no grades.json: run `lablib grade {self.lab.name} <submissions> "
                f"-o {self.out}` first."
            ) from None
        stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if stamp == self._stamp:
            return
        try:
            data = GradebookFolder(self.out).read()
        except GradebookError as exc:
            raise ReviewError(str(exc)) from None
        if not isinstance(data, dict) or data.get("lab") != self.lab.name:
            raise ReviewError(
                f"{path} is the gradebook of {data.get('lab') if isinstance(data, dict) else '?'!r}, "
                f"not of {self.lab.name!r}."
            )
        try:  # a row that cannot be read is an error, never a row left off the page
            results = GradebookFolder(self.out).results(self.lab.name, data)
        except GradebookError as exc:
            raise ReviewError(str(exc)) from None
        rows, students = {}, {}
        for entry, result in zip(data["submissions"], results):
            rows[result.submission] = result
            student = revealed_student(result.identity, entry.get("student"))
            if student:
                students[result.submission] = student
        digests = {
            name: {
                q: r.answers[q].digest if q in r.answers else MISSING_DIGEST
                for q in self.lab.answers
            }
            for name, r in rows.items()
        }
        # the texts this read replaces (a regrade): a grade given meanwhile to the text the
        # page showed keeps that text for its diff
        now = {d for row in digests.values() for d in row.values()}
        replaced = {
            a.digest: a.text
            for r in self._rows.values()
            for a in r.answers.values()
            if a.digest not in now
        }
        unreadable = {
            q: {
                n
                for n, r in rows.items()
                if q not in r.answers or r.status.has(Kind.INVALID_NOTEBOOK)
            }
            for q in self.lab.answers
        }
        self._rows, self._digests, self._stamp, self._orders = rows, digests, stamp, {}
        self._students, self._unreadable, self._replaced = students, unreadable, replaced
        self.generation += 1

    def _token(self, question: str, submission: str) -> str:
        return hashlib.sha256(
            f"{self.store.secret}|token|{question}|{submission}".encode()
        ).hexdigest()[:16]

    def _ordered(self, question: str, names=None) -> list[str]:
        """The submissions with an answer to grade (``names``: these) in this question's
        shuffled order (the same for every grader)."""
        key = lambda name: hashlib.sha256(
            f"{self.store.secret}|order|{question}|{name}".encode()
        ).hexdigest()
        if names is None:
            names = [n for n in self._rows if n not in self._unreadable.get(question, ())]
        return sorted(names, key=key)

    def _order(self, question: str) -> tuple[list[str], dict[str, str], dict[str, int]]:
        """``(names in the page's order, token -> name, name -> number)`` for ``question``,
        with the gradebook re-read when it changed (call with ``self._lock`` held)."""
        self._load()
        key = (question, self.store.secret)
        if key not in self._orders:
            names = self._ordered(question)
            self._orders[key] = (
                names,
                {self._token(question, n): n for n in names},
                {n: k for k, n in enumerate(names, 1)},
            )
        return self._orders[key]

    def _by_token(self, question: str, tokens) -> list[str]:
        known = self._order(question)[1]
        missing = [t for t in tokens if t not in known]
        if missing:
            raise ReviewError(
                f"Unknown answer(s) {[str(t)[:20] for t in missing[:3]]} for question {question!r}: "
                f"the gradebook changed (a regrade?); reload the page."
            )
        return [known[t] for t in tokens]

    def _text(self, name: str, question: str):
        answer = self._rows[name].answers.get(question)
        return answer.text if answer else "", answer

    # ------------------------------------------------------------ what the page reads

    def questions(self) -> dict:
        """The lab, its questions and each one's progress."""
        with self._lock:
            self._load()
            rows, digests, unreadable = list(self._rows.values()), self._digests, self._unreadable
        scores = self.store.person_scores([r.submission for r in rows], digests)
        flagged = self.store.flagged()
        out = []
        for q in self.lab.answers.values():
            given = [
                scores[r.submission][q.id] for r in rows if r.submission not in unreadable[q.id]
            ]
            flags = [n for n in flagged.get(q.id, []) if n in digests and n not in unreadable[q.id]]
            out.append(
                {
                    "id": q.id,
                    "title": q.title,
                    "points": q.points,
                    "answers": len(given),
                    "graded": sum(s.graded and not s.stale for s in given),
                    "stale": sum(s.stale for s in given),
                    "flagged": len(flags),
                    "unreadable": len(unreadable[q.id]),
                }
            )
        return {
            "lab": self.lab.name,
            "title": self.lab.title,
            "grader": self.grader,
            "reveal": self.reveal,
            "questions": out,
        }

    def _meta(self, question: str, names) -> list[dict]:
        """What the page knows of each answer without its text (call with the lock held)."""
        number = self._order(question)[2]
        state = self.store.answers(question, {n: self._digests[n][question] for n in names})
        out = []
        for name in names:
            text, answer = self._text(name, question)
            notes = [str(n)[:300] for n in answer.notes[:5]] if answer else [_NO_RECORD]
            out.append(
                {
                    "token": self._token(question, name),
                    "number": number[name],
                    "length": len(text),
                    "truncated": len(text) > self.preview_chars,
                    "empty": not text,
                    "found": answer.found if answer else "",
                    "notes": notes,
                    "digest": self._digests[name][question],
                    **state[name],
                }
            )
        return out

    def _unreadable_list(self, question: str) -> list[dict]:
        """The rows of ``question`` without an answer to grade, anonymised, with the reason
        (call with the lock held)."""
        out = []
        for k, name in enumerate(self._ordered(question, self._unreadable.get(question, ())), 1):
            row = self._rows[name]
            if row.status.has(Kind.INVALID_NOTEBOOK):
                reason = f"the notebook could not be read (status: {status_text(row.status)[:200]})"
            elif row.status.has(Kind.GRADER_ERROR):
                reason = (
                    "the grader itself failed on this notebook before its answers were read "
                    f"(status: {status_text(row.status)[:200]}): see the instructor report, "
                    "then grade the folder again"
                )
            else:
                reason = "grades.json holds no record of this answer (graded by an older lablib: grade it again)"
            out.append({"number": k, "reason": reason})
        return out

    def _rubric(self, question: str) -> list[dict]:
        return [vars(row) for row in self.store.rubric(question)]

    def question(self, question: str) -> dict:
        """One question: its text, model answer, rubric, version and every answer
        (anonymised, in order, without its text: see :meth:`texts`)."""
        q = self.store.question(question)
        version = self.store.version(
            question
        )  # read first: a change after it is sent again next time
        with self._lock:
            names = self._order(question)[0]
            answers = self._meta(question, names) if names else []
            unreadable = self._unreadable_list(question)
            generation = self.generation
        return {
            "id": q.id,
            "title": q.title,
            "points": q.points,
            **self.prompts[question],
            "version": version,
            "generation": generation,
            "page_size": PAGE_SIZE,
            "preview_chars": self.preview_chars,
            "rubric": self._rubric(question),
            "answers": answers,
            "unreadable": unreadable,
        }

    def changes(self, question: str, since, generation) -> dict:
        """What changed in ``question`` after version ``since``: the answers whose grade
        changed (all of them when a rubric item did), or ``reload`` when the gradebook was
        regraded since ``generation``."""
        self.store.question(question)
        try:
            since, generation = int(since), int(generation)
        except (TypeError, ValueError):
            raise ReviewError(
                f"Changes are asked with since=<version>&generation=<number>; got since={since!r}, "
                f"generation={generation!r}."
            ) from None
        version = self.store.version(question)
        names, rubric = self.store.changed_since(question, since)
        with self._lock:
            order = self._order(question)[0]
            if generation != self.generation:
                return {"reload": True, "generation": self.generation}
            changed = order if rubric else [n for n in order if n in names]
            answers = self._meta(question, changed) if changed else []
        return {
            "version": version,
            "generation": generation,
            "answers": answers,
            "rubric": self._rubric(question) if rubric else None,
        }

    def texts(self, question: str, tokens) -> dict:
        """The rendered previews of some answers (at most :data:`MAX_TEXTS`), each with the
        digest of the text it shows: the page sends it back with a grade."""
        self.store.question(question)
        if not isinstance(tokens, list) or not 0 < len(tokens) <= MAX_TEXTS:
            raise ReviewError(
                f"Texts are asked for 1 to {MAX_TEXTS} answers at a time; got "
                f"{len(tokens) if isinstance(tokens, list) else tokens!r}."
            )
        with self._lock:
            names = self._by_token(question, tokens)
            found = [
                (t, n, *self._text(n, question), self._digests[n][question])
                for t, n in zip(tokens, names)
            ]
        return {
            "answers": [
                self._shown(token, text, digest, self.preview_chars)
                for token, _, text, _, digest in found
            ]
        }

    def full_text(self, question: str, token: str) -> dict:
        """One answer in full ("show all"; past the renderer's limit the rest as plain text)."""
        self.store.question(question)
        with self._lock:
            name = self._by_token(question, [token])[0]
            text, _ = self._text(name, question)
            digest = self._digests[name][question]
        return self._shown(token, text, digest, None)

    def diff(self, question: str, token: str) -> dict:
        """What changed in one answer since it was graded: ``segments`` of
        :func:`~.store.compare_texts` (plain text, each part :func:`~.render.readable`;
        ``word_by_word`` False and a ``note``
        where the texts were too different to compare word by word and are shown whole),
        or ``available: False`` with the reason. Each pair of texts is compared once."""
        self.store.question(question)
        with self._lock:
            name = self._by_token(question, [token])[0]
            text, _ = self._text(name, question)
            digest = self._digests[name][question]
        graded_digest, graded = self.store.graded_text(name, question)
        if not graded_digest:
            return {
                "token": token,
                "available": False,
                "reason": "This answer has not been graded yet.",
            }
        if graded is None:
            return {
                "token": token,
                "available": False,
                "reason": "The text this answer was graded for was not kept (graded by an older lablib, or "
                "while the notebook could not be read): read the answer again as it is.",
            }
        if graded_digest == digest:
            return {
                "token": token,
                "available": True,
                "segments": [["=", readable(text[:200])]] if text else [],
                "unchanged": True,
                "graded_length": len(graded),
                "length": len(text),
            }
        compared = self._diffs.get((graded_digest, digest), lambda: compare_texts(graded, text))
        return {
            "token": token,
            "available": True,
            # what the page puts into text nodes: a bidirectional override or an escape
            # sequence the student added is shown as a symbol, as in the answer itself
            "segments": [[op, readable(part)] for op, part in compared.segments],
            "unchanged": False,
            "word_by_word": compared.word_by_word,
            "note": "" if compared.word_by_word else TOO_DIFFERENT,
            "graded_length": len(graded),
            "length": len(text),
        }

    def _shown(self, token: str, text: str, digest: str, limit) -> dict:
        html = (
            self._renders.get((digest, limit), lambda: render_answer(text, limit)) if text else ""
        )
        return {
            "token": token,
            "digest": digest,
            "html": html,
            "empty": not text,
            "length": len(text),
            "truncated": limit is not None and len(text) > limit,
        }

    # ------------------------------------------------------------ what the page changes

    def change(self, body: dict) -> dict:
        """Apply one change (``action``: ``grade``, ``item``, ``delete-item``, ``write``)
        and return what the page shows next (the rows it changed, the rubric, the
        question's version).

        Raises:
            ReviewError: a malformed change (400).
            ChangeRefused: a change based on an old version (409): nothing changed; the
                payload holds the rows as they are now.
        """
        action = body.get("action")
        question = body.get("question")
        unknown = sorted(set(body) - _FIELDS.get(action, set(body)))
        if unknown:  # "grader" among them: the log names the server's grader, never the request's
            raise ReviewError(
                f"A {action!r} change has no field(s) {unknown[:5]}; its fields: "
                f"{sorted(_FIELDS[action])}."
            )
        if action == "write":
            if self.on_write is None:
                raise ReviewError(
                    "This review page cannot write the gradebook: run `lablib report` instead."
                )
            return {"message": str(self.on_write())}
        if not isinstance(question, str):
            raise ReviewError(f"A change names its question; got {question!r}.")
        self.store.question(question)
        if action == "grade":
            return self._grade(question, body)
        if action == "flag":
            return self._flag(question, body)
        if action == "reveal":
            return self._reveal(question, body)
        version = body.get("version")
        if (
            action in ("item", "delete-item")
            and body.get("id") is not None
            and (not isinstance(version, int) or isinstance(version, bool))
        ):
            raise ReviewError(
                f"A change of rubric item {body.get('id')!r} names the version of the item it was "
                f'based on ("version": a number, from the page\'s rubric); got {version!r}; reload '
                f"the page."
            )
        try:
            if action == "item":
                self.store.save_item(
                    question,
                    body.get("points"),
                    body.get("comment", ""),
                    item=body.get("id"),
                    version=version,
                    grader=self.grader,
                )
            elif action == "delete-item":
                self.store.delete_item(
                    question, body.get("id"), version=version, grader=self.grader
                )
            else:
                raise ReviewError(
                    f"Unknown action {action!r}; expected grade, item, delete-item, flag, reveal or "
                    f"write."
                )
        except ReviewConflict as exc:
            raise ChangeRefused(
                409,
                {
                    "error": str(exc),
                    "conflict": "item",
                    "item": exc.item,
                    "rubric": self._rubric(question),
                },
            ) from None
        page = self.question(question)
        return {
            "version": page["version"],
            "rubric": page["rubric"],
            "answers": page["answers"],
            "message": "saved",
        }

    def _flag(self, question: str, body: dict) -> dict:
        tokens, flagged = _answer_tokens(body, "flag"), body.get("flagged")
        if not isinstance(flagged, bool):
            raise ReviewError(
                f'A flag is set ("flagged": true) or cleared (false); got {flagged!r}.'
            )
        with self._lock:
            names = self._by_token(question, tokens)
        self.store.set_flag(names, question, flagged, grader=self.grader)
        version = self.store.version(question)
        with self._lock:
            self._order(question)
            answers = self._meta(question, [n for n in names if n in self._rows])
        count = len(names)
        return {
            "version": version,
            "answers": answers,
            "message": f"{count} answer{'s' if count != 1 else ''} {'flagged for a second look' if flagged else 'no longer flagged'}",
        }

    def _reveal(self, question: str, body: dict) -> dict:
        if not self.reveal:
            raise ReviewError(
                "This review server was started without --reveal: students' names stay hidden. The "
                "instructor starts `lablib review ... --reveal` to see one answer's student on request "
                "(each reveal is logged)."
            )
        token = body.get("answer")
        if not isinstance(token, str):
            raise ReviewError(f"A reveal names one answer (its token); got {token!r}.")
        with self._lock:
            name = self._by_token(question, [token])[0]
            number = self._order(question)[2][name]
            student = dict(self._students.get(name) or {})
        self.store.log_reveal(name, question, grader=self.grader)
        shown = {
            "submission": name,
            "name": student.get("name", ""),
            "student_id": student.get("student_id", ""),
            "email": student.get("email", ""),
        }
        return {
            "token": token,
            "number": number,
            "student": shown,
            "message": f"Answer {number}'s student shown to you; recorded in the review log under "
            f"{self.grader or 'your name'}.",
        }

    def _grade(self, question: str, body: dict) -> dict:
        # Over 80 lines for its code: one grade request from end to end (the body's digests and
        # versions checked, the texts graded kept for a later diff, the change applied, a
        # conflict answered with 409, the answers changed since shown named); code: 89 lines.
        tokens = _answer_tokens(body, "grade")
        seen, versions = body.get("seen"), body.get("versions")
        if not isinstance(seen, dict) or not isinstance(versions, dict):
            raise ReviewError(
                "A grade says which text of each answer it graded and which grade it changes "
                '("seen": token -> the digest shown, "versions": token -> the grade\'s version); '
                f"got seen={type(seen).__name__}, versions={type(versions).__name__}; reload the page."
            )
        bad = [
            t
            for t in tokens
            if not isinstance(seen.get(t), str)
            or not 0 < len(seen[t]) <= 64
            or not isinstance(versions.get(t), int)
            or isinstance(versions.get(t), bool)
        ]
        if bad:
            raise ReviewError(
                f"{len(bad)} answer(s) of this grade lack the digest of the text shown or the "
                f"version of their grade (an answer is graded once its text is on the page); "
                f"reload the page."
            )
        change = {
            k: body[k] for k in ("items", "add", "remove", "adjustment", "comment") if k in body
        }
        item_version = body.get("item_version")  # of the item added or removed, as read
        if item_version is not None and (
            not isinstance(item_version, int) or isinstance(item_version, bool)
        ):
            raise ReviewError(
                f"item_version is {item_version!r}; expected an int; reload the page."
            )
        item = change.get("add", change.get("remove"))
        item_versions = (
            {item: item_version} if item is not None and item_version is not None else {}
        )
        with self._lock:
            names = self._by_token(question, tokens)
            now = {n: self._digests[n][question] for n in names}
            texts = {}
            for n, t in zip(names, tokens):  # the text graded, for a later diff
                if seen[t] == now[n]:
                    texts[seen[t]] = self._text(n, question)[0]
                elif seen[t] in self._replaced:
                    texts[seen[t]] = self._replaced[seen[t]]
        token_of, name_of = dict(zip(names, tokens)), dict(zip(tokens, names))
        try:
            self.store.apply(
                names,
                question,
                change,
                digest={n: seen[token_of[n]] for n in names},
                versions={n: versions[token_of[n]] for n in names},
                grader=self.grader,
                texts=texts,
                item_versions=item_versions,
            )
        except ReviewConflict as exc:
            with self._lock:
                self._order(question)
                answers = self._meta(question, [n for n in names if n in self._rows])
            raise ChangeRefused(
                409,
                {
                    "error": str(exc),
                    "conflict": "grade",
                    "answers": answers,
                    "rubric": self._rubric(question),
                },
            ) from None
        version = self.store.version(question)
        with self._lock:
            self._order(question)
            answers = self._meta(question, [n for n in names if n in self._rows])
        moved = sorted(a["number"] for a in answers if seen[a["token"]] != now[name_of[a["token"]]])
        message = "saved"
        if moved:
            message = (
                f"saved, but answer(s) {', '.join(map(str, moved))} changed since the page showed them (a "
                f"regrade): the grade is kept for the text you saw and marked 'answer changed since "
                f"graded'; the new text is shown now, look at it again."
            )
        return {
            "version": version,
            "rubric": self._rubric(question),
            "answers": answers,
            "message": message,
            "changed_text": [a["token"] for a in answers if a["number"] in moved],
        }


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "lablib-review"
    app: ReviewApp
    token: str

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        if os.environ.get("LABLIB_REVIEW_LOG"):  # the token never reaches a log
            super().log_message("%s", (format % args).replace(self.token, "<token>"))

    def _send(self, status: int, body: bytes, content_type: str, message=None) -> None:
        self.send_response(status, message)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error(self, code, message=None, explain=None):
        """What the base class answers itself (a malformed request line, a method this
        server has no handler for: HEAD, OPTIONS, PUT...) with every header of the other
        answers (its own HTML page had no Content-Security-Policy, ``nosniff`` or frame
        rule) and a JSON body saying what was wrong; the connection is closed."""
        self.close_connection = True
        short = self.responses.get(code, ("error", ""))[0]
        text = json.dumps({"error": f"{code} {message or short}"})
        # the message can quote the request line; a line too broken to name its HTTP
        # version gets an answer without headers (HTTP/0.9): no markup in it either
        body = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        body = body.encode()
        self._send(code, body, "application/json; charset=utf-8", message)

    def _json(self, status: int, data) -> None:
        self._send(status, json.dumps(data).encode(), "application/json; charset=utf-8")

    def _local(self) -> bool:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]").lower()
        return host in ("127.0.0.1", "localhost", "::1")

    def _refused(self) -> bool:
        """Answer 401/403 (and True) unless the request carries this run's token."""
        given = self.headers.get("Authorization") or ""
        scheme, _, value = given.strip().partition(" ")
        if scheme.lower() not in ("bearer", "token") or not value.strip():
            self._json(
                401,
                {
                    "error": "This review server answers only its own page: open the address `lablib review` "
                    "printed (http://127.0.0.1:<port>/?token=...), which carries this run's token. "
                    "An API request sends it as 'Authorization: Bearer <token>'."
                },
            )
            return True
        if not hmac.compare_digest(value.strip().encode(), self.token.encode()):
            self._json(
                403,
                {
                    "error": "The token sent is not this review server's (each `lablib review` run makes a "
                    "new one): open the address it printed this time."
                },
            )
            return True
        return False

    def do_GET(self):  # noqa: N802 - http.server's name
        if not self._local():
            return self._json(
                403, {"error": "This page answers only requests addressed to localhost."}
            )
        url = urllib.parse.urlparse(self.path)
        path = url.path
        try:
            if path in _STATIC:
                name, kind = _STATIC[path]
                return self._send(200, (PAGE_DIR / name).read_bytes(), kind)
            if not path.startswith("/api/"):
                return self._json(404, {"error": f"No page {path[:100]!r} here."})
            if self._refused():
                return None
            query = urllib.parse.parse_qs(url.query)
            if path == "/api/questions":
                return self._json(200, self.app.questions())
            match = re.fullmatch(r"/api/question/([a-z][a-z0-9_]*)(/changes)?", path)
            if match and match.group(2):
                return self._json(
                    200,
                    self.app.changes(
                        match.group(1),
                        query.get("since", [None])[0],
                        query.get("generation", [None])[0],
                    ),
                )
            if match:
                return self._json(200, self.app.question(match.group(1)))
            match = re.fullmatch(r"/api/texts/([a-z][a-z0-9_]*)", path)
            if match:
                tokens = [t for t in ",".join(query.get("answers", [])).split(",") if t]
                return self._json(200, self.app.texts(match.group(1), tokens))
            match = re.fullmatch(r"/api/text/([a-z][a-z0-9_]*)/([0-9a-f]{16})", path)
            if match:
                return self._json(200, self.app.full_text(match.group(1), match.group(2)))
            match = re.fullmatch(r"/api/diff/([a-z][a-z0-9_]*)/([0-9a-f]{16})", path)
            if match:
                return self._json(200, self.app.diff(match.group(1), match.group(2)))
            return self._json(404, {"error": f"No page {path[:100]!r} here."})
        except ReviewError as exc:
            return self._json(400, {"error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - said to the page, the server goes on
            return self._json(500, {"error": f"{type(exc).__name__}: {exc}"})

    def do_POST(self):  # noqa: N802
        if not self._local():
            return self._json(
                403, {"error": "This page answers only requests addressed to localhost."}
            )
        if self._refused():
            return None
        origin = self.headers.get("Origin")
        if origin and urllib.parse.urlparse(origin).hostname not in (
            "127.0.0.1",
            "localhost",
            "::1",
        ):
            return self._json(
                403, {"error": f"Changes come only from the review page itself, not from {origin}."}
            )
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            return self._json(
                415, {"error": "Changes are sent as JSON (Content-Type: application/json)."}
            )
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            return self._json(
                413, {"error": f"A change is 1 to {MAX_BODY} bytes of JSON; got {length}."}
            )
        try:
            body = json.loads(self.rfile.read(length))
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            return self._json(400, {"error": f"The change is not a JSON object ({exc})."})
        if urllib.parse.urlparse(self.path).path != "/api/change":
            return self._json(
                404, {"error": f"No action at {self.path[:100]!r}; changes go to /api/change."}
            )
        try:
            return self._json(200, self.app.change(body))
        except ChangeRefused as exc:
            return self._json(exc.status, exc.payload)
        except ReviewError as exc:
            return self._json(400, {"error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - said to the page, the server goes on
            return self._json(500, {"error": f"{type(exc).__name__}: {exc}"})


class ReviewServer(http.server.ThreadingHTTPServer):
    """The review page's HTTP server (127.0.0.1 only); ``url`` is its address with this
    run's token, ``token`` the token alone."""

    daemon_threads = True
    token: str = ""

    @property
    def address(self) -> str:
        """The page's address without the token."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    @property
    def url(self) -> str:
        return f"{self.address}?token={self.token}"


def make_server(
    app: ReviewApp, *, port: int = 0, host: str = "127.0.0.1", token: str | None = None
) -> ReviewServer:
    """A server for ``app`` on ``host:port`` (0: any free port). Only loopback addresses
    are accepted: the page holds students' answers and changes their grades. ``token``:
    the credential the API asks for (None: a new random one, 256 bits)."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ReviewError(
            f"The review page listens on localhost only, not {host!r}; to grade from another "
            f"machine forward the port (ssh -L {port or 8765}:127.0.0.1:{port or 8765} ...)."
        )
    token = token or secrets.token_urlsafe(32)
    if not re.fullmatch(r"[A-Za-z0-9_-]{16,128}", token):
        raise ReviewError(
            "A review token is 16 to 128 letters, digits, '-' or '_' (it travels in a URL)."
        )
    handler = type("Handler", (_Handler,), {"app": app, "token": token})
    server = ReviewServer((host, port), handler)
    server.token = token
    return server
