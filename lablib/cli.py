"""The ``lablib`` command: ``assign``, ``grade``, ``review``, ``report``, ``export``, ``gradescope``, ``written``, ``data``.

Examples::

    lablib assign                                  # labs/*.ipynb from solutions/*.ipynb
    lablib assign lab2                             # one lab of the registry (lablib/labs.py)
    lablib grade lab1 submissions/ -o out --tests hidden/ --jobs 4
    lablib grade ~/course/lab5_mine.py subs/ -o out --course ~/course   # ~/course/labs/lab5_mine.ipynb
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
import contextlib
import os
import pathlib
import shutil
import sys
import warnings

__all__ = ["main", "build_parser"]


def _assign_sources(root: pathlib.Path, given, shipped: pathlib.Path | None) -> list[pathlib.Path]:
    """The solution notebooks to assign: paths as given, a registered lab's name as
    ``solutions/<name>.ipynb``, nothing given: every notebook in ``solutions/``. Where
    ``solutions/`` lacks them and ``shipped`` is a folder (``-o`` given), the released labs
    there: an instructor with the wheel alone writes handouts from them."""
    from lablib.labs import UnknownLab, resolve_lab

    if not given:
        found = sorted((root / "solutions").glob("*.ipynb"))
        return found or (sorted(shipped.glob("*.ipynb")) if shipped else [])
    sources = []
    for item in given:
        path = pathlib.Path(item)
        if path.suffix != ".ipynb" and not path.exists():
            try:
                name = resolve_lab(item).notebook
            except UnknownLab as exc:
                raise FileNotFoundError(f"{item} is neither a notebook nor a lab: {exc}") from None
            path = root / "solutions" / name
            if not path.is_file() and shipped is not None and (shipped / name).is_file():
                path = shipped / name
        sources.append(path)
    return sources


def _cmd_assign(args) -> int:
    from lablib.grading.author.assignment import assign_notebook, check_lablib_pip
    from lablib.grading.author.catalog import PACKAGE_LABS_DIR

    if args.lablib_pip is not None:
        if not args.output:
            print(
                "lablib assign: --lablib-pip writes handouts to their own folder; add -o "
                "(e.g. -o handout), so that labs/ keeps the repository's default.",
                file=sys.stderr,
            )
            return 2
        check_lablib_pip(args.lablib_pip)
    root = pathlib.Path.cwd()
    sources = _assign_sources(root, args.notebooks, PACKAGE_LABS_DIR if args.output else None)
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
    elif not args.output and (root / "lablib" / "grading" / "labs").is_dir():
        print(
            f"lablib assign: lablib/grading/labs/ here is NOT updated: the lablib running is "
            f"installed from {PACKAGE_LABS_DIR.parents[2]}, not from this checkout, and "
            "`lablib grade` falls back to the released labs in the package. Run "
            "`pip install -e .` here, then `lablib assign` again.",
            file=sys.stderr,
        )
    for source in sources:
        if not source.is_file():
            print(f"lablib assign: {source} does not exist.", file=sys.stderr)
            return 2
        outs = [
            assign_notebook(source, out_dir, lablib_pip=args.lablib_pip) for out_dir in out_dirs
        ]
        print(f"{source} -> {', '.join(map(str, outs))}")
    return 0


def _late_policy(args):
    """The late policy of ``--due`` and its options, or None (then the folder's own)."""
    from lablib.grading.gradebook.late import LatePolicy

    given = {key: getattr(args, f"late_{key}") for key in _LATE_AMOUNTS}
    if args.due is None:
        if any(v is not None for v in given.values()) or args.late_from_file_times:
            raise ValueError("--late-* options need --due (the lab's due date).")
        return None
    return LatePolicy.parse(due=args.due, from_files=args.late_from_file_times, **given)


#: The ``--late-*`` options that take a value: :meth:`LatePolicy.parse`'s keyword (the
#: option's name) -> (metavar, help).
_LATE_AMOUNTS = {
    "per_day": (
        "AMOUNT",
        "deduction per started day late: 10%% (of the points possible) or points (2)",
    ),
    "per_hour": ("AMOUNT", "deduction per started hour late"),
    "cap": ("AMOUNT", "at most this much in all (50%% or points)"),
    "grace": ("DURATION", "no deduction within this time after the due date (15m, 2h)"),
}


def _late_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "late work (kept in the output folder: later regrades and reports apply it)"
    )
    g.add_argument(
        "--due",
        metavar="TIME",
        default=None,
        help="due date, ISO 8601 (2026-11-20T23:59, with +01:00 for a zone; default: this machine's zone)",
    )
    for key, (metavar, text) in _LATE_AMOUNTS.items():
        g.add_argument(f"--late-{key.replace('_', '-')}", metavar=metavar, default=None, help=text)
    g.add_argument(
        "--late-from-file-times",
        action="store_true",
        help="where no submission time is found (the LMS download, --times, the roster's "
        "submitted_at:<lab> or submitted_at column), take the notebook's file time",
    )


