"""Where dataset files come from: data folders, the local cache, verified downloads.

Every loader in :mod:`lablib.data` asks this module for the folder that holds its
dataset's files. The folder is looked for, in order, in:

1. the ``data_dir`` argument of the loader;
2. the folder named by the ``LABLIB_DATA_DIR`` environment variable;
3. the local cache, ``LABLIB_CACHE_DIR`` or ``~/.cache/lablib``;
4. and, when none of these has the files, they are downloaded from the dataset's
   online origin into the cache and checked against the published checksum.

A data folder (and the cache) has one sub-folder per dataset: ``reuters/``,
``molecules/`` (the MoleculeNet CSV files), ``molecules/MUTAG/`` and ``cora/``. The
datasets, their files, URLs, checksums, licences and citations are listed in
``registry.json`` beside this module (documented in the repository's
``data/README.md``).

Downloads are safe against partial and corrupt files: a file is written to a temporary
file in the destination folder, verified (sha256, or the MD5 where only that was
published) and only then renamed into place, atomically. A cached file whose checksum
does not match is discarded and fetched again. Files in a folder that you name
(``data_dir``, ``LABLIB_DATA_DIR``) are yours: they are used as they are, with a
warning when they match no known checksum.

Set ``LABLIB_OFFLINE=1`` to never try the network (the loaders then fail at once with
:class:`DataNotFoundError` when no folder has the files).

Example::

    from lablib.data import sources
    sources.dataset_path("cora", data_dir="../shared/data")   # .../shared/data/cora
    sources.fetch_dataset("cora")                             # download into the cache
    for row in sources.dataset_status():
        print(row["name"], row["source"], row["verified"])
"""

from __future__ import annotations

import copy
import functools
import hashlib
import http.client
import json
import os
import pathlib
import pickle
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import warnings
import zipfile

__all__ = [
    "DataNotFoundError",
    "ChecksumError",
    "load_registry",
    "dataset_names",
    "dataset_info",
    "cache_dir",
    "dataset_path",
    "fetch_dataset",
    "dataset_status",
    "file_sha256",
    "RestrictedUnpickler",
]

DATA_DIR_ENV = "LABLIB_DATA_DIR"
CACHE_DIR_ENV = "LABLIB_CACHE_DIR"
OFFLINE_ENV = "LABLIB_OFFLINE"
DOWNLOAD_TIMEOUT_S = 60.0
_CHUNK = 1 << 20
_TRUE = {"1", "true", "yes", "on"}


class DataNotFoundError(FileNotFoundError):
    """A dataset's files are in no data folder, not in the cache and could not be downloaded.

    The message names every way to provide them: the ``data_dir`` argument, the
    ``LABLIB_DATA_DIR`` variable, the cache path, the download URL and the command
    ``lablib data fetch NAME``.
    """


class ChecksumError(OSError, ValueError):
    """A downloaded (or extracted) file is incomplete or matches no known checksum.

    The bad file is deleted before this is raised; nothing is left in the cache. It is
    an ``OSError`` (a failed transfer) and a ``ValueError`` (wrong content), so code
    that reports either kind of error reports this one too.
    """


# --------------------------------------------------------------------------- registry


@functools.lru_cache(maxsize=1)
def _read_registry() -> dict:
    path = pathlib.Path(__file__).with_name("registry.json")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)["datasets"]


def load_registry() -> dict:
    """The dataset registry: ``{name: entry}`` read from ``registry.json``.

    Each entry has ``title``, ``folder`` (relative to a data folder), ``homepage``,
    ``licence``, ``citation`` and ``files``: a list of ``{"name", "url", "sha256": [...],
    "md5": [...], "optional"}`` (``url`` is absent for files extracted from the entry's
    ``archive``, ``{"url", "format": "zip"}``).

    Returns:
        A deep copy (changing it does not change the registry).

    Example::

        load_registry()["cora"]["files"][0]["url"]
    """
    return copy.deepcopy(_read_registry())


