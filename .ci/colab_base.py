"""Write .ci/colab-base.txt from Colab's published runtime list (googlecolab/backend-info).

    python .ci/colab_base.py pip-freeze.gpu.txt --commit <sha> --date <YYYY-MM-DD> \
        --python 3.13 > .ci/colab-base.txt

Keeps, at Colab's versions, every package that lablib, its extras or the labs import or
constrain and that Colab preinstalls (PACKAGES below); the test tools Colab lacks are
added unpinned. To refresh: fetch backend-info, run this on its pip-freeze.gpu.txt with
the commit and date of that file, and set COLAB_PYTHON in .ci/run to os-info.txt's
Python minor.
"""

import argparse
import re
import sys

# What lablib (core, tfm, molecules, grading) and the labs import or constrain, and the
# packages whose versions the labs' first cells must keep (.ci/colab_check.py KEPT).
PACKAGES = (
    "tensorflow",
    "keras",
    "tf-keras",
    "numpy",
    "scipy",
    "scikit-learn",
    "ml-dtypes",
    "h5py",
    "protobuf",
    "absl-py",
    "setuptools",
    "matplotlib",
    "pandas",
    "tqdm",
    "psutil",
    "cloudpickle",
    "ipykernel",
    "nbclient",
    "nbformat",
    "pytest",
    # tf-models-official's requirements that Colab preinstalls (the first cell adds the rest)
    "tensorflow-text",
    "tensorflow-hub",
    "tensorflow-datasets",
    "tensorflow-metadata",
    "gin-config",
    "immutabledict",
    "sentencepiece",
    "tf-slim",
    "pycocotools",
    "opencv-python-headless",
    "pyyaml",
    "kaggle",
    "dm-tree",
    "pandas",
    "tensorboard",
)
UNPINNED = ("hypothesis",)  # test tools Colab does not have


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("freeze")
    parser.add_argument("--commit", required=True)
    parser.add_argument("--date", required=True)
    parser.add_argument("--python", required=True, help="os-info.txt's Python, major.minor")
    args = parser.parse_args(argv)
    pins = {}
    for line in open(args.freeze, encoding="utf-8"):
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line.strip())
        if match:
            pins[_norm(match.group(1))] = (match.group(1), match.group(2))
    wanted = list(dict.fromkeys(_norm(p) for p in PACKAGES))
    missing = [p for p in wanted if p not in pins]
    print(
        f"# The Colab-like environment of `bash .ci/run colab`, installed BEFORE lablib, on Python {args.python}:"
    )
    print(
        "# Colab's GPU runtime as published in googlecolab/backend-info (pip-freeze.gpu.txt, commit"
    )
    print(f"# {args.commit}, {args.date}), for every package lablib, its extras or the labs")
    print(
        "# import or constrain. Written by .ci/colab_base.py (its docstring says how to refresh it);"
    )
    print(
        f"# not in Colab's list: {', '.join(missing) or 'none'}. Changing this file rebuilds .venv-colab."
    )
    for name in wanted:
        if name in pins:
            print(f"{pins[name][0]}=={pins[name][1]}")
    for name in UNPINNED:
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
