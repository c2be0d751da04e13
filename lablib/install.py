"""What a lab needs, installed into a running notebook without replacing its TensorFlow.

Every lab's first cell (``# SETUP``) installs lablib alone when it is missing
(``pip install --no-deps $LABLIB_PIP``, which can replace nothing), then calls
:func:`prepare`, which installs what that lab imports and the runtime lacks:

* the packages already installed at a version the lab accepts are left alone, and
  tensorflow, keras, numpy, protobuf, ml-dtypes and h5py are pinned (pip constraints)
  at their installed versions, so an install never replaces Colab's TensorFlow stack;
* Lab 2 gets TF Model Garden (``tf-models-official``) and ``tf-keras`` for the installed
  TensorFlow minor (``~=X.Y.0``). Where no tf-models-official exists for that minor
  (TensorFlow 2.21), the cell says so and installs nothing; only with
  ``LABLIB_ALLOW_TENSORFLOW_CHANGE=1`` does it install the newest release with the
  TensorFlow it pins, and then the student is told to restart;
* a failed install is reported as what it was (the package pip could not build or find,
  pip's own error lines) and changes nothing; every package an install added or changed
  is listed, with what required a changed version;
* on a runtime without TensorFlow, Colab's (its TPU runtime has none) gets one sentence
  saying to change the runtime type, instead of TensorFlow installed over it;
* when an install changed a package this process had already imported, the new files
  on disk and the old modules in memory disagree: :func:`prepare` prints what changed
  and raises :class:`RestartRequired`, so "Run all" stops there.

With everything present (the grader's sandbox, a second run of the cell) it only reads
package metadata: no pip, no network. This module imports only the standard library (and
``packaging``, which TensorFlow and Keras require) and the lab registry, never TensorFlow.

Example::

    from lablib.install import prepare
    prepare("lab2")
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import warnings
from typing import Callable, Iterable, Mapping, Sequence

from lablib.labs import Lab, UnknownLab, resolve_lab

__all__ = [
    "DEFAULT_LABLIB_PIP",
    "ALLOW_TENSORFLOW_CHANGE",
    "NO_TENSORFLOW_ON_COLAB",
    "PINNED",
    "CORE",
    "EXTRAS",
    "InstallError",
    "RestartRequired",
    "Plan",
    "lablib_pip",
    "KNOWN_NOISE",
    "quiet_known_noise",
    "set_tensorflow_environment",
    "lab_extras",
    "lab_requirements",
    "plan",
    "constraints",
    "pip_install_command",
    "changed_imports",
    "pip_failure",
    "install_summary",
    "prepare",
]

#: Where the labs install lablib from when ``LABLIB_PIP`` is unset (the course's repository).
DEFAULT_LABLIB_PIP = "lablib @ git+https://github.com/lablib-course/lablib"

#: Packages an install must never replace: pinned at their installed versions.
PINNED = ("tensorflow", "keras", "numpy", "protobuf", "ml-dtypes", "h5py")

#: lablib's own requirements (setup.cfg ``install_requires``; a test keeps them equal):
#: what lablib's layers, data loaders and ``lablib.check`` import.
CORE = (
    "tensorflow>=2.19",
    "keras>=3.10",
    "numpy>=1.26",
    "scipy>=1.10",
    "scikit-learn>=1.3",
)

#: setup.cfg extras a lab needs (a test keeps them equal to setup.cfg's).
EXTRAS = {
    "tfm": ("tf-models-official>=2.19", "tf-keras>=2.19", "setuptools<81"),
    "molecules": ("rdkit>=2024.3",),
}

TFM_PAIR = ("tf-models-official", "tf-keras")


RESTART_HINT = "restart the session (Colab: Runtime > Restart session), then run this notebook again from the top"

#: The variable that lets Lab 2's first cell replace TensorFlow when TF Model Garden has no
#: release for the installed minor (``1`` allows; unset, the cell only says what to do).
ALLOW_TENSORFLOW_CHANGE = "LABLIB_ALLOW_TENSORFLOW_CHANGE"

#: What the first cell says on a Colab runtime without TensorFlow (its TPU runtime).
NO_TENSORFLOW_ON_COLAB = (
    "This Colab runtime has no TensorFlow (Colab's TPU runtimes come without it): choose "
    "Runtime > Change runtime type > T4 GPU (or CPU), then run this notebook again from the top.")

#: Modules a ``.pth`` file imports at every interpreter start (setuptools' distutils shim):
#: in memory, but never used by a lab, so a changed setuptools needs no restart for them.
_STARTUP_MODULES = ("_distutils_hack",)


class InstallError(RuntimeError):
    """An install the lab needs could not be done (the message says what and how to fix it)."""


class RestartRequired(RuntimeError):
    """Packages this process had imported changed on disk: the session must restart."""


# -- pure logic ---------------------------------------------------------------------


def lab_extras(name: str) -> tuple:
    """The lablib extras a lab needs, by short name (``"lab2"``) or full name
    (``"lab2_transformer_reuters"``), as the lab registry (:mod:`lablib.labs`) declares
    them; ``()`` for a lab the registry does not know.

    Example:
        >>> lab_extras("lab2_transformer_reuters")
        ('tfm',)
    """
    try:
        return resolve_lab(name).extras
    except UnknownLab:
        return ()


def normalize(name: str) -> str:
    """A distribution name in its canonical form (PEP 503): ``ML_Dtypes`` -> ``ml-dtypes``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _packaging():
    try:
        from packaging.requirements import Requirement
        from packaging.version import Version
    except ImportError:  # pragma: no cover - TensorFlow and Keras both require packaging
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.version import Version
    return Requirement, Version


