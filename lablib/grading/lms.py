"""What an LMS's download says about who submitted: Canvas, Moodle and Gradescope.

Each LMS names the files of its bulk download in its own way; lablib reads those names
as they are, so an instructor never renames a file:

* **Canvas**, *Assignments > Download Submissions* (``lib/content_zipper.rb`` of
  canvas-lms): one flat file per attachment,
  ``<name>_<user id>_<attachment id>_<original file name>``, where ``<name>`` is the
  student's sortable name ("Anderson, Emma") in lower case with everything but letters,
  digits and ``_`` removed (``andersonemma``), ``LATE_`` comes before the user id when
  Canvas counts the submission late, and an anonymously graded assignment has no name
  and ``anon_<anonymous id>`` instead of the user id. The user id is the ``ID`` column
  of Canvas's gradebook export. The download holds each student's latest submission.
  ``<name>`` is what the student (or, in a group assignment graded as a group, the
  group) is called, so it can hold ``_<digits>``: Canvas collapses ``_<digits>_`` in it,
  but not a final ``_1002``, nor one made when the punctuation is removed
  (``Mallory_1005-_000`` is written ``mallory_1005_000``); and ``<file>`` is the
  student's own file name. A name may then be read in several ways
  (``mallory_1002_1005_9000005_lab.ipynb``: user 1002 named ``mallory``, or user 1005
  named ``mallory_1002``): :func:`canvas_name` gives each (:func:`canvas_splits`), and
  :mod:`~lablib.grading.gradebook.identity` takes the one whose user id is the roster's
  student of that name (:func:`canvas_slug`), never one by itself. In a group assignment
  graded as a group (``Assignment#representatives``), the file of each group is named
  after the group (its name as above) under the user id of one of its members.
* **Moodle**, *Assignment > View all submissions > Download all submissions*: one folder
  per submission and submission plugin (the default since Moodle 3.1),
  ``<prefix>_assignsubmission_file_`` (``mod/assign/locallib.php``,
  ``download_submissions``) or, from ``mod/assign/classes/downloader.php`` (Moodle 4.1)
  on, the same without the last ``_``; with "Download submissions in folders" off, flat
  files ``<prefix>_assignsubmission_file_<file name>``. In every prefix ``_`` becomes a
  space and ``clean_filename`` removes control characters and ``&``, ``<``, ``>``,
  ``"``, the backtick, ``|``, ``'``, ``:``, the backslash and ``/``.
  The prefix of a student's own submission is ``<Full name>_<participant id>``
  ("Participant" instead of the name with anonymous submissions); the participant id is
  the ``Identifier`` ("Participant 1234567") of the assignment's grading worksheet, and
  differs between assignments. A *team* submission (an assignment with "Students submit
  in groups"):

  - ``downloader.php``: once per group, ``<group name>_<group id>``; the group's name
    has been through ``format_string`` (a bare ``&`` written ``&amp;``, tags removed), so
    "R&D" is written ``Ramp;D``; anonymous submissions change nothing. Students in no
    group (or in several) share the "Default group" (Moodle's word in the site's
    language), written without an id. A group id is not a participant id, though both
    are numbers, and the grading worksheet does not give it.
  - ``locallib.php`` before 4.1: once per member, ``<group name>-<Full name>_<participant
    id>`` (``<group name>-Participant_...`` with anonymous submissions), each member's
    copy of the group's files; the group's name as it is (not through
    ``format_string``), so "R&D" is written ``RD``.

  The grading worksheet of a team assignment has a ``Group`` column: each member's group
  as its name reads (or "Default group"), one row per student. :func:`moodle_file_text`
  gives how each writes a name (a 4.1 folder's group formatted, a copy's as it is), to
  find a folder's group there (case and spacing kept, as Moodle keeps them);
  :func:`moodle_file_forms` gives it folded.
  Uploading the worksheet (``mod/assign/feedback/offline``) grades each row's student
  alone: every member needs a row.
* **Gradescope**, *Review Grades > Export Submissions*: a folder per submission,
  ``submission_<id>/`` with the files uploaded, and ``submission_metadata.yml`` naming
  for each folder its ``:submitters:`` (``:name:``, ``:sid:``, ``:email:``; several for a
  group), ``:created_at:`` (the active submission's time) and ``:history:`` (earlier
  uploads).

Example::

    canvas_name("andersonemma_LATE_184001_9000001_lab4_gat.ipynb")
    # {'lms': 'canvas', 'name': 'andersonemma', 'user_id': '184001', 'attachment_id': '9000001',
    #  'late': True, 'file': 'lab4_gat.ipynb'}
"""