def _cmd_grade(args) -> int:
    from lablib.grading.author import catalog
    from lablib.grading.grade import (
        INTERRUPTED_WRITING,
        ResourcesWarning,
        SubmissionRemoved,
        SubmissionReplaced,
        grade,
    )
    from lablib.grading.gradebook.roster import Roster, SubmissionTimes
    from lablib.grading.options import GradeOptions
    from lablib.grading.report.text import status_text
    from lablib.grading.labspec.registry import load_lab
    from lablib.grading.submissions import LayoutWarning, SubmissionSkipped

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
        layout=args.layout,
    )
    with warnings.catch_warnings(record=True) as caught, _stopped_by_signals():
        warnings.simplefilter("always", SubmissionSkipped)
        warnings.simplefilter("always", SubmissionRemoved)
        warnings.simplefilter("always", SubmissionReplaced)
        warnings.simplefilter("always", LayoutWarning)
        try:
            results = grade(spec, args.submissions, args.output, options)
        except KeyboardInterrupt as stopped:
            writing = stopped.args == (INTERRUPTED_WRITING,)
            said = (
                "interrupted while writing the gradebook: its files may be partly of this run; "
                if writing
                else "interrupted; nothing was written to "
                f"{_printable(str(args.output))}. The notebooks judged before are cached: "
            )
            print(f"lablib grade: {said}run the same command again to go on.", file=sys.stderr)
            return 130
    for warning in caught:
        if issubclass(warning.category, LayoutWarning):
            print(f"lablib grade: layout: {_printable(str(warning.message))}", file=sys.stderr)
        elif issubclass(warning.category, SubmissionSkipped):
            print(f"lablib grade: skipped: {_printable(str(warning.message))}", file=sys.stderr)
        elif issubclass(warning.category, SubmissionRemoved):
            print(f"lablib grade: removed: {_printable(str(warning.message))}", file=sys.stderr)
        elif issubclass(warning.category, SubmissionReplaced):
            print(f"lablib grade: replaced: {_printable(str(warning.message))}", file=sys.stderr)
        elif issubclass(warning.category, ResourcesWarning):
            print(f"lablib grade: memory: {_printable(str(warning.message))}", file=sys.stderr)
        else:
            warnings.showwarning(
                _printable(str(warning.message)), warning.category, warning.filename, warning.lineno
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
    _print_unsandboxed(results)
    print(_gradebook_message(args.output, results))
    return 0


@contextlib.contextmanager
def _stopped_by_signals():
    """Within: SIGTERM and SIGHUP (a service manager, a closed terminal or ssh session)
    stop as Ctrl-C does, so the runs going are ended, never left running unwatched."""
    import signal
    import threading

    def stop(signum, frame):
        raise KeyboardInterrupt

    kept = {}
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if (
            sig is not None
            and threading.current_thread() is threading.main_thread()  # (the only one allowed)
            and signal.getsignal(sig) is signal.SIG_DFL  # never nohup's SIG_IGN, nor a caller's
        ):
            kept[sig] = signal.signal(sig, stop)
    try:
        yield
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)


def _print_unsandboxed(results) -> None:
    """One line where submissions ran without the sandbox stage: as the grading user,
    able to read and write what it can (each row's isolation notes say so too)."""
    bare = [
        r
        for r in results
        if not r.cached and any("sandbox stage not used" in n for n in r.isolation.notes)
    ]
    if bare:
        print(
            f"lablib grade: {len(bare)} submission(s) ran without the sandbox (not root, not Linux, "
            "or --no-sandbox): as your own user, able to read and write what you can (the hidden "
            "tests, the output folder, other notebooks). Grade a class as root, in a container or "
            "on Gradescope (lablib/grading/run/ISOLATION.md, in the package).",
            file=sys.stderr,
        )


