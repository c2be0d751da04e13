"""Finding the submissions to grade: notebooks and folders -> named submissions.

A path given is a notebook (its name: the stem), or a folder (an archive given, the LMS's
download zip, is refused: unzip it and give the folder). In a folder, each notebook
is named by the student it belongs to:

* a notebook at the top of the folder: its stem (``w03.ipynb`` -> ``w03``);
* a notebook in a student's folder: the folder's name. A student's folder is the first
  folder on the way down that holds a notebook itself; folders above it that hold only
  folders are sections or teams (``Sec-03/mivanova/lab4_gat.ipynb`` -> ``mivanova``,
  also when the section holds one student). When two students' folders share a name,
  both are named by their path (``Sec-01/erin``, ``Sec-02/erin``); a student's folder
  holding several notebooks gives one submission each, ``folder/stem``;
* an LMS's bulk download, read as the LMS names it (:mod:`~lablib.grading.lms`): Canvas's
  ``<name>_[LATE_]<user id>_<attachment id>_<file>`` files (named ``<name>``), Moodle's
  ``<Full name>_<participant id>_assignsubmission_file_`` folders (named by the full
  name) and a Gradescope export's ``submission_<id>`` folders described by its
  ``submission_metadata.yml`` (named by the first submitter). What the download says
  (user ids, the LATE marker, submitters, the submission time) travels with the
  submission to the identity resolved at grading (:mod:`~lablib.grading.gradebook.identity`).

What a student uploads never speaks for the LMS. A student's folder of a download (a
Gradescope ``submission_<id>`` folder, a Moodle student's folder) names every notebook in
it, whatever the notebook's own file name says (a file named as Canvas names its files is
a Canvas file only outside such folders). A ``submission_metadata.yml`` inside a student's
folder (those two, or a folder that holds a notebook itself) is the student's file: it is
listed as not graded and never read, so it can neither say who submitted or when nor stop
the class with a file that does not parse.

A layout of one folder per student (a course that clones students' repositories) cannot
be told from sections of LMS downloads, nor a section from a student's folder, by its
shape: a student can put a Gradescope-shaped export, a Moodle folder, a Canvas-named file
or a folder named as a classmate in their own folder. ``layout="plain"`` says which it is:
each folder directly in a folder given is one student's (their repository) and names
every notebook in it, whatever its subfolders or file names say (several notebooks:
``folder/sub/stem``); a notebook at the top is named by its stem; no LMS's shape is read
and a ``submission_metadata.yml`` is not read; sections are given as folders of their own
(``lablib grade lab1 Sec-01/ Sec-02/``). The default, ``"auto"``, reads the shapes as
above, and where one folder given holds both folders nothing marks as an LMS's and
LMS-shaped content it says so once (a :class:`LayoutWarning` naming both), so that an
instructor whose folders are students' own grades again with ``--layout plain``.

Names are Unicode NFC (macOS zips write NFD), without control or bidirectional-override
characters, and unique in the batch (compared NFC and case-folded; a repeated name gets
``-2``, ``-3``...). Symbolic links are followed only while they stay inside the folder
given and only at its top (the instructor's: a folder of links to the students'
clones); a link inside a student's folder (a repository keeps them) is not followed, so
it cannot grade a classmate's notebook as its owner's. A notebook is graded once: a
second path to it (a top-level link beside it, the same notebook given twice) is not a
submission.

Example::

    from lablib.grading.submissions import find_submissions
    for found in find_submissions(["submissions/"]):
        found.name, found.path, found.lms
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import unicodedata
import warnings

from lablib.grading import lms
from lablib.grading.notebook import listed_path

__all__ = [
    "find_submissions",
    "collect_submissions",
    "Found",
    "warn_skipped",
    "SubmissionSkipped",
    "LayoutWarning",
    "LAYOUTS",
    "NOT_A_NOTEBOOK",
    "skipped_submission",
]

#: How a folder given is read: ``auto`` (LMS downloads by their shapes) or ``plain`` (none).
LAYOUTS = ("auto", "plain")


class SubmissionSkipped(UserWarning):
    """A path among the submissions that is not graded: a file that is not a notebook, a
    student's folder without one, a symbolic link leading out of its folder."""


class LayoutWarning(UserWarning):
    """A folder given holds both students' own folders and LMS-shaped content, read as the
    LMS's: if the folders are students' own, ``--layout plain`` is the reading to use."""


