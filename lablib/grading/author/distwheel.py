"""A wheel of the lablib that is running, for the Gradescope zip (no build tools, no network).

The Gradescope autograder must run the very lablib that built it, and nothing named
lablib may come from a package index (whoever owns that name there would run code as
root on the autograder). :func:`running_wheel` writes that wheel:

- lablib installed from a wheel (``pip install lablib-X.whl``): the files its ``RECORD``
  lists under ``lablib/``, read from the installation;
- an editable install or a source tree on ``sys.path``: every file of the imported
  ``lablib`` package folder (caches and hidden files left out).

The metadata (``METADATA``, ``entry_points.txt``) comes from the installed distribution,
which must have the running lablib's version; a new ``RECORD`` is written. The same files
give the same bytes (fixed dates, sorted entries).

Example::

    from lablib.grading.author.distwheel import running_wheel, check_wheel
    path = running_wheel("dist/")
    check_wheel(path)  # name, version of the lablib inside
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import pathlib
import re
import subprocess
import warnings
import zipfile

from lablib._version import PACKAGE_DIR, __version__

__all__ = ["running_wheel", "check_wheel", "wheel_files"]

_DATE = (2020, 1, 1, 0, 0, 0)


def _package_dir() -> pathlib.Path:
    return PACKAGE_DIR


def _distribution():
    # An installed dist-info first: a source tree's lablib.egg-info (written by
    # `pip install -e .` into the checkout, found through the working directory) lists
    # the files as they were then and carries PKG-INFO instead of METADATA.
    found = sorted(
        importlib.metadata.distributions(name="lablib"),
        key=lambda d: d.read_text("METADATA") is None,
    )
    try:
        if not found:
            raise importlib.metadata.PackageNotFoundError("lablib")
        dist = found[0]
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"lablib is imported from {_package_dir()} but no installed lablib distribution was "
            "found, so no wheel can be made of it. Install it (pip install -e . or pip install "
            "lablib-X.whl), or pass --wheel PATH (build one with `pip wheel --no-deps .`)."
        ) from None
    if dist.version != __version__:
        raise ValueError(
            f"The running lablib is version {__version__} ({_package_dir()}) but the installed "
            f"distribution says {dist.version}; pass --wheel PATH with a wheel of the lablib you mean."
        )
    return dist


def _skipped(relative: pathlib.PurePath) -> bool:
    return any(
        part == "__pycache__" or part.startswith(".") for part in relative.parts
    ) or relative.suffix in (".pyc", ".pyo")


def wheel_files() -> tuple[dict[str, pathlib.Path], str]:
    """The files of the running lablib package: ``({archive name: path}, how found)``."""
    package = _package_dir()
    dist = _distribution()
    recorded = {}
    for entry in dist.files or ():
        parts = pathlib.PurePosixPath(str(entry)).parts
        if parts and parts[0] == "lablib" and not _skipped(pathlib.PurePosixPath(*parts[1:])):
            recorded[str(pathlib.PurePosixPath(*parts))] = pathlib.Path(entry.locate()).resolve()
    complete = all(path.is_file() for path in recorded.values())
    # A stale record (an egg-info of a source tree whose files moved since it was
    # written) falls back to the package folder the running lablib is imported from.
    if recorded.get("lablib/__init__.py") == package / "__init__.py" and complete:
        return recorded, f"the installed files ({dist.locate_file('')})"
    files = {}
    tracked = _tracked(package)
    left = []
    for path in sorted(package.rglob("*")):
        relative = path.relative_to(package)
        if path.is_file() and not _skipped(relative):
            if tracked is not None and path.resolve() not in tracked:
                left.append(str(relative))
                continue
            files[str(pathlib.PurePosixPath("lablib", *relative.parts))] = path
    if left:
        warnings.warn(
            f"{len(left)} file(s) of {package} not under version control are not shipped in the "
            f"wheel: {', '.join(left[:5])}{' ...' if len(left) > 5 else ''}. A hidden test kept "
            f"there would be readable by the students' code wherever the wheel is installed; "
            f"commit a file to ship it.",
            stacklevel=2,
        )
    return files, f"the package folder {package}"


def _tracked(package: pathlib.Path) -> set[pathlib.Path] | None:
    """The files of ``package`` under version control (git), or None where it is not in a
    git checkout (or git cannot say): then every file is the package's."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(package), "ls-files", "-z", "--", "."],
            capture_output=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {
        (package / name).resolve()
        for name in listed.decode("utf-8", "surrogateescape").split("\0")
        if name
    }


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=_DATE)
    info.external_attr = 0o100644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def running_wheel(dest_dir) -> pathlib.Path:
    """Write a wheel of the running lablib into ``dest_dir``; returns its path.

    Raises:
        FileNotFoundError: lablib is not installed as a distribution (only on ``sys.path``).
        ValueError: the installed distribution's version differs from the running lablib's.
    """
    dist = _distribution()
    files, _ = wheel_files()
    tag = "py3-none-any"
    wheel_text = dist.read_text("WHEEL") or ""
    match = re.search(r"^Tag:\s*(\S+)", wheel_text, re.M)
    if match and match.group(1).endswith("-none-any"):
        tag = match.group(1)
    version = dist.version
    info = f"lablib-{version}.dist-info"
    contents = {name: path.read_bytes() for name, path in files.items()}
    contents[f"{info}/METADATA"] = (
        dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    ).encode()
    if dist.read_text("entry_points.txt"):
        contents[f"{info}/entry_points.txt"] = dist.read_text("entry_points.txt").encode()
    contents[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: lablib.grading.author.distwheel\n"
        f"Root-Is-Purelib: true\nTag: {tag}\n"
    ).encode()
    record = "".join(
        f"{name},{_digest(data)},{len(data)}\n" for name, data in sorted(contents.items())
    )
    contents[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    dest = pathlib.Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"lablib-{version}-{tag}.whl"
    tmp = path.with_name(path.name + ".part")
    with zipfile.ZipFile(tmp, "w") as zf:
        for name in sorted(contents):
            _write(zf, name, contents[name])
    tmp.replace(path)
    return path


def check_wheel(path) -> dict:
    """Check that ``path`` is a lablib wheel; returns ``{"version", "extras", "requires_python"}``
    of its metadata.

    Raises:
        ValueError: not a wheel of lablib (what was found, and how to make a right one).
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"Wheel {str(path)!r} does not exist; build one with `pip wheel --no-deps .` "
            "in lablib's source tree, or leave --wheel out to use the running lablib."
        )
    match = re.fullmatch(r"lablib-([\w.!+]+)-([\w.]+-[\w.]+-[\w.]+)\.whl", path.name, re.ASCII)
    if not match:
        raise ValueError(
            f"{path.name!r} is not named like a lablib wheel (lablib-<version>-py3-none-any.whl)."
        )
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            metadata = zf.read(f"lablib-{match.group(1)}.dist-info/METADATA").decode()
    except zipfile.BadZipFile:
        raise ValueError(
            f"{str(path)!r} is not a lablib wheel (not a zip file); build one with "
            "`pip wheel --no-deps .` in lablib's source tree."
        ) from None
    except KeyError:
        raise ValueError(
            f"{str(path)!r} is not a lablib wheel (no lablib-{match.group(1)}.dist-info/METADATA "
            "inside); build one with `pip wheel --no-deps .` in lablib's source tree."
        ) from None
    if "lablib/__init__.py" not in names or not re.search(r"^Name:\s*lablib\s*$", metadata, re.M):
        raise ValueError(
            f"{str(path)!r} does not hold the lablib package (lablib/__init__.py and "
            "Name: lablib in its METADATA)."
        )
    extras = re.findall(r"^Provides-Extra:\s*(\S+)", metadata, re.M)
    requires = re.search(r"^Requires-Python:\s*(\S.*?)\s*$", metadata, re.M)
    return {
        "version": match.group(1),
        "extras": extras,
        "requires_python": requires.group(1) if requires else "",
    }