def dataset_names() -> list[str]:
    """Names accepted by :func:`fetch_dataset` and ``lablib data fetch NAME``."""
    return list(load_registry())


def dataset_info(name: str) -> dict:
    """The registry entry of one dataset (see :func:`load_registry`).

    Args:
        name: a dataset name such as ``"reuters"`` (case-insensitive).

    Raises:
        ValueError: unknown name; the message lists the known ones.
    """
    registry = load_registry()
    key = str(name).strip().lower()
    if key not in registry:
        raise ValueError(
            f"Unknown dataset {name!r}. Known datasets: {', '.join(sorted(registry))}."
        )
    entry = registry[key]
    entry["name"] = key
    return entry


# --------------------------------------------------------------------------- places


def cache_dir() -> pathlib.Path:
    """The download cache: ``$LABLIB_CACHE_DIR`` or ``~/.cache/lablib`` (not created here)."""
    value = os.environ.get(CACHE_DIR_ENV, "").strip()
    if value:
        return pathlib.Path(value).expanduser()
    return pathlib.Path("~/.cache/lablib").expanduser()


def _offline() -> bool:
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in _TRUE


def _required(entry: dict) -> list[dict]:
    return [f for f in entry["files"] if not f.get("optional")]


def _has_files(folder: pathlib.Path, entry: dict) -> bool:
    return folder.is_dir() and all((folder / f["name"]).is_file() for f in _required(entry))


def _existing_folder(value, given: str, advice: str) -> pathlib.Path:
    """``value`` as a folder path, or DataNotFoundError naming what was ``given``."""
    root = pathlib.Path(value).expanduser()
    if not root.is_dir():
        raise DataNotFoundError(f"{given} is not a folder. {advice}")
    return root


def _candidates(entry: dict, data_dir) -> list[tuple[str, pathlib.Path]]:
    """(source label, dataset folder) in the order they are searched."""
    places = []
    holds = (
        f"the folder that holds the dataset sub-folders ({entry['folder']}/ for {entry['name']})"
    )
    if data_dir is not None:
        root = _existing_folder(
            data_dir,
            f"data_dir={str(data_dir)!r}",
            f"Pass {holds}, or data_dir=None to use {DATA_DIR_ENV}, the cache or a download.",
        )
        places.append(("data_dir", root / entry["folder"]))
        # Also accept data_dir pointing at a parent folder one level down
        # (".../molecules" for MUTAG) or straight at the dataset's own folder.
        last = pathlib.PurePosixPath(entry["folder"]).name
        if last != entry["folder"]:
            places.append(("data_dir", root / last))
        places.append(("data_dir", root))
    env = os.environ.get(DATA_DIR_ENV, "").strip()
    if env:
        root = _existing_folder(env, f"{DATA_DIR_ENV}={env!r}", f"Set it to {holds}, or unset it.")
        places.append((DATA_DIR_ENV, root / entry["folder"]))
    places.append(("cache", cache_dir() / entry["folder"]))
    return places


# --------------------------------------------------------------------------- checksums


def file_sha256(path) -> str:
    """The sha256 hex digest of a file, read in 1 MiB chunks."""
    return _digests(pathlib.Path(path), want_md5=False)[0]


def _digests(path: pathlib.Path, want_md5: bool) -> tuple[str, str | None]:
    sha = hashlib.sha256()
    md5 = hashlib.md5(usedforsecurity=False) if want_md5 else None
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            sha.update(chunk)
            if md5 is not None:
                md5.update(chunk)
    return sha.hexdigest(), (md5.hexdigest() if md5 is not None else None)


def _known(spec: dict) -> bool:
    return bool(spec.get("sha256") or spec.get("md5"))


