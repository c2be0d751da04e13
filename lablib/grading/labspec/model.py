"""What a lab's tests are: graded pieces, written questions, tests (a probe and a judge)
and the lab's spec that holds them (:class:`LabSpec`). How to write them:
:mod:`lablib.grading.spec`."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import pathlib
import re
from typing import Any
from collections.abc import Callable, Mapping

from lablib.grading.expect import expect_close

__all__ = [
    "LabSpec",
    "Piece",
    "WrittenQuestion",
    "RubricItem",
    "ANSWER_ID_RE",
    "Test",
    "HIDDEN_NAMESPACE",
    "NeedsSandbox",
    "sandbox_only",
    "judging_in_grader",
]

_IN_GRADER = contextvars.ContextVar("lablib_judging_in_grader", default=False)


class NeedsSandbox(BaseException):
    """Raised by :func:`sandbox_only` in the grader's own process: this judge must run
    in a sandboxed process (what it was about to do is the message). A BaseException,
    so that a judge's own ``except Exception`` cannot swallow it and go on in the grader."""


@contextlib.contextmanager
def judging_in_grader():
    """Mark judges run inside this block (this thread) as running in the grader's own
    process, where :func:`sandbox_only` refuses."""
    token = _IN_GRADER.set(True)
    try:
        yield
    finally:
        _IN_GRADER.reset(token)


def sandbox_only(what: str) -> None:
    """Judge side: call before building or running anything a submission described.

    Raises:
        NeedsSandbox: inside :func:`judging_in_grader` (the grader then runs the judge
            in a sandboxed process); elsewhere it returns and the judge goes on.
    """
    if _IN_GRADER.get():
        raise NeedsSandbox(what)


#: Hidden test modules are imported under this namespace; their tests are hidden.
HIDDEN_NAMESPACE = "lablib_hidden_tests"


@dataclasses.dataclass(frozen=True)
class Piece:
    """A graded piece: the cell starting with ``# GRADED: <name>``.

    Attributes:
        name: the marker name.
        objects: names the graded cell must define (functions, classes, constants).
        description: one line shown in reports.
        by_hand: the lab asks for it written by hand: at grading, its code calling
            lablib's layers or graph helpers, or the grader's references, gets no points
            (:mod:`lablib.grading.run.guard`). False for pieces that build models from
            lablib's layers.
        error_hints: ``(pattern, sentence)`` pairs: when the student's code raises an
            error whose text matches the regular expression ``pattern`` (NumPy's
            "matmul: ... mismatch" of a product written the wrong way round), the test's
            message starts with ``sentence``, the mistake in plain words, instead of the
            bare error.
    """

    name: str
    objects: tuple[str, ...]
    description: str = ""
    by_hand: bool = True
    error_hints: tuple[tuple[str, str], ...] = ()


#: What a written question's id may be (it also appears in the answer markers).
ANSWER_ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class RubricItem:
    """One reusable rubric item of a written question: points (negative for a deduction)
    and the comment the student reads."""

    points: float
    comment: str


@dataclasses.dataclass(frozen=True)
class WrittenQuestion:
    """A written answer graded by a person (``lablib review``), declared with
    :meth:`LabSpec.answer`.

    The solution notebook marks its model answer ``<!-- BEGIN ANSWER <id> -->`` ...
    ``<!-- END ANSWER -->``; ``lablib assign`` keeps both markers in the blank lab and
    tags the cell (``metadata.lablib.answer``), which is how the grader finds the
    student's answer (:func:`lablib.grading.notebook.written_answers`).

    Attributes:
        id: short name (``metric``), unique in the lab.
        points: what the question is worth.
        title: one line naming it in reports (``section 2: why this metric``).
        rubric: the items the review page starts with (editable there).
    """

    id: str
    points: float
    title: str
    rubric: tuple[RubricItem, ...] = ()