#: Why a visible file in a submissions folder is not graded.
NOT_A_NOTEBOOK = "not a notebook: only .ipynb files are graded"
#: Why a folder at the top of the folder given is not graded.
NO_NOTEBOOK_FOLDER = "a folder without a notebook (.ipynb): no row in the gradebook"
#: Why a ``submission_metadata.yml`` is not read: it lies in a student's submission.
PLANTED_METADATA = (
    f"a {lms.GRADESCOPE_METADATA} inside a student's submission folder ({{folder}}), "
    "so a file the student uploaded, not the export's own: not read (a Gradescope export "
    "has its metadata beside its submission_<id> folders)"
)
#: Why a ``submission_metadata.yml`` is not read with ``layout="plain"``.
PLAIN_METADATA = (
    "a Gradescope export's metadata file, not read: --layout plain reads every folder as "
    "a student's own"
)
# A Gradescope export's folder of one submission.
_SUBMISSION_FOLDER = re.compile(r"submission_\d+\Z")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _resolve_inside(
    entry: pathlib.Path, root: str, refused: list, follow: bool = True
) -> pathlib.Path | None:
    """``entry`` resolved, or None (and a note in ``refused``) when it is a link leading
    outside ``root`` (the submissions folder given), a broken one, or any link where
    ``follow`` is False (below the top of a folder given: inside a student's folder)."""
    if not entry.is_symlink():
        return entry
    real = os.path.realpath(entry)
    if not os.path.exists(real):
        refused.append((entry, "a broken symbolic link"))
        return None
    if not follow:
        refused.append(
            (
                entry,
                f"a symbolic link inside a student's folder (to {real}): not followed, "
                f"a notebook is graded where it is (links are followed only at the top "
                f"of the folder given, which are the instructor's)",
            )
        )
        return None
    if not _inside(real, root):
        refused.append(
            (
                entry,
                f"a symbolic link leading outside the submissions folder {root} "
                f"(to {real}); copy the notebook into the folder to grade it",
            )
        )
        return None
    return pathlib.Path(real)


def _is_notebook(entry: pathlib.Path, target: pathlib.Path) -> bool:
    return target.is_file() and entry.suffix.lower() == ".ipynb"  # Windows uploads: .IPYNB


def _entries(folder: pathlib.Path, root: str, refused: list, follow: bool = True):
    """``(entry, target)`` for each visible entry of ``folder`` (sorted), links resolved
    while they stay inside ``root`` (and only where ``follow``); the others are noted in
    ``refused``, and so is a folder that cannot be listed (its entries cannot be known;
    the rest of the class is listed)."""
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        refused.append(
            (
                folder,
                f"a folder that cannot be read ({exc.strerror or exc}); give the grading "
                f"user permission to read and enter it (chmod -R u+rX) and grade again",
            )
        )
        return
    for entry in entries:
        if entry.name.startswith(".") or entry.name in (
            "__pycache__",
            "__MACOSX",
        ):  # macOS zips' resource forks
            continue
        try:
            entry.lstat()  # a folder listed but not entered (mode r--) fails here, once
        except OSError as exc:
            refused.append(
                (
                    folder,
                    f"a folder whose files cannot be read ({exc.strerror or exc}); give the "
                    f"grading user permission to read and enter it (chmod -R u+rX) and grade "
                    f"again",
                )
            )
            return
        try:
            target = _resolve_inside(entry, root, refused, follow)
            if target is not None:
                target.stat()  # what the callers ask of it (is_dir, is_file) can be known
        except OSError as exc:
            refused.append((entry, f"cannot be read ({exc.strerror or exc})"))
            continue
        if target is not None:
            yield entry, target


#: Folders below a folder given that are walked; a folder deeper is not graded (listed as
#: skipped): a chain of folders thousands deep would end the listing of the whole class.
MAX_DEPTH = 32


def _walk(folder: pathlib.Path, root: str, refused: list, seen: set, where: tuple = ()):
    """The notebooks under ``folder`` (sorted) as ``(path parts below the folder, file)``,
    and the folders (as parts) holding a Gradescope ``submission_metadata.yml``. No link
    is followed here, below the top of the folder given: what a student's folder holds
    (a repository keeps links) is theirs, and a link in it to a classmate's notebook or
    folder would grade the classmate's work as theirs."""
    found, exports = [], []
    for entry, target in _entries(folder, root, refused, follow=False):
        if target.is_dir() and len(where) >= MAX_DEPTH:
            refused.append(
                (
                    entry,
                    f"a folder nested more than {MAX_DEPTH} folders deep; no LMS download "
                    f"nests so deep: move the notebooks it holds up to grade them",
                )
            )
        elif target.is_dir():
            real = os.path.realpath(target)
            if real not in seen:  # a link back up the tree is walked once
                seen.add(real)
                books, more = _walk(target, root, refused, seen, where + (entry.name,))
                found.extend(books)
                exports.extend(more)
        elif _is_notebook(entry, target):
            found.append((where + (entry.name,), target))
        elif entry.name == lms.GRADESCOPE_METADATA and target.is_file():
            exports.append((where, target))
        else:
            refused.append((entry, NOT_A_NOTEBOOK))
    return found, exports


