"""lablib.install: what each lab's first cell installs, and the cell itself.

The cell's real installs in a Colab-like environment are exercised by
``bash .ci/run colab`` (``.ci/colab_check.py``); here the decisions are tested with fake
installed versions and a fake pip.
"""

import configparser
import importlib.metadata
import io
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from lablib import install
from lablib.install import pip_run, startup
from lablib.install.plan import requirement_name
from lablib.labs import all_labs

ROOT = pathlib.Path(__file__).resolve().parents[2]
# short name -> notebook name, from the lab registry
LABS = {lab.short: lab.name for lab in all_labs()}

COLAB = {
    "tensorflow": "2.19.0",
    "keras": "3.10.0",
    "numpy": "2.0.2",
    "protobuf": "5.29.5",
    "ml_dtypes": "0.4.1",
    "h5py": "3.14.0",
    "scipy": "1.16.1",
    "scikit-learn": "1.6.1",
    "matplotlib": "3.10.0",
    "pandas": "2.2.2",
    "setuptools": "75.2.0",
}


def _setup_cfg():
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    lines = lambda text: [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    extras = {name: lines(value) for name, value in parser["options.extras_require"].items()}
    return lines(parser["options"]["install_requires"]), extras


def _first_cell(lab):
    nb = json.loads((ROOT / "solutions" / f"{LABS[lab]}.ipynb").read_text())
    return "".join(next(c for c in nb["cells"] if c["cell_type"] == "code")["source"])


# -- requirements match setup.cfg and the notebooks ------------------------------------


def test_core_and_extras_equal_setup_cfg():
    core, extras = _setup_cfg()
    assert core == list(install.CORE)
    for name, requirements in install.EXTRAS.items():
        assert extras[name] == list(requirements), name
    everything = (
        set(core) | {r for name in install.EXTRAS for r in extras[name]} | set(extras["grading"])
    )
    everything |= {r for lab in all_labs() for r in lab.imports}
    assert everything - set(core) <= set(extras["dev"]), (
        "dev must hold every extra and every lab import"
    )


def test_lab_needs_cover_every_import_of_the_notebook():
    # Top-level modules a lab's cells import -> the distribution that provides them.
    provider = {
        "numpy": "numpy",
        "tensorflow": "tensorflow",
        "keras": "keras",
        "matplotlib": "matplotlib",
        "pandas": "pandas",
        "sklearn": "scikit-learn",
        "tensorflow_models": "tf-models-official",
        "scipy": "scipy",
        "rdkit": "rdkit",
    }
    stdlib = set(sys.stdlib_module_names) | {"lablib"}
    for lab, name in LABS.items():
        nb = json.loads((ROOT / "solutions" / f"{name}.ipynb").read_text())
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        modules = {
            m.split(".")[0] for m in re.findall(r"^\s*(?:import|from)\s+([\w.]+)", code, re.M)
        }
        needed = {requirement_name(r) for r in install.lab_requirements(lab, "2.19.0")}
        for module in modules - stdlib:
            assert module in provider, (
                f"{name} imports {module}: add it to the lab's imports in lablib/labs.py"
            )
            assert install.normalize(provider[module]) in needed, (lab, module)
        if "lablib.data.molecules" in code or "load_molecules" in code or "smiles_to_graph" in code:
            assert "rdkit" in needed, lab


def test_lab_notebooks_and_extras():
    assert sorted(LABS.values()) == sorted(p.stem for p in (ROOT / "solutions").glob("lab*.ipynb"))
    assert install.lab_extras("lab2_transformer_reuters") == install.lab_extras("lab2") == ("tfm",)
    assert install.lab_extras("lab3_gcn_molecules") == ("molecules",)
    assert install.lab_extras("lab1_attention") == () and install.lab_extras("lab0_fixture") == ()


def test_gradescope_setup_installs_the_labs_extras(tmp_path, monkeypatch):
    """The grader runs a lab's SETUP cells offline, so Gradescope's setup.sh installs the
    wheel with the lab's extras (Lab 2: tfm) besides grading."""
    import zipfile

    import lablib
    from lablib.grading.author import autograder, distwheel

    wheel = tmp_path / f"lablib-{lablib.__version__}-py3-none-any.whl"
    wheel.write_bytes(b"not read here")
    monkeypatch.setattr(
        distwheel,
        "check_wheel",
        lambda path: {
            "version": lablib.__version__,
            "extras": ["tfm", "molecules", "grading", "dev", "pyg", "bench"],
            "requires_python": ">=3.10",
        },
    )
    for lab, extras in [
        ("lab2_transformer_reuters", "[grading,tfm]"),
        ("lab3_gcn_molecules", "[grading,molecules]"),
        ("lab1_attention", "[grading]"),
    ]:
        out = autograder.build_autograder(lab, tmp_path / f"{lab}.zip", wheel=wheel)
        setup_sh = zipfile.ZipFile(out).read("setup.sh").decode()
        assert f'"$HERE/wheels/{wheel.name}{extras}"' in setup_sh, setup_sh


def test_cells_default_source_is_the_module_default():
    for lab in LABS:
        assert f'"{install.DEFAULT_LABLIB_PIP}"' in _first_cell(lab), lab
        assert f'prepare("{lab}")' in _first_cell(lab)


def test_lab2_asks_for_model_garden_of_the_installed_tensorflow_minor():
    requirements = install.lab_requirements("lab2", "2.19.0")
    assert "tf-models-official~=2.19.0" in requirements and "tf-keras~=2.19.0" in requirements
    assert "setuptools<81" in requirements
    assert "tf-models-official~=2.21.0" in install.lab_requirements("lab2", "2.21.0rc1")
    # No TensorFlow yet: the extra's own ranges, pip picks a consistent set.
    assert "tf-models-official>=2.19" in install.lab_requirements("lab2", None)
    for lab in ("lab1", "lab3", "lab4"):
        assert not any(
            r.startswith(("tf-models", "tf-keras")) for r in install.lab_requirements(lab, "2.19.0")
        )
    with pytest.raises(ValueError, match="lab5.*lab1"):
        install.lab_requirements("lab5", "2.19.0")


def test_the_names_released_notebooks_and_graders_import_stay_in_lablib_install():
    """The released notebooks' first cells import ``prepare`` from ``lablib.install``,
    ``lablib gradescope`` imports ``lab_extras``: every name the module exported before it
    became a package (0.3.0) is still there, and importing it never imports TensorFlow."""
    released = [
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
    assert set(released) <= set(install.__all__)
    assert all(getattr(install, name) is not None for name in install.__all__)
    code = (
        "import sys; from lablib.install import prepare, lab_extras; "
        "assert 'tensorflow' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# -- plan: what gets installed, what is pinned ------------------------------------------


def test_plan_on_colab_installs_only_what_is_missing_and_pins_the_stack():
    lab3 = install.plan(install.lab_requirements("lab3", "2.19.0"), COLAB)
    assert lab3.install == ["rdkit>=2024.3"]
    assert lab3.pins == [
        "tensorflow==2.19.0",
        "keras==3.10.0",
        "numpy==2.0.2",
        "protobuf==5.29.5",
        "ml-dtypes==0.4.1",
        "h5py==3.14.0",
    ]
    assert install.plan(install.lab_requirements("lab1", "2.19.0"), COLAB).nothing_to_do
    lab2 = install.plan(install.lab_requirements("lab2", "2.19.0"), COLAB)
    assert lab2.install == ["tf-models-official~=2.19.0", "tf-keras~=2.19.0"]
    # Model Garden of another minor counts as missing.
    present = dict(COLAB, **{"tf-models-official": "2.20.0", "tf_keras": "2.19.0"})
    assert install.plan(install.lab_requirements("lab2", "2.19.0"), present).install == [
        "tf-models-official~=2.19.0"
    ]


def test_plan_upgrades_an_old_unpinned_package_but_never_replaces_a_pinned_one():
    assert install.plan(["matplotlib>=3.7"], dict(COLAB, matplotlib="3.5.0")).install == [
        "matplotlib>=3.7"
    ]
    with pytest.raises(
        install.InstallError, match=r"keras 3\.5\.0 is installed; this lab needs keras>=3\.10"
    ):
        install.plan(install.CORE, dict(COLAB, keras="3.5.0"))
    with pytest.raises(install.InstallError, match="tensorflow 2.15.1"):
        install.plan(install.CORE, dict(COLAB, tensorflow="2.15.1"))
    # Missing pinned packages are simply installed (nothing to replace).
    bare = {k: v for k, v in COLAB.items() if k not in ("keras", "h5py")}
    assert install.plan(install.CORE, bare).install == ["keras>=3.10"]


def test_lablib_pip_reads_requirements_and_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkout").mkdir()
    assert install.lablib_pip("checkout") == str(tmp_path / "checkout")  # never an index name
    assert install.lablib_pip(" lablib==0.1.0 ") == "lablib==0.1.0"
    assert install.lablib_pip("") == install.DEFAULT_LABLIB_PIP
    monkeypatch.setenv("LABLIB_PIP", "lablib[molecules] @ git+https://example.org/fork")
    assert install.lablib_pip() == "lablib[molecules] @ git+https://example.org/fork"


def test_changed_imports_only_reports_loaded_distributions():
    before = {"numpy": "2.0.2", "tensorflow": "2.19.0", "rich": "13.0", "six": "1.16"}
    after = {"numpy": "2.1.0", "tensorflow": "2.19.0", "rich": "14.0", "tf-keras": "2.19.0"}
    providers = {"numpy": ["numpy"], "rich": ["rich"], "six": ["six"], "tensorflow": ["tensorflow"]}
    changed = install.changed_imports(
        before, after, providers, ["numpy.linalg", "tensorflow", "six"]
    )
    assert changed == [("numpy", "2.0.2", "2.1.0"), ("six", "1.16", None)]


def test_changed_imports_with_this_environments_metadata():
    """Real metadata: imported numpy at another version before is reported, pip (not
    imported) is not; distribution names are matched in any spelling."""
    import numpy

    now = install.installed_versions()
    assert now["numpy"] == numpy.__version__
    assert install.installed_versions(["ML_Dtypes"]) == {"ml-dtypes": now["ml-dtypes"]}
    before = dict(now, numpy="1.0.0", pip="0.1")
    changed = install.changed_imports(
        before, now, importlib.metadata.packages_distributions(), ["numpy.linalg", "json"]
    )
    assert changed == [("numpy", "1.0.0", numpy.__version__)]


def test_newest_version_from_report():
    report = {"install": [{"metadata": {"name": "tf_models_official", "version": "2.20.0"}}]}
    assert install.newest_version_from_report(report, "tf-models-official") == "2.20.0"
    with pytest.raises(install.InstallError, match="no release of tf-models-official"):
        install.newest_version_from_report({"install": []}, "tf-models-official")


# -- prepare, with a fake pip ---------------------------------------------------------


class FakePip:
    """Records pip commands; 'installs' by editing a dict of versions. ``fail`` (pip's
    output) makes every real install fail as that output; ``offline`` every command."""

    def __init__(self, versions, available, fail=None, offline=False):
        self.versions, self.available, self.commands = dict(versions), available, []
        self.fail, self.offline = fail, offline

    def __call__(self, command):
        from packaging.requirements import Requirement

        self.commands.append(command)
        if self.offline:
            return subprocess.CompletedProcess(command, 1, "", OFFLINE)
        args = command[command.index("install") + 1 :]
        if "--dry-run" in args:
            report = pathlib.Path(args[args.index("--report") + 1])
            requirement = Requirement(args[-1])
            versions = [
                v for v in self.available.get(requirement.name, []) if v in requirement.specifier
            ]
            if not versions:
                return subprocess.CompletedProcess(
                    command, 1, "", f"ERROR: No matching distribution found for {args[-1]}"
                )
            report.write_text(
                json.dumps(
                    {"install": [{"metadata": {"name": requirement.name, "version": versions[-1]}}]}
                )
            )
            return subprocess.CompletedProcess(command, 0, "", "")
        if self.fail:
            return subprocess.CompletedProcess(command, 1, "", self.fail)
        pins = {}
        if "-c" in args:
            self.constraints = pathlib.Path(args[args.index("-c") + 1]).read_text()
            pins = dict(line.split("==") for line in self.constraints.split())
        requirements = [
            a for i, a in enumerate(args) if not a.startswith("-") and args[i - 1] != "-c"
        ]
        for text in requirements:
            requirement = Requirement(text)
            versions = [
                v for v in self.available.get(requirement.name, []) if v in requirement.specifier
            ]
            if not versions:
                return subprocess.CompletedProcess(
                    command, 1, "", f"ERROR: No matching distribution found for {text}"
                )
            if requirement.name == "tf-models-official":  # pins its TensorFlow minor
                tf = f"{install.tf_minor(versions[-1])}.0"
                if pins.get("tensorflow", tf) != tf:
                    return subprocess.CompletedProcess(command, 1, "", "ResolutionImpossible")
                self.versions["tensorflow"] = tf
            self.versions[requirement.name] = versions[-1]
        return subprocess.CompletedProcess(command, 0, "", "")


# What pip printed (pip 26.3, Python 3.12) when the index was unreachable.
OFFLINE = """WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError("HTTPConnection(host='127.0.0.1', port=9): Failed to establish a new connection: [Errno 111] Connection refused")': /simple/tf-models-official/
ERROR: Could not find a version that satisfies the requirement tf-models-official~=2.19.0 (from versions: none)
ERROR: No matching distribution found for tf-models-official~=2.19.0
"""

# What pip printed when a source package of tf-models-official's did not build (pip 25).
SEQEVAL = """  Building wheel for seqeval (pyproject.toml): finished with status 'error'
  error: subprocess-exited-with-error

  × Building wheel for seqeval (pyproject.toml) did not run successfully.
  │ exit code: 1
  ╰─> [4 lines of output]
      ModuleNotFoundError: No module named 'vcs_versioning'
      [end of output]

  note: This error originates from a subprocess, and is likely not a problem with pip.
  ERROR: Failed building wheel for seqeval
Failed to build seqeval
ERROR: Failed to build installable wheels for some pyproject.toml based projects (seqeval)
"""


@pytest.fixture
def fake_env(monkeypatch):
    def make(versions, available, imported=(), **kwargs):
        pip = FakePip(versions, available, **kwargs)
        monkeypatch.setattr(
            pip_run,
            "installed_versions",
            lambda names=None: {
                install.normalize(k): v
                for k, v in pip.versions.items()
                if names is None or install.normalize(k) in map(install.normalize, names)
            },
        )
        monkeypatch.setattr(
            importlib.metadata,
            "packages_distributions",
            lambda: {name.replace("-", "_"): [name] for name in pip.versions},
        )
        monkeypatch.setattr(startup, "_imported_modules", lambda: list(imported))
        monkeypatch.setattr(startup, "_RESTART_OWED", [])  # each case a fresh session
        return pip

    return make


AVAILABLE = {
    "tf-models-official": ["2.19.1", "2.20.0"],
    "tf-keras": ["2.19.0", "2.20.1", "2.21.0"],
    "rdkit": ["2025.3.1"],
    "matplotlib": ["3.10.5"],
    "numpy": ["2.3.0"],
}


def test_prepare_with_everything_present_runs_no_pip(fake_env):
    pip = fake_env(
        dict(COLAB, **{"tf-models-official": "2.19.1", "tf-keras": "2.19.0", "rdkit": "2025.3.1"}),
        AVAILABLE,
    )
    out = io.StringIO()
    for lab in LABS:
        assert install.prepare(lab, run=pip, out=out) == []
    assert pip.commands == [] and out.getvalue() == ""


def test_prepare_lab2_installs_model_garden_for_colabs_tensorflow(fake_env):
    pip = fake_env(COLAB, AVAILABLE, imported=["numpy", "keras"])
    out = io.StringIO()
    assert install.prepare("lab2", run=pip, out=out) == [
        "tf-models-official~=2.19.0",
        "tf-keras~=2.19.0",
    ]
    assert len(pip.commands) == 1 and "tensorflow==2.19.0" in pip.constraints.split()
    assert pip.versions["tensorflow"] == "2.19.0" and pip.versions["tf-models-official"] == "2.19.1"
    assert "Installed for lab2: tf-models-official~=2.19.0 tf-keras~=2.19.0" in out.getvalue()
    assert "Added 2: tf-keras 2.19.0, tf-models-official 2.19.1" in out.getvalue()


def test_prepare_lab2_without_model_garden_for_this_minor_says_so_and_installs_nothing(fake_env):
    """TensorFlow 2.21 has no TF Model Garden: the cell names the newest release, the
    TensorFlow it needs and the variable that allows the change; TensorFlow stays."""
    pip = fake_env(dict(COLAB, tensorflow="2.21.0"), AVAILABLE)
    with pytest.raises(install.InstallError) as error:
        install.prepare("lab2", run=pip, out=io.StringIO(), environ={})
    message = str(error.value)
    assert (
        "no release for TensorFlow 2.21" in message and "2.20.0, needs TensorFlow 2.20" in message
    )
    assert (
        f"%env {install.ALLOW_TENSORFLOW_CHANGE}=1" in message
        and "Nothing was installed" in message
    )
    assert pip.versions["tensorflow"] == "2.21.0" and "tf-models-official" not in pip.versions


def test_prepare_lab2_replaces_tensorflow_only_when_allowed_and_then_stops(fake_env):
    pip = fake_env(
        dict(COLAB, tensorflow="2.21.0"), dict(AVAILABLE, tensorflow=["2.20.0", "2.21.0"])
    )
    out = io.StringIO()
    with pytest.raises(
        install.RestartRequired,
        match=r"TensorFlow was replaced for TF Model Garden: 2\.21\.0 -> 2\.20\.0(.|\n)*Restart session",
    ):
        install.prepare("lab2", run=pip, out=out, environ={install.ALLOW_TENSORFLOW_CHANGE: "1"})
    assert pip.versions["tf-models-official"] == "2.20.0" and pip.versions["tf-keras"] == "2.20.1"
    assert f"as {install.ALLOW_TENSORFLOW_CHANGE} allows" in out.getvalue()
    assert "tensorflow==" not in pip.constraints and "keras==3.10.0" in pip.constraints.split()
    assert "tensorflow 2.21.0 -> 2.20.0" in out.getvalue()  # every change is listed


def test_a_failed_build_is_reported_as_what_it_was_never_as_no_release(fake_env):
    """tf-models-official exists for TensorFlow 2.19, but a source package it needs did
    not build: the message names that package and quotes pip; TensorFlow is untouched."""
    pip = fake_env(COLAB, AVAILABLE, fail=SEQEVAL)
    with pytest.raises(install.InstallError) as error:
        install.prepare(
            "lab2", run=pip, out=io.StringIO(), environ={install.ALLOW_TENSORFLOW_CHANGE: "1"}
        )
    message = str(error.value)
    assert "building seqeval from its source failed" in message
    assert "Nothing was replaced: tensorflow 2.19.0, keras 3.10.0 as before" in message
    assert "ModuleNotFoundError: No module named 'vcs_versioning'" in message  # pip's own lines
    assert "no release" not in message and pip.versions["tensorflow"] == "2.19.0"
    # One install, then one look-up of Model Garden for 2.19 (which exists): no fallback.
    assert [("--dry-run" in c) for c in pip.commands] == [False, True]


def test_an_unreachable_index_is_reported_with_pips_error(fake_env):
    pip = fake_env(COLAB, AVAILABLE, offline=True)
    with pytest.raises(install.InstallError) as error:
        install.prepare("lab2", run=pip, out=io.StringIO(), environ={})
    message = str(error.value)
    assert message.startswith("pip could not install ")
    assert "the package index could not be reached (is this runtime online?)" in message
    assert "Nothing was replaced: tensorflow 2.19.0, keras 3.10.0 as before" in message
    assert "Connection refused" in message and "no release for TensorFlow" not in message
    assert pip.versions == COLAB
    many = "\n".join(
        [OFFLINE.splitlines()[0].replace("total=0", f"total={n}") for n in (2, 1, 0)]
        + OFFLINE.splitlines()[1:]
    )
    assert pip_run._pip_error_lines(many) == OFFLINE.strip()  # one line per run of pip's retries


def test_colab_without_tensorflow_says_to_change_the_runtime(fake_env):
    """Colab's TPU runtime has no TensorFlow: one sentence, and nothing installed over it."""
    tpu = {k: v for k, v in COLAB.items() if k != "tensorflow"}
    pip = fake_env(tpu, AVAILABLE)
    for lab in LABS:
        with pytest.raises(install.InstallError) as error:
            install.prepare(
                lab,
                run=pip,
                out=io.StringIO(),
                environ={"COLAB_RELEASE_TAG": "release-colab-20260819"},
            )
        assert str(error.value) == install.NO_TENSORFLOW_ON_COLAB
        assert "Change runtime type" in str(error.value) and str(error.value).count(". ") == 0
    assert pip.commands == []


@pytest.mark.parametrize(
    "output, expected",
    [
        (SEQEVAL, "building seqeval from its source failed"),
        (
            "ERROR: Could not build wheels for seqeval, which is required to install pyproject.toml-based projects",
            "building seqeval from its source failed",
        ),
        (OFFLINE, "the package index could not be reached (is this runtime online?)"),
        (
            "ERROR: No matching distribution found for rdkit>=2024.3",
            "no release of rdkit>=2024.3 fits this runtime",
        ),
        (
            "ERROR: Could not find a version that satisfies the requirement tf-models-official~=2.19.0 (from versions: none)\n"
            "ERROR: No matching distribution found for tf-models-official~=2.19.0",
            "pip found no release of tf-models-official at all on its package index (is this runtime online?)",
        ),
        (
            "ERROR: Cannot install x because these package versions have conflicting dependencies.\n"
            "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io",
            "the packages' version requirements conflict",
        ),
        ("ERROR: Invalid requirement: 'lablib.whl'", "'lablib.whl' is not a pip requirement"),
        ("something else entirely", "pip failed"),
    ],
)
def test_pip_failure_names_what_failed(output, expected):
    assert install.pip_failure(output) == expected


def test_install_summary_lists_every_change_with_what_required_it():
    before = {"absl-py": "2.5.1", "setuptools": "84.2.1", "tensorflow": "2.19.0"}
    after = {
        "absl-py": "1.4.0",
        "setuptools": "80.10.2",
        "tensorflow": "2.19.0",
        "tf-models-official": "2.19.1",
        "seqeval": "1.2.2",
    }
    lines = install.install_summary(
        before, after, {"absl-py": ["tensorflow-model-optimization requires absl-py~=1.2"]}
    )
    assert lines == [
        "Added 2: seqeval 1.2.2, tf-models-official 2.19.1",
        "Changed 2: absl-py 2.5.1 -> 1.4.0 (tensorflow-model-optimization requires absl-py~=1.2), "
        "setuptools 84.2.1 -> 80.10.2",
    ]
    assert install.install_summary(before, before) == []


def test_requirers_reads_installed_metadata():
    """With this environment's metadata: a version of packaging that its requirers exclude
    is explained by them (packaging is required by pytest, among others)."""
    found = pip_run.requirers({"packaging": "0.1"})
    assert found.get("packaging") and all(
        " requires packaging" in line for line in found["packaging"]
    )
    assert pip_run.requirers({}) == {}


def test_setuptools_shim_in_memory_needs_no_restart(fake_env):
    """setuptools' .pth imports _distutils_hack at every start: a setuptools downgrade
    (Lab 2 asks setuptools<81 where 84 is installed) must not demand a restart for it."""
    pip = fake_env(
        dict(COLAB, setuptools="84.2.1"),
        dict(AVAILABLE, setuptools=["80.10.2"]),
        imported=["_distutils_hack", "numpy"],
    )
    out = io.StringIO()
    assert "setuptools<81" in install.prepare("lab2", run=pip, out=out, environ={})
    assert "setuptools 84.2.1 -> 80.10.2" in out.getvalue()
    pip = fake_env(
        dict(COLAB, setuptools="84.2.1"),
        dict(AVAILABLE, setuptools=["80.10.2"]),
        imported=["setuptools", "numpy"],
    )
    with pytest.raises(install.RestartRequired, match="setuptools 84.2.1 -> 80.10.2"):
        install.prepare("lab2", run=pip, out=io.StringIO(), environ={})


def test_prepare_stops_when_a_loaded_package_changed(fake_env):
    pip = fake_env(dict(COLAB, matplotlib="3.5.0"), AVAILABLE, imported=["matplotlib.pyplot"])
    out = io.StringIO()
    with pytest.raises(install.RestartRequired, match=r"matplotlib 3\.5\.0 -> 3\.10\.5"):
        install.prepare("lab1", run=pip, out=out)
    assert "Runtime > Restart session" in out.getvalue()
    # "Run all" again without the restart: the modules in memory still differ from those
    # on disk, and the cell said nothing and went on; it says the restart is still owed
    with pytest.raises(install.RestartRequired, match=r"matplotlib 3\.5\.0 -> 3\.10\.5"):
        install.prepare("lab1", run=pip, out=io.StringIO())
    assert len([c for c in pip.commands if "install" in c]) == 1, "no second install"
    # Not loaded: no restart needed.
    pip = fake_env(dict(COLAB, matplotlib="3.5.0"), AVAILABLE, imported=["numpy"])
    assert install.prepare("lab1", run=pip, out=io.StringIO()) == ["matplotlib>=3.7"]


def test_prepare_reports_a_failed_pip(fake_env):
    pip = fake_env(COLAB, {"rdkit": []})
    with pytest.raises(
        install.InstallError,
        match="could not install rdkit>=2024.3: no release of rdkit>=2024.3 fits this runtime(.|\n)*No matching distribution",
    ):
        install.prepare("lab3", run=pip, out=io.StringIO())


def test_prepare_sets_tensorflows_environment_keeping_what_is_set(fake_env, monkeypatch):
    """Every lab's first cell: TensorFlow grows its GPU memory instead of taking the whole
    card at start (on an H100, Lab 2 ran out of memory beside a lab kernel without it),
    and its C++ start-up log stays out of the notebook; a value already set is kept."""
    pip = fake_env(
        dict(COLAB, **{"tf-models-official": "2.19.1", "tf-keras": "2.19.0", "rdkit": "2025.3.1"}),
        AVAILABLE,
    )
    for lab in LABS:
        monkeypatch.delenv("TF_FORCE_GPU_ALLOW_GROWTH", raising=False)
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
        install.prepare(lab, run=pip, out=io.StringIO())
        assert os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] == "true", lab
        assert os.environ["TF_CPP_MIN_LOG_LEVEL"] in ("2", "3"), lab
    monkeypatch.setenv("TF_FORCE_GPU_ALLOW_GROWTH", "false")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    install.prepare("lab1", run=pip, out=io.StringIO())
    assert (
        os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] == "false"
        and os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"
    )


@pytest.mark.parametrize("has_gpu, level", [(True, "2"), (False, "3")])
def test_tensorflow_log_level_keeps_errors_where_a_gpu_is(has_gpu, level):
    environ = {}
    install.set_tensorflow_environment(environ, has_gpu=has_gpu)
    assert environ == {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "TF_CPP_MIN_LOG_LEVEL": level}


def test_every_first_cell_turns_tf32_off_after_choosing_keras():
    """TF32 would make a GPU's float32 differ from the labs' NumPy by 1e-3; the call must
    come after the Keras choice (it imports TensorFlow)."""
    for lab in LABS:
        cell = _first_cell(lab)
        choose = max(cell.find("lablib.use_keras3()"), cell.find("lablib.use_legacy_keras()"))
        assert 0 < choose < cell.find("lablib.exact_float32()"), lab
        assert "TF_FORCE_GPU_ALLOW_GROWTH" not in cell, f"{lab}: prepare() sets it for every lab"


def test_prepare_on_this_environment_needs_nothing_and_runs_no_pip():
    """The grader's sandbox runs the SETUP cells offline: with the dev install present,
    prepare() must only read metadata."""

    def no_pip(command):
        raise AssertionError(f"prepare ran {command}")

    for lab in LABS:
        assert install.prepare(lab, run=no_pip, out=io.StringIO()) == []


# -- the cell's own bootstrap ----------------------------------------------------------


@pytest.mark.parametrize("value", ["", "  lablib==0.1.0", "checkout"])
def test_cell_installs_lablib_alone_from_lablib_pip(value, tmp_path, monkeypatch):
    """Run lab 1's first cell as if lablib were missing: it installs LABLIB_PIP (made
    absolute when it is a path) with --no-deps, then imports lablib and prepares."""
    import lablib

    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkout").mkdir()
    monkeypatch.setenv("LABLIB_PIP", value)
    monkeypatch.setitem(sys.modules, "lablib", None)  # import lablib -> ImportError
    calls, prepared = [], []

    def fake_run(command, **kwargs):
        calls.append(command)
        sys.modules["lablib"] = lablib  # "installed"
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(install, "prepare", lambda lab: prepared.append(lab))
    monkeypatch.setattr(lablib, "use_keras3", lambda: None)
    monkeypatch.setattr(lablib, "exact_float32", lambda: False)
    exec(compile(_first_cell("lab1"), "cell", "exec"), {})
    assert calls == [
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", install.lablib_pip(value)]
    ]
    assert prepared == ["lab1"]


@pytest.mark.parametrize(
    "value, pip_says, expected",
    [
        (
            "/content/lablib-0.3.0-py3-none-any.whl",
            "ERROR: Invalid requirement: '/content/lablib-0.3.0-py3-none-any.whl'",
            "LABLIB_PIP='/content/lablib-0.3.0-py3-none-any.whl': no such file on this machine.",
        ),
        (
            "",
            "  fatal: unable to access 'https://github.com/lablib-course/lablib/': Could not resolve host: github.com\n"
            "error: subprocess-exited-with-error",
            "LABLIB_PIP='lablib @ git+https://github.com/lablib-course/lablib'. Set LABLIB_PIP",
        ),
    ],
)
def test_cell_says_what_it_tried_when_lablib_cannot_be_installed(
    value, pip_says, expected, tmp_path, monkeypatch
):
    """A missing wheel or an unreachable repository: one short message naming what was
    tried, what to set, and pip's last lines; not pip's chained traceback."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LABLIB_PIP", value)
    monkeypatch.setitem(sys.modules, "lablib", None)
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda command, **kw: subprocess.CompletedProcess(command, 1, "", pip_says),
    )
    with pytest.raises(RuntimeError) as error:
        exec(compile(_first_cell("lab2"), "cell", "exec"), {})
    message = str(error.value)
    assert message.startswith("lablib could not be installed from ") and expected in message
    assert "%env LABLIB_PIP=" in message and pip_says.strip().splitlines()[-1] in message
    assert error.value.__cause__ is None and error.value.__suppress_context__


def test_known_noise_is_dropped_and_nothing_else():
    """The first cell's narrow filters: TensorFlow's retracing warning (Labs 2 and 4 printed
    it), tensorflow_hub's pkg_resources warning and tensorflow_datasets' protobuf ERROR
    (Lab 2's import of TF Model Garden; Colab's protobuf), google.api_core's Python
    end-of-life FutureWarning; a message that merely resembles them passes."""
    import logging
    import warnings

    logger = logging.getLogger("tensorflow")
    before = list(logger.filters)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            install.quiet_known_noise()
            install.quiet_known_noise()  # a first cell run twice
            logger.warning(
                "5 out of the last 9 calls to <function f> triggered tf.function retracing."
            )
            logger.warning("Model was constructed with shape (None, 3)")
            warnings.warn(
                "pkg_resources is deprecated as an API. See https://setuptools.pypa.io",
                UserWarning,
                stacklevel=1,
            )
            warnings.warn("pkg_resources is deprecated as an API", DeprecationWarning, stacklevel=1)
            warnings.warn("The structure of `inputs` doesn't match", UserWarning, stacklevel=1)
            warnings.warn(
                "You are using a Python version (3.11.7) which Google will stop supporting in "
                "new releases of google.api_core once it reaches its end of life",
                FutureWarning,
                stacklevel=1,
            )
            absl = logging.getLogger("absl")
            absl.addHandler(handler)
            try:
                absl.error(
                    "Detected incompatible Protobuf Gencode/Runtime versions when loading "
                    "tensorflow_metadata/proto/v0/anomalies.proto: gencode 6.31.1 runtime 5.29.6"
                )
                absl.error("Model Garden could not load its checkpoint")
            finally:
                absl.removeHandler(handler)
                absl.filters[:] = [f for f in absl.filters if type(f).__name__ != "_DropKnownNoise"]
        assert stream.getvalue() == (
            "Model was constructed with shape (None, 3)\n"
            "Model Garden could not load its checkpoint\n"
        )
        assert [(w.category, str(w.message)) for w in caught] == [
            (DeprecationWarning, "pkg_resources is deprecated as an API"),
            (UserWarning, "The structure of `inputs` doesn't match"),
        ]
        assert len(logger.filters) == len(before) + (
            0 if any(type(f).__name__ == "_DropKnownNoise" for f in before) else 1
        )
    finally:
        logger.removeHandler(handler)
        logger.filters[:] = before


@pytest.mark.parametrize("module", ["plan", "pip_run", "startup"])
def test_the_examples_in_the_docstrings_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"lablib.install.{module}"))
    assert result.attempted and result.failed == 0


def test_install_errors_print_under_the_name_students_import():
    """The first cell's traceback ends "lablib.install.InstallError: ..." (.ci/runtime_cases.py
    checks it on a Colab runtime without TensorFlow), not under the module that defines it."""
    import traceback

    from lablib.install import InstallError, RestartRequired

    for error in (InstallError("x"), RestartRequired("x")):
        line = traceback.format_exception_only(error)[-1]
        assert line.startswith(f"lablib.install.{type(error).__name__}: x"), line


@pytest.mark.parametrize(
    "target",
    [
        "lablib @ git+https://github.com/a-course/lablib@v0.3.0",
        "/content/lablib-0.3.0-py3-none-any.whl",
    ],
)
def test_a_handout_pinned_by_assign_installs_its_target_unless_the_variable_is_set(
    target, tmp_path, monkeypatch, capsys
):
    """`lablib assign -o handout --lablib-pip TARGET` (from the labs shipped with lablib,
    as an instructor with the wheel alone has them): the handout's first cell installs
    TARGET where LABLIB_PIP is unset, and the variable, where set, still wins. Every other
    line of the notebook is the released lab's."""
    import lablib
    from lablib.cli import main
    from lablib.grading.author.catalog import PACKAGE_LABS_DIR

    monkeypatch.chdir(tmp_path)  # no solutions/ here
    assert main(["assign", "lab1", "-o", "handout", "--lablib-pip", f"  {target} "]) == 0
    handout = json.loads((tmp_path / "handout" / "lab1_attention.ipynb").read_text())
    released = json.loads((PACKAGE_LABS_DIR / "lab1_attention.ipynb").read_text())
    differ = [
        (a, b)
        for x, y in zip(handout["cells"], released["cells"])
        for a, b in zip(x["source"], y["source"])
        if a != b
    ]
    assert differ == [
        (
            f'                  or "{target}")\n',
            f'                  or "{install.DEFAULT_LABLIB_PIP}")\n',
        )
    ]
    cell = "".join(next(c for c in handout["cells"] if c["cell_type"] == "code")["source"])
    monkeypatch.setitem(sys.modules, "lablib", None)  # import lablib -> ImportError
    calls = []

    def fake_run(command, **kwargs):
        calls.append(command[-1])
        sys.modules["lablib"] = lablib  # "installed"
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(install, "prepare", lambda lab: None)
    monkeypatch.setattr(lablib, "use_keras3", lambda: None)
    monkeypatch.setattr(lablib, "exact_float32", lambda: False)
    for value in ("", "lablib==9.9"):
        monkeypatch.setenv("LABLIB_PIP", value)
        monkeypatch.setitem(sys.modules, "lablib", None)
        exec(compile(cell, "cell", "exec"), {})
    assert calls == [target, "lablib==9.9"]