def lablib_pip(value: str | None = None) -> str:
    """The pip target a lab installs lablib from, given ``LABLIB_PIP``.

    Args:
        value: the variable's value; ``None`` reads ``os.environ["LABLIB_PIP"]``. Unset
            or blank means :data:`DEFAULT_LABLIB_PIP`.

    Returns:
        An existing path (a checkout, a wheel) made absolute, so pip reads it as a path
        and never looks the name up on an index; anything else unchanged (a requirement
        such as ``lablib @ git+https://...`` or ``lablib==0.1.0``).

    Example:
        >>> lablib_pip("  ")
        'lablib @ git+https://github.com/lablib-course/lablib'
    """
    if value is None:
        value = os.environ.get("LABLIB_PIP", "")
    value = value.strip()
    if not value:
        return DEFAULT_LABLIB_PIP
    if os.path.exists(value):
        return os.path.abspath(value)
    return value


def tf_minor(version: str) -> str:
    """``"2.19.0"`` -> ``"2.19"`` (the release series tf-models-official follows)."""
    _, Version = _packaging()
    release = Version(version).release
    return f"{release[0]}.{release[1] if len(release) > 1 else 0}"


def lab_requirements(lab: str, tensorflow: str | None) -> list[str]:
    """Every requirement of ``lab``: lablib's core, its extras, the notebook's imports.

    Args:
        lab: a lab's short or full name (``"lab1"``, ``"lab2_transformer_reuters"``).
        tensorflow: the installed TensorFlow version, or None. With a version, the
            ``tfm`` extra becomes ``tf-models-official~=X.Y.0`` and ``tf-keras~=X.Y.0``
            (each pins one TensorFlow minor); without, the extra's own ranges.

    Returns:
        Requirement strings, in a stable order, without duplicates.
    """
    needs = _lab_needs(lab)
    out = list(CORE)
    for extra in needs.extras:
        for requirement in EXTRAS[extra]:
            name = _name(requirement)
            if tensorflow is not None and name in TFM_PAIR:
                requirement = f"{name}~={tf_minor(tensorflow)}.0"
            out.append(requirement)
    out.extend(needs.imports)
    seen, unique = set(), []
    for requirement in out:
        if requirement not in seen:
            seen.add(requirement)
            unique.append(requirement)
    return unique


@dataclasses.dataclass
class Plan:
    """What :func:`plan` decided.

    Attributes:
        install: requirements to hand to pip (not installed, or at a version the lab
            does not accept).
        pins: ``name==version`` constraints for the installed :data:`PINNED` packages.
    """

    install: list
    pins: list

    @property
    def nothing_to_do(self) -> bool:
        return not self.install