def _matches(path: pathlib.Path, spec: dict) -> tuple[bool, str]:
    """(file matches a known checksum, its sha256)."""
    sha, md5 = _digests(path, want_md5=bool(spec.get("md5")))
    ok = sha in spec.get("sha256", []) or (md5 is not None and md5 in spec.get("md5", []))
    return ok, sha


def _verify_folder(folder: pathlib.Path, entry: dict) -> tuple[bool | None, list[str]]:
    """(True/False, or None when no checksum is known; names of files that fail)."""
    bad, any_known = [], False
    for spec in entry["files"]:
        path = folder / spec["name"]
        if not path.is_file() or not _known(spec):
            if not path.is_file() and not spec.get("optional"):
                bad.append(spec["name"])
            continue
        any_known = True
        if not _matches(path, spec)[0]:
            bad.append(spec["name"])
    if bad:
        return False, bad
    return (True if any_known else None), []


# --------------------------------------------------------------------------- downloads


class _DownloadFailed(Exception):
    """The network could not deliver a file (offline, DNS, HTTP error, timeout)."""


def _say(message: str) -> None:
    print(f"lablib: {message}", file=sys.stderr, flush=True)


def _stream_to_temp(url: str, folder: pathlib.Path, name: str) -> pathlib.Path:
    """Download ``url`` into a temporary file in ``folder``; raise on a short read."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temp_name = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part")
    except OSError as error:  # the folder cannot be written: said as a failed download
        raise _DownloadFailed(f"{folder}: {type(error).__name__}: {error}") from error
    temp = pathlib.Path(temp_name)
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "lablib"})
        with (
            os.fdopen(handle, "wb") as out,
            urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_S) as response,
        ):
            expected = response.headers.get("Content-Length")
            size = 0
            for chunk in iter(lambda: response.read(_CHUNK), b""):
                out.write(chunk)
                size += len(chunk)
        if expected is not None and expected.isdigit() and size != int(expected):
            raise ChecksumError(
                f"Download of {url} stopped after {size} of {expected} bytes; the partial "
                f"file was discarded. Run the same command again."
            )
        return temp
    except ChecksumError:
        temp.unlink(missing_ok=True)
        raise
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as error:
        # URLError covers DNS failures, refused connections and HTTP errors;
        # HTTPException covers a connection closed mid-body (IncompleteRead).
        temp.unlink(missing_ok=True)
        raise _DownloadFailed(f"{url}: {type(error).__name__}: {error}") from error


def _install(temp: pathlib.Path, dest: pathlib.Path, spec: dict, origin: str) -> None:
    """Verify ``temp`` against ``spec`` and rename it to ``dest``; delete it if bad."""
    try:
        if _known(spec):
            ok, sha = _matches(temp, spec)
            if not ok:
                expected = ", ".join(spec.get("sha256", []) + spec.get("md5", []))
                raise ChecksumError(
                    f"{spec['name']} from {origin} is corrupt or not the expected file: "
                    f"sha256 {sha} ({temp.stat().st_size} bytes) matches none of the "
                    f"known checksums ({expected}). It was discarded; nothing was cached. "
                    f"Try again later, or download the file yourself, check it and put it "
                    f"in a folder passed as data_dir."
                )
        os.replace(temp, dest)
    finally:
        temp.unlink(missing_ok=True)


def _download_files(entry: dict, folder: pathlib.Path, names: list[str]) -> None:
    """Download the files ``names`` of ``entry`` into ``folder``, verified."""
    specs = {f["name"]: f for f in entry["files"]}
    archive = entry.get("archive")
    if archive:
        _download_archive(entry, folder, [specs[n] for n in names])
        return
    for name in names:
        spec = specs[name]
        if not spec.get("url"):  # an optional file with no download of its own
            continue
        _say(f"downloading {spec['url']} -> {folder / name}")
        temp = _stream_to_temp(spec["url"], folder, name)
        _install(temp, folder / name, spec, spec["url"])


def _download_archive(entry: dict, folder: pathlib.Path, specs: list[dict]) -> None:
    archive = entry["archive"]
    url = archive["url"]
    if archive.get("format", "zip") != "zip":
        raise ValueError(f"registry: archive format {archive.get('format')!r} is not supported.")
    _say(f"downloading {url} -> {folder}")
    temp_zip = _stream_to_temp(url, folder, pathlib.PurePosixPath(url).name)
    try:
        if archive.get("sha256"):
            ok, sha = _matches(temp_zip, {"sha256": archive["sha256"]})
            if not ok:
                raise ChecksumError(
                    f"{url} is corrupt: sha256 {sha} is not one of {archive['sha256']}. "
                    f"It was discarded; try again later."
                )
        try:
            bundle = zipfile.ZipFile(temp_zip)
        except zipfile.BadZipFile as error:
            raise ChecksumError(
                f"{url} is not a valid zip archive ({error}); it was discarded. Try again later."
            ) from error
        with bundle:
            members = {pathlib.PurePosixPath(m).name: m for m in bundle.namelist()}
            for spec in specs:
                member = members.get(spec["name"])
                if member is None:
                    if spec.get("optional"):
                        continue
                    raise ChecksumError(
                        f"{url} does not contain {spec['name']} (it has "
                        f"{', '.join(sorted(members)[:10])}); the archive was discarded."
                    )
                handle, temp_name = tempfile.mkstemp(
                    dir=folder, prefix=f".{spec['name']}.", suffix=".part"
                )
                with os.fdopen(handle, "wb") as out, bundle.open(member) as source:
                    shutil.copyfileobj(source, out, _CHUNK)
                _install(pathlib.Path(temp_name), folder / spec["name"], spec, f"{url}!{member}")
    finally:
        temp_zip.unlink(missing_ok=True)


def _not_found(
    entry: dict, searched: list[tuple[str, pathlib.Path]], reason: str
) -> DataNotFoundError:
    name = entry["name"]
    files = ", ".join(f["name"] for f in _required(entry))
    urls = (
        [entry["archive"]["url"]]
        if entry.get("archive")
        else [f["url"] for f in entry["files"] if f.get("url")]
    )
    lines = [
        f"The {name} dataset ({entry['title']}) was not found and could not be downloaded.",
        f"Files needed: {files}.",
        "Looked in:" if searched else "",
    ]
    lines += [f"  - {path} ({label})" for label, path in searched]
    lines += [
        f"Download: {reason}",
        "Provide the files in any one of these ways:",
        f"  1. pass data_dir='/path/to/data' to the loader, a folder holding {entry['folder']}/;",
        f"  2. set the environment variable {DATA_DIR_ENV}=/path/to/data (same layout);",
        f"  3. put the files in the cache folder {cache_dir() / entry['folder']} "
        f"(move it with {CACHE_DIR_ENV});",
        "  4. download " + ("the zip archive and extract it:" if entry.get("archive") else "them:"),
    ]
    lines += [f"       {url}" for url in urls]
    lines += [
        f"  5. or run `lablib data fetch {name}` on a machine with internet access.",
    ]
    return DataNotFoundError("\n".join(line for line in lines if line))


# --------------------------------------------------------------------------- pickles


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals it is given, nothing else.

    Dataset files in pickle form (Keras' ``reuters.npz`` object arrays, Planetoid's
    ``ind.cora.*``) would run arbitrary code if loaded with plain :mod:`pickle` or
    ``np.load(allow_pickle=True)``. This one maps each allowed ``(module, name)`` to
    the object to use, which also lets a loader swap an old class (``scipy.sparse.csr
    .csr_matrix`` of 2016) for a plain record it converts itself.

    Args:
        file: a binary file object positioned at the pickle stream.
        allowed: mapping ``(module, name) -> object``.
        encoding: how Python 2 ``str`` objects are decoded (``"latin1"`` for NumPy
            arrays pickled by Python 2).

    Example::

        import numpy as np
        allowed = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype}
        RestrictedUnpickler(handle, allowed).load()
    """

    def __init__(self, file, allowed: dict, encoding: str = "ASCII"):
        super().__init__(file, encoding=encoding)
        self._allowed = dict(allowed)

    def find_class(self, module, name):
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"Refusing to load {module}.{name} from a dataset file: only NumPy arrays "
                f"and the dataset's own containers are allowed. The file is corrupt or "
                f"not the published one; delete it and fetch it again."
            ) from None