@dataclasses.dataclass(frozen=True)
class Found:
    """One submission found among the paths given.

    Attributes:
        name: its name in the gradebook (unique in the batch).
        path: the notebook.
        where: its path below the folder given (``Sec-03/mivanova/lab4_gat.ipynb``; the
            file name for a notebook given by path), NFC.
        folder: the student's folder below the folder given (``Sec-03/mivanova``), "" when
            there is none (a notebook at the top, a Canvas file).
        lms: what the LMS download says (:mod:`~lablib.grading.lms`: ``{"lms": "canvas",
            "user_id", "late", ...}``), {} for plain files and folders.
        real: the real path of the notebook when it was listed
            (:func:`~lablib.grading.notebook.listed_path`); the grader reads the file
            there or none (a path that leads elsewhere since, through a link or a folder
            put in its place, is not graded); "" where unknown.
    """

    name: str
    path: pathlib.Path
    where: str = ""
    folder: str = ""
    lms: dict = dataclasses.field(default_factory=dict, compare=False)
    real: str = dataclasses.field(default="", compare=False)


def _nfc(parts) -> tuple:
    return tuple(unicodedata.normalize("NFC", p) for p in parts)


def _stem(file_name: str) -> str:
    return (
        file_name[: -len(".ipynb")]
        if file_name.lower().endswith(".ipynb")
        else pathlib.PurePath(file_name).stem
    )


def _gradescope_label(info: dict, folder: str) -> str:
    for person in info.get("submitters", []):
        for key in ("name", "sid", "email"):
            if person.get(key):
                return person[key]
    return folder


def _moodle_folder(name: str) -> dict | None:
    """What a Moodle student's or group's folder name says (:func:`lms.moodle_name`), or
    None when ``name`` is no such folder (a flat file's name is not one)."""
    info = lms.moodle_name(name)
    return info if info is not None and not info["file"] else None


def _lms_student_folder(name: str) -> bool:
    """Whether a folder's name is one an LMS gives a student's folder: a Gradescope
    ``submission_<id>`` or a Moodle student's (or group's) folder."""
    return bool(_SUBMISSION_FOLDER.match(name)) or _moodle_folder(name) is not None


def _student_folder_of(folder: tuple, holding: set, metadata: dict) -> tuple | None:
    """The first folder on the way down to ``folder`` (itself included) that is a
    student's: a Gradescope ``submission_<id>`` folder or one an export lists, a Moodle
    student's folder, or a folder that holds a notebook itself; None if there is none."""
    for j in range(1, len(folder) + 1):
        name = folder[j - 1]
        if (
            _lms_student_folder(name)
            or folder[:j] in holding
            or any(
                folder[: len(at)] == at and name in listed
                for at, listed in metadata.items()
                if len(at) < j
            )
        ):
            return folder[:j]
    return None


def _export_metadata(books, exports, refused: list) -> dict:
    """Each Gradescope export's metadata, ``{folder parts: read metadata}``, shallowest
    first. A ``submission_metadata.yml`` inside a student's folder (see
    :func:`_student_folder_of`) is a file the student uploaded: it is listed in ``refused``
    and never read, so it can neither name who submitted nor when, nor stop the class
    with a file that does not parse."""
    holding = {_nfc(parts[:-1]) for parts, _ in books}
    metadata: dict[tuple, dict] = {}
    for parts, path in sorted(exports, key=lambda e: len(e[0])):
        parts = _nfc(parts)
        student = _student_folder_of(parts, holding, metadata)
        if student is not None:
            refused.append((path, PLANTED_METADATA.format(folder="/".join(student))))
            continue
        metadata[parts] = lms.read_gradescope_metadata(path)
    return metadata


def _gradescope_download(parts, metadata: dict):
    """``(label, folder parts, lms info)`` of a notebook of a Gradescope export, or None."""
    export = max(
        (p for p in metadata if len(p) < len(parts) - 1 and parts[: len(p)] == p),
        key=len,
        default=None,
    )
    if export is None:
        return None
    # the submission_<id> folder: the one the metadata lists (an instructor may have
    # sorted the export into section folders), else the first below the export
    at = next(
        (j for j in range(len(export), len(parts) - 1) if parts[j] in metadata[export]),
        len(export),
    )
    folder = parts[at]
    info = metadata[export].get(folder) or {
        "lms": "gradescope",
        "submission_id": folder.rpartition("_")[2],
        "submitters": [],
        "submitted_at": "",
        "history": [],
        "note": f"{folder} is not in {lms.GRADESCOPE_METADATA}",
    }
    return lms.clean_label(_gradescope_label(info, folder)), parts[: at + 1], info


