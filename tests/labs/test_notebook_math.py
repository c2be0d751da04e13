"""Every markdown cell of solutions/ and labs/ reads as the student will see it.

Three checks per markdown cell:

1. no control character (a JSON string written with ``"\\begin"`` unescaped turns
   ``\\b`` into a backspace, ``\\r`` into a carriage return, ``\\t`` into a tab);
2. every ``\\begin{name}`` has its ``\\end{name}``, properly nested;
3. every formula, inline ``$...$`` and display ``$$...$$``, is rendered by KaTeX with
   ``throwOnError``: an unknown command, an unbalanced brace or a malformed
   environment fails the test with the cell, the formula and KaTeX's message.

Why KaTeX: it is a maintained LaTeX renderer for the web that parses the whole of a
formula the way a notebook front end does, environments included (``cases``,
``pmatrix``, ``aligned``), and reports every error instead of drawing it in red.
matplotlib's mathtext, the Python-only alternative, knows no environments, so it would
reject correct ``cases`` formulas and could not check the ones most likely to break.
KaTeX runs in Node.js; the test finds it with Node's own lookup (``NODE_PATH`` or a
``node_modules`` folder above the working directory). Set-up, as in .ci/run:

    npm install --prefix "$ROOT/.ci/node" katex@0.16.47
    export NODE_PATH="$ROOT/.ci/node/node_modules"
"""

import json
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "labs").glob("*.ipynb"))

# C0 controls but the newline, and DEL. A tab is refused too: markdown cells indent
# with spaces, and a tab where ``\t`` of ``\text`` was is the corruption we look for.
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.DOTALL)
INLINE = re.compile(r"(?<![\\$])\$(?!\$)((?:\\.|[^$\\])+?)(?<![\\\s])\$(?!\$)")
ENVIRONMENT = re.compile(r"\\(begin|end)\{([^}]*)\}")

KATEX_SCRIPT = r"""
const katex = require("katex");
const formulas = JSON.parse(require("fs").readFileSync(0, "utf8"));
const errors = formulas.map(({tex, display}) => {
  try {
    katex.renderToString(tex, {displayMode: display, throwOnError: true, strict: "ignore"});
    return null;
  } catch (error) {
    return String(error.message || error);
  }
});
process.stdout.write(JSON.stringify(errors));
"""


def markdown_cells(path):
    """[(cell index, source)] of the notebook's markdown cells."""
    cells = json.loads(path.read_text())["cells"]
    return [
        (index, "".join(cell["source"]))
        for index, cell in enumerate(cells)
        if cell["cell_type"] == "markdown"
    ]


def without_code(text):
    """The markdown with fenced blocks and code spans blanked: `$` there is not math."""
    text = FENCE.sub(lambda match: " " * len(match.group(0)), text)
    return CODE_SPAN.sub(lambda match: " " * len(match.group(0)), text)


def formulas(text):
    """[(tex, display)] of the display and inline formulas of one markdown cell."""
    text = without_code(text)
    found = [(match.group(1), True) for match in DISPLAY.finditer(text)]
    text = DISPLAY.sub(" ", text)
    for paragraph in re.split(r"\n\s*\n", text):  # inline math never spans paragraphs
        found.extend((match.group(1), False) for match in INLINE.finditer(paragraph))
    return found


def environment_errors(text):
    """Messages for each \\begin without its \\end (or the other way round)."""
    stack, errors = [], []
    for match in ENVIRONMENT.finditer(text):
        kind, name = match.groups()
        if kind == "begin":
            stack.append(name)
        elif not stack:
            errors.append(f"\\end{{{name}}} without a \\begin{{{name}}}")
        elif stack[-1] != name:
            errors.append(f"\\end{{{name}}} closes \\begin{{{stack[-1]}}}")
            stack.pop()
        else:
            stack.pop()
    errors.extend(f"\\begin{{{name}}} is never closed" for name in stack)
    return errors


def katex_errors(items):
    """KaTeX's verdict on each (tex, display): None when it renders, else the message."""
    node = shutil.which("node")
    if node is None:
        pytest.fail(
            "Node.js is not installed; the math check renders formulas with KaTeX "
            "in Node: install Node (apt-get install nodejs npm) and KaTeX (see this "
            "module's docstring)."
        )
    payload = json.dumps([{"tex": tex, "display": display} for tex, display in items])
    result = subprocess.run(
        [node, "-e", KATEX_SCRIPT],
        input=payload,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    if "Cannot find module 'katex'" in result.stderr:
        pytest.fail(
            "KaTeX is not installed where Node finds it: run "
            "`npm install --prefix .ci/node katex@0.16.47` and set "
            "NODE_PATH=$PWD/.ci/node/node_modules (see this module's docstring)."
        )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_the_extractor_finds_inline_display_and_skips_code():
    text = (
        "Cost $5 and `$x$` in code, $a_i$ inline,\n\n$$\\frac{1}{2}$$ and "
        "$b$.\n```\n$not math$\n```\nA \\$ sign, $c \\$ d$."
    )
    assert formulas(text) == [
        ("\\frac{1}{2}", True),
        ("a_i", False),
        ("b", False),
        ("c \\$ d", False),
    ]


def test_the_checks_catch_the_corruptions_they_are_for():
    """The three checks, each on a formula broken the way Lab 2's section 8 was."""
    broken = "$$p = \begin{cases} 1 \\ 2 \\end{cases}$$"  # \b became a backspace
    assert CONTROL.search(broken)
    assert environment_errors(r"$$\begin{cases} 1 \end{pmatrix}$$")
    assert environment_errors(r"$$\begin{cases} 1 $$")
    assert not environment_errors(r"$$\begin{pmatrix} \begin{cases} 1 \end{cases} \end{pmatrix}$$")
    verdicts = katex_errors(
        [
            (r"\sin\left(x\right)", False),
            (r"\sin\left(x\rght)", False),
            (r"\frac{1}{2", True),
            (r"\begin{cases} a & b \\ c & d \end{cases}", True),
        ]
    )
    assert verdicts[0] is None and verdicts[3] is None, verdicts
    assert verdicts[1] and verdicts[2], verdicts


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_markdown_cells_have_clean_balanced_renderable_math(path):
    assert NOTEBOOKS, "no notebooks found under solutions/ and labs/"
    problems, items, where = [], [], []
    for index, text in markdown_cells(path):
        for match in CONTROL.finditer(text):
            context = text[max(0, match.start() - 30) : match.end() + 30]
            problems.append(f"cell {index}: control character {match.group(0)!r} in {context!r}")
        problems.extend(f"cell {index}: {message}" for message in environment_errors(text))
        for tex, display in formulas(text):
            items.append((tex, display))
            where.append(index)
    for index, (tex, _), error in zip(where, items, katex_errors(items)):
        if error is not None:
            problems.append(f"cell {index}: KaTeX rejects {tex!r}: {error}")
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)
