"""A lab's first cell: what it needs, installed into the running notebook without
replacing its TensorFlow.

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

import importlib
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Mapping

import lablib.install.pip_run as pip_run
from lablib.install.environment import quiet_known_noise, set_tensorflow_environment
from lablib.install.plan import (
    PINNED,
    TFM_PAIR,
    InstallError,
    Plan,
    changed_imports,
    install_summary,
    lab_requirements,
    plan,
    requirement_name,
    tf_minor,
)

__all__ = [
    "DEFAULT_LABLIB_PIP",
    "ALLOW_TENSORFLOW_CHANGE",
    "NO_TENSORFLOW_ON_COLAB",
    "RestartRequired",
    "lablib_pip",
    "prepare",
]

#: Where the labs install lablib from when ``LABLIB_PIP`` is unset (the course's repository).
DEFAULT_LABLIB_PIP = "lablib @ git+https://github.com/lablib-course/lablib"

#: The variable that lets Lab 2's first cell replace TensorFlow when TF Model Garden has no
#: release for the installed minor (``1`` allows; unset, the cell only says what to do).
ALLOW_TENSORFLOW_CHANGE = "LABLIB_ALLOW_TENSORFLOW_CHANGE"

#: What the first cell says on a Colab runtime without TensorFlow (its TPU runtime).
NO_TENSORFLOW_ON_COLAB = (
    "This Colab runtime has no TensorFlow (Colab's TPU runtimes come without it): choose "
    "Runtime > Change runtime type > T4 GPU (or CPU), then run this notebook again from the top."
)

#: Modules a ``.pth`` file imports at every interpreter start (setuptools' distutils shim):
#: in memory, but never used by a lab, so a changed setuptools needs no restart for them.
_STARTUP_MODULES = ("_distutils_hack",)


class RestartRequired(RuntimeError):
    """Packages this process had imported changed on disk: the session must restart."""


#: What the last :class:`RestartRequired` of this process said: every later call of
#: :func:`prepare` in it raises it again (the packages in memory and on disk still
#: differ: "Run all" again without a restart must not go on); a restart clears it.
_RESTART_OWED: list[str] = []


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


def _on_colab(environ) -> bool:
    """Whether this is a Colab runtime (its ``COLAB_RELEASE_TAG`` variable, or the
    ``google.colab`` package)."""
    if environ.get("COLAB_RELEASE_TAG"):
        return True
    try:
        return importlib.util.find_spec("google.colab") is not None
    except (ImportError, ValueError):
        return False


def _allowed(environ) -> bool:
    return environ.get(ALLOW_TENSORFLOW_CHANGE, "").strip().lower() in ("1", "true", "yes")


def _imported_modules() -> list[str]:
    return list(sys.modules)


def prepare(lab: str, *, run: pip_run.Runner = pip_run.run, out=None, environ=None) -> list[str]:
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
    starts (:func:`~lablib.install.environment.set_tensorflow_environment`) and silences
    the dependencies' messages listed in :data:`~lablib.install.environment.KNOWN_NOISE`
    (:func:`~lablib.install.environment.quiet_known_noise`).

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

    if _RESTART_OWED:
        raise RestartRequired(
            f"{_RESTART_OWED[-1]}\n(Still owed: this session has not restarted since.)"
        )
    environ = os.environ if environ is None else environ
    session.start()
    set_tensorflow_environment()
    quiet_known_noise()
    out = out or sys.stdout
    tensorflow = pip_run.installed_versions(["tensorflow"]).get("tensorflow")
    if tensorflow is None and _on_colab(environ) and not _allowed(environ):
        raise InstallError(NO_TENSORFLOW_ON_COLAB)
    requirements = lab_requirements(lab, tensorflow)
    names = {requirement_name(r) for r in requirements} | set(PINNED)
    decided = plan(requirements, pip_run.installed_versions(names))
    if decided.nothing_to_do:
        return []

    before = pip_run.installed_versions()
    kept = {name: before[name] for name in ("tensorflow", "keras") if name in before}
    print(
        f"Installing for {lab}: {' '.join(decided.install)} (keeping "
        f"{', '.join(decided.pins) or 'nothing pinned'}) ...",
        file=out,
        flush=True,
    )
    installed, replaced_tensorflow = _install(decided, tensorflow, kept, run, out, environ)
    _report(lab, installed, before, replaced_tensorflow, out)
    return installed


def _install(
    decided: Plan,
    tensorflow: str | None,
    kept: Mapping[str, str],
    run: pip_run.Runner,
    out,
    environ,
) -> tuple[list, bool]:
    """Runs pip for ``decided``. When that fails because TF Model Garden has no release
    for this TensorFlow, the newest Model Garden with its TensorFlow replaces it, where
    :data:`ALLOW_TENSORFLOW_CHANGE` allows. Returns the requirements installed and
    whether TensorFlow was replaced; raises :class:`InstallError` for any other failure.
    """
    __tracebackhide__ = True
    result = pip_run.pip_install(decided.install, decided.pins, run)
    if result.returncode == 0:
        return list(decided.install), False
    wanted = {requirement_name(r) for r in decided.install}
    if tensorflow is None or not wanted & set(TFM_PAIR):
        raise pip_run.pip_failed(decided.install, pip_run.printed(result), kept)
    try:
        newest = pip_run.model_garden_missing(tensorflow, run)
    except pip_run.LookupFailed as failed:  # the index gives nothing: say what pip said
        raise pip_run.pip_failed(
            decided.install, pip_run.printed(result) + failed.output, kept
        ) from None
    if newest is None:  # Model Garden exists for this TensorFlow: something else failed
        raise pip_run.pip_failed(decided.install, pip_run.printed(result), kept)
    old, new = tf_minor(tensorflow), tf_minor(newest)
    if not _allowed(environ):
        raise InstallError(
            f"TF Model Garden (tf-models-official) has no release for TensorFlow {old}, the "
            f"version this runtime has ({tensorflow}); its newest release, {newest}, needs "
            f"TensorFlow {new}. Nothing was installed. Use a runtime with TensorFlow {new} "
            f"(Colab's default runtime), or let this cell install TensorFlow {new} with it: "
            f"run `%env {ALLOW_TENSORFLOW_CHANGE}=1` in a cell of its own, then this cell "
            f"again (a restart follows)."
        )
    requirements = [f"{TFM_PAIR[0]}=={newest}", f"{TFM_PAIR[1]}~={new}.0", f"tensorflow~={new}.0"]
    requirements += [r for r in decided.install if requirement_name(r) not in TFM_PAIR]
    print(
        f"TF Model Garden has no release for TensorFlow {old}; as "
        f"{ALLOW_TENSORFLOW_CHANGE} allows, installing tf-models-official {newest} with the "
        f"TensorFlow {new} it needs ...",
        file=out,
        flush=True,
    )
    pins = [p for p in decided.pins if not p.startswith("tensorflow==")]
    result = pip_run.pip_install(requirements, pins, run)
    if result.returncode != 0:
        raise pip_run.pip_failed(requirements, pip_run.printed(result), kept)
    return requirements, True


def _report(
    lab: str, installed: list, before: Mapping[str, str], replaced_tensorflow: bool, out
) -> None:
    """Prints what the install added and changed. Raises :class:`RestartRequired` when it
    replaced TensorFlow or changed a package this process had imported."""
    __tracebackhide__ = True
    importlib.invalidate_caches()
    after = pip_run.installed_versions()
    changed_versions = {
        name: version for name, version in before.items() if after.get(name) != version
    }
    summary = install_summary(before, after, pip_run.requirers(changed_versions))
    imported = [m for m in _imported_modules() if m.partition(".")[0] not in _STARTUP_MODULES]
    changed = changed_imports(before, after, importlib.metadata.packages_distributions(), imported)
    if not (replaced_tensorflow or changed):
        print(
            "\n".join([f"Installed for {lab}: {' '.join(installed)}"] + summary),
            file=out,
            flush=True,
        )
        return
    lines = [f"  {name} {old} -> {new or '(removed)'}" for name, old, new in changed]
    if changed:
        lines.insert(0, "The install changed packages this session had already loaded:")
    if replaced_tensorflow:
        lines.insert(
            0,
            f"TensorFlow was replaced for TF Model Garden: {before.get('tensorflow')}"
            f" -> {after.get('tensorflow')}.",
        )
    message = "\n".join(lines) + f"\nNow {pip_run.RESTART_HINT}."
    print("\n".join(summary + [message]), file=out, flush=True)
    _RESTART_OWED.append(message)
    raise RestartRequired(message)