def _flat_download(file_name: str) -> tuple[str, dict] | None:
    """``(label, lms info)`` of a file named as a flat LMS download names its files, or
    None. A name both LMSs could have written is Canvas's when Canvas's own prefix
    (``<name>_[LATE_]<user id>_<attachment id>_``, which always has a name or
    ``anon_<id>``: ``1_5001_assignsubmission_file_lab.ipynb`` is group 1's Moodle file)
    holds no ``_assignsubmission_``: the
    rest is the student's own file name, which could say anything
    (``smithmallory_184002_9000002_x-andersonemma_1234_assignsubmission_file_lab1.ipynb``
    is Mallory's); else Moodle's
    (``Alice Smith_7300001_assignsubmission_file_hw_1_2023.ipynb`` is Alice Smith's)."""
    canvas = lms.canvas_name(file_name)
    named = canvas is not None and (canvas["name"] or canvas.get("anonymous_id"))
    if named and "_assignsubmission_" not in canvas["name"]:
        return canvas["name"] or f"anon_{canvas.get('anonymous_id', '')}", canvas
    flat = lms.moodle_name(file_name)
    if flat is not None and flat["file"]:
        return flat["name"], flat
    if canvas is not None:
        return canvas["name"] or f"anon_{canvas.get('anonymous_id', '')}", canvas
    return None


def _lms_shaped(parts, exports) -> bool:
    """Whether a notebook (its parts below the folder given) could be read as an LMS
    download's: a Gradescope or Moodle student's folder on its way down, a flat LMS file
    name, or a ``submission_metadata.yml`` in a folder above it."""
    folders = parts[:-1]
    return (
        any(_lms_student_folder(p) for p in folders)
        or _flat_download(parts[-1]) is not None
        or any(folders[: len(at)] == at for at in exports)
    )


def _download_at(parts, exports) -> str:
    """Where an LMS-shaped notebook's download lies, for a message: the export's folder,
    the folder holding a Moodle folder, or the folder holding a flat file ("" for the top
    of the folder given)."""
    export = max((at for at in exports if parts[: len(at)] == at), key=len, default=None)
    if export is not None:
        return "/".join(export)
    moodle = next(
        (i for i, p in enumerate(parts[:-1]) if _lms_student_folder(p)),
        None,
    )
    return "/".join(parts[: moodle if moodle is not None else len(parts) - 1])


def _mixed_note(books, exports, given: str) -> str | None:
    """The :class:`LayoutWarning` of one folder given that holds both students' own
    folders (notebooks in folders nothing marks as an LMS's) and LMS-shaped content, or
    None."""
    at = [_nfc(parts) for parts, _ in exports]
    own, lms_at = [], []
    for parts, _ in books:
        parts = _nfc(parts)
        if _lms_shaped(parts, at):
            lms_at.append(_download_at(parts, at) or "(the top)")
        elif len(parts) > 1:
            own.append(parts[0])
    if not (own and lms_at):
        return None
    own, lms_at = sorted(set(own)), sorted(set(lms_at))
    return (
        f"{given} holds students' own folders ({_some(own)}) and LMS-shaped content in "
        f"{_some(lms_at)}, read as LMS downloads (names, ids and times from their files). "
        "If those are files students put in their own folders (a folder per student, as "
        "cloned from their repositories), grade with --layout plain."
    )


def _some(paths, shown: int = 3) -> str:
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    cleaned = ("/".join(lms.clean_label(p) for p in path.split("/")) for path in paths[:shown])
    return ", ".join(cleaned) + more