def plan(requirements: Sequence[str], installed: Mapping[str, str]) -> Plan:
    """Decide what to install.

    Args:
        requirements: requirement strings (``"numpy>=1.26"``).
        installed: installed distributions, ``{name: version}`` (any name spelling).

    Returns:
        A :class:`Plan`.

    Raises:
        InstallError: a :data:`PINNED` package is installed at a version outside the
            lab's range: installing would replace it (for TensorFlow, a 600 MB download
            and a restart), so the student is told instead.
    """
    Requirement, _ = _packaging()
    versions = {normalize(name): version for name, version in installed.items()}
    install, conflicts = [], []
    for text in requirements:
        requirement = Requirement(text)
        name = normalize(requirement.name)
        version = versions.get(name)
        if version is not None and requirement.specifier.contains(version, prereleases=True):
            continue
        if version is not None and name in PINNED:
            conflicts.append(f"{name} {version} is installed; this lab needs {text}")
            continue
        install.append(text)
    if conflicts:
        raise InstallError(
            "This runtime's packages do not fit this lab, and replacing them would need a "
            "download and a restart: " + "; ".join(conflicts) + ". Use a runtime with a "
            "supported TensorFlow (Colab's default runtime), or install the versions "
            "named above yourself and restart."
        )
    return Plan(install=install, pins=constraints(versions))


def constraints(installed: Mapping[str, str], keep: Iterable[str] = PINNED) -> list[str]:
    """``name==version`` lines pinning the installed ones among ``keep``."""
    versions = {normalize(name): version for name, version in installed.items()}
    return [f"{name}=={versions[name]}" for name in map(normalize, keep) if name in versions]


def pip_install_command(requirements: Sequence[str], constraints_file: str | None = None,
                        python: str | None = None) -> list[str]:
    """The pip command line installing ``requirements`` under ``constraints_file``."""
    command = [python or sys.executable, "-m", "pip", "install", "-q"]
    if constraints_file is not None:
        command += ["-c", str(constraints_file)]
    return command + list(requirements)


def changed_imports(before: Mapping[str, str], after: Mapping[str, str],
                    providers: Mapping[str, Sequence[str]], imported: Iterable[str]) -> list[tuple]:
    """The installed distributions that changed and that this process had imported.

    Args:
        before, after: ``{distribution: version}`` before and after an install.
        providers: top-level import name -> distributions providing it
            (``importlib.metadata.packages_distributions()``).
        imported: module names this process has imported (``sys.modules``).

    Returns:
        ``[(distribution, old version, new version or None if removed), ...]``, sorted.
    """
    before = {normalize(k): v for k, v in before.items()}
    after = {normalize(k): v for k, v in after.items()}
    loaded = set()
    for module in imported:
        for dist in providers.get(module.partition(".")[0], ()):
            loaded.add(normalize(dist))
    return sorted((name, old, after.get(name)) for name, old in before.items()
                  if name in loaded and after.get(name) != old)


def newest_version_from_report(report: dict, name: str) -> str:
    """The version of ``name`` that a ``pip install --dry-run --report`` would install."""
    for item in report.get("install", []):
        metadata = item.get("metadata", {})
        if normalize(metadata.get("name", "")) == normalize(name):
            return metadata["version"]
    raise InstallError(f"pip found no release of {name}; check the network and the package index.")


# -- effects -------------------------------------------------------------------------


def installed_versions(names: Iterable[str] | None = None) -> dict[str, str]:
    """``{name: version}`` of the installed distributions (``names`` only, if given)."""
    if names is None:
        out = {}
        for dist in importlib.metadata.distributions():
            name = dist.metadata["Name"]
            if name:
                out.setdefault(normalize(name), dist.version)
        return out
    out = {}
    for name in names:
        try:
            out[normalize(name)] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _name(requirement: str) -> str:
    Requirement, _ = _packaging()
    return normalize(Requirement(requirement).name)


def _lab_needs(lab: str) -> Lab:
    try:
        return resolve_lab(lab)
    except UnknownLab as exc:
        raise ValueError(str(exc)) from None


Runner = Callable[[list], "subprocess.CompletedProcess"]


def _run(command: list) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True)


def _pip(requirements, pins, run: Runner):
    with tempfile.TemporaryDirectory(prefix="lablib-pip-") as folder:
        path = pathlib.Path(folder) / "constraints.txt"
        path.write_text("".join(f"{line}\n" for line in pins))
        return run(pip_install_command(requirements, path))


