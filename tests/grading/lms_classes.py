"""Classes of Lab 1 submissions laid out as each LMS's bulk download lays them out, with
the roster in that LMS's own export layout (for tests/grading/test_lms_flow.py).

* Canvas: "Download Submissions" files ``<sortable name slug>_[LATE_]<user id>_<attachment
  id>_lab1_attention.ipynb`` (canvas-lms ``lib/content_zipper.rb``), the gradebook export
  (``Student, ID, SIS User ID, SIS Login ID, Section``, "Points Possible", a test student)
  and a times file for the LATE-marked ones (Canvas's export has no times);
* Moodle: "Download all submissions" folders ``<Full name>_<participant id>_assignsubmission_file_``
  (``mod/assign/locallib.php``) and the grading worksheet (``Identifier, Full name, Email
  address, Status, ..., Last modified (submission)``); and a team assignment
  (:func:`make_moodle_teams`): one folder per group, ``<group name>_<group id>_assignsubmission_file``
  (``mod/assign/classes/downloader.php``), and its worksheet's ``Group`` column;
* Gradescope: "Export Submissions", ``submission_<id>/`` folders and ``submission_metadata.yml``
  (Ruby-symbol keys: ``:submitters:``, ``:created_at:``; one group submission), and the
  roster export (``First Name, Last Name, SID, Email, Role, Sections``).

Every class has a section folder holding one student, names in NFD (as macOS zips write
them: José Núñez, Zoë), a CJK name, late students, a student without a submission and a
resubmission made after review (:func:`resubmit`). Four graded codes only (the solution,
the blank lab, two named mistakes), so that one grading of each serves every class through
the grading cache; what varies per student is the written answer, the name and the time.
"""

from __future__ import annotations

import copy
import csv
import datetime as dt
import pathlib
import random
import re
import unicodedata

import nbformat

from lablib.grading.author.assignment import dumps_notebook, make_assignment
from lablib.grading.notebook import ANSWER_PLACEHOLDER, answer_tag, read_notebook

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solutions" / "lab1_attention.ipynb"
LAB = "lab1_attention"
QUESTION = "positions"
DUE = dt.datetime(2026, 11, 20, 23, 59, tzinfo=dt.timezone.utc)
FILE = "lab1_attention.ipynb"

#: The graded code each student hands in: (variant, text in the solution, what the student wrote).
MISTAKES = {
    "unscaled": (
        "energies = query @ key.swapaxes(-1, -2) / np.sqrt(query.shape[-1])",
        "energies = query @ key.swapaxes(-1, -2)",
    ),
    "slide": (
        "angles = positions / np.power(10000.0, 2 * pair / depth)",
        "angles = positions / np.power(10000.0, 2 * np.arange(depth)[np.newaxis, :] / depth)",
    ),
}
VARIANTS = ("full", "full", "full", "blank", "unscaled", "slide")

_FIRST = [
    "Emma",
    "Liam",
    "Olivia",
    "Noah",
    "Ava",
    "Mateo",
    "Sofía",
    "Lucas",
    "Mia",
    "Ethan",
    "Amara",
    "Kenji",
    "Chloé",
    "Omar",
    "Priya",
    "Jonas",
    "Leila",
    "Tomás",
    "Hana",
    "Felix",
    "Ines",
    "Ravi",
    "Nora",
    "Yusuf",
    "Elif",
    "Diego",
    "Freya",
    "Arjun",
    "Maja",
    "Theo",
    "Aisha",
    "Lena",
    "Bruno",
    "Sven",
]
_LAST = [
    "Anderson",
    "Brown",
    "Chen",
    "Dubois",
    "Evans",
    "Fischer",
    "García",
    "Hughes",
    "Ivanova",
    "Jensen",
    "Kowalski",
    "Lopez",
    "Müller",
    "Nakamura",
    "O'Brien",
    "Patel",
    "Quinn",
    "Rossi",
    "Schmidt",
    "Tanaka",
    "Usman",
    "Vargas",
    "Weber",
    "Xu",
    "Yilmaz",
    "Zhang",
    "Berg",
    "Costa",
    "Dahl",
    "Eriksen",
    "Ferreira",
    "Gruber",
    "Horvat",
    "Ito",
]