from __future__ import annotations

import copy
import datetime as dt
import pathlib
import re
import unicodedata

from lablib.grading.filenames import shown

__all__ = [
    "canvas_name",
    "canvas_splits",
    "canvas_slug",
    "moodle_name",
    "moodle_file_forms",
    "moodle_file_text",
    "read_gradescope_metadata",
    "GRADESCOPE_METADATA",
    "LmsDownloadError",
    "clean_label",
    "moodle_time",
    "moodle_number",
    "fold",
]

#: The metadata file of a Gradescope export.
GRADESCOPE_METADATA = "submission_metadata.yml"
#: The largest metadata file read (a class of a thousand, with every test's output, is a few MB).
METADATA_BYTES = 64 * 2**20

# What follows <name>_ (or begins the name of an anonymous submission's file):
# [LATE_]<user id | anon_<id>>_<attachment id>_<file>. Canvas's ids are ASCII digits.
_CANVAS_SPLIT = re.compile(
    r"(?P<late>LATE_)?(?P<user>[0-9]+|anon_[0-9A-Za-z]+)_(?P<attachment>[0-9]{3,})_(?P<file>.+)",
    re.DOTALL,
)
# What content_zipper.rb's sanitize_user_name collapses in a name ("_12_" -> "12").
_CANVAS_COLLAPSED = re.compile(r"_([0-9]+)_")
# <Full name | group name>[_<participant id | group id>]_assignsubmission_<plugin>[_[<file>]]
_MOODLE = re.compile(
    r"^(?P<name>.+?)(?:_(?P<participant>\d+))?_assignsubmission_(?P<plugin>[a-z0-9]+)"
    r"(?:_(?P<file>.*))?$",
    re.DOTALL,
)
# What Moodle's clean_filename (PARAM_FILE) removes from a file or folder name.
_MOODLE_FILE_REMOVES = re.compile("[\x00-\x1f\x7f&<>\"`|':\\\\/]")


class LmsDownloadError(ValueError):
    """An LMS download whose own description cannot be read (a Gradescope
    ``submission_metadata.yml`` cut short, not YAML, not a mapping)."""


