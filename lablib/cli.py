"""The ``lablib`` command: ``assign``, ``grade``, ``review``, ``report``, ``export``, ``gradescope``, ``written``, ``data``.

Examples::

    lablib assign                                  # labs/*.ipynb from solutions/*.ipynb
    lablib assign lab2                             # one lab of the registry (lablib/labs.py)
    lablib grade lab1 submissions/ -o out --tests hidden/ --jobs 4
    lablib grade lab5_mine subs/ -o out --course ~/course   # ~/course/labs/lab5_mine.ipynb
    lablib review lab2 grades/lab2 --solution solutions/lab2_transformer_reuters.ipynb
    lablib report grades/lab2                      # the reports again, with the people's grades
    lablib export canvas grades/lab1 grades/lab2 --roster canvas_export.csv -o canvas_import.csv
    lablib gradescope lab1 -o autograder.zip --tests hidden/
    lablib written pdf lab2 grades/lab2 -o written-pdfs   # a PDF of the written answers per student
    lablib written import lab2 grades/lab2 evaluations.zip --printout written-pdfs   # Gradescope's grades back
    lablib data list
    lablib data fetch reuters --data-dir ~/lablib-data
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import warnings

__all__ = ["main", "build_parser"]


def _assign_sources(root: pathlib.Path, given) -> list[pathlib.Path]:
    """The solution notebooks to assign: paths as given, a registered lab's name as
    ``solutions/<name>.ipynb``, nothing given: every notebook in ``solutions/``."""
    from lablib.labs import UnknownLab, resolve_lab

    if not given:
        return sorted((root / "solutions").glob("*.ipynb"))
    sources = []
    for item in given:
        path = pathlib.Path(item)
        if path.suffix != ".ipynb" and not path.exists():
            try:
                path = root / "solutions" / resolve_lab(item).notebook
            except UnknownLab as exc:
                raise FileNotFoundError(f"{item} is neither a notebook nor a lab: {exc}") from None
        sources.append(path)
    return sources


def _cmd_assign(args) -> int:
    from lablib.grading.author.assignment import assign_notebook
    from lablib.grading.author.catalog import PACKAGE_LABS_DIR

    root = pathlib.Path.cwd()
    sources = _assign_sources(root, args.notebooks)
    if not sources:
        print(
            "lablib assign: no solution notebooks given and none in ./solutions; "
            "run it from the project root or pass solutions/<lab>.ipynb.",
            file=sys.stderr,
        )
        return 2
    out_dirs = [pathlib.Path(args.output) if args.output else root / "labs"]
    # Run from the project root of the lablib that is running (an editable install of
    # this checkout), without -o: the released labs also go into the package data that
    # `lablib grade` falls back to (blank labs only, never solutions).
    if not args.output and PACKAGE_LABS_DIR.resolve().parents[2] == root.resolve():
        out_dirs.append(PACKAGE_LABS_DIR)
    for source in sources:
        if not source.is_file():
            print(f"lablib assign: {source} does not exist.", file=sys.stderr)
            return 2
        outs = [assign_notebook(source, out_dir) for out_dir in out_dirs]
        print(f"{source} -> {', '.join(map(str, outs))}")
    return 0


def _late_policy(args):
    """The late policy of ``--due`` and its options, or None (then the folder's own)."""
    from lablib.grading.gradebook.late import LatePolicy

    given = [args.late_per_day, args.late_per_hour, args.late_cap, args.late_grace]
    if args.due is None:
        if any(v is not None for v in given) or args.late_from_file_times:
            raise ValueError("--late-* options need --due (the lab's due date).")
        return None
    return LatePolicy.parse(
        due=args.due,
        per_day=args.late_per_day,
        per_hour=args.late_per_hour,
        cap=args.late_cap,
        grace=args.late_grace,
        from_files=args.late_from_file_times,
    )


def _late_options(p) -> None:
    g = p.add_argument_group(
        "late work (kept in the output folder: later regrades and reports apply it)"
    )
    g.add_argument(
        "--due",
        metavar="TIME",
        default=None,
        help="due date, ISO 8601 (2026-11-20T23:59, with +01:00 for a zone; default: this machine's zone)",
    )
    g.add_argument(
        "--late-per-day",
        metavar="AMOUNT",
        default=None,
        help="deduction per started day late: 10%% (of the points possible) or points (2)",
    )
    g.add_argument(
        "--late-per-hour", metavar="AMOUNT", default=None, help="deduction per started hour late"
    )
    g.add_argument(
        "--late-cap",
        metavar="AMOUNT",
        default=None,
        help="at most this much in all (50%% or points)",
    )
    g.add_argument(
        "--late-grace",
        metavar="DURATION",
        default=None,
        help="no deduction within this time after the due date (15m, 2h)",
    )
    g.add_argument(
        "--late-from-file-times",
        action="store_true",
        help="where no submission time is found (the LMS download, --times, the roster's "
        "submitted_at:<lab> or submitted_at column), take the notebook's file time",
    )


def _cmd_grade(args) -> int:
    from lablib.grading.author import catalog
    from lablib.grading.grade import SubmissionRemoved, SubmissionReplaced, grade
    from lablib.grading.gradebook.roster import Roster, SubmissionTimes
    from lablib.grading.options import GradeOptions
    from lablib.grading.report.text import status_text
    from lablib.grading.spec import load_lab
    from lablib.grading.submissions import SubmissionSkipped

    spec = load_lab(args.lab, args.tests)  # the lab resolved once, passed down
    notebook = catalog.find_lab_notebook(
        spec, lab_notebook=args.lab_notebook, course_dir=args.course
    )
    options = GradeOptions(
        hidden_dirs=args.tests,
        jobs=args.jobs,
        timeout=args.timeout,
        memory_mb=args.memory,
        force=args.force,
        lab_notebook=notebook,
        progress=not args.quiet,
        isolate=not args.no_sandbox,
        fresh=args.fresh,
        roster=Roster.load(args.roster) if args.roster else None,
        times=SubmissionTimes.load(args.times) if args.times else None,
        late_policy=_late_policy(args),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SubmissionSkipped)
        warnings.simplefilter("always", SubmissionRemoved)
        warnings.simplefilter("always", SubmissionReplaced)
        results = grade(spec, args.submissions, args.output, options)
    for warning in caught:
        if issubclass(warning.category, SubmissionSkipped):
            print(f"lablib grade: skipped: {_printable(str(warning.message))}", file=sys.stderr)
        elif issubclass(warning.category, SubmissionRemoved):
            print(f"lablib grade: removed: {_printable(str(warning.message))}", file=sys.stderr)
        elif issubclass(warning.category, SubmissionReplaced):
            print(f"lablib grade: replaced: {_printable(str(warning.message))}", file=sys.stderr)
        else:
            warnings.showwarning(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    names = {r.submission: _printable(r.submission) for r in results}
    width = max([10, *(_width(name) for name in names.values())])
    print(f"{_pad('submission', width)}  {'score':>11}  status")
    for r in results:
        print(
            f"{_pad(names[r.submission], width)}  {r.score:>5g}/{r.max_score:<5g}  {status_text(r.status)}"
            + ("  (cached)" if r.cached else "")
        )
    _print_roster_lists(args.output)
    print(_gradebook_message(args.output, results))
    return 0


def _print_roster_lists(out) -> None:
    """What matched nothing and what the LMS marked late without a time, as the gradebook
    says (after a regrade too, where no --roster is given)."""
    from lablib.grading.gradebook import GradebookFolder

    data = GradebookFolder(out).read()
    roster = data.get("roster") or {}
    for name in roster.get("unmatched_submissions", []):
        print(
            f"lablib grade: roster: no student for submission {_printable(str(name))}",
            file=sys.stderr,
        )
    for student in roster.get("students_without_submission", []):
        key = str(
            student.get("student_id")
            or student.get("lms_id")
            or student.get("email")
            or student.get("name")
        )
        print(
            f"lablib grade: roster: no submission from {_printable(str(student.get('name') or key))} "
            f"({_printable(key)})",
            file=sys.stderr,
        )
    if data.get("late_policy"):
        for entry in data.get("submissions", []):
            lms = (entry.get("identity") or {}).get("lms") or {}
            if lms.get("late") and not entry.get("late"):
                print(
                    f"lablib grade: late: {_printable(entry['submission'])} is marked LATE by "
                    f"{str(lms.get('lms', 'the LMS')).capitalize()} but has no submission time: no deduction "
                    f"computed (give its time with --times FILE: student,lab,submitted_at)",
                    file=sys.stderr,
                )


def _width(text: str) -> int:
    """Columns ``text`` takes in a terminal: wide (CJK) characters 2, combining marks 0."""
    from wcwidth import wcswidth

    width = wcswidth(text)
    return width if width >= 0 else len(text)


def _pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal columns."""
    return text + " " * max(0, width - _width(text))


def _cmd_export(args) -> int:
    from lablib.grading.export import export
    from lablib.grading.gradebook.roster import Roster

    columns = {}
    for item in args.column:
        lab, sep, header = item.partition("=")
        if not sep or not lab.strip() or not header.strip():
            raise ValueError(
                f"--column {item!r}: expected LAB=HEADER, e.g. lab1_attention='Lab 1 (12345)'."
            )
        columns[lab.strip()] = header.strip()
    missing = "zero" if args.missing_zero else args.missing
    report = export(
        args.format,
        args.outputs,
        Roster.load(args.roster) if args.roster else None,
        args.output,
        columns=columns,
        pieces=args.pieces,
        missing=missing,
        allow_ungraded=args.allow_ungraded,
    )
    for lab in report["labs"]:
        for name in report["unmatched"][lab]:
            print(
                f"lablib export: {lab}: submission {_printable(name)} matched no roster student: exported from the "
                f"identity kept at grading",
                file=sys.stderr,
            )
        absent = report["missing"][lab]
        if absent:
            print(
                f"lablib export: {lab}: {len(absent)} students without a submission "
                f"({'0, noted' if missing == 'zero' else 'left empty'}): {_some(absent)}",
                file=sys.stderr,
            )
        ungraded = report["ungraded"].get(lab, [])
        if ungraded:
            print(
                f"lablib export: {lab}: {len(ungraded)} students with written answers never graded (counted 0) or "
                f"changed since graded (--allow-ungraded; noted): {_some(ungraded)}",
                file=sys.stderr,
            )
    print(_printable(report["summary"]))
    return 0


def _some(names, shown: int = 20) -> str:
    """The first ``shown`` of ``names``, printable, and how many more."""
    text = ", ".join(_printable(str(n)) for n in names[:shown])
    return text + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _gradebook_message(out, results) -> str:
    from lablib.grading.gradebook import GradebookFolder

    data = GradebookFolder(out).read()
    pending = sum(entry.get("ungraded", 0) for entry in data.get("submissions", []))
    return (
        f"wrote {pathlib.Path(out) / 'grades.csv'}, grades.json, feedback/ and summary.html: {len(results)} "
        f"submissions"
        + (f", {pending} written answers still to grade" if data.get("questions") else "")
    )


def _cmd_review(args) -> int:
    import getpass
    import signal
    import webbrowser

    from lablib.grading.author import catalog
    from lablib.grading.grade import rewrite_reports
    from lablib.grading.review.server import ReviewApp, make_server
    from lablib.grading.spec import load_lab

    spec = load_lab(args.lab, args.tests)
    template = catalog.find_lab_notebook(
        spec, lab_notebook=args.lab_notebook, course_dir=args.course
    )
    solution = catalog.find_solution_notebook(spec, solution=args.solution, course_dir=args.course)
    grader = args.grader or getpass.getuser()

    def write() -> str:
        return _gradebook_message(
            args.output, rewrite_reports(args.output, lab=spec, hidden_dirs=args.tests)
        )

    app = ReviewApp(
        args.output,
        spec,
        template=template,
        solution=solution,
        grader=grader,
        on_write=write,
        reveal=args.reveal,
    )
    server = make_server(app, port=args.port)
    print(
        f"lablib review: {spec.title}, grading as {grader}: open {server.url}  (Ctrl-C or SIGTERM to stop; every grade "
        f"is saved in {pathlib.Path(args.output) / 'reviews.sqlite'} as it is given)",
        flush=True,
    )
    if solution is None:
        print(
            "lablib review: no model answers shown: pass --solution (the solution notebook) or --course DIR "
            "(DIR/solutions/<lab>.ipynb)",
            file=sys.stderr,
        )
    opener = None
    if not args.no_browser:  # the token never goes on a command line (other users can read those)
        opener = _review_opener(server.url)
        webbrowser.open(opener.as_uri())

    def stop(signum, frame):  # Ctrl-C or a service manager's SIGTERM: write the gradebook, end
        raise KeyboardInterrupt

    for sig in (
        signal.SIGINT,
        signal.SIGTERM,
    ):  # also where SIGINT came in ignored (a background job)
        signal.signal(sig, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if opener is not None:
            shutil.rmtree(opener.parent, ignore_errors=True)
    print(write())
    return 0


def _review_opener(url: str) -> pathlib.Path:
    """A page that forwards the browser to ``url`` (which carries the review token), in a
    new folder only this user can read: the browser is started with this file's path, so
    the token is not in any process's command line (as Jupyter does)."""
    import html
    import tempfile

    folder = pathlib.Path(tempfile.mkdtemp(prefix="lablib-review-"))  # mode 0700, a new name
    path = folder / "open.html"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        address = html.escape(url)
        file.write(
            f'<!DOCTYPE html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={address}">'
            f'<title>lablib review</title><p><a href="{address}">Open the review page</a></p>\n'
        )
    return path


def _cmd_report(args) -> int:
    from lablib.grading.grade import rewrite_reports
    from lablib.grading.gradebook.roster import Roster

    roster = Roster.load(args.roster) if args.roster else None
    results = rewrite_reports(
        args.output,
        lab=args.lab,
        roster=roster,
        hidden_dirs=args.tests,
        late_policy=_late_policy(args),
    )
    print(_gradebook_message(args.output, results))
    return 0


def _printable(text: str) -> str:
    """``text`` for a terminal: control characters (escape sequences that could rewrite
    the screen) shown as ``?``."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _cmd_gradescope(args) -> int:
    from lablib.grading.author.autograder import build_autograder

    path = build_autograder(
        args.lab,
        args.output,
        hidden_dirs=args.tests,
        wheel=args.wheel,
        lab_notebook=args.lab_notebook,
        course_dir=args.course,
        timeout=args.timeout,
        memory_mb=args.memory,
    )
    print(f"wrote {path}")
    return 0


def _cmd_written(args) -> int:
    from lablib.grading.review import printout
    from lablib.grading.spec import load_lab

    spec = load_lab(args.lab, args.tests)
    if args.written_command == "pdf":
        manifest = printout.write_printouts(
            args.output,
            spec,
            args.to,
            questions=args.questions,
            chromium=args.chromium,
            html=args.html,
        )
        pages = sum(e["pages"] for e in manifest["students"])
        print(
            f"wrote {len(manifest['students'])} PDFs ({pages} pages, questions {', '.join(manifest['questions'])}) "
            f"and manifest.json to {args.to}"
        )
        keys = [e["key"] for e in manifest["students"]]
        for key in sorted({k for k in keys if keys.count(k) > 1}):
            print(
                f"lablib written: {_printable(key)} has {keys.count(key)} submissions in the gradebook: one PDF "
                f"each ({_printable(key)}.pdf, {_printable(key)}-2.pdf...); upload the one to grade",
                file=sys.stderr,
            )
        return 0
    if args.written_command == "points":
        rows = printout.write_points_csv(args.output, spec, args.to, questions=args.questions)
        print(f"wrote {args.to}: {rows} rows (student, question, points, comment)")
        return 0
    mapping = {}
    for item in args.question:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(
                f"--question {item!r}: expected GRADESCOPE_QUESTION=ID, e.g. 2=metric."
            )
        mapping[key.strip()] = value.strip()
    import getpass

    report = printout.import_gradescope(
        args.output,
        spec,
        args.evaluations,
        questions=args.questions,
        question_map=mapping,
        printout=args.printout,
        grader=args.grader or getpass.getuser(),
        replace=args.replace,
    )
    for line in report["unmatched"] + report["conflicts"] + report["capped"]:
        print(f"lablib written import: {_printable(line)}", file=sys.stderr)
    done = ", ".join(f"{q} {n}" for q, n in report["imported"].items())
    print(
        f"imported {sum(report['imported'].values())} grades ({done}); {report['unchanged']} unchanged, "
        f"{len(report['conflicts'])} kept as graded in lablib, {len(report['unmatched'])} rows matched no student, "
        f"{report['ungraded']} not graded in Gradescope, {report['items_added']} rubric items added. Then: "
        f"lablib report {args.output}"
    )
    return 0


def _cmd_data(args) -> int:
    from lablib.data import sources  # lazy: written separately, heavy imports avoided

    if args.data_command == "list":
        rows = sources.dataset_status(data_dir=args.data_dir)
        if not rows:
            print("no datasets registered")
            return 0
        keys = list(dict.fromkeys(k for row in rows for k in row))
        print(" | ".join(keys))
        for row in rows:
            print(" | ".join(str(row.get(k, "")) for k in keys))
        return 0
    path = sources.fetch_dataset(args.name, data_dir=args.data_dir)
    print(path)
    return 0


def _limit_options(p) -> None:
    """The options ``lablib grade`` and ``lablib gradescope`` share (their help texts and
    defaults are :class:`~lablib.grading.options.GradeOptions`')."""
    from lablib.grading.options import GradeOptions as G

    p.add_argument(
        "--tests",
        action="append",
        default=[],
        metavar="HIDDEN_DIR",
        help=f"{G.help('hidden_dirs')} (repeatable)",
    )
    p.add_argument(
        "--timeout", type=float, default=G.default("timeout"), metavar="S", help=G.help("timeout")
    )
    p.add_argument(
        "--memory",
        type=float,
        default=G.default("memory_mb"),
        metavar="MB",
        help=G.help("memory_mb"),
    )
    p.add_argument("--lab-notebook", metavar="PATH", help=G.help("lab_notebook"))
    p.add_argument(
        "--course",
        metavar="DIR",
        default=None,
        help="course folder holding labs/<lab>.ipynb (default: $LABLIB_COURSE_DIR); "
        "then the labs shipped with lablib",
    )


def _parse_assign(sub) -> None:
    """``lablib assign``: write blank labs."""
    p = sub.add_parser("assign", help="write blank labs (labs/*.ipynb) from solution notebooks")
    p.add_argument(
        "notebooks",
        nargs="*",
        help="solution notebooks, or lab names (lab1 -> solutions/lab1_attention.ipynb); "
        "default: solutions/*.ipynb",
    )
    p.add_argument("-o", "--output", help="output folder (default: labs/)")
    p.set_defaults(func=_cmd_assign)


def _parse_grade(sub) -> None:
    """``lablib grade``: grade submissions."""
    p = sub.add_parser("grade", help="grade submissions")
    p.add_argument("lab", help="lab name (lab1 or lab1_attention) or path of a spec module")
    p.add_argument("submissions", nargs="+", help=".ipynb files or folders of them")
    p.add_argument("-o", "--output", required=True, help="output folder")
    from lablib.grading.options import GradeOptions as G

    _limit_options(p)
    p.add_argument("--jobs", type=int, default=G.default("jobs"), metavar="N", help=G.help("jobs"))
    p.add_argument("--force", action="store_true", help=G.help("force"))
    p.add_argument(
        "--roster",
        metavar="CSV",
        default=None,
        help=f"{G.help('roster')} (lablib's student_id,name,email,section,submission; "
        f"a Canvas gradebook export; a Gradescope roster; a Moodle grading "
        f"worksheet)",
    )
    p.add_argument(
        "--times",
        metavar="CSV",
        default=None,
        help=f"{G.help('times')}: student,lab,submitted_at (one row per submission; "
        f"the latest counts)",
    )
    p.add_argument("--fresh", action="store_true", help=G.help("fresh"))
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.add_argument("--no-sandbox", action="store_true", help=f"do not use {G.help('isolate')}")
    _late_options(p)
    p.set_defaults(func=_cmd_grade)


def _parse_review(sub) -> None:
    """``lablib review``: the review page."""
    p = sub.add_parser(
        "review",
        help="grade the written answers in a local web page, one question across the class",
    )
    p.add_argument(
        "lab", help="lab name (lab2 or lab2_transformer_reuters) or path of a spec module"
    )
    p.add_argument("output", help="the output folder of `lablib grade` for this lab")
    p.add_argument(
        "--solution",
        metavar="PATH",
        default=None,
        help="the solution notebook, for the model answers (default: <course>/solutions/<lab>.ipynb)",
    )
    p.add_argument(
        "--lab-notebook", metavar="PATH", help="released lab notebook (the questions' text)"
    )
    p.add_argument(
        "--course", metavar="DIR", default=None, help="course folder (labs/, solutions/)"
    )
    p.add_argument(
        "--tests",
        action="append",
        default=[],
        metavar="HIDDEN_DIR",
        help="folder with hidden tests <lab>.py, as given to `lablib grade`",
    )
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    p.add_argument(
        "--grader", default=None, help="your name in the review log (default: your login)"
    )
    p.add_argument("--no-browser", action="store_true", help="only print the page's address")
    p.add_argument(
        "--reveal",
        action="store_true",
        help="let this page show one answer's student on request (for the instructor; each reveal is "
        "recorded in the review log with --grader's name)",
    )
    p.set_defaults(func=_cmd_review)


def _parse_report(sub) -> None:
    """``lablib report``: write a graded lab's reports again."""
    p = sub.add_parser(
        "report", help="write a graded lab's reports again, with the people's latest grades"
    )
    p.add_argument("output", help="the output folder of `lablib grade`")
    p.add_argument("--lab", default=None, help="the lab (default: the one in grades.json)")
    p.add_argument(
        "--tests",
        action="append",
        default=[],
        metavar="HIDDEN_DIR",
        help="folder with hidden tests <lab>.py, as given to `lablib grade`",
    )
    p.add_argument(
        "--roster",
        metavar="CSV",
        default=None,
        help="class list (default: the one the folder was graded with)",
    )
    _late_options(p)
    p.set_defaults(func=_cmd_report)


def _parse_export(sub) -> None:
    """``lablib export``: LMS import files."""
    p = sub.add_parser(
        "export", help="grades of graded labs as an LMS import file (Canvas, Moodle)"
    )
    p.add_argument("format", choices=("canvas", "moodle"))
    p.add_argument("outputs", nargs="+", help="output folders of `lablib grade`, one per lab")
    p.add_argument(
        "--roster",
        default=None,
        metavar="CSV",
        help="class list: adds its students and columns (for Canvas: its gradebook export, which has the "
        "ids Canvas matches); rows keep the students matched at grading",
    )
    p.add_argument("-o", "--output", required=True, help="the CSV file to write")
    p.add_argument(
        "--pieces", action="store_true", help="a column per graded piece after each lab total"
    )
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="LAB=HEADER",
        help="column header of a lab (Canvas: an existing assignment's 'Name (id)')",
    )
    p.add_argument(
        "--missing",
        choices=("zero", "blank"),
        default="zero",
        help="a student without a submission: 0 with a note (default), or blank (no grade)",
    )
    p.add_argument("--missing-zero", action="store_true", help=argparse.SUPPRESS)  # the default now
    p.add_argument(
        "--allow-ungraded",
        action="store_true",
        help="export although written answers are still to grade (counted 0; those students noted)",
    )
    p.set_defaults(func=_cmd_export)


def _parse_gradescope(sub) -> None:
    """``lablib gradescope``: a Gradescope autograder zip."""
    p = sub.add_parser("gradescope", help="build a Gradescope autograder zip")
    p.add_argument("lab")
    p.add_argument("-o", "--output", default="autograder.zip")
    _limit_options(p)
    p.add_argument(
        "--wheel",
        metavar="PATH",
        default=None,
        help="lablib wheel to ship in the zip (default: a wheel of the running lablib)",
    )
    p.set_defaults(func=_cmd_gradescope)


def _parse_written(sub) -> None:
    """``lablib written``: written answers for Gradescope."""
    p = sub.add_parser(
        "written",
        help="written answers for Gradescope: PDFs per student, the points as CSV, "
        "Gradescope's evaluations back into the review",
    )
    wsub = p.add_subparsers(dest="written_command", required=True)

    def written_common(w):
        w.add_argument(
            "lab", help="lab name (lab2 or lab2_transformer_reuters) or path of a spec module"
        )
        w.add_argument("output", help="the output folder of `lablib grade` for this lab")
        w.add_argument(
            "--questions",
            metavar="ID,ID,...",
            default=None,
            help="the written questions in Gradescope's order (default: the lab's order)",
        )
        w.add_argument(
            "--tests",
            action="append",
            default=[],
            metavar="HIDDEN_DIR",
            help="folder with hidden tests <lab>.py, as given to `lablib grade`",
        )

    w = wsub.add_parser(
        "pdf", help="one PDF of the written answers per student (headless Chromium)"
    )
    written_common(w)
    w.add_argument(
        "-o", "--to", required=True, metavar="DIR", help="the folder for the PDFs and manifest.json"
    )
    w.add_argument(
        "--chromium",
        metavar="PATH",
        default=None,
        help="Chromium or Chrome (default: found on PATH)",
    )
    w.add_argument("--html", action="store_true", help="also keep the HTML printed (DIR/html/)")
    w = wsub.add_parser("points", help="the people's points of the written answers as CSV")
    written_common(w)
    w.add_argument("-o", "--to", required=True, metavar="CSV", help="the CSV file to write")
    w = wsub.add_parser(
        "import", help="Gradescope's Export Evaluations (zip, folder or CSV) into the review store"
    )
    written_common(w)
    w.add_argument(
        "evaluations", help="the zip of Review Grades > Export Evaluations, its folder, or one CSV"
    )
    w.add_argument(
        "--question",
        action="append",
        default=[],
        metavar="N=ID",
        help="Gradescope question N (its number or title) is the written question ID",
    )
    w.add_argument(
        "--printout",
        metavar="DIR",
        default=None,
        help="the folder `lablib written pdf` wrote: grades go to the texts printed",
    )
    w.add_argument(
        "--grader", default=None, help="your name in the review log (default: your login)"
    )
    w.add_argument(
        "--replace",
        action="store_true",
        help="replace grades given differently in lablib (default: keep them, listed)",
    )
    p.set_defaults(func=_cmd_written)


def _parse_data(sub) -> None:
    """``lablib data``: list or fetch datasets."""
    p = sub.add_parser("data", help="list or fetch datasets")
    dsub = p.add_subparsers(dest="data_command", required=True)
    d = dsub.add_parser("list", help="datasets and whether they are present")
    d.add_argument("--data-dir", default=None)
    d = dsub.add_parser("fetch", help="download (and verify) one dataset")
    d.add_argument("name")
    d.add_argument("--data-dir", default=None)
    p.set_defaults(func=_cmd_data)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``lablib`` command: one function per command."""
    parser = argparse.ArgumentParser(prog="lablib", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (
        _parse_assign,
        _parse_grade,
        _parse_review,
        _parse_report,
        _parse_export,
        _parse_gradescope,
        _parse_written,
        _parse_data,
    ):
        add(sub)
    return parser


def main(argv=None) -> int:
    """Run the ``lablib`` command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, KeyError, ValueError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"lablib {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