def _student_list(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    people = []
    for k in range(n):
        first, last = _FIRST[k % len(_FIRST)], _LAST[(k * 7) % len(_LAST)]
        if k == 1:
            first, last = "José", "Núñez"
        if k == 2:
            first, last = "小明", "王"
        if k == 3:
            first, last = (
                "Zoë",
                "Ivanova",
            )  # "mivanova"'s neighbour: the section folder of one student
        people.append(
            {
                "k": k,
                "first": first,
                "last": last,
                "sid": f"S{2000 + k}",
                "email": f"{unicodedata.normalize('NFKD', first).encode('ascii', 'ignore').decode().lower() or 'x'}"
                f".{k}@uni.example",
                "login": f"u{2000 + k}",
                "section": f"Sec-0{1 + k % 2}",
                "variant": VARIANTS[k % len(VARIANTS)],
                "late_hours": (30 if k % 5 == 2 else 3 if k % 7 == 4 else 0),
                "answer": ""
                if VARIANTS[k % len(VARIANTS)] == "blank"
                else f"(student {k}) "
                + rng.choice(
                    [
                        "Without positions attention is permutation-equivariant.",
                        "The average over tokens ignores their order.",
                        "An index grows without bound; sinusoids stay bounded.",
                    ]
                ),
            }
        )
    return people


def _notebooks() -> dict[str, nbformat.NotebookNode]:
    """The four variants, each with the blank lab's tagged answer cell (filled per student)."""
    solution, _ = read_notebook(SOLUTION)
    blank = make_assignment(solution)
    tagged = next(c for c in blank.cells if answer_tag(c) == QUESTION)
    out = {"blank": blank}
    for variant in ("full", *MISTAKES):
        nb = copy.deepcopy(solution)
        for i, cell in enumerate(nb.cells):
            if f"BEGIN ANSWER {QUESTION}" in cell.source:
                nb.cells[i] = copy.deepcopy(tagged)
            if (
                variant in MISTAKES
                and cell.cell_type == "code"
                and MISTAKES[variant][0] in cell.source
            ):
                cell.source = cell.source.replace(*MISTAKES[variant])
        assert variant == "full" or any(MISTAKES[variant][1] in c.source for c in nb.cells), variant
        out[variant] = nb
    return out


_BOOKS: dict = {}


def notebook(variant: str, answer: str) -> str:
    """A submission of ``variant`` with ``answer`` in its answer cell, as text."""
    if not _BOOKS:
        _BOOKS.update(_notebooks())
    nb = copy.deepcopy(_BOOKS[variant])
    cell = next(c for c in nb.cells if answer_tag(c) == QUESTION)
    if answer:
        cell.source = cell.source.replace(ANSWER_PLACEHOLDER, answer)
    return dumps_notebook(nb)


def write_variants(folder) -> pathlib.Path:
    """One notebook per graded code (to fill the grading cache once)."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for variant in ("full", "blank", *MISTAKES):
        (folder / f"{variant}.ipynb").write_text(notebook(variant, ""), encoding="utf-8")
    return folder


def _nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def _when(person) -> dt.datetime:
    return (
        DUE + dt.timedelta(hours=person["late_hours"])
        if person["late_hours"]
        else DUE - dt.timedelta(hours=1 + person["k"] % 9)
    )


def _write(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def canvas_slug(person) -> str:
    """Canvas's ``sortable_name`` ("Last, First") as its download writes it."""
    return "".join(
        c for c in f"{person['last']}, {person['first']}".lower() if c.isalnum() or c == "_"
    )


def make_canvas(folder, n: int = 33, seed: int = 0) -> dict:
    """A Canvas download in ``folder/subs`` (+ ``canvas_roster.csv``, ``times.csv``)."""
    folder = pathlib.Path(folder)
    people = _student_list(n, seed)
    subs = folder / "subs"
    absent = people[-1]  # on the roster, never submitted
    times = [("student", "lab", "submitted_at")]
    for p in people[:-1]:
        p["user_id"] = str(184000 + p["k"])
        late = p["late_hours"] > 0
        name = f"{canvas_slug(p)}_{'LATE_' if late else ''}{p['user_id']}_{9000000 + p['k']}_{FILE}"
        name = _nfd(name) if p["k"] == 1 else name  # as a macOS zip writes it
        where = subs / ("Sec-03" if p["k"] == 3 else p["section"] if p["k"] % 4 == 0 else "") / name
        _write(where, notebook(p["variant"], p["answer"]))
        p["path"] = where
        if late and p["k"] != 7:  # one LATE marker without a time: no deduction, listed
            times.append((p["sid"], "lab1", _when(p).isoformat(timespec="minutes")))
        p["time"] = _when(p) if late and p["k"] != 7 else None
    absent["user_id"] = str(184000 + absent["k"])
    absent["time"] = None
    rows = [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 1 (5501)"],
        ["    Points Possible", "", "", "", "", "23"],
    ]
    rows += [
        [f"{p['last']}, {p['first']}", p["user_id"], p["sid"], p["login"], p["section"], ""]
        for p in people
    ]
    rows.append(["Student, Test", "999999", "", "", "Sec-01", ""])
    _csv(folder / "canvas_roster.csv", rows)
    _csv(folder / "times.csv", times)
    return {
        "people": people,
        "subs": subs,
        "roster": folder / "canvas_roster.csv",
        "times": folder / "times.csv",
        "absent": absent,
        "lms": "canvas",
    }


def _csv(path: pathlib.Path, rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)


def _moodle_time(when: dt.datetime) -> str:
    return when.astimezone().strftime("%A, %d %B %Y, %I:%M %p").replace(" 0", " ")


def make_moodle(folder, n: int = 33, seed: int = 1) -> dict:
    """A Moodle download in ``folder/subs`` (+ ``worksheet.csv``)."""
    folder = pathlib.Path(folder)
    people = _student_list(n, seed)
    subs = folder / "subs"
    absent = people[-1]
    for p in people:
        p["participant"] = str(7300000 + 17 * p["k"])
    for p in people[:-1]:
        full = f"{p['first']} {p['last']}"
        name = f"{full}_{p['participant']}_assignsubmission_file_"
        name = _nfd(name) if p["k"] in (1, 3) else name
        where = (
            subs
            / ("Sec-03" if p["k"] == 3 else p["section"] if p["k"] % 4 == 0 else "")
            / name
            / FILE
        )
        _write(where, notebook(p["variant"], p["answer"]))
        p["path"] = where
        p["time"] = _when(p).replace(second=0, microsecond=0)
    absent["time"] = None

    def status(p):
        if p is absent:
            return "No submission"
        return "Submitted for grading" + (" - late" if p["late_hours"] else "")

    made = _moodle_worksheet(folder, "worksheet.csv", people, [absent], status)
    return made | {"absent": absent}


#: A team assignment's groups (members by student number): names as a teacher or a
#: student may write them (Moodle's "_", "&" and tags, a "-" followed by the name of a
#: student of another group, an apostrophe), the first group's id the participant id of
#: a student of another group; the last group hands in nothing; students 10 and 11 are in
#: no group (Moodle's "Default group").
TEAMS = (
    ("Team_Α ⚡", (0, 1, 2)),
    ("R&D-Emma Anderson", (3, 4, 5)),
    # its first member is 30 hours late; a name a student chose (Moodle's group
    # self-selection lets them): markup, a bidi override, a terminal escape and a formula,
    # all kept in the worksheet's Group column
    ("<i>Les</i> Bleus \u202e\x1b[2J=1+1", (7, 6)),
    ("O'Neil's", (8, 9)),
)
DEFAULT_GROUP = "Default group"


def moodle_group_folder(group: str, group_id: str) -> str:
    """A group's folder as Moodle's downloader.php writes it: the name through
    format_string (a bare "&" escaped, tags removed), "_" made a space, clean_filename's
    characters removed, then "_<group id>" and the plugin."""
    shown = re.sub(r"&(?![a-zA-Z0-9#]{1,8};)", "&amp;", group)
    shown = re.sub(r"<[^>]*>", "", shown).replace("_", " ")
    shown = re.sub("[\x00-\x1f\x7f&<>\"`|':\\\\/]", "", shown)
    return (
        f"{shown}_{group_id}_assignsubmission_file"
        if group_id
        else f"{shown}_assignsubmission_file"
    )


def make_moodle_teams(folder, n: int = 12, seed: int = 3) -> dict:
    """A Moodle team assignment's download in ``folder/subs`` (one folder per group that
    submitted, the group's first member's work) and its grading worksheet
    (``team_worksheet.csv``, with the Group column): every member's ``variant``,
    ``answer`` and ``time`` are their group's, ``group_of`` its first member."""
    folder = pathlib.Path(folder)
    people = _student_list(n, seed)
    for p in people:
        p["participant"] = str(7300000 + 17 * p["k"])
    groups = [*TEAMS, (DEFAULT_GROUP, tuple(range(10, n)))]
    ids = {TEAMS[0][0]: people[11]["participant"], TEAMS[1][0]: "501", TEAMS[2][0]: "502"}
    subs = folder / "subs"
    absent = []
    for group, members in groups:
        first = people[members[0]]
        first["time"] = _when(first).replace(second=0, microsecond=0)
        for k in members:
            people[k].update(
                group=group,
                group_of=first["k"],
                variant=first["variant"],
                answer=first["answer"],
                time=first["time"],
            )
        if group == TEAMS[-1][0]:  # handed in nothing
            absent += [people[k] for k in members]
            continue
        where = subs / moodle_group_folder(group, ids.get(group, "")) / FILE
        _write(where, notebook(first["variant"], first["answer"]))
        first["path"] = where
    for p in absent:
        p["time"] = None

    def status(p):
        return "No submission" if p in absent else "Submitted for grading"

    return _moodle_worksheet(folder, "team_worksheet.csv", people, absent, status, group=True)


def _moodle_worksheet(folder, file_name, people, absent, status, group=False) -> dict:
    """Moodle's grading worksheet of ``people`` in ``folder/file_name`` (with the
    ``Group`` column of a team assignment when ``group``; ``status(p)`` each row's
    status), and the class as the flow tests take it."""
    rows = [
        [
            "Identifier",
            "Full name",
            "Email address",
            "Status",
            *(["Group"] if group else []),
            "Grade",
            "Maximum Grade",
            "Grade can be changed",
            "Last modified (submission)",
            "Last modified (grade)",
            "Feedback comments",
        ]
    ]
    for p in people:
        rows.append(
            [
                f"Participant {p['participant']}",
                f"{p['first']} {p['last']}",
                p["email"],
                status(p),
                *([p["group"]] if group else []),
                "",
                "23.00",
                "Yes",
                "-" if any(p is q for q in absent) else _moodle_time(p["time"]),
                "-",
                "",
            ]
        )
    _csv(folder / file_name, rows)
    return {
        "people": people,
        "subs": folder / "subs",
        "roster": folder / file_name,
        "absent": absent,
        "lms": "moodle",
    }


def _gradescope_yaml(entries) -> str:
    lines = []
    for folder, submitters, when in entries:
        lines.append(f"{folder}:")
        lines.append("  :submitters:")
        for s in submitters:
            lines += [
                f"  - :name: {s['name']}",
                f"    :sid: '{s['sid']}'",
                f"    :email: {s['email']}",
            ]
        lines.append(
            f"  :created_at: {when.strftime('%Y-%m-%d %H:%M:%S')}.123456789 {when.strftime('%z')}"
        )
        lines.append("  :score: 0.0")
        lines.append("  :history: []")
    return "\n".join(lines) + "\n"


def make_gradescope(folder, n: int = 33, seed: int = 2) -> dict:
    """A Gradescope export in ``folder/subs/assignment_777_export`` (+ ``gs_roster.csv``);
    students 5 and 6 hand in one group submission."""
    folder = pathlib.Path(folder)
    people = _student_list(n, seed)
    export = folder / "subs" / "assignment_777_export"
    absent = people[-1]
    entries = []
    for p in people[:-1]:
        if p["k"] == 6:  # 5's group partner: no submission of their own
            continue
        sub = f"submission_{410000000 + p['k']}"
        submitters = [
            {
                "name": _nfd(f"{p['first']} {p['last']}")
                if p["k"] == 1
                else f"{p['first']} {p['last']}",
                "sid": p["sid"],
                "email": p["email"],
            }
        ]
        if p["k"] == 5:
            q = people[6]
            submitters.append(
                {"name": f"{q['first']} {q['last']}", "sid": q["sid"], "email": q["email"]}
            )
        p["time"] = _when(p).replace(microsecond=0)
        entries.append((sub, submitters, p["time"]))
        where = export / ("Sec-03" if p["k"] == 3 else "") / sub / FILE
        _write(where, notebook(p["variant"], p["answer"]))
        p["path"] = where
    people[6].update(
        time=people[5]["time"],
        variant=people[5]["variant"],
        answer=people[5]["answer"],
        group_of=people[5]["k"],
    )
    _write(export / "submission_metadata.yml", _gradescope_yaml(entries))
    absent["time"] = None
    rows = [
        ["First Name", "Last Name", "SID", "Email", "Role", "Sections"],
        ["Ian", "Structor", "", "ian@uni.example", "Instructor", ""],
    ]
    rows += [[p["first"], p["last"], p["sid"], p["email"], "Student", p["section"]] for p in people]
    _csv(folder / "gs_roster.csv", rows)
    return {
        "people": people,
        "subs": folder / "subs",
        "roster": folder / "gs_roster.csv",
        "absent": absent,
        "lms": "gradescope",
        "export": export,
    }


def resubmit(made: dict, k: int, hours_late: int = 40) -> dict:
    """Student ``k`` resubmits the full solution (same written answer) ``hours_late`` hours
    after the due date, as the LMS's next download shows it. Returns what to grade and how:
    ``{"path", "args"}`` (``args``: extra ``lablib grade`` arguments)."""
    p = made["people"][k]
    when = DUE + dt.timedelta(hours=hours_late)
    p.update(variant="full", time=when, late_hours=hours_late)
    text = notebook("full", p["answer"])
    if (
        made["lms"] == "canvas"
    ):  # a new attachment, LATE, beside the old file (the new zip unzipped over the old)
        path = p["path"].with_name(f"{canvas_slug(p)}_LATE_{p['user_id']}_{9500000 + k}_{FILE}")
        _write(path, text)
        times = made["times"].with_name("times2.csv")
        rows = list(csv.reader(open(made["times"], encoding="utf-8"))) + [
            [p["sid"], "lab1_attention", when.isoformat(timespec="minutes")]
        ]
        _csv(times, rows)
        return {"path": path, "args": ["--times", str(times)], "replaces": p["path"]}
    if (
        made["lms"] == "moodle"
    ):  # the same folder, the file replaced; the new worksheet has the new time
        _write(p["path"], text)
        sheet = made["roster"].with_name("worksheet2.csv")
        rows = list(csv.reader(open(made["roster"], encoding="utf-8")))
        for row in rows[1:]:
            if row[0] == f"Participant {p['participant']}":
                row[7] = _moodle_time(when)
        _csv(sheet, rows)
        return {"path": p["path"], "args": ["--roster", str(sheet)], "replaces": None}
    # Gradescope: a new submission id in the next export
    export2 = made["subs"].parent / "subs2" / "assignment_777_export"
    sub = f"submission_{420000000 + k}"
    _write(export2 / sub / FILE, text)
    _write(
        export2 / "submission_metadata.yml",
        _gradescope_yaml(
            [
                (
                    sub,
                    [{"name": f"{p['first']} {p['last']}", "sid": p["sid"], "email": p["email"]}],
                    when,
                )
            ]
        ),
    )
    return {"path": export2 / sub / FILE, "args": [], "replaces": p["path"]}