def _print_roster_lists(out) -> None:
    """What matched nothing and what the LMS marked late without a time, as the gradebook
    says (after a regrade too, where no --roster is given)."""
    from lablib.grading.gradebook import GradebookFolder

    data = GradebookFolder(out).read()
    roster = data.get("roster") or {}
    why = roster.get("unmatched_reasons") or {}
    for name in roster.get("unmatched_submissions", []):
        print(
            f"lablib grade: roster: no student for submission {_printable(str(name))}"
            + (f": {_printable(str(why[name]))}" if why.get(name) else ""),
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
        _print_unknown_lateness(data)
        for entry in data.get("submissions", []):
            lms = (entry.get("identity") or {}).get("lms") or {}
            if lms.get("late") and not entry.get("late"):
                print(
                    f"lablib grade: late: {_printable(entry['submission'])} is marked LATE by "
                    f"{str(lms.get('lms', 'the LMS')).capitalize()} but has no submission time: no deduction "
                    f"computed (give its time with --times FILE: student,lab,submitted_at)",
                    file=sys.stderr,
                )


def _print_unknown_lateness(data: dict) -> None:
    """A line per row (or group member) whose lateness could not be computed: no
    penalty, never on time (a time or an extension that cannot be read); then one line
    naming those with no submission time at all (no penalty either: summary.html lists
    them, the terminal said nothing)."""
    untimed = []
    for entry in data.get("submissions", []):
        members = entry.get("members") or [{"name": "", "late": entry.get("late")}]
        for member in members:
            late = member.get("late")
            if late is None:
                who = f" ({member['name']})" if len(members) > 1 and member.get("name") else ""
                untimed.append(entry["submission"] + who)
            if isinstance(late, dict) and (late.get("computed") is False or not late.get("due")):
                who = f" ({member['name']})" if len(members) > 1 and member.get("name") else ""
                print(
                    f"lablib grade: late: {_printable(entry['submission'] + who)}: "
                    f"{_printable(str(late.get('text', '')))}",
                    file=sys.stderr,
                )
    if untimed:
        shown = ", ".join(_printable(u) for u in untimed[:10]) + (
            " ..." if len(untimed) > 10 else ""
        )
        print(
            f"lablib grade: late: no submission time for {len(untimed)}: {shown} (no late penalty "
            f"applied; give their times with --times FILE: student,lab,submitted_at)",
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

    columns = _assignments(
        args.column, "--column", "LAB=HEADER, e.g. lab1_attention='Lab 1 (12345)'"
    )
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
        allow_unknown_lateness=args.allow_unknown_lateness,
        allow_several=args.allow_several,
        allow_grader_errors=args.allow_grader_errors,
        scale_to_points_possible=args.scale_to_points_possible,
    )
    left_out = {name for person in report["left_out"] for name in person["submissions"]}
    for lab in report["labs"]:
        why = report.get("unmatched_reasons", {}).get(lab, {})
        for name in report["unmatched"][lab]:
            what = (
                "left out of the file (below)"
                if name in left_out
                else "exported from the identity kept at grading"
            )
            print(
                f"lablib export: {lab}: submission {_printable(name)} matched no roster student: {what}"
                + (f" ({_printable(why[name])})" if why.get(name) else ""),
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
        unknown = report["lateness_unknown"].get(lab, [])
        if unknown:
            print(
                f"lablib export: {lab}: {len(unknown)} students whose lateness was not computed, a time "
                f"or an extension that cannot be read (no late penalty, --allow-unknown-lateness; "
                f"noted): {_some(unknown)}",
                file=sys.stderr,
            )
    for person in report["left_out"]:
        grades = "; ".join(f"{h} {c}" for h, c in person["grades"].items()) or "no grade"
        print(
            f"lablib export: left out: {_printable(person['name'])} ({_printable(person['key'])}): "
            f"{_printable(person['why'])}; grades: {_printable(grades)}. "
            f"{_printable(person['advice'])}",
            file=sys.stderr,
        )
    print(_printable(report["summary"]))
    return 0


def _assignments(items, flag: str, form: str) -> dict[str, str]:
    """The ``KEY=VALUE`` items of a repeatable option as a dict, both sides stripped; an
    item without both sides is refused with ``form`` (the form expected, an example)."""
    found = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"{flag} {item!r}: expected {form}.")
        found[key.strip()] = value.strip()
    return found


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
    from lablib.grading.labspec.registry import load_lab

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
    the screen) and characters that show nothing (zero-width, bidirectional, tag
    characters: a name that looks like another's) shown as ``?``."""
    from lablib.grading.filenames import SHAPING, shown

    return "".join(c if c.isprintable() or SHAPING.match(c) else "?" for c in shown(text, "?"))


def _error_text(message) -> str:
    """An error's message for a terminal: each line :func:`_printable`, the lines after
    the first indented (a line break in a name cannot pass for a line of lablib's)."""
    return "\n  ".join(_printable(line) for line in str(message).split("\n"))


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
        gradescope_minutes=args.gradescope_minutes,
    )
    print(f"wrote {path}")
    return 0


