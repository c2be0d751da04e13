"""``lablib review``: grade one written question across the whole class, in a local page.

The page shows one question at a time: its text and the model answer, then every
student's answer, anonymised ("Answer 7") and shuffled (the same order for every grader,
a different one per question), rendered as in the notebook. Beside them, the question's
rubric: reusable items (points and a comment the student reads), applied with a click or
a number key to the focused answer or to every selected one at once, editable while
grading (an item's new points re-score every answer it is on). Each change is stored in
``<out>/reviews.sqlite`` (:mod:`.store`) before the page hears back: closing the page or
the process loses nothing, and two graders can work at once.

The server is the standard library's, bound to 127.0.0.1 only. It answers only requests
addressed to localhost (no DNS rebinding) and changes only on JSON POSTs from its own
page (a request from another site is refused). Students' names never reach the page:
answers travel under a per-question token.

Example::

    app = ReviewApp("grades/lab2", load_lab("lab2"))
    server = make_server(app, port=0)
    print(server.url); server.serve_forever()
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import pathlib
import re
import threading
import urllib.parse

from lablib.grading.notebook import (
    ANSWER_BEGIN_RE,
    answer_tag,
    cell_source,
    read_notebook,
    written_answers,
)
from lablib.grading.report.gradebook_json import read_gradebook, result_from_entry
from lablib.grading.review.render import render_markdown
from lablib.grading.review.store import DB_NAME, ReviewError, ReviewStore

__all__ = ["ReviewApp", "ReviewServer", "make_server", "question_prompts"]

PAGE_DIR = pathlib.Path(__file__).with_name("page")
_STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
           "/review.js": ("review.js", "text/javascript; charset=utf-8"),
           "/review.css": ("review.css", "text/css; charset=utf-8")}
#: Request bodies larger than this are refused (a page's request is a few hundred bytes).
MAX_BODY = 256 * 1024


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
        ids = [m.group(1) for m in (ANSWER_BEGIN_RE.match(line.strip()) for line in lines) if m and m.group(1)]
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
            above = next((c for c in reversed(cells[max(0, index - 3):index]) if c.get("cell_type") == "markdown"),
                         None)
            if above is not None:
                text = (cell_source(above).strip() + "\n\n" + text).strip()
        prompts[tag] = text
    return prompts


class ReviewApp:
    """What the page asks and changes, without HTTP (tested directly).

    Args:
        out_dir: the grading output of one lab (``grades.json``; ``reviews.sqlite`` is
            created there).
        lab: its :class:`~lablib.grading.spec.LabSpec` (with written questions).
        template: the released lab notebook (the questions' text), or None.
        solution: the solution notebook (the model answers), or None.
        grader: the name recorded with each change.
        on_write: called by "Write the gradebook"; returns a message (the CLI passes
            :func:`lablib.grading.grade.rewrite_reports`).

    Raises:
        ReviewError: the lab has no written question, or ``out_dir`` holds no gradebook
            of this lab.
    """

    def __init__(self, out_dir, lab, *, template=None, solution=None, grader: str = "", on_write=None):
        if not lab.answers:
            raise ReviewError(f"Lab {lab.name!r} has no written answers to review (its spec declares none with "
                              f"lab.answer(...)).")
        self.out = pathlib.Path(out_dir)
        self.lab = lab
        self.grader = grader
        self.on_write = on_write
        self._lock = threading.Lock()
        self._stamp = None
        self._rows: dict = {}
        self._load()
        self.store = ReviewStore(self.out / DB_NAME, lab)
        template_nb = read_notebook(template)[0] if template else None
        prompts = question_prompts(template_nb, lab.answers)
        model = {}
        if solution:
            model = {q: a.text for q, a in written_answers(read_notebook(solution)[0], lab.answers).items()}
        self.texts = {q: {"prompt": render_markdown(prompts.get(q, "")),
                          "model": render_markdown(model[q]) if model.get(q) else ""} for q in lab.answers}

    # ------------------------------------------------------------ the gradebook's rows

    def _load(self) -> None:
        """(Re)read grades.json when it changed (a regrade while the page is open)."""
        path = self.out / "grades.json"
        try:
            stat = path.stat()
        except OSError:
            raise ReviewError(f"{self.out} holds no grades.json: run `lablib grade {self.lab.name} <submissions> "
                              f"-o {self.out}` first.") from None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return
        data = read_gradebook(self.out)
        if not isinstance(data, dict) or data.get("lab") != self.lab.name:
            raise ReviewError(f"{path} is the gradebook of {data.get('lab') if isinstance(data, dict) else '?'!r}, "
                              f"not of {self.lab.name!r}.")
        rows = {}
        for entry in data.get("submissions", []):
            try:
                result = result_from_entry(entry)
            except (KeyError, TypeError, ValueError):
                continue
            rows[result.submission] = result
        self._rows, self._stamp = rows, stamp

    def _token(self, question: str, submission: str) -> str:
        return hashlib.sha256(f"{self.store.secret}|token|{question}|{submission}".encode()).hexdigest()[:16]

    def _ordered(self, question: str) -> list[str]:
        """The submissions in this question's shuffled order (the same for every grader)."""
        key = lambda name: hashlib.sha256(f"{self.store.secret}|order|{question}|{name}".encode()).hexdigest()
        return sorted(self._rows, key=key)

    def _by_token(self, question: str, tokens) -> list[str]:
        known = {self._token(question, name): name for name in self._rows}
        missing = [t for t in tokens if t not in known]
        if missing:
            raise ReviewError(f"Unknown answer(s) {missing[:3]} for question {question!r}: the gradebook changed "
                              f"(a regrade?); reload the page.")
        return [known[t] for t in tokens]

    # ------------------------------------------------------------ what the page reads

    def questions(self) -> dict:
        """The lab, its questions and each one's progress."""
        with self._lock:
            self._load()
            rows = list(self._rows.values())
        scores, _ = self.store.for_gradebook(rows)
        out = []
        for q in self.lab.answers.values():
            given = [scores[r.submission][q.id] for r in rows]
            out.append({"id": q.id, "title": q.title, "points": q.points, "answers": len(rows),
                        "graded": sum(s.graded and not s.stale for s in given), "stale": sum(s.stale for s in given)})
        return {"lab": self.lab.name, "title": self.lab.title, "grader": self.grader, "questions": out}

    def question(self, question: str) -> dict:
        """One question: its text, model answer, rubric and every answer (anonymised)."""
        q = self.store.question(question)
        with self._lock:
            self._load()
            names = self._ordered(question)
            rows = [self._rows[n] for n in names]
        scores, _ = self.store.for_gradebook(rows)
        ids_of = {(row.points, row.comment): row.id for row in self.store.rubric(question)}
        answers = []
        for number, (name, r) in enumerate(zip(names, rows), 1):
            answer = r.answers.get(question)
            s = scores[name][question]
            answers.append({
                "token": self._token(question, name), "number": number,
                "html": render_markdown(answer.text) if answer and answer.text else "",
                "empty": not (answer and answer.text), "found": answer.found if answer else "",
                "notes": list(answer.notes) if answer else [
                    "no answer recorded: the notebook could not be read (see its status), or it was graded by an "
                    "older lablib (grade it again)"],
                "items": [ids_of.get(item) for item in s.items if ids_of.get(item) is not None],
                "adjustment": s.adjustment, "comment": s.comment, "score": s.score, "graded": s.graded,
                "stale": s.stale,
            })
        return {"id": q.id, "title": q.title, "points": q.points, **self.texts[question],
                "rubric": [vars(row) for row in self.store.rubric(question)], "answers": answers}

    # ------------------------------------------------------------ what the page changes

    def change(self, body: dict) -> dict:
        """Apply one change (``action``: ``grade``, ``item``, ``delete-item``, ``write``)
        and return what the page shows next."""
        action = body.get("action")
        question = body.get("question")
        if action == "write":
            if self.on_write is None:
                raise ReviewError("This review page cannot write the gradebook: run `lablib report` instead.")
            return {"message": str(self.on_write())}
        if not isinstance(question, str):
            raise ReviewError(f"A change names its question; got {question!r}.")
        if action == "grade":
            tokens = body.get("answers")
            if not isinstance(tokens, list) or not tokens:
                raise ReviewError("A grade names the answers it changes (a non-empty list).")
            with self._lock:
                self._load()
                names = self._by_token(question, tokens)
                digest = {n: self._rows[n].answers[question].digest if question in self._rows[n].answers else ""
                          for n in names}
            change = {k: body[k] for k in ("items", "add", "remove", "adjustment", "comment") if k in body}
            self.store.apply(names, question, change, digest=digest, grader=self.grader)
        elif action == "item":
            self.store.save_item(question, body.get("points"), body.get("comment", ""), item=body.get("id"),
                                 grader=self.grader)
        elif action == "delete-item":
            self.store.delete_item(question, body.get("id"), grader=self.grader)
        else:
            raise ReviewError(f"Unknown action {action!r}; expected grade, item, delete-item or write.")
        return self.question(question)


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "lablib-review"
    app: ReviewApp

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        if os.environ.get("LABLIB_REVIEW_LOG"):
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data) -> None:
        self._send(status, json.dumps(data).encode(), "application/json; charset=utf-8")

    def _local(self) -> bool:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]").lower()
        return host in ("127.0.0.1", "localhost", "::1")

    def do_GET(self):  # noqa: N802 - http.server's name
        if not self._local():
            return self._json(403, {"error": "This page answers only requests addressed to localhost."})
        path = urllib.parse.urlparse(self.path).path
        try:
            if path in _STATIC:
                name, kind = _STATIC[path]
                return self._send(200, (PAGE_DIR / name).read_bytes(), kind)
            if path == "/api/questions":
                return self._json(200, self.app.questions())
            match = re.fullmatch(r"/api/question/([a-z][a-z0-9_]*)", path)
            if match:
                return self._json(200, self.app.question(match.group(1)))
            return self._json(404, {"error": f"No page {path!r} here."})
        except ReviewError as exc:
            return self._json(400, {"error": str(exc)})

    def do_POST(self):  # noqa: N802
        if not self._local():
            return self._json(403, {"error": "This page answers only requests addressed to localhost."})
        origin = self.headers.get("Origin")
        if origin and urllib.parse.urlparse(origin).hostname not in ("127.0.0.1", "localhost", "::1"):
            return self._json(403, {"error": f"Changes come only from the review page itself, not from {origin}."})
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            return self._json(415, {"error": "Changes are sent as JSON (Content-Type: application/json)."})
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            return self._json(413, {"error": f"A change is 1 to {MAX_BODY} bytes of JSON; got {length}."})
        try:
            body = json.loads(self.rfile.read(length))
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            return self._json(400, {"error": f"The change is not a JSON object ({exc})."})
        if urllib.parse.urlparse(self.path).path != "/api/change":
            return self._json(404, {"error": f"No action at {self.path!r}; changes go to /api/change."})
        try:
            return self._json(200, self.app.change(body))
        except ReviewError as exc:
            return self._json(400, {"error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - said to the page, the server goes on
            return self._json(500, {"error": f"{type(exc).__name__}: {exc}"})


class ReviewServer(http.server.ThreadingHTTPServer):
    """The review page's HTTP server (127.0.0.1 only); ``url`` is its address."""

    daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"


def make_server(app: ReviewApp, *, port: int = 0, host: str = "127.0.0.1") -> ReviewServer:
    """A server for ``app`` on ``host:port`` (0: any free port). Only loopback addresses
    are accepted: the page holds students' answers and changes their grades."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ReviewError(f"The review page listens on localhost only, not {host!r}; to grade from another "
                          f"machine forward the port (ssh -L {port or 8765}:127.0.0.1:{port or 8765} ...).")
    handler = type("Handler", (_Handler,), {"app": app})
    return ReviewServer((host, port), handler)