def numpy_pickle_globals() -> dict:
    """The globals that rebuild NumPy arrays (both NumPy 1 and 2 spellings)."""
    import numpy as np

    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # NumPy 1.x
        from numpy.core.multiarray import _reconstruct
    return {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    }


# --------------------------------------------------------------------------- public


def dataset_path(name: str, data_dir=None, download: bool = True) -> pathlib.Path:
    """The folder holding a dataset's files, downloading them into the cache if needed.

    Args:
        name: a dataset of the registry (``"reuters"``, ``"esol"``, ``"freesolv"``,
            ``"lipophilicity"``, ``"mutag"``, ``"cora"``).
        data_dir: a folder with the dataset sub-folders (``reuters/``, ``molecules/``,
            ``molecules/MUTAG/``, ``cora/``), or the dataset's own folder. Searched first.
        download: try the online origin when no folder has the files (also disabled by
            ``LABLIB_OFFLINE=1``).

    Returns:
        The dataset folder (all required files present).

    Raises:
        DataNotFoundError: no folder has the files and the download failed or was
            disabled; the message lists every way to provide them.
        ChecksumError: a downloaded file was corrupt (it was discarded).
        ValueError: unknown dataset name.

    Example::

        folder = dataset_path("cora", data_dir="../shared/data")
    """
    entry = dataset_info(name)
    searched = _candidates(entry, data_dir)
    for label, folder in searched:
        if not _has_files(folder, entry):
            continue
        if label == "cache":
            ok, bad = _verify_folder(folder, entry)
            if ok is False:
                for file_name in bad:
                    _say(f"cached {folder / file_name} is corrupt or incomplete; fetching it again")
                    (folder / file_name).unlink(missing_ok=True)
                break  # fall through to the download, which refills the cache
            return folder
        _warn_unverified(folder, entry, label)
        return folder
    return _download_into(entry, cache_dir() / entry["folder"], searched, download)