def _font_warning(manifest: dict) -> None:
    """Says which PDFs hold characters no installed font draws (printed as boxes)."""
    from lablib.grading.review.fonts import FONT_HINT

    boxed = [e for e in manifest["students"] if e.get("missing_glyphs")]
    if not boxed:
        return
    shown = "; ".join(
        f"{_printable(e['file'])} ({_printable(e['missing_glyphs'])})" for e in boxed[:5]
    )
    more = f" and {len(boxed) - 5} more" if len(boxed) > 5 else ""
    print(
        f"lablib written: {len(boxed)} PDF(s) hold characters that no font on this machine draws, "
        f"printed as empty boxes: {shown}{more} (each file's characters: manifest.json, "
        f"missing_glyphs); {FONT_HINT}",
        file=sys.stderr,
    )


def _not_printed_warning(manifest: dict) -> int:
    """Says which students got no PDF and why; the exit status (1 when one got none)."""
    for entry in manifest["not_printed"]:
        print(
            f"lablib written: not printed: {_printable(entry['key'])} ({_printable(entry['submission'])}), "
            f"no {_printable(entry['file'])}: {_printable(entry['why'])}. Grade these answers with "
            f"`lablib review` (or in their notebook); every other PDF was written",
            file=sys.stderr,
        )
    return 1 if manifest["not_printed"] else 0


def _cmd_written(args) -> int:
    from lablib.grading.review import printout
    from lablib.grading.labspec.registry import load_lab

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
        _font_warning(manifest)
        keys = [e["key"] for e in manifest["students"]]
        for key in sorted({k for k in keys if keys.count(k) > 1}):
            print(
                f"lablib written: {_printable(key)} has {keys.count(key)} submissions in the gradebook: one PDF "
                f"each ({_printable(key)}.pdf, {_printable(key)}-2.pdf...); upload the one to grade",
                file=sys.stderr,
            )
        return _not_printed_warning(manifest)
    if args.written_command == "points":
        rows = printout.write_points_csv(args.output, spec, args.to, questions=args.questions)
        print(f"wrote {args.to}: {rows} rows (student, question, points, comment)")
        return 0
    mapping = _assignments(args.question, "--question", "GRADESCOPE_QUESTION=ID, e.g. 2=metric")
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
    for line in report["refused"]:
        print(f"lablib written import: not imported: {_printable(line)}", file=sys.stderr)
    done = ", ".join(f"{q} {n}" for q, n in report["imported"].items())
    print(
        f"imported {sum(report['imported'].values())} grades ({done}); {report['unchanged']} unchanged, "
        f"{len(report['conflicts'])} kept as graded in lablib, {len(report['refused'])} refused, "
        f"{len(report['unmatched'])} rows matched no student, "
        f"{report['ungraded']} not graded in Gradescope, {report['items_added']} rubric items added. Then: "
        f"lablib report {args.output}"
    )
    return 1 if report["refused"] else 0


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


def _limit_options(p: argparse.ArgumentParser) -> None:
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