@dataclasses.dataclass
class Test:
    """One test of one graded piece. Create with :meth:`LabSpec.test`.

    A test without a judge compares the probe's values with ``expected`` (a value, or a
    function that returns it) by :func:`~lablib.grading.expect.expect_close`, within
    ``rtol`` and ``atol``. An expected NaN fails there (the grader takes it for NaN
    weights or outputs) unless ``nonfinite_ok`` is set, for a reference that holds NaN
    by design; an expected inf or -inf is always compared exactly.
    """

    __test__ = False

    lab: str
    piece: str
    name: str
    probe: Callable[[Mapping[str, Any]], Any]
    points: float = 1.0
    hint: str = ""
    hidden: bool = False
    timeout: float | None = None
    expected: Any = None
    rtol: float = 1e-5
    atol: float = 1e-6
    judge_fn: Callable[[Any], Any] | None = None
    module: str = ""
    error_hints: tuple[tuple[str, str], ...] = ()
    nonfinite_ok: bool = False

    def judge(self, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """Decorator: set the function that judges the probe's plain values."""
        self.judge_fn = fn
        return fn

    def named_error(self, error: str) -> str | None:
        """The sentence of the first of its piece's ``error_hints`` whose pattern the
        error text ``error`` matches, or None."""
        for pattern, sentence in self.error_hints:
            if re.search(pattern, error):
                return sentence
        return None

    def __reduce_ex__(self, protocol):
        raise TypeError(
            f"Test {self.id!r} must not be pickled: only its probe travels to the student's "
            f"process (a probe that refers to a Test or to the lab would carry the judges and "
            f"hidden tests along). Call helper functions from the probe instead."
        )

    def __call__(self, ns):  # a Test is still usable as its probe
        return self.probe(ns)

    @property
    def id(self) -> str:
        """``"piece::name"``, unique within a lab."""
        return f"{self.piece}::{self.name}"

    def run_judge(self, got: Any) -> float:
        """Judge plain values; raises TestFailure when they are wrong.

        Returns:
            The fraction of the points earned: 1.0, or what the judge function returned
            when it returns a number in [0, 1] (partial credit).
        """
        if self.judge_fn is not None:
            return self.fraction(self.judge_fn(got))
        expected = self.expected() if callable(self.expected) else self.expected
        expect_close(
            got,
            expected,
            rtol=self.rtol,
            atol=self.atol,
            what=self.name,
            nonfinite_ok=self.nonfinite_ok,
        )
        return 1.0

    def fraction(self, returned: Any) -> float:
        """The fraction of the points a judge's return value gives (None or True: 1.0).

        Raises:
            TypeError: the judge returned something else (the spec's bug).
        """
        if returned is None or returned is True:
            return 1.0
        if type(returned) in (int, float) and 0.0 <= returned <= 1.0:
            return float(returned)
        raise TypeError(
            f"The judge of test {self.id!r} returned {returned!r}; a judge returns "
            f"None (full marks), a number in [0, 1] (partial credit) or raises TestFailure."
        )


class LabSpec:
    """The graded pieces and tests of one lab."""

    def __init__(self, name: str, title: str = "", aliases: tuple[str, ...] = ()):
        self.name = name
        self.title = title or name
        self.aliases = tuple(aliases)
        self.pieces: dict[str, Piece] = {}
        self.tests: list[Test] = []
        #: Written questions graded by a person, by id, in the lab's order.
        self.answers: dict[str, WrittenQuestion] = {}
        #: Files whose content defines this lab's tests (public module, hidden modules).
        self.source_files: list[pathlib.Path] = []
        #: Folder of the public spec module (used to find the lab's notebooks).
        self.spec_dir: pathlib.Path | None = None
        #: Modules the judges import (Keras, TensorFlow): the grader imports them once,
        #: before its worker threads start.
        self.judge_imports: tuple[str, ...] = ()

    def __reduce_ex__(self, protocol):
        raise TypeError(
            f"LabSpec {self.name!r} must not be pickled: a probe that refers to the lab would "
            f"carry its judges and hidden tests into the student's process."
        )

    def __repr__(self) -> str:
        return f"LabSpec({self.name!r}, pieces={list(self.pieces)}, tests={len(self.tests)})"

    def with_hidden(self, tests, files) -> LabSpec:
        """A copy of this spec for one grading: its tests followed by the hidden ``tests``,
        its source files followed by ``files`` (the hidden tests' modules). The pieces,
        answers and settings are this spec's."""
        copy = LabSpec.__new__(LabSpec)  # not copy.copy(): pickling a spec is refused
        copy.__dict__.update(self.__dict__)
        copy.tests = [*self.tests, *tests]
        copy.source_files = [*self.source_files, *(f for f in files if f not in self.source_files)]
        return copy

    def piece(
        self, name: str, objects, description: str = "", *, by_hand: bool = True, error_hints=()
    ) -> Piece:
        """Declare a graded piece and the names its cell must define (``by_hand`` and
        ``error_hints``: see :class:`Piece`)."""
        if isinstance(objects, str):
            objects = (objects,)
        for pattern, _ in error_hints:
            re.compile(pattern)  # a bad pattern fails when the spec loads, not when judging
        piece = Piece(
            name,
            tuple(objects),
            description,
            bool(by_hand),
            tuple((str(p), str(t)) for p, t in error_hints),
        )
        self.pieces[name] = piece
        return piece

    def answer(self, id: str, *, points: float, title: str, rubric=()) -> WrittenQuestion:
        """Declare a written answer graded by a person (see :class:`WrittenQuestion`).

        ``rubric``: ``(points, comment)`` pairs the review page starts with.

        Example::

            lab.answer("metric", points=4, title="section 2: why this metric",
                       rubric=[(2, "Uses the class counts of these data"), (0, "No answer")])
        """
        if not isinstance(id, str) or not ANSWER_ID_RE.match(id):
            raise ValueError(
                f"Lab {self.name!r}: written answer id {id!r} is not a valid id; use lower-case "
                f"letters, digits and _ starting with a letter (e.g. 'metric', 'find_error')."
            )
        if not points > 0:
            raise ValueError(
                f"Lab {self.name!r}: written answer {id!r} has points={points!r}; give it a "
                f"positive number of points."
            )
        items = tuple(RubricItem(float(p), str(c)) for p, c in rubric)
        question = WrittenQuestion(id, float(points), title, items)
        self.answers[id] = question
        return question

    @property
    def written_points(self) -> float:
        """Total points of the written answers."""
        return sum(q.points for q in self.answers.values())

    def test(
        self,
        piece: str,
        *,
        points: float = 1.0,
        hint: str = "",
        name: str | None = None,
        expected: Any = None,
        rtol: float = 1e-5,
        atol: float = 1e-6,
        timeout: float | None = None,
        hidden: bool | None = None,
        nonfinite_ok: bool = False,
    ) -> Callable[[Callable], Test]:
        """Decorator: register a probe function as a test of ``piece``.

        ``hidden``: None (the default) makes the test hidden when its probe is defined in a
        hidden test module (one :func:`load_lab` imported from ``--tests``).
        ``nonfinite_ok``: an ``expected`` that holds NaN by design (see :class:`Test`).
        """
        if piece not in self.pieces:
            raise KeyError(
                f"Lab {self.name!r} has no graded piece {piece!r}; declare it first "
                f"with lab.piece({piece!r}, objects=[...]). Known: {sorted(self.pieces)}"
            )

        def register(fn: Callable) -> Test:
            module = getattr(fn, "__module__", "") or ""
            test = Test(
                lab=self.name,
                piece=piece,
                name=name or fn.__name__,
                probe=fn,
                points=float(points),
                hint=hint,
                hidden=_is_hidden_module(module) if hidden is None else bool(hidden),
                timeout=timeout,
                expected=expected,
                rtol=rtol,
                atol=atol,
                nonfinite_ok=nonfinite_ok,
                module=module,
                error_hints=self.pieces[piece].error_hints,
            )
            self.tests = [t for t in self.tests if t.id != test.id or t.hidden != test.hidden]
            self.tests.append(test)
            return test

        return register

    def tests_for(self, piece: str | None = None, *, hidden: bool | None = None) -> list[Test]:
        """The tests of ``piece`` (all pieces when None), optionally only hidden/public."""
        return [
            t
            for t in self.tests
            if (piece is None or t.piece == piece) and (hidden is None or t.hidden == hidden)
        ]

    @property
    def max_score(self) -> float:
        """Total points of all tests (public and hidden) loaded so far."""
        return sum(t.points for t in self.tests)

    def test_by_id(self, test_id: str) -> Test:
        """The test whose :attr:`Test.id` is ``test_id`` (``"piece::name"``)."""
        for test in self.tests:
            if test.id == test_id:
                return test
        raise KeyError(
            f"Lab {self.name!r} has no test {test_id!r}; known: {[t.id for t in self.tests]}"
        )


def _is_hidden_module(module: str) -> bool:
    return module == HIDDEN_NAMESPACE or module.startswith(HIDDEN_NAMESPACE + ".")