def _warn_unverified(folder: pathlib.Path, entry: dict, label: str) -> None:
    ok, bad = _verify_folder(folder, entry)
    if ok is False:
        warnings.warn(
            f"{', '.join(bad)} in {folder} ({label}) match no published checksum of the "
            f"{entry['name']} dataset; using them as you provided them. If loading fails "
            f"or results look wrong, replace them: `lablib data fetch {entry['name']}`.",
            stacklevel=3,
        )


def _download_into(entry, folder, searched, download) -> pathlib.Path:
    if not download or _offline():
        why = "disabled (LABLIB_OFFLINE=1)" if _offline() else "disabled (download=False)"
        raise _not_found(entry, searched, why)
    missing = [
        spec["name"]
        for spec in entry["files"]
        if not (folder / spec["name"]).is_file()
        or (_known(spec) and not _matches(folder / spec["name"], spec)[0])
    ]
    try:  # a home or cache that cannot be written (read-only, not a folder) is said so
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):  # a folder that exists but is read-only
            pass
        for file_name in missing:
            (folder / file_name).unlink(missing_ok=True)
    except OSError as exc:
        where = (
            f"set {CACHE_DIR_ENV} to a folder you can write"
            if searched and searched[-1][0] == "cache"
            else "give a data folder you can write"
        )
        raise _not_found(
            entry,
            searched,
            f"not possible: the folder {folder} cannot be written ({exc.strerror or exc}); {where}",
        ) from None
    try:
        _download_files(entry, folder, missing)
    except _DownloadFailed as error:
        raise _not_found(entry, searched, f"failed: {error}") from None
    return folder