def _classify(books, exports, refused: list, layout: str = "auto") -> tuple[list, list]:
    """Split the notebooks of one folder given into those of an LMS download, as
    ``(label, student folder parts or None, parts, file, lms info)``, and the plain ones.

    A student's folder of an LMS download (a Gradescope submission, a Moodle student's
    folder) names every notebook inside it, whatever the notebook's own file name says:
    a file named as Canvas names its files is read as a Canvas file only outside them
    (which LMS wrote a flat file's name: :func:`_flat_download`). With ``layout="plain"``
    nothing is an LMS download's and no metadata file is read."""
    if layout == "plain":  # the folder at the top names all in it; its owner chose the rest
        refused.extend((path, PLAIN_METADATA) for _, path in exports)
        books = [(_nfc(parts), target) for parts, target in books]
        return [
            (lms.clean_label(parts[0]), parts[:1], parts, target, {})
            for parts, target in books
            if len(parts) > 1
        ], [(parts, target) for parts, target in books if len(parts) == 1]
    metadata = _export_metadata(books, exports, refused)
    downloads, plain = [], []
    for parts, target in books:
        parts = _nfc(parts)
        gradescope = _gradescope_download(parts, metadata)
        if gradescope is not None:
            label, folder, info = gradescope
            downloads.append((label, folder, parts, target, info))
            continue
        moodle = next(
            (
                (i, info)
                for i, part in enumerate(parts[:-1])
                if (info := _moodle_folder(part)) is not None
            ),
            None,
        )
        if moodle is not None:
            i, info = moodle
            downloads.append((info["name"], parts[: i + 1], parts, target, info))
            continue
        flat = _flat_download(parts[-1])
        if flat is not None:
            downloads.append((flat[0], None, parts, target, flat[1]))
            continue
        plain.append((parts, target))
    return downloads, plain


def _student_folders(plain) -> dict[tuple, tuple]:
    """Each plain notebook's student folder: the first folder on its way down that holds
    a notebook itself (parts -> folder parts; () for a notebook at the top)."""
    holding = {parts[:-1] for parts, _ in plain}
    return {
        parts: next((parts[:j] for j in range(1, len(parts)) if parts[:j] in holding), ())
        for parts, _ in plain
    }


def _named(downloads, plain, given: str) -> list[Found]:
    """The :class:`Found` of one folder given: every notebook named (see the module's
    docstring); names not yet unique across folders."""
    folders = _student_folders(plain)
    items = []  # (label, student folder parts or None, parts, target, lms)
    for parts, target in plain:
        folder = folders[parts]
        items.append(
            (
                lms.clean_label(folder[-1]) if folder else lms.clean_label(_stem(parts[-1])),
                folder or None,
                parts,
                target,
                {},
            )
        )
    items.extend(downloads)
    # two students' folders with one name: both named by their path below the folder given
    by_label: dict[str, set] = {}
    for label, folder, _, _, _ in items:
        if folder is not None:
            by_label.setdefault(lms.fold(label), set()).add(folder)
    per_folder: dict[tuple, int] = {}
    for _, folder, _, _, _ in items:
        if folder is not None:
            per_folder[folder] = per_folder.get(folder, 0) + 1
    found = []
    for label, folder, parts, target, info in items:
        if folder is not None and len(by_label[lms.fold(label)]) > 1 and not info:
            label = "/".join(lms.clean_label(p) for p in folder)
        if folder is not None and per_folder[folder] > 1:  # several notebooks: one submission each
            below = parts[len(folder) :]
            label = "/".join(
                [
                    label,
                    *(lms.clean_label(p) for p in below[:-1]),
                    lms.clean_label(_stem(below[-1])),
                ]
            )
        found.append(
            Found(label or "submission", target, "/".join(parts), "/".join(folder or ()), info)
        )
    return sorted(found, key=lambda f: f.where)


def _given_notebook(
    path: pathlib.Path, target: pathlib.Path, refused: list, layout: str = "auto"
) -> Found:
    """A notebook given by its path: named by an LMS download's name where its folder or
    file carries one (a Gradescope ``submission_<id>`` folder is looked up in the
    metadata of the export holding it), else by its stem. A student's folder names the
    notebook before the notebook's own file name does."""
    name = unicodedata.normalize("NFC", path.name)
    parent = unicodedata.normalize("NFC", path.parent.name)
    if layout == "plain":
        return Found(lms.clean_label(_stem(name)), target, name, "", {})
    moodle = _moodle_folder(parent)
    if moodle is not None:
        return Found(moodle["name"], target, f"{parent}/{name}", parent, moodle)
    if _SUBMISSION_FOLDER.match(parent):
        found = _gradescope_given(path, target, name, parent, refused)
        if found is not None:
            return found
    flat = _flat_download(name)
    if flat is not None:
        return Found(flat[0], target, name, "", flat[1])
    return Found(lms.clean_label(_stem(name)), target, name, "", {})


def _gradescope_given(path, target, name: str, parent: str, refused: list) -> Found | None:
    """A notebook given by its path in a ``submission_<id>`` folder: named by the
    export's metadata, the file beside that folder (:func:`_submission_info`)."""
    info = _submission_info(path.parent, parent, refused)
    if info is None:
        return None
    return Found(
        lms.clean_label(_gradescope_label(info, parent)), target, f"{parent}/{name}", parent, info
    )