def _graded_lab_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of a command on a graded lab's written answers (``review``,
    ``written``): the lab and the output folder ``lablib grade`` wrote."""
    p.add_argument(
        "lab", help="lab name (lab2 or lab2_transformer_reuters) or path of a spec module"
    )
    p.add_argument("output", help="the output folder of `lablib grade` for this lab")


def _hidden_tests_option(p: argparse.ArgumentParser) -> None:
    """``--tests`` of a command that reads a graded lab's output folder: the hidden tests
    given to ``lablib grade`` (their names in the reports)."""
    p.add_argument(
        "--tests",
        action="append",
        default=[],
        metavar="HIDDEN_DIR",
        help="folder with hidden tests <lab>.py, as given to `lablib grade`",
    )


def _parse_assign(p: argparse.ArgumentParser) -> None:
    """``lablib assign``: write blank labs."""
    p.add_argument(
        "notebooks",
        nargs="*",
        help="solution notebooks, or lab names (lab1 -> solutions/lab1_attention.ipynb); "
        "default: solutions/*.ipynb",
    )
    p.add_argument(
        "-o",
        "--output",
        help="output folder (default: labs/, and lablib/grading/labs/ when the lablib "
        "running is an editable install of this checkout); with -o, a lab missing from "
        "solutions/ is taken from the labs shipped with lablib",
    )
    p.add_argument(
        "--lablib-pip",
        metavar="TARGET",
        help="handouts for a term: where each lab's first cell installs lablib from when "
        "LABLIB_PIP is unset, e.g. the release the course grades with "
        "('lablib @ git+https://github.com/<you>/lablib@v0.3.0' or a lablib wheel); needs -o",
    )


def _parse_grade(p: argparse.ArgumentParser) -> None:
    """``lablib grade``: grade submissions."""
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
    p.add_argument(
        "--layout", choices=("auto", "plain"), default=G.default("layout"), help=G.help("layout")
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.add_argument("--no-sandbox", action="store_true", help=f"do not use {G.help('isolate')}")
    _late_options(p)


def _parse_review(p: argparse.ArgumentParser) -> None:
    """``lablib review``: the review page."""
    _graded_lab_arguments(p)
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
    _hidden_tests_option(p)
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


def _parse_report(p: argparse.ArgumentParser) -> None:
    """``lablib report``: write a graded lab's reports again."""
    p.add_argument("output", help="the output folder of `lablib grade`")
    p.add_argument("--lab", default=None, help="the lab (default: the one in grades.json)")
    _hidden_tests_option(p)
    p.add_argument(
        "--roster",
        metavar="CSV",
        default=None,
        help="class list (default: the one the folder was graded with)",
    )
    _late_options(p)


def _parse_export(p: argparse.ArgumentParser) -> None:
    """``lablib export``: LMS import files."""
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
    p.add_argument(
        "--allow-unknown-lateness",
        action="store_true",
        help="export rows whose lateness could not be computed (a submission time or an extension "
        "that cannot be read) without a late penalty (those students noted)",
    )
    p.add_argument(
        "--allow-several",
        action="store_true",
        help="export a student with several notebooks in one lab with the best one's total "
        "(those students noted) instead of refusing",
    )
    p.add_argument(
        "--allow-grader-errors",
        action="store_true",
        help="export rows whose status is grader-error (the grader failed on some tests, not the "
        "student) with their scores as they are (those students noted) instead of refusing",
    )
    p.add_argument(
        "--scale-to-points-possible",
        action="store_true",
        help="scale a column's scores to the points its assignment is out of where the roster "
        "says other points than the lab's (Canvas: its Points Possible row; Moodle: a grading "
        "worksheet's Maximum Grade, one column exported), rounded to 2 decimals, instead of refusing",
    )


def _parse_gradescope(p: argparse.ArgumentParser) -> None:
    """``lablib gradescope``: a Gradescope autograder zip."""
    p.add_argument("lab", help="lab name (lab1 or lab1_attention) or path of a spec module")
    p.add_argument(
        "-o",
        "--output",
        default="autograder.zip",
        help="the zip to write (default: autograder.zip)",
    )
    p.add_argument(
        "--gradescope-minutes",
        type=float,
        default=10.0,
        metavar="M",
        help="the assignment's autograder timeout in Gradescope (Autograder settings; default "
        "10, Gradescope's): the student's code gets half of it, and grading stops in time to "
        "write the results",
    )
    _limit_options(p)
    p.add_argument(
        "--wheel",
        metavar="PATH",
        default=None,
        help="lablib wheel to ship in the zip (default: a wheel of the running lablib)",
    )