def fold(text) -> str:
    """``text`` as lablib compares names and identifiers: Unicode NFC (a macOS zip's NFD
    ``josé`` equals the roster's NFC one), spaces collapsed, case folded."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", str(text or "")).strip()).casefold()


def clean_label(text) -> str:
    """A name taken from a submission (a file or folder name, LMS metadata) made safe to
    show and to write: NFC; control, bidirectional and invisible characters and the lone
    surrogates of a file name that was not UTF-8 replaced by ``?``; path separators by
    ``_``."""
    text = shown(unicodedata.normalize("NFC", str(text or "")), "?")
    return text.replace("/", "_").replace("\\", "_").strip()


def _canvas_word(char: str) -> bool:
    """Whether Canvas keeps ``char`` in a download's name (Ruby's ``[[:word:]]``: a letter,
    a mark, a decimal digit or a connector such as ``_``)."""
    kind = unicodedata.category(char)
    return kind[0] in "LM" or kind in ("Nd", "Pc")


def canvas_slug(text) -> str:
    """``text`` (a sortable name, or a group's name) as Canvas's download writes it
    (``content_zipper.rb``: ``sanitize_user_name``, then ``sanitize_file_name``): NFC,
    each ``_<digits>_`` collapsed to its digits, lower case, then everything but letters,
    marks, digits and ``_`` removed.

    Example::

        canvas_slug("Anderson, Emma")      # 'andersonemma'
        canvas_slug("Mallory_1005-_000")   # 'mallory_1005_000'
        canvas_slug("lab_12_group")        # 'lab12group'
    """
    text = _CANVAS_COLLAPSED.sub(r"\1", unicodedata.normalize("NFC", str(text or "")))
    return "".join(c for c in text.lower() if _canvas_word(c))


def _canvas_written(name: str) -> bool:
    """Whether Canvas can have written ``name`` before ``_<user id>``: not empty, only
    what :func:`canvas_slug` keeps, and in lower case (so never ``LATE``)."""
    return bool(name) and all(_canvas_word(c) and c.lower() == c for c in name)


def canvas_splits(file_name: str) -> list[dict]:
    """Every way a Canvas "Download Submissions" file name can be read, shortest name
    first: ``[{"name", "user_id" (or "anonymous_id"), "late", "attachment_id", "file"}]``
    ([] when it is not one). A reading is kept only when Canvas could have written it: a
    user id after a name :func:`canvas_slug` can give (lower case, letters, marks, digits
    and ``_``), an ``anon_<id>`` at the start with no name.

    Example::

        canvas_splits("mallory_1002_1005_9000005_lab.ipynb")
        # [{'name': 'mallory', 'user_id': '1002', 'attachment_id': '1005', ...},
        #  {'name': 'mallory_1002', 'user_id': '1005', 'attachment_id': '9000005', ...}]
    """
    text = unicodedata.normalize("NFC", file_name)
    starts = [0] + [i + 1 for i, char in enumerate(text) if char == "_"]
    out = []
    for start in starts:
        match = _CANVAS_SPLIT.fullmatch(text, start)
        if match is None:
            continue
        name, user = text[: max(start - 1, 0)], match["user"]
        anonymous = user.startswith("anon_")
        if (anonymous and start) or (not anonymous and not _canvas_written(name)):
            continue
        split = {"name": clean_label(name)}
        if anonymous:
            split["anonymous_id"] = user[len("anon_") :]
        else:
            split["user_id"] = user
        split.update(
            late=bool(match["late"]),
            attachment_id=match["attachment"],
            file=clean_label(match["file"]),
        )
        out.append(split)
    return out


def canvas_name(file_name: str) -> dict | None:
    """What a Canvas "Download Submissions" file name says, or None when it is not one.

    Returns:
        Read one way only (:func:`canvas_splits`): ``{"lms": "canvas", "name", "user_id"
        (or "anonymous_id"), "attachment_id", "late", "file"}``; ``name`` is "" for an
        anonymously graded assignment. Read in several ways: ``{"lms": "canvas", "name":
        the first reading's name (the row's name), "late", "late_disputed", "candidates":
        every reading}``, without a user id, attachment id or file: which reading is
        Canvas's is decided against the roster
        (:func:`lablib.grading.gradebook.identity.resolve`: the one whose user id is the
        roster's student named so), else none is. ``late`` is True when any reading has
        Canvas's ``LATE`` marker (a marker is never lost), ``late_disputed`` when some
        reading has none.
    """
    splits = canvas_splits(file_name)
    if not splits:
        return None
    if len(splits) == 1:
        return {"lms": "canvas", **splits[0]}
    late = [split["late"] for split in splits]
    first = splits[0]
    return {
        "lms": "canvas",
        "name": first["name"] or f"anon_{first.get('anonymous_id', '')}",
        "late": any(late),
        "late_disputed": any(late) and not all(late),
        "candidates": splits,
    }


def moodle_name(name: str) -> dict | None:
    """What a Moodle "Download all submissions" folder (``..._assignsubmission_file_``)
    or flat file name says, or None when it is not one.

    Returns:
        ``{"lms": "moodle", "name", "participant_id", "plugin", "file"}`` (``file``: ""
        for a folder). ``participant_id`` is the prefix's number as a student's folder
        has it: in a team assignment's download it is the group's id (which folder is
        which is decided against the roster, :mod:`~lablib.grading.gradebook.identity`). A
        prefix without a number (the "Default group" of a team assignment) is a group's:
        ``participant_id`` is "" and ``group`` its name, ``group_id`` "".
    """
    match = _MOODLE.match(unicodedata.normalize("NFC", name))
    if not match:
        return None
    found = {
        "lms": "moodle",
        "name": clean_label(match["name"]),
        "participant_id": match["participant"] or "",
        "plugin": match["plugin"],
        "file": clean_label(match["file"] or ""),
    }
    if not found["participant_id"]:
        found.update(group=found["name"], group_id="")
    return found


def moodle_file_text(text, *, formatted: bool = False) -> str:
    """``text`` (a group's or a student's name as the roster has it) as Moodle's download
    writes it in a folder or file name: NFC, ``_`` made a space and what
    ``clean_filename`` removes removed, then made safe to show as :func:`clean_label`
    makes the download's names; case and spacing kept, as Moodle keeps them ("Team Red"
    and "team  red" are two folders).

    Args:
        text: the name.
        formatted: False: the name as it is (a student's full name; a group's in the
            copies per member of ``locallib.php`` before Moodle 4.1, which write
            ``$group->name`` unformatted). True: as ``format_string`` shows it (a group's
            in the one folder per group of ``downloader.php``, Moodle 4.1 on: a bare
            ``&`` escaped ``&amp;``, tags removed, ``<`` and ``>`` escaped). Each writer
            writes one form only, so "R&D" and "RD" are told apart in 4.1's folders.

    Example::

        moodle_file_text("R&D_team")                   # 'RD team'
        moodle_file_text("R&D_team", formatted=True)   # 'Ramp;D team'
    """
    form = unicodedata.normalize("NFC", str(text or ""))
    if formatted:
        form = re.sub(r"&(?![a-zA-Z0-9#]{1,8};)", "&amp;", form)
        form = re.sub(r"<[^>]*>", "", form).replace("<", "&lt;").replace(">", "&gt;")
    return clean_label(_MOODLE_FILE_REMOVES.sub("", form.replace("_", " ")))


def moodle_file_forms(text, *, formatted: bool = False) -> set[str]:
    """:func:`moodle_file_text` folded as :func:`fold` does (a set: empty for a name
    Moodle writes as nothing); ``formatted`` as there.

    Example::

        moodle_file_forms("R&D_team")                   # {'rd team'}
        moodle_file_forms("R&D_team", formatted=True)   # {'ramp;d team'}
    """
    forms = {fold(moodle_file_text(text, formatted=formatted))}
    forms.discard("")
    return forms


def _time_text(value) -> str:
    """A metadata time as ISO 8601 with its offset ("" when there is none)."""
    if value is None or value == "":
        return ""
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)).isoformat(
            timespec="seconds"
        )
    text = str(value).strip()
    # Ruby's "2026-04-26 17:34:00.861687000 Z" / "... -0700": at most 6 fractional digits
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    text = re.sub(r"\s+Z$", "+00:00", text)
    text = re.sub(r"\s+([+-]\d{2}):?(\d{2})$", r"\1:\2", text)
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return str(value).strip()
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)).isoformat(
        timespec="seconds"
    )


def _key(entry, name: str):
    """``entry[':name']`` or ``entry['name']`` (Gradescope writes Ruby symbols)."""
    if not isinstance(entry, dict):
        return None
    return entry.get(f":{name}", entry.get(name))


def read_gradescope_metadata(path) -> dict[str, dict]:
    """The submissions a Gradescope export's ``submission_metadata.yml`` describes.

    Returns:
        folder name (``submission_123``) -> ``{"lms": "gradescope", "submission_id",
        "submitters": [{"name", "sid", "email"}], "submitted_at", "history": [times]}``.

    Raises:
        LmsDownloadError: the file cannot be read as Gradescope's metadata (the message
            names it and says what to do).
    """
    import hashlib

    import yaml

    path = pathlib.Path(path)
    what_to_do = (
        "download the export again (Review Grades > Export Submissions) and unzip it whole, or "
        "remove the file to grade the folders without it (each row is then named by its folder)"
    )
    try:
        size = path.stat().st_size
        if size > METADATA_BYTES:
            raise LmsDownloadError(
                f"{path} is {size / 2**20:.0f} MB, more than Gradescope's submission metadata of "
                f"any class ({METADATA_BYTES // 2**20} MB at most); {what_to_do}."
            )
        raw = path.read_bytes()[: METADATA_BYTES + 1]  # (a file grown since its size)
        seen = hashlib.sha256(raw).hexdigest()
        if seen in _METADATA_READ:  # these bytes, read before
            return copy.deepcopy(_METADATA_READ[seen])
        data = yaml.safe_load(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise LmsDownloadError(
            f"{path} cannot be read as Gradescope's submission metadata "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); {what_to_do}."
        ) from None
    if not isinstance(data, dict):
        raise LmsDownloadError(
            f"{path} is not Gradescope's submission metadata (expected a mapping of "
            f"submission_<id> folders, got {type(data).__name__}); {what_to_do}."
        )
    found = {}
    for folder, entry in data.items():
        folder = str(folder)
        submitters = []
        for person in _key(entry, "submitters") or []:
            if isinstance(person, dict):
                submitters.append(
                    {k: clean_label(_key(person, k) or "") for k in ("name", "sid", "email")}
                )
        history = [
            _time_text(_key(h, "created_at"))
            for h in (_key(entry, "history") or [])
            if isinstance(h, dict)
        ]
        found[folder] = {
            "lms": "gradescope",
            "submission_id": folder.rpartition("_")[2],
            "submitters": submitters,
            "submitted_at": _time_text(_key(entry, "created_at")),
            "history": [h for h in history if h],
        }
    if len(_METADATA_READ) >= 16:
        _METADATA_READ.clear()
    _METADATA_READ[seen] = copy.deepcopy(found)
    return found


#: Metadata already read, by the SHA-256 of its bytes: an export's metadata is looked up
#: once per file the export lists, and PyYAML's pure-Python reader takes about 0.1 s for
#: a class's (a student's 3,000 files cost minutes); the bytes are read each time.
_METADATA_READ: dict[str, dict] = {}


#: Moodle's worksheet times ("Wednesday, 10 June 2026, 2:14 PM"; US sites write the month
#: first), without a zone: the Moodle user's zone, taken as this machine's.
_MOODLE_TIME_FORMATS = (
    "%A, %d %B %Y, %I:%M %p",
    "%A, %B %d, %Y, %I:%M %p",
    "%A, %d %B %Y, %H:%M",
    "%d %B %Y, %I:%M %p",
    "%d %B %Y, %H:%M",
)


def moodle_number(text: str) -> float | None:
    """A number as a Moodle worksheet writes it (``"10.00"``; ``"10,00"`` on a site whose
    decimal separator is a comma): None for anything else (a scale's name, ``"1,000"``, a
    value with both separators, infinity or NaN), never a guess.

    Example::

        moodle_number("17,50")  # 17.5
    """
    text = unicodedata.normalize("NFKC", str(text)).strip()
    if re.fullmatch(r"[0-9]+,[0-9]{1,2}", text):
        text = text.replace(",", ".")
    if not re.fullmatch(r"[+-]?[0-9]+(\.[0-9]*)?", text):
        return None
    return float(text)


def moodle_time(text: str) -> str:
    """A Moodle grading worksheet's "Last modified (submission)" as ISO 8601 (in this
    machine's zone, as Moodle writes none); "" for "-" or nothing; other text unchanged
    (the late policy then says it cannot read it)."""
    raw = re.sub(r"\s+", " ", str(text or "")).strip()
    if raw in ("", "-"):
        return ""
    for form in _MOODLE_TIME_FORMATS:
        try:
            return dt.datetime.strptime(raw, form).astimezone().isoformat(timespec="minutes")
        except ValueError:
            continue
    return raw