def test_a_windows_path_to_lablibs_wheel_is_a_lablib_wheel():
    from lablib.grading.author.assignment import check_lablib_pip

    wheel = "C:\\Users\\me\\lablib-0.3.0-py3-none-any.whl"
    assert check_lablib_pip(f"  {wheel} ") == wheel
    with pytest.raises(ValueError, match="a wheel of another package"):
        check_lablib_pip("C:\\lablib-wheels\\numpy-2.0-py3-none-any.whl")


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--lablib-pip", "numpy==2.0", "-o", "h"], "is not a requirement naming lablib"),
        (
            ["--lablib-pip", "/w/numpy-2.0-py3-none-any.whl", "-o", "h"],
            "a wheel of another package",
        ),
        (["--lablib-pip", "lablib\n==1", "-o", "h"], "characters that do not print"),
        (  # a line separator or a bidirectional override: the cell shows another path
            ["--lablib-pip", "/c/x\u2028y/lablib-0.3.0-py3-none-any.whl", "-o", "h"],
            "characters that do not print",
        ),
        (["--lablib-pip", "/c/\u202e/lablib-0.3.0-py3-none-any.whl", "-o", "h"], "do not print"),
        (  # pip's options: a requirements file fetched from anywhere, another index
            ["--lablib-pip=-rhttps://e.example/lablib-0.3.0-py3-none-any.whl", "-o", "h"],
            "starts with '-'",
        ),
        (["--lablib-pip=--index-url=https://e.example/lablib-0-x.whl", "-o", "h"], "option"),
        (["--lablib-pip", "lablib==0.3.0"], "add -o"),
    ],
)
def test_assign_refuses_a_lablib_pip_it_cannot_pin_and_writes_nothing(
    argv, says, tmp_path, monkeypatch, capsys
):
    from lablib.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["assign", "lab1", *argv]) == 2
    assert says in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
