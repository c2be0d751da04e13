"""Running pip and reading what it did: the installed versions, pip's commands, and what
a failed pip says went wrong, in a few words and in pip's own error lines.

Every command goes through a ``run`` callable (:data:`Runner`, default :func:`run`), so
the tests hand in a fake pip. The decisions over the versions read here are in
:mod:`lablib.install.plan`.
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence

from lablib.install.plan import TFM_PAIR, InstallError, _packaging, normalize, tf_minor

__all__ = [
    "RESTART_HINT",
    "Runner",
    "run",
    "installed_versions",
    "pip_install_command",
    "pip_install",
    "printed",
    "newest_version_from_report",
    "pip_failure",
    "pip_failed",
    "requirers",
    "LookupFailed",
    "model_garden_missing",
]

RESTART_HINT = (
    "restart the session (Colab: Runtime > Restart session), then run this "
    "notebook again from the top"
)

#: Runs a command line and returns its ``subprocess.CompletedProcess`` (tests pass a fake pip).
Runner = Callable[[list], "subprocess.CompletedProcess"]


def run(command: list) -> subprocess.CompletedProcess:
    """The default :data:`Runner`: the command in a subprocess, its output captured."""
    return subprocess.run(command, capture_output=True, text=True)


def installed_versions(names: Iterable[str] | None = None) -> dict[str, str]:
    """``{name: version}`` of the installed distributions (``names`` only, if given)."""
    out = {}
    if names is None:
        for dist in importlib.metadata.distributions():
            name = dist.metadata["Name"]
            if name:
                out.setdefault(normalize(name), dist.version)
        return out
    for name in names:
        try:
            out[normalize(name)] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def pip_install_command(
    requirements: Sequence[str], constraints_file: str | None = None, python: str | None = None
) -> list[str]:
    """The pip command line installing ``requirements`` under ``constraints_file``."""
    command = [python or sys.executable, "-m", "pip", "install", "-q"]
    if constraints_file is not None:
        command += ["-c", str(constraints_file)]
    return command + list(requirements)


def pip_install(requirements: Sequence[str], pins: Sequence[str], runner: Runner):
    """``pip install requirements`` with ``pins`` (``name==version``) as its constraints."""
    with tempfile.TemporaryDirectory(prefix="lablib-pip-") as folder:
        path = pathlib.Path(folder) / "constraints.txt"
        path.write_text("".join(f"{line}\n" for line in pins))
        return runner(pip_install_command(requirements, path))


def newest_version_from_report(report: dict, name: str) -> str:
    """The version of ``name`` that a ``pip install --dry-run --report`` would install."""
    for item in report.get("install", []):
        metadata = item.get("metadata", {})
        if normalize(metadata.get("name", "")) == normalize(name):
            return metadata["version"]
    raise InstallError(f"pip found no release of {name}; check the network and the package index.")


def _dry_run(requirement: str, runner: Runner, report: pathlib.Path):
    return runner(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--dry-run",
            "--no-deps",
            "--ignore-installed",
            "--report",
            str(report),
            requirement,
        ]
    )


def _newest(name: str, runner: Runner) -> str:
    with tempfile.TemporaryDirectory(prefix="lablib-pip-") as folder:
        report = pathlib.Path(folder) / "report.json"
        result = _dry_run(name, runner, report)
        if result.returncode != 0 or not report.is_file():
            raise InstallError(f"pip could not look up {name}:\n{printed(result)[-3000:]}")
        return newest_version_from_report(json.loads(report.read_text()), name)


def printed(result) -> str:
    """What a finished command printed, stdout then stderr."""
    return (result.stdout or "") + (result.stderr or "")


_BUILD_FAILED = "building {0} from its source failed"

# What pip prints when it fails, most specific first: (pattern, what happened).
_PIP_FAILURES = (
    (r"Failed building wheel for ([\w.-]+)", _BUILD_FAILED),
    (r"Could not build wheels for ([\w.-]+)", _BUILD_FAILED),
    (
        r"Failed to build installable wheels for some pyproject\.toml based projects \(?([\w.-]+)",
        _BUILD_FAILED,
    ),
    (r"Failed to build ([\w.-]+)", _BUILD_FAILED),
    (
        r"metadata-generation-failed[\s\S]*?Encountered error while generating package metadata"
        r"[\s\S]*?(?:See above for output\.)?",
        "preparing a source package failed",
    ),
    (
        r"(?:NewConnectionError|Failed to establish a new connection"
        r"|Temporary failure in name resolution"
        r"|Network is unreachable|Connection refused|Could not fetch URL|ProxyError|SSLError)",
        "the package index could not be reached (is this runtime online?)",
    ),
    (
        r"satisfies the requirement ([A-Za-z0-9_.\-]+)[^\n]*\(from versions: none\)",
        "pip found no release of {0} at all on its package index (is this runtime online?)",
    ),
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
    lines = [
        line for line in lines if not line.lstrip().startswith(("WARNING: Location", "Looking in"))
    ]
    # pip's retries of one request: only the last of each run of them
    retry = "Retrying (Retry("
    lines = [
        line
        for i, line in enumerate(lines)
        if not (retry in line and i + 1 < len(lines) and retry in lines[i + 1])
    ]
    wanted = [
        i
        for i, line in enumerate(lines)
        if re.match(r"\s*(ERROR|error|note|hint|ModuleNotFoundError|\S+Error)\b", line)
    ]
    if not wanted:
        return "\n".join(lines[-limit:])
    first = max(0, wanted[0] - 3)
    return "\n".join(lines[first:][-limit:])


def pip_failed(requirements, output: str, kept: Mapping[str, str] | None = None) -> InstallError:
    """The error of a failed install, from pip's ``output``; ``kept`` (TensorFlow's and
    Keras's versions before) is read again, and the message says they are unchanged only
    when they are."""
    unchanged = ""
    if kept:
        now = installed_versions(list(kept))
        if all(now.get(name) == version for name, version in kept.items()):
            unchanged = (
                " Nothing was replaced: "
                + ", ".join(f"{name} {version}" for name, version in kept.items())
                + " as before."
            )
        else:
            unchanged = (
                " Changed all the same: "
                + ", ".join(
                    f"{name} {version} -> {now.get(name) or '(removed)'}"
                    for name, version in kept.items()
                    if now.get(name) != version
                )
                + f"; {RESTART_HINT}."
            )
    return InstallError(
        f"pip could not install {' '.join(requirements)}: {pip_failure(output)}.{unchanged} "
        f"pip said:\n{_pip_error_lines(output)}"
    )


def requirers(changed: Mapping[str, str]) -> dict[str, list[str]]:
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
            if (
                name not in changed
                or not requirement.specifier
                or requirement.specifier.contains(changed[name], prereleases=True)
            ):
                continue
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            line = f"{dist.metadata['Name']} requires {requirement.name}{requirement.specifier}"
            if line not in out.setdefault(name, []):
                out[name].append(line)
    return out


class LookupFailed(Exception):
    """pip found no tf-models-official at all (offline, another index): ``output`` is
    what the look-up printed."""

    def __init__(self, output: str):
        super().__init__(output)
        self.output = output


def model_garden_missing(tensorflow: str, runner: Runner) -> str | None:
    """After a failed install: the newest tf-models-official when none exists for
    ``tensorflow``'s minor (the failure was "no release"), None when one exists (the
    failure was something else, which the caller reports as it was).

    Raises:
        LookupFailed: pip found no tf-models-official at all (offline, another index).
    """
    minor = tf_minor(tensorflow)
    with tempfile.TemporaryDirectory(prefix="lablib-pip-") as folder:
        found = _dry_run(f"{TFM_PAIR[0]}~={minor}.0", runner, pathlib.Path(folder) / "report.json")
        if found.returncode == 0:
            return None
    try:
        newest = _newest(TFM_PAIR[0], runner)
    except InstallError:
        raise LookupFailed(printed(found)) from None
    return None if tf_minor(newest) == minor else newest
