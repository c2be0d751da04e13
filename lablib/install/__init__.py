"""What each lab's first cell installs, never replacing the runtime's TensorFlow.

* :mod:`.plan` - what a lab needs and what of it to install: decisions over versions.
* :mod:`.pip_run` - the installed versions, pip's commands, what a failed pip said.
* :mod:`.environment` - TensorFlow's variables, set before it starts; known log noise.
* :mod:`.startup` - the first cell: :func:`prepare` (``from lablib.install import prepare``).

Standard library, ``packaging`` and the lab registry only: never TensorFlow.
"""

from lablib.install.environment import KNOWN_NOISE, quiet_known_noise, set_tensorflow_environment
from lablib.install.pip_run import (
    installed_versions,
    newest_version_from_report,
    pip_failure,
    pip_install_command,
)
from lablib.install.plan import (
    CORE,
    EXTRAS,
    PINNED,
    InstallError,
    Plan,
    changed_imports,
    constraints,
    install_summary,
    lab_extras,
    lab_requirements,
    normalize,
    plan,
    tf_minor,
)
from lablib.install.startup import (
    ALLOW_TENSORFLOW_CHANGE,
    DEFAULT_LABLIB_PIP,
    NO_TENSORFLOW_ON_COLAB,
    RestartRequired,
    lablib_pip,
    prepare,
)

# The errors a student meets print under the name they import them by (the last line of
# the first cell's traceback: "lablib.install.InstallError: ..."), not their module's.
InstallError.__module__ = RestartRequired.__module__ = "lablib.install"

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
    "normalize",
    "tf_minor",
    "installed_versions",
    "newest_version_from_report",
]
