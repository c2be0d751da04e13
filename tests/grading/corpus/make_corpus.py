"""Generate the corpus of broken and hostile submissions from the fixture lab's solution.

Run from the project root: ``.venv/bin/python tests/grading/corpus/make_corpus.py``.
It rewrites ``tests/grading/corpus/*.ipynb`` and ``expected.json`` (what each one must
get when graded in one batch with the fixture lab's hidden tests). Deterministic.
"""

import copy
import json
import pathlib

import nbformat

HERE = pathlib.Path(__file__).resolve().parent
FIXTURE = HERE.parent / "fixtures" / "lab0_fixture"
SOLUTION = FIXTURE / "solutions" / "lab0_fixture.ipynb"

# Full marks are 8: normalize 1 + 1 hidden, softmax 2 + 2 hidden, running_mean 2.
FULL = 8.0
WITHOUT_SOFTMAX = 4.0


def load():
    return nbformat.read(SOLUTION, as_version=4)


def graded_index(nb, piece):
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.source.startswith(f"# GRADED: {piece}"):
            return i
    raise KeyError(piece)


def with_cell(nb, piece, source):
    nb = copy.deepcopy(nb)
    nb.cells[graded_index(nb, piece)].source = f"# GRADED: {piece}\n" + source
    return nb


def nb_source(nb, piece):
    """The body of a graded cell (without its marker line)."""
    return nb.cells[graded_index(nb, piece)].source.split("\n", 1)[1]


def softmax_body(body):
    return with_cell(load(), "softmax", "import numpy as np\n\ndef softmax(x):\n" + body)


FIND_GRADER_PATHS = '''
import os

def _grader_args():
    """Paths on the command lines of this process's ancestors (the grader)."""
    found, pid = [], os.getppid()
    for _ in range(8):
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
            found += [a.decode() for a in args if a.startswith(b"/") or a.startswith(b".")]
            pid = int(open(f"/proc/{pid}/stat").read().split(")")[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
    return found
'''