def _newest(name: str, run: Runner) -> str:
    with tempfile.TemporaryDirectory(prefix="lablib-pip-") as folder:
        report = pathlib.Path(folder) / "report.json"
        result = run([sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--no-deps",
                      "--ignore-installed", "--report", str(report), name])
        if result.returncode != 0 or not report.is_file():
            raise InstallError(f"pip could not look up {name}:\n{_tail(result)}")
        return newest_version_from_report(json.loads(report.read_text()), name)


def _imported_modules() -> list[str]:
    return list(sys.modules)


def _tail(result, limit=3000) -> str:
    return _output(result)[-limit:]


# What pip prints when it fails, most specific first: (pattern, what happened).
_PIP_FAILURES = (
    (r"Failed building wheel for ([\w.-]+)", "building {0} from its source failed"),
    (r"Could not build wheels for ([\w.-]+)", "building {0} from its source failed"),
    (r"Failed to build installable wheels for some pyproject\.toml based projects \(?([\w.-]+)", "building {0} from its source failed"),
    (r"Failed to build ([\w.-]+)", "building {0} from its source failed"),
    (r"metadata-generation-failed[\s\S]*?Encountered error while generating package metadata[\s\S]*?(?:See above for output\.)?", "preparing a source package failed"),
    (r"(?:NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution"
     r"|Network is unreachable|Connection refused|Could not fetch URL|ProxyError|SSLError)",
     "the package index could not be reached (is this runtime online?)"),
    (r"satisfies the requirement ([A-Za-z0-9_.\-]+)[^\n]*\(from versions: none\)",
     "pip found no release of {0} at all on its package index (is this runtime online?)"),
    (r"No matching distribution found for ([^\s]+)", "no release of {0} fits this runtime"),
    (r"ResolutionImpossible", "the packages' version requirements conflict"),
    (r"Invalid requirement: '?([^'\n]+)", "{0!r} is not a pip requirement"),
    (r"No space left on device", "the disk is full"),
)


def pip_failure(output: str) -> str:
    """What a failed ``pip install`` says went wrong, in a few words, from its output:
    the package it could not build (``"building seqeval from its source failed"``) or
    find, an unreachable index, conflicting requirements; else ``"pip failed"``.

    Example:
        >>> pip_failure("ERROR: Failed building wheel for seqeval")
        'building seqeval from its source failed'
    """
    for pattern, words in _PIP_FAILURES:
        match = re.search(pattern, output)
        if match:
            return words.format(*match.groups())
    return "pip failed"


def _pip_error_lines(output: str, limit: int = 25) -> str:
    """pip's own error lines (``ERROR:``, ``error:`` and the build's last lines), at most
    ``limit``: what the student reads instead of pip's whole log."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    lines = [line for line in lines if not line.lstrip().startswith(("WARNING: Location", "Looking in"))]
    # pip's retries of one request: only the last of each run of them
    lines = [line for i, line in enumerate(lines)
             if not ("Retrying (Retry(" in line and i + 1 < len(lines) and "Retrying (Retry(" in lines[i + 1])]
    wanted = [i for i, line in enumerate(lines)
              if re.match(r"\s*(ERROR|error|note|hint|ModuleNotFoundError|\S+Error)\b", line)]
    if not wanted:
        return "\n".join(lines[-limit:])
    first = max(0, wanted[0] - 3)
    return "\n".join(lines[first:][-limit:])


def _output(result) -> str:
    return (result.stdout or "") + (result.stderr or "")


def _pip_failed(requirements, output: str, kept: Mapping[str, str] | None = None) -> InstallError:
    """The error of a failed install, from pip's ``output``; ``kept`` (TensorFlow's and
    Keras's versions before) is read again, and the message says they are unchanged only
    when they are."""
    unchanged = ""
    if kept:
        now = installed_versions(list(kept))
        if all(now.get(name) == version for name, version in kept.items()):
            unchanged = " Nothing was replaced: " + ", ".join(f"{name} {version}" for name, version in kept.items()) + " as before."
        else:
            unchanged = " Changed all the same: " + ", ".join(
                f"{name} {version} -> {now.get(name) or '(removed)'}" for name, version in kept.items()
                if now.get(name) != version) + f"; {RESTART_HINT}."
    return InstallError(
        f"pip could not install {' '.join(requirements)}: {pip_failure(output)}.{unchanged} "
        f"pip said:\n{_pip_error_lines(output)}")


def install_summary(before: Mapping[str, str], after: Mapping[str, str],
                    requirers: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The lines that tell a student what an install did: every distribution added, and
    every one changed or removed (``absl-py 2.5.1 -> 1.4.0 (tensorflow-model-optimization
    requires absl-py~=1.2)``), so no change goes unreported.

    Args:
        before, after: ``{distribution: version}`` around the install.
        requirers: changed distribution -> the requirements of installed distributions that
            exclude its old version (:func:`_requirers`); shown in brackets.
    """
    before = {normalize(k): v for k, v in before.items()}
    after = {normalize(k): v for k, v in after.items()}
    added = sorted(f"{name} {after[name]}" for name in set(after) - set(before))
    changed = []
    for name in sorted(before):
        if after.get(name) == before[name]:
            continue
        why = (requirers or {}).get(name)
        changed.append(f"{name} {before[name]} -> {after.get(name) or '(removed)'}"
                       + (f" ({'; '.join(why)})" if why else ""))
    lines = []
    if added:
        lines.append(f"Added {len(added)}: " + ", ".join(added))
    if changed:
        lines.append(f"Changed {len(changed)}: " + ", ".join(changed))
    return lines