def _submission_info(folder: pathlib.Path, key: str, refused: list) -> dict | None:
    """What the metadata beside a Gradescope export's ``submission_<id>`` ``folder`` says
    of the submission ``key`` (the folder's name, NFC), or None (no metadata there, or none
    of it). A metadata file inside another export's submission (a ``submission_<id>``
    folder above it that has a metadata file beside it) is the student's: not read, and
    appended to ``refused``.

    Raises:
        lablib.grading.lms.LmsDownloadError: the metadata cannot be read.
    """
    export = folder.parent
    metadata = export / lms.GRADESCOPE_METADATA
    if not metadata.is_file():
        return None
    real = export.resolve()
    student = next(
        (
            above
            for above in (real, *real.parents)
            if _SUBMISSION_FOLDER.match(above.name)
            and (above.parent / lms.GRADESCOPE_METADATA).is_file()
        ),
        None,
    )
    if student is not None:
        refused.append((metadata, PLANTED_METADATA.format(folder=student.name)))
        return None
    return lms.read_gradescope_metadata(metadata).get(key)


def _unique(found: list[Found]) -> list[Found]:
    """Names made unique: a repeated name gets ``-2``, ``-3``... skipping every name that is
    taken, by another submission's own name too (``d2/alice`` + ``d3/alice-2`` + ``d1/alice``
    give ``alice``, ``alice-2`` and ``alice-3``); compared NFC and case-folded."""
    taken = {lms.fold(f.name) for f in found}
    seen: set[str] = set()
    out = []
    for f in found:
        unique = f.name
        if lms.fold(unique) in seen:
            k = 2
            while lms.fold(f"{f.name}-{k}") in taken:
                k += 1
            unique = f"{f.name}-{k}"
            taken.add(lms.fold(unique))
        seen.add(lms.fold(unique))
        out.append(dataclasses.replace(f, name=unique))
    return out