def corpus():
    sol = load()
    items = {}
    items["solution"] = (sol, {"status": "ok", "score": FULL})

    # Blank lab: solution regions replaced by NotImplementedError stubs.
    from lablib.grading.author.assignment import make_assignment
    from lablib.grading.notebook import normalize_notebook

    blank = make_assignment(normalize_notebook(json.loads(json.dumps(sol)))[0])
    items["blank"] = (blank, {"status": "ok", "score": 0.0, "message": "not done yet"})

    items["infinite_loop"] = (
        softmax_body("    while True:\n        pass\n"),
        {"status": "timeout", "score": WITHOUT_SOFTMAX},
    )
    items["sys_exit"] = (
        softmax_body("    import sys\n    sys.exit(1)\n"),
        {"status": "crashed", "score": WITHOUT_SOFTMAX},
    )
    items["os_exit"] = (
        softmax_body("    import os\n    os._exit(0)\n"),
        {"status": "crashed", "score": WITHOUT_SOFTMAX},
    )
    items["segfault"] = (
        softmax_body("    import ctypes\n    return ctypes.string_at(0)\n"),
        {"status": "crashed", "score": WITHOUT_SOFTMAX},
    )
    items["memory_blowup"] = (
        softmax_body(
            "    chunks = []\n    while True:\n        chunks.append(np.ones(2**24))  # 128 MB each, touched\n"
        ),
        {"status": "memory", "score": WITHOUT_SOFTMAX},
    )

    # Huge output: printed at run time and stored in the notebook.
    nb = copy.deepcopy(sol)
    i = graded_index(nb, "normalize")
    nb.cells[i].source += "\nfor _ in range(200):\n    print('x' * 100_000)\n"
    nb.cells[i].outputs = [nbformat.v4.new_output("stream", name="stdout", text="y" * 300_000)]
    items["huge_output"] = (nb, {"status": "ok", "score": FULL, "note": "stripped"})

    # Graded cell deleted.
    nb = copy.deepcopy(sol)
    del nb.cells[graded_index(nb, "running_mean")]
    items["deleted_cell"] = (nb, {"status": "missing: running_mean", "score": FULL - 2})

    # A graded cell that raises when it runs (a helper defined in a non-graded cell): the
    # status names the piece and the exception, the tests the # SETUP rule.
    items["raising_cell"] = (
        with_cell(
            sol,
            "softmax",
            "import numpy as np\n\nTEMPERATURE = my_temperature()\n\n"
            "def softmax(x):\n    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
            "    return e / e.sum(axis=-1, keepdims=True)\n",
        ),
        {
            "status": "error: softmax (NameError)",
            "score": WITHOUT_SOFTMAX,
            "message": "# SETUP",
            "note": "graded cell softmax raised NameError: name 'my_temperature' is not defined",
        },
    )

    # Graded cell duplicated: a correct copy first, a wrong one last (the last counts).
    nb = copy.deepcopy(sol)
    i = graded_index(nb, "normalize")
    wrong = copy.deepcopy(nb.cells[i])
    wrong.source = "# GRADED: normalize\ndef normalize(x):\n    return x\n"
    wrong["id"] = "duplicate-normalize"
    nb.cells.insert(i + 2, wrong)
    items["duplicated_cell"] = (
        nb,
        {"status": "ok", "score": FULL - 2, "note": "appears in 2 cells"},
    )

    # Edited test code: patch lablib's spec helpers, to_plain, the wire's encoder and
    # json.dumps (which wrote every reply before the child bound its own references).
    nb = with_cell(
        sol,
        "normalize",
        """import json
import lablib.grading.spec as spec
import lablib.grading.run.protocol as protocol
spec.expect_close = lambda *a, **k: None
spec.expect = lambda *a, **k: None
spec.to_plain = lambda value, *a: value
spec.TestFailure = type("Nothing", (Exception,), {})
protocol.to_plain = lambda value, *a: value
protocol.encode_value = lambda value: ([[0.25, 0.75], [0.5, 0.5]], [])
_dumps = json.dumps
def _forged_dumps(obj, *args, **kwargs):
    if isinstance(obj, dict) and obj.get("event") == "result":
        obj = dict(obj, ok=True, value=[[0.25, 0.75], [0.5, 0.5]], blobs=[])
    return _dumps(obj, *args, **kwargs)
json.dumps = _forged_dumps

def normalize(x):
    return x * 0
""",
    )
    nb.cells[
        graded_index(nb, "softmax")
    ].source = (
        "# GRADED: softmax\nimport numpy as np\n\ndef softmax(x):\n    return np.zeros_like(x)\n"
    )
    items["patched_tests"] = (nb, {"status": "ok", "score": 2.0})

    # Comparison functions redefined to always say "equal".
    nb = with_cell(
        sol,
        "normalize",
        """import numpy as np
np.allclose = lambda *a, **k: True
np.isclose = lambda a, b, *args, **k: np.ones(np.broadcast(a, b).shape, dtype=bool)
np.array_equal = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None

def normalize(x):
    return x
""",
    )
    nb.cells[
        graded_index(nb, "softmax")
    ].source = "# GRADED: softmax\nimport numpy as np\n\ndef softmax(x):\n    return x\n"
    items["redefined_comparisons"] = (nb, {"status": "ok", "score": 2.0})

    # Objects whose == is always true (and an ndarray subclass doing the same).
    nb = with_cell(
        sol,
        "normalize",
        """import numpy as np

class Anything:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
    def __float__(self):
        return 0.25

def normalize(x):
    return Anything()
""",
    )
    nb.cells[graded_index(nb, "softmax")].source = """# GRADED: softmax
import numpy as np

class Always(np.ndarray):
    def __eq__(self, other):
        return np.ones(np.shape(self), dtype=bool)

def softmax(x):
    return np.zeros_like(x).view(Always)
"""
    items["always_equal"] = (nb, {"status": "ok", "score": 2.0})

    # Reads the hidden tests: softmax is right only if the hidden file could be read.
    nb = with_cell(
        sol,
        "softmax",
        FIND_GRADER_PATHS
        + """
import glob
import numpy as np

def _read_hidden():
    for path in _grader_args():
        for name in glob.glob(os.path.join(path, "**", "lab0_fixture.py"), recursive=True) + [path]:
            try:
                text = open(name, errors="replace").read()
            except (OSError, ValueError):
                continue
            if "SECRET_LOGITS" in text:
                return text
    return None

HIDDEN_SOURCE = _read_hidden()

def softmax(x):
    if HIDDEN_SOURCE is None:          # could not cheat: a wrong answer
        return np.zeros_like(x)
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
""",
    )
    items["reads_hidden"] = (nb, {"status": "ok", "score": WITHOUT_SOFTMAX, "needs_sandbox": True})

    # Writes into the grader's output folder (and the other rows' feedback).
    nb = with_cell(
        sol,
        "running_mean",
        FIND_GRADER_PATHS
        + """
for _path in _grader_args():
    for _name in ("grades.csv", "grades.json", "feedback/solution.md", "HACKED.txt"):
        try:
            with open(os.path.join(_path, _name), "w") as _f:
                _f.write("HACKED")
        except OSError:
            pass

class RunningMean:
    def __init__(self):
        self.values = []

    def update(self, x):
        self.values.append(x)

    @property
    def mean(self):
        return sum(self.values) / len(self.values)
""",
    )
    items["writes_output"] = (nb, {"status": "ok", "score": FULL, "needs_sandbox": True})

    # Red-team: a detached process that keeps re-forking, holding the output pipe.
    nb = with_cell(
        sol,
        "running_mean",
        """import os, time
if os.fork() == 0:
    os.setsid()
    while True:
        if os.fork():
            os._exit(0)
        time.sleep(0.005)
"""
        + nb_source(sol, "running_mean"),
    )
    # The batch survives it and nothing outlives the batch; its process, still running when
    # the tests open, could serve lablib's code: every by-hand test gives no points.
    items["detached_reforker"] = (nb, {"status": "ok", "score": 0.0})

    # Red-team: progress messages written to the result pipe to push the deadline back.
    nb = softmax_body("""    import json, os, struct, threading, time
    def spam():
        fds = [int(n) for n in os.listdir("/proc/self/fd") if int(n) > 2]
        while True:
            for fd in fds:
                data = json.dumps({"event": "test_start", "test": "softmax::x", "blobs": []}).encode()
                try:
                    os.write(fd, struct.pack(">I", len(data)) + data)
                except OSError:
                    pass
            time.sleep(1)
    threading.Thread(target=spam, daemon=True).start()
    time.sleep(45)
    return x
""")
    items["deadline_pusher"] = (nb, {"status": "crashed", "score": WITHOUT_SOFTMAX})

    # Red-team: walks the stack at cell time looking for the runner's probes to replace.
    nb = with_cell(
        load(),
        "normalize",
        """import sys
_frame, _found = sys._getframe(), 0
while _frame is not None:
    for _name, _value in list(_frame.f_locals.items()):
        if getattr(_value, "probe", None) is not None or (isinstance(_value, dict) and "tests" in _value):
            _found += 1
    _frame = _frame.f_back
PROBES_SEEN = _found

def normalize(x):
    raise NotImplementedError(f"saw {PROBES_SEEN} probes")
""",
    )
    items["probe_hunter"] = (nb, {"status": "ok", "score": FULL - 2, "message": "saw 0 probes"})

    # Red-team: leaves files in every writable place it can find, and a shared-memory segment.
    nb = with_cell(
        sol,
        "running_mean",
        """import ctypes, os
for _folder in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", os.path.expanduser("~")):
    try:
        with open(os.path.join(_folder, "lablib-litter"), "wb") as _f:
            _f.write(b"x" * 2**20)
    except OSError:
        pass
try:
    ctypes.CDLL("libc.so.6").shmget(0x11AB, 2**20, 0o1000 | 0o666)
except OSError:
    pass
"""
        + nb_source(sol, "running_mean"),
    )
    items["litterer"] = (nb, {"status": "ok", "score": FULL})

    items["colab"] = (sol, {"status": "ok", "score": FULL})
    items["nbformat3"] = (sol, {"status": "ok", "score": FULL, "note": "converted from nbformat 3"})
    items["invalid_json"] = (sol, {"status": "invalid-notebook", "score": 0.0})
    return items