def _requirers(changed: Mapping[str, str]) -> dict[str, list[str]]:
    """For each changed distribution (``{name: old version}``), the installed
    distributions whose requirements exclude the old version:
    ``{"absl-py": ["tensorflow-model-optimization requires absl-py~=1.2"]}``."""
    Requirement, _ = _packaging()
    out: dict[str, list[str]] = {}
    if not changed:
        return out
    for dist in importlib.metadata.distributions():
        for text in dist.requires or ():
            try:
                requirement = Requirement(text)
            except Exception:  # noqa: BLE001 - a malformed requirement of another package
                continue
            name = normalize(requirement.name)
            if name in changed and requirement.specifier and not requirement.specifier.contains(
                    changed[name], prereleases=True):
                if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                    continue
                line = f"{dist.metadata['Name']} requires {requirement.name}{requirement.specifier}"
                out.setdefault(name, [])
                if line not in out[name]:
                    out[name].append(line)
    return out


def _on_colab(environ=None) -> bool:
    """Whether this is a Colab runtime (its ``COLAB_RELEASE_TAG`` variable, or the
    ``google.colab`` package)."""
    environ = os.environ if environ is None else environ
    if environ.get("COLAB_RELEASE_TAG"):
        return True
    try:
        return importlib.util.find_spec("google.colab") is not None
    except (ImportError, ValueError):
        return False


def _allowed(environ=None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get(ALLOW_TENSORFLOW_CHANGE, "").strip().lower() in ("1", "true", "yes")


def set_tensorflow_environment(environ=None, has_gpu=None) -> None:
    """The environment variables a lab sets before TensorFlow starts; a value already set
    (by the user, a grader, CI) is kept. Its child processes inherit them.

    * ``TF_FORCE_GPU_ALLOW_GROWTH=true``: TensorFlow takes GPU memory as it needs it
      instead of nearly the whole card at start, so a second TensorFlow process (Lab 2's
      Keras 3 run, another notebook on the same runtime, a grader) can share the card.
      On an H100, Lab 2 ran out of memory beside another lab's kernel started without it.
    * ``TF_CPP_MIN_LOG_LEVEL``: TensorFlow's C++ log prints its start-up lines (CPU
      instruction sets, oneDNN, CUDA libraries, the devices it created) into the first
      cell that imports it, where a student reads them as errors. ``2`` keeps its
      errors and drops the INFO and WARNING lines; on a machine without an NVIDIA GPU
      (no ``/dev/nvidiactl``) ``3``, because TensorFlow's CUDA build then logs
      "failed call to cuInit" as an error at every start. An error that stops a
      computation still reaches the student as a Python exception; Python-level
      warnings are not affected.

    Args:
        environ: the mapping to set (default ``os.environ``; tests pass a dict).
        has_gpu: whether an NVIDIA GPU is present (default: ``/dev/nvidiactl`` exists).
    """
    environ = os.environ if environ is None else environ
    if has_gpu is None:
        has_gpu = os.path.exists("/dev/nvidiactl")
    environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2" if has_gpu else "3")


# Messages of the labs' dependencies that a student can do nothing about, each matched
# narrowly: (logger or warning category, text the message contains, why it is harmless).
KNOWN_NOISE = (
    ("tensorflow", "triggered tf.function retracing",
     "the labs build several models and evaluate batches of several lengths by design; "
     "benchmarks/retracing.py measures what retracing costs"),
    (UserWarning, "pkg_resources is deprecated as an API",
     "tensorflow_hub (imported by TF Model Garden) imports pkg_resources"),
    ("absl", "Detected incompatible Protobuf Gencode/Runtime versions",
     "tensorflow_datasets, imported by TF Model Garden, cannot load tensorflow_metadata's "
     "protos with Colab's older protobuf runtime (an ERROR line and a traceback); the labs "
     "do not use tensorflow_datasets, and replacing Colab's protobuf would need a restart"),
    (FutureWarning, "which Google will stop supporting in new releases of google.api_core",
     "google.api_core, loaded with TensorFlow, announces the end of this Python version's "
     "support; nothing a lab can do"),
)


class _DropKnownNoise(logging.Filter):
    """Drops the log records that :data:`KNOWN_NOISE` lists for its logger."""

    def __init__(self, texts):
        super().__init__()
        self.texts = tuple(texts)

    def filter(self, record):
        message = record.getMessage()
        return not any(text in message for text in self.texts)


def quiet_known_noise() -> None:
    """Silences the messages in :data:`KNOWN_NOISE`, and only those, for this process.

    Idempotent (a first cell run twice adds nothing). Other warnings and log records
    pass as before.
    """
    by_logger = {}
    for source, text, _why in KNOWN_NOISE:
        if isinstance(source, str):
            by_logger.setdefault(source, []).append(text)
        else:
            warnings.filterwarnings("ignore", message=".*" + re.escape(text), category=source)
    for name, texts in by_logger.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropKnownNoise) for f in logger.filters):
            logger.addFilter(_DropKnownNoise(texts))