def fetch_dataset(name: str, data_dir=None) -> pathlib.Path:
    """Make sure a dataset's files are present and verified; download what is missing.

    With ``data_dir`` the files go into ``data_dir/<folder>`` (created if needed;
    missing or corrupt files there are replaced). Without it, a folder named by
    ``LABLIB_DATA_DIR`` that already holds verified files is used as it is; otherwise
    the files go into the cache. This is what ``lablib data fetch NAME`` runs.

    Args:
        name: a dataset of the registry (see :func:`dataset_names`).
        data_dir: the data folder to download into, or None for the cache.

    Returns:
        The dataset folder.

    Raises:
        DataNotFoundError: the download failed (offline...); the message says what to do.
        ChecksumError: a downloaded file was corrupt (it was discarded).
        ValueError: unknown dataset name.

    Example::

        fetch_dataset("cora")              # ~/.cache/lablib/cora
        fetch_dataset("mutag", "data")     # data/molecules/MUTAG
    """
    entry = dataset_info(name)
    if data_dir is None:
        env = os.environ.get(DATA_DIR_ENV, "").strip()
        if env:
            folder = pathlib.Path(env).expanduser() / entry["folder"]
            if _has_files(folder, entry) and _verify_folder(folder, entry)[0] is not False:
                return folder
        target = cache_dir() / entry["folder"]
    else:
        target = pathlib.Path(data_dir).expanduser() / entry["folder"]
    ok, bad = _verify_folder(target, entry)
    if _has_files(target, entry) and ok is not False:
        return target
    searched = [("data_dir" if data_dir is not None else "cache", target)]
    return _download_into(entry, target, searched, download=True)


def dataset_status(data_dir=None) -> list[dict]:
    """Where each registered dataset is found, and whether its files verify.

    Searches like the loaders (``data_dir``, ``LABLIB_DATA_DIR``, the cache) without
    downloading anything. This is what ``lablib data list`` prints.

    Args:
        data_dir: a data folder to search first, as for the loaders.

    Returns:
        One dict per dataset, in registry order, with keys ``name``, ``title``,
        ``found`` (bool), ``source`` (``"data_dir"``, ``"LABLIB_DATA_DIR"``,
        ``"cache"`` or None), ``path`` (str of the dataset folder, or None),
        ``verified`` (True: every file matches a known checksum; False: some do not,
        listed in ``bad_files``; None: not found or no checksum known),
        ``bad_files`` (list of names), ``missing_files`` (required files absent from
        the best candidate folder; all of them when not found), ``urls`` and ``licence``.

    Example::

        for row in dataset_status():
            print(f"{row['name']:15} {row['source'] or 'missing':16} {row['verified']}")
    """
    rows = []
    for name in dataset_names():
        entry = dataset_info(name)
        required = [f["name"] for f in _required(entry)]
        urls = (
            [entry["archive"]["url"]]
            if entry.get("archive")
            else [f["url"] for f in entry["files"] if f.get("url")]
        )
        row = {
            "name": name,
            "title": entry["title"],
            "found": False,
            "source": None,
            "path": None,
            "verified": None,
            "bad_files": [],
            "missing_files": required,
            "urls": urls,
            "licence": entry["licence"],
        }
        try:
            candidates = _candidates(entry, data_dir)
        except DataNotFoundError as error:
            row["error"] = str(error)
            rows.append(row)
            continue
        for label, folder in candidates:
            if _has_files(folder, entry):
                ok, bad = _verify_folder(folder, entry)
                row.update(
                    found=True,
                    source=label,
                    path=str(folder),
                    verified=ok,
                    bad_files=bad,
                    missing_files=[],
                )
                break
        rows.append(row)
    return rows