def colabify(nb) -> str:
    """The solution as Colab saves it: nbformat 4.0, executionInfo, widgets without state."""
    data = json.loads(nbformat.writes(nb))
    data["nbformat_minor"] = 0
    data["metadata"]["colab"] = {"provenance": [], "name": "lab0_fixture.ipynb"}
    data["metadata"]["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {"abc": {"model_name": "x"}}
    }
    data["metadata"]["accelerator"] = "GPU"
    for i, cell in enumerate(data["cells"]):
        cell.pop("id", None)
        if cell["cell_type"] == "code":
            cell["metadata"] = {
                "executionInfo": {"elapsed": 12, "status": "ok", "user_tz": -60},
                "outputId": f"{i:08x}-aaaa",
                "colab": {"base_uri": "https://localhost:8080/"},
            }
    return json.dumps(data, indent=2)


def main():
    for old in HERE.glob("*.ipynb"):
        old.unlink()
    expected = {}
    for name, (nb, expect) in corpus().items():
        path = HERE / f"{name}.ipynb"
        if name == "colab":
            text = colabify(nb)
        elif name == "nbformat3":
            text = json.dumps(
                json.loads(nbformat.writes(nbformat.convert(nb, 3), version=3)), indent=1
            )
        elif name == "invalid_json":
            text = nbformat.writes(nb)[:2000]  # truncated upload
        else:
            for i, cell in enumerate(nb.cells):
                cell["id"] = f"c{i:02d}"
            text = json.dumps(json.loads(nbformat.writes(nb)), indent=1, sort_keys=True)
        path.write_text(text + ("\n" if not text.endswith("\n") else ""))
        expected[name] = expect
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(expected)} notebooks to {HERE}")


if __name__ == "__main__":
    main()