def _model_garden_missing(tensorflow: str, run: Runner) -> str | None:
    """After a failed install: the newest tf-models-official when none exists for
    ``tensorflow``'s minor (the failure was "no release"), None when one exists (the
    failure was something else, which the caller reports as it was).

    Raises:
        _LookupFailed: pip found no tf-models-official at all (offline, another index).
    """
    minor = tf_minor(tensorflow)
    with tempfile.TemporaryDirectory(prefix="lablib-pip-") as folder:
        report = pathlib.Path(folder) / "report.json"
        found = run([sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--no-deps",
                     "--ignore-installed", "--report", str(report), f"{TFM_PAIR[0]}~={minor}.0"])
        if found.returncode == 0:
            return None
    try:
        newest = _newest(TFM_PAIR[0], run)
    except InstallError:
        raise _LookupFailed(_output(found)) from None
    return None if tf_minor(newest) == minor else newest


class _LookupFailed(Exception):
    """pip found no tf-models-official at all (offline, another index): ``output`` is
    what the look-up printed."""

    def __init__(self, output: str):
        super().__init__(output)
        self.output = output


def prepare(lab: str, *, run: Runner = _run, out=None, environ=None) -> list[str]:
    """Install what ``lab`` needs and this Python lacks, without replacing TensorFlow.

    Args:
        lab: a lab's short or full name (``"lab1"``, ``"lab2_transformer_reuters"``).
        run: runs a command and returns a ``subprocess.CompletedProcess`` (tests pass
            a fake).
        out: where messages go (default ``sys.stdout``).
        environ: the variables read (:data:`ALLOW_TENSORFLOW_CHANGE`, Colab's); default
            ``os.environ``.

    In a notebook it also lets "Run all" go past graded pieces not written yet
    (:func:`lablib.session.start`), sets TensorFlow's environment before TensorFlow
    starts (:func:`set_tensorflow_environment`) and silences the dependencies' messages
    listed in :data:`KNOWN_NOISE` (:func:`quiet_known_noise`).

    Returns:
        The requirements installed (empty when everything was present).

    Raises:
        InstallError: pip failed (the message names what failed and quotes pip's error
            lines; nothing was replaced), a pinned package has a version the lab cannot
            use, TF Model Garden has no release for this TensorFlow and
            :data:`ALLOW_TENSORFLOW_CHANGE` is not set, or this is a Colab runtime
            without TensorFlow (:data:`NO_TENSORFLOW_ON_COLAB`).
        RestartRequired: an install changed a package this process had imported, or
            replaced TensorFlow (the message says what changed).
    """
    __tracebackhide__ = True  # IPython shows the cell's line and the message, not this frame
    from lablib import session

    environ = os.environ if environ is None else environ
    session.start()
    set_tensorflow_environment()
    quiet_known_noise()
    out = out or sys.stdout
    tensorflow = installed_versions(["tensorflow"]).get("tensorflow")
    if tensorflow is None and _on_colab(environ) and not _allowed(environ):
        raise InstallError(NO_TENSORFLOW_ON_COLAB)
    requirements = lab_requirements(lab, tensorflow)
    names = {_name(r) for r in requirements} | set(PINNED)
    decided = plan(requirements, installed_versions(names))
    if decided.nothing_to_do:
        return []

    before = installed_versions()
    kept = {name: before[name] for name in ("tensorflow", "keras") if name in before}
    print(f"Installing for {lab}: {' '.join(decided.install)} (keeping "
          f"{', '.join(decided.pins) or 'nothing pinned'}) ...", file=out, flush=True)
    installed = list(decided.install)
    result = _pip(decided.install, decided.pins, run)
    replaced_tensorflow = False
    if result.returncode != 0:
        wanted = {_name(r) for r in decided.install}
        if tensorflow is None or not wanted & set(TFM_PAIR):
            raise _pip_failed(decided.install, _output(result), kept)
        try:
            newest = _model_garden_missing(tensorflow, run)
        except _LookupFailed as failed:  # the index gives nothing: say what pip said
            raise _pip_failed(decided.install, _output(result) + failed.output, kept) from None
        if newest is None:  # Model Garden exists for this TensorFlow: something else failed
            raise _pip_failed(decided.install, _output(result), kept)
        if not _allowed(environ):
            raise InstallError(
                f"TF Model Garden (tf-models-official) has no release for TensorFlow "
                f"{tf_minor(tensorflow)}, the version this runtime has ({tensorflow}); its newest "
                f"release, {newest}, needs TensorFlow {tf_minor(newest)}. Nothing was installed. "
                f"Use a runtime with TensorFlow {tf_minor(newest)} (Colab's default runtime), or let "
                f"this cell install TensorFlow {tf_minor(newest)} with it: run "
                f"`%env {ALLOW_TENSORFLOW_CHANGE}=1` in a cell of its own, then this cell again "
                f"(a restart follows).")
        pair = [f"{TFM_PAIR[0]}=={newest}", f"{TFM_PAIR[1]}~={tf_minor(newest)}.0",
                f"tensorflow~={tf_minor(newest)}.0"]
        others = [r for r in decided.install if _name(r) not in TFM_PAIR]
        print(f"TF Model Garden has no release for TensorFlow {tf_minor(tensorflow)}; as "
              f"{ALLOW_TENSORFLOW_CHANGE} allows, installing tf-models-official {newest} with the "
              f"TensorFlow {tf_minor(newest)} it needs ...", file=out, flush=True)
        result = _pip(pair + others, [p for p in decided.pins if not p.startswith("tensorflow==")], run)
        if result.returncode != 0:
            raise _pip_failed(pair + others, _output(result), kept)
        installed, replaced_tensorflow = pair + others, True

    importlib.invalidate_caches()
    after = installed_versions()
    changed_versions = {name: version for name, version in before.items() if after.get(name) != version}
    summary = install_summary(before, after, _requirers(changed_versions))
    imported = [m for m in _imported_modules() if m.partition(".")[0] not in _STARTUP_MODULES]
    changed = changed_imports(before, after, importlib.metadata.packages_distributions(), imported)
    if replaced_tensorflow or changed:
        lines = [f"  {name} {old} -> {new or '(removed)'}" for name, old, new in changed]
        if replaced_tensorflow:
            lines.insert(0, f"TensorFlow was replaced for TF Model Garden: {tensorflow} -> "
                            f"{after.get('tensorflow')}.")
        if changed:
            lines.insert(int(replaced_tensorflow), "The install changed packages this session had already loaded:")
        message = "\n".join(lines) + f"\nNow {RESTART_HINT}."
        print("\n".join(summary + [message]), file=out, flush=True)
        raise RestartRequired(message)
    print("\n".join([f"Installed for {lab}: {' '.join(installed)}"] + summary), file=out, flush=True)
    return installed