def _parse_written(p: argparse.ArgumentParser) -> None:
    """``lablib written``: written answers for Gradescope."""
    wsub = p.add_subparsers(dest="written_command", required=True)

    def written_common(w):
        _graded_lab_arguments(w)
        w.add_argument(
            "--questions",
            metavar="ID,ID,...",
            default=None,
            help="the written questions in Gradescope's order (default: the lab's order)",
        )
        _hidden_tests_option(w)

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


def _parse_data(p: argparse.ArgumentParser) -> None:
    """``lablib data``: list or fetch datasets."""
    dsub = p.add_subparsers(dest="data_command", required=True)
    d = dsub.add_parser("list", help="datasets and whether they are present")
    d.add_argument(
        "--data-dir",
        default=None,
        help="a data folder to search first, then $LABLIB_DATA_DIR, then the cache",
    )
    d = dsub.add_parser("fetch", help="download (and verify) one dataset")
    d.add_argument(
        "name",
        help="the dataset: reuters, esol, freesolv, lipophilicity, mutag or cora "
        "(`lablib data list` shows them)",
    )
    d.add_argument(
        "--data-dir",
        default=None,
        help="the data folder to download into, as DATA_DIR/<the dataset's folder> (default: "
        "$LABLIB_DATA_DIR when it already holds the verified files, else the cache: "
        "~/.cache/lablib or $LABLIB_CACHE_DIR)",
    )


#: The commands, in the order of ``lablib --help``: (name, help, the function that adds its
#: arguments, the function that runs it).
_COMMANDS = (
    (
        "assign",
        "write blank labs (labs/*.ipynb) from solution notebooks",
        _parse_assign,
        _cmd_assign,
    ),
    ("grade", "grade submissions", _parse_grade, _cmd_grade),
    (
        "review",
        "grade the written answers in a local web page, one question across the class",
        _parse_review,
        _cmd_review,
    ),
    (
        "report",
        "write a graded lab's reports again, with the people's latest grades",
        _parse_report,
        _cmd_report,
    ),
    (
        "export",
        "grades of graded labs as an LMS import file (Canvas, Moodle)",
        _parse_export,
        _cmd_export,
    ),
    ("gradescope", "build a Gradescope autograder zip", _parse_gradescope, _cmd_gradescope),
    (
        "written",
        "written answers for Gradescope: PDFs per student, the points as CSV, "
        "Gradescope's evaluations back into the review",
        _parse_written,
        _cmd_written,
    ),
    ("data", "list or fetch datasets", _parse_data, _cmd_data),
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``lablib`` command: one function per command."""
    parser = argparse.ArgumentParser(prog="lablib", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text, add_arguments, run in _COMMANDS:
        command = sub.add_parser(name, help=text)
        add_arguments(command)
        command.set_defaults(func=run)
    return parser


def _printable_streams() -> None:
    """stdout and stderr write what they cannot encode as escapes (an ASCII terminal, a
    CI log with PYTHONIOENCODING=ascii, a file name that is not UTF-8): a student's name
    ended the command with a UnicodeEncodeError after the gradebook was written."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream already used in a way that forbids it
                pass


def _utf8_file_names() -> str | None:
    """Why file names cannot be read as they are here, or None: Python reading them as
    ASCII (the C locale with PYTHONUTF8=0) makes every non-ASCII name two rows, one per
    encoding, in a gradebook graded under both."""
    encoding = sys.getfilesystemencoding().lower().replace("-", "").replace("_", "")
    if encoding == "utf8":
        return None
    if sys.platform == "win32":
        fix = "unset PYTHONLEGACYWINDOWSFSENCODING"
    else:
        fix = "run with PYTHONUTF8=1 or a UTF-8 locale (LANG=C.UTF-8); PYTHONUTF8=0 in the C locale does this"
    return (
        f"Python reads file names here as {sys.getfilesystemencoding()}, not UTF-8: students' "
        f"names would be read as another text than elsewhere (one notebook, two rows). To "
        f"fix it, {fix}."
    )


def main(argv=None) -> int:
    """Run the ``lablib`` command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _printable_streams()
    why = _utf8_file_names() if args.command in ("grade", "report", "export", "written") else None
    if why:
        print(f"lablib {args.command}: error: {why}", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (FileNotFoundError, KeyError, ValueError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"lablib {args.command}: error: {_error_text(message)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