def find_submissions(paths, refused: list | None = None, layout: str = "auto") -> list[Found]:
    # Over 80 lines for its docstring (every rule and error); code: 66 lines, one loop over
    # the paths given whose three kinds (folder, file, link) fill the same two lists.
    """A :class:`Found` for each submission among ``paths`` (notebooks and folders; see the
    module's docstring for the names). ``.ipynb`` is matched in any case.

    Symbolic links are followed only at the top of a folder given and while they stay
    inside it (for a notebook given by path: the folder holding it): a link leading
    elsewhere, a broken one or one inside a student's folder is not graded; nor is a
    second path to a notebook already found (a link to a notebook graded by its own
    path, the same notebook given twice). Neither is a visible file that is not a notebook, nor a folder
    that holds none (hidden entries, starting with ".", are passed over; a Gradescope
    export's ``submission_metadata.yml`` is read, not listed). Each is appended to
    ``refused`` as ``(path, reason)``, or, when ``refused`` is None, reported as a
    :class:`SubmissionSkipped` warning. ``layout`` is ``"auto"`` or ``"plain"`` (see the
    module's docstring); a folder given that mixes students' own folders with LMS-shaped
    content is reported as a :class:`LayoutWarning` with ``"auto"``.

    Raises:
        ValueError: ``layout`` is neither, a folder given cannot be listed (a folder
            inside one that cannot is skipped, with the reason), or a file given is an
            archive (the LMS's download zip: :func:`_refuse_archive`).
        FileNotFoundError: a path given does not exist.
        lablib.grading.lms.LmsDownloadError: a Gradescope ``submission_metadata.yml``
            cannot be read (never graded as if it were not there).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout is {layout!r}; expected one of {', '.join(LAYOUTS)}")
    skipped: list = []
    found: list[tuple[Found, pathlib.Path, str]] = []  # (found, its path, how it was reached)
    for path in map(pathlib.Path, paths):
        if path.is_dir():
            try:
                os.listdir(path)
            except OSError as exc:
                raise ValueError(
                    f"The submissions folder {str(path)!r} cannot be read ({exc.strerror or exc}); "
                    f"give the grading user permission to read and enter it (chmod -R u+rX)."
                ) from None
            root = os.path.realpath(path)
            books, exports = [], []
            for entry, target in _entries(path, root, skipped):
                if _is_notebook(entry, target):
                    books.append(((entry.name,), target))
                elif target.is_dir() and os.path.realpath(target) == root:
                    skipped.append((entry, "a symbolic link to the submissions folder itself"))
                elif target.is_dir():
                    inside, more = _walk(
                        target, root, skipped, {root, os.path.realpath(target)}, (entry.name,)
                    )
                    if not inside:
                        skipped.append((entry, NO_NOTEBOOK_FOLDER))
                    books.extend(inside)
                    exports.extend(more)
                elif entry.name == lms.GRADESCOPE_METADATA:
                    exports.append(((), target))
                else:
                    skipped.append((entry, NOT_A_NOTEBOOK))
            note = _mixed_note(books, exports, str(path)) if layout == "auto" else None
            if note:
                warnings.warn(note, LayoutWarning, stacklevel=2)
            # a path's parts as named (NFC) -> on disk; only a link at the top is followed
            raw = {"/".join(_nfc(parts)): parts for parts, _ in books}
            for f in _named(*_classify(books, exports, skipped, layout), str(path)):
                parts = raw.get(f.where, f.where.split("/"))
                linked = (path / parts[0]).is_symlink()
                found.append(
                    (
                        _listed(f, _walked_at(f.path, path), skipped),
                        path.joinpath(*parts),
                        _LINKED if linked else _FOLDER,
                    )
                )
        elif path.is_file():
            _refuse_archive(path)
            target = _resolve_inside(path, os.path.realpath(path.parent), skipped)
            if target is not None:
                how = _LINKED_GIVEN if path.is_symlink() else _GIVEN
                given = _given_notebook(path, target, skipped, layout)  # nothing walked
                found.append((dataclasses.replace(given, real=os.path.realpath(target)), path, how))
        elif path.is_symlink():
            skipped.append((path, "a broken symbolic link"))
        else:
            raise FileNotFoundError(
                f"Submission {str(path)!r} does not exist; pass .ipynb files or folders."
            )
    found = _given_once([entry for entry in found if entry[0] is not None], skipped)
    if refused is not None:
        refused.extend(skipped)
    else:
        warn_skipped(skipped, stacklevel=3)
    return _unique(found)


#: The names of archives (an LMS's download, a folder compressed), in lower case.
_ARCHIVES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".gz", ".7z", ".rar")


def _refuse_archive(path: pathlib.Path) -> None:
    """A file given by its path that is an archive (named so, or a zip archive by its
    first bytes, unless it is named ``.ipynb``: a student's notebook that is no notebook
    is graded as unreadable, never refused) would be graded as one unreadable notebook:
    refused, saying what to do. lablib reads no archive: the LMS's download is unzipped
    first, and its folder given.

    Raises:
        ValueError: ``path`` is an archive.
    """
    name = path.name.lower()
    if name.endswith(".ipynb"):
        return
    suffix = next((a for a in _ARCHIVES if name.endswith(a)), "")
    if not suffix:
        try:
            with open(path, "rb") as f:
                head = f.read(4)
        except OSError:
            return  # read as a notebook, which says why it cannot be
        if head not in (b"PK\x03\x04", b"PK\x05\x06"):
            return
        suffix = ".zip"
    stem = path.name[: len(path.name) - len(suffix)] or "submissions"
    unpack = f"unzip {path.name} -d {stem}" if suffix == ".zip" else "extract it"
    raise ValueError(
        f"{str(path)!r} is a{' zip' if suffix == '.zip' else 'n'} archive, not a notebook: "
        f"lablib grades .ipynb files and folders of them, and reads no archive. Unzip the "
        f"LMS's download ({unpack}) and give the folder: lablib grade LAB {stem}/ -o OUT."
    )


def _walked_at(file: pathlib.Path, folder: pathlib.Path) -> str:
    """The real path of ``file`` as the walk of ``folder`` found it: the folder given and a
    link at its top resolved (the instructor's), every folder below as walked (the walk
    follows no link there), so that a link put below since leads elsewhere."""
    try:
        parts = pathlib.Path(file).relative_to(folder).parts
    except ValueError:  # below a link at the top, resolved by the walk already
        return str(file)
    return os.path.join(os.path.realpath(folder / parts[0]), *parts[1:])


def _listed(found: Found, at: str, refused: list) -> Found | None:
    """``found`` with the real path of its notebook (``real``), which must be ``at``,
    where the listing found it (its folders as walked, a link at the top of the folder
    given resolved); None, noted in ``refused``, where its path leads elsewhere now (a
    link or folder put in its way while the listing ran)."""
    real = listed_path(found.path)
    if real != at:
        refused.append((found.path, f"{MOVED_WHILE_LISTED} (to {real})"))
        return None
    return dataclasses.replace(found, real=real)


#: Why a notebook whose path led elsewhere during the listing is not graded.
MOVED_WHILE_LISTED = (
    "its path led to another file while the submissions were listed (a symbolic link or "
    "a folder put in its place): not graded"
)


# How a notebook was reached (:func:`_given_once`): in a folder given, directly or through
# a link at its top; given by its path, as a file or as a link.
_FOLDER, _LINKED, _GIVEN, _LINKED_GIVEN = "folder", "linked", "given", "linked given"


def _given_once(found: list[tuple[Found, pathlib.Path, str]], refused: list) -> list[Found]:
    """Each notebook once among the paths found (a link at the top of a folder given to
    a notebook or folder also there, the same file given twice, a folder and a notebook
    in it, ``subs/*.ipynb`` where one file links to another): as the first path that
    crosses no symbolic link, else as the first; each other path is noted in
    ``refused``."""
    best: dict[str, tuple] = {}
    for entry in found:
        real = os.path.realpath(entry[0].path)
        if real not in best or (
            best[real][2] in (_LINKED, _LINKED_GIVEN) and entry[2] in (_FOLDER, _GIVEN)
        ):
            best[real] = entry
    kept = []
    for entry in found:
        chosen = best[os.path.realpath(entry[0].path)]
        if entry is chosen:
            kept.append(entry[0])
        elif entry[2] == _LINKED:
            refused.append(
                (
                    entry[1],
                    f"a second path to the notebook {chosen[1]}, through a symbolic link: a "
                    f"notebook is graded once",
                )
            )
        else:
            refused.append(
                (entry[1], f"the same notebook as {chosen[1]}, given again: graded once")
            )
    return kept


def collect_submissions(
    paths, refused: list | None = None, layout: str = "auto"
) -> list[tuple[str, pathlib.Path]]:
    """``(name, notebook path)`` for each submission among ``paths``: the names and paths
    of :func:`find_submissions` (see it for the rules, ``refused`` and ``layout``)."""
    skipped: list = []
    found = find_submissions(paths, skipped, layout)
    if refused is not None:
        refused.extend(skipped)
    else:
        warn_skipped(skipped, stacklevel=3)
    return [(f.name, f.path) for f in found]


def skipped_submission(path, layout: str = "auto", folder: bool = True) -> Found | None:
    """A path that was not graded (one of :func:`find_submissions`'s ``refused``, as
    ``grades.json`` keeps them under ``skipped``: a zip, a ``.ipynb.txt``) as the
    :class:`Found` a notebook there would have been, where an LMS download's names say
    whose it is: the Moodle student's folder on its way (the first from the top, as for a
    notebook), else its own name as Canvas or Moodle names a flat file
    (``smithjohn_1001_9000001_lab1.zip``). Its ``lms`` then tells the file to its student
    (:func:`lablib.grading.gradebook.identity.resolve`). None where no such name is on the
    path, and always with ``layout="plain"`` (the names are the students' own). A path in
    a Gradescope export's ``submission_<id>`` folder is its submitters', as the export's
    metadata beside that folder names them (read as grading reads it: never a metadata
    file inside another submission). ``folder=False`` says the path is a file: its own
    name is then never read as a Moodle folder's (a Canvas file a student named
    ``..._assignsubmission_file_``).

    Example::

        skipped_submission("subs/smithjohn_1001_9000001_lab0.zip").lms["user_id"]  # '1001'
    """
    if layout == "plain":
        return None
    gradescope = _gradescope_skipped(pathlib.Path(path))
    if gradescope is not None:
        return gradescope
    parts = _nfc(pathlib.PurePath(str(path)).parts)
    for i, part in enumerate(parts if folder else parts[:-1]):
        info = _moodle_folder(part)
        if info is not None:
            return Found(info["name"], pathlib.Path(path), "/".join(parts[i:]), part, info)
    flat = _flat_download(parts[-1]) if parts else None
    if flat is None:
        return None
    return Found(flat[0], pathlib.Path(path), parts[-1], "", flat[1])


def _gradescope_skipped(path: pathlib.Path) -> Found | None:
    """A path not graded inside a Gradescope export's ``submission_<id>`` folder (the
    folder itself, or a file in it) as the :class:`Found` its submitters' notebook would
    have been (:func:`_submission_info`, as grading reads it), or None."""
    folder = next((f for f in (path, *path.parents) if _SUBMISSION_FOLDER.match(f.name)), None)
    if folder is None:
        return None
    key = unicodedata.normalize("NFC", folder.name)
    try:
        info = _submission_info(folder, key, [])
    except lms.LmsDownloadError:  # grading said so already; not a student's file here
        return None
    if info is None:
        return None
    where = path.relative_to(folder.parent).as_posix()
    return Found(lms.clean_label(_gradescope_label(info, key)), path, where, key, info)


def warn_skipped(skipped, stacklevel: int = 2) -> None:
    """One :class:`SubmissionSkipped` warning per ``(path, reason)`` (the CLI prints them)."""
    for path, reason in skipped:
        warnings.warn(f"{path} is not graded: {reason}.", SubmissionSkipped, stacklevel=stacklevel)
