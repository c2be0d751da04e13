"""MkDocs hooks for lablib's site (mkdocs.yml: ``hooks: [docs/hooks.py]``).

What lives elsewhere in the repository is read where it is, at build time, never copied
into docs/:

* pages from Markdown files kept beside what they describe: ``CHANGELOG.md`` (the
  Changelog), ``benchmarks/README.md`` and every ``benchmarks/results/*.md`` (the
  benchmarks' tables, with a generated list of them), ``data/README.md`` (dataset
  sources), ``lablib/grading/run/ISOLATION.md`` (how submissions are isolated), and the
  review page's picture;
* the ``lablib`` command's reference: the ``--help`` text of every subcommand, rendered
  from ``lablib.cli.build_parser()``, so the page is what the installed command prints;
* links: a relative link in a page that names a file of the repository outside the site
  (a test, a module, a notebook) becomes a link to that file in the repository
  (``repo_url``); a link that is neither a page nor a repository file is left alone, and
  the strict build fails on it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import pathlib
import posixpath
import re

from mkdocs.structure.files import File, Files

#: Site path -> repository path of the pages and files read from elsewhere.
MOUNTED = {
    "changelog.md": "CHANGELOG.md",
    "benchmarks/index.md": "benchmarks/README.md",
    "data/registry.md": "data/README.md",
    "guide/isolation.md": "lablib/grading/run/ISOLATION.md",
    "img/review-page.png": "lablib/grading/review/page/screenshot.png",
}
RESULTS = "benchmarks/results"
CLI_PAGE = "reference/cli.md"
RESULTS_INDEX = f"{RESULTS}/index.md"
#: Width of the rendered --help text (argparse reads COLUMNS).
HELP_COLUMNS = "92"

_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")
_sources: dict[str, str] = {}  # site path -> repository path, for the link rewriting


def _root(config) -> pathlib.Path:
    """The repository: the folder of mkdocs.yml."""
    return pathlib.Path(config.config_file_path).resolve().parent


def on_files(files: Files, config) -> Files:
    root = _root(config)
    _sources.clear()
    mounted = dict(MOUNTED)
    for result in sorted((root / RESULTS).glob("*.md")):
        mounted[f"{RESULTS}/{result.name}"] = f"{RESULTS}/{result.name}"
    for site_path, repo_path in mounted.items():
        files.append(File.generated(config, site_path, abs_src_path=str(root / repo_path)))
        _sources[site_path] = repo_path
    files.append(File.generated(config, RESULTS_INDEX, content=_results_index(root)))
    _sources[RESULTS_INDEX] = f"{RESULTS}/"
    files.append(File.generated(config, CLI_PAGE, content=_cli_page()))
    _sources[CLI_PAGE] = "lablib/cli.py"
    return files


def _results_index(root: pathlib.Path) -> str:
    lines = [
        "# Result files",
        "",
        "Every table a full benchmark run wrote, with its date, machine and command, as kept",
        f"in `{RESULTS}/` (the per-seed `.log` files beside them are in the repository).",
        "",
        "| file | what it measures |",
        "|---|---|",
    ]
    for result in sorted((root / RESULTS).glob("*.md")):
        title = next(
            (
                line.lstrip("# ").strip()
                for line in result.read_text().splitlines()
                if line.startswith("#")
            ),
            result.stem,
        )
        lines.append(f"| [{result.name}]({result.name}) | {title} |")
    return "\n".join(lines) + "\n"


def _help_text(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        parser.parse_args([*argv, "--help"])
    return out.getvalue().rstrip()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subparsers here and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _cli_page() -> str:
    from lablib.cli import __doc__ as cli_doc
    from lablib.cli import build_parser

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        parser = build_parser()
        sections = []

        def walk(p, argv):
            sections.append((argv, _help_text(build_parser(), argv)))
            for name, child in _subcommands(p).items():
                walk(child, [*argv, name])

        walk(parser, [])
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    examples = cli_doc.split("Examples::", 1)[1].strip("\n") if "Examples::" in cli_doc else ""
    lines = [
        "# The `lablib` command",
        "",
        "Installed with the package (`lablib = lablib.cli:main`). Every section below is the",
        "`--help` text of one subcommand, rendered from `lablib.cli.build_parser()` when the",
        "site is built: it is what the installed command prints.",
        "",
    ]
    if examples:
        lines += [
            "## Examples",
            "",
            "```bash",
            *(line[4:] for line in examples.splitlines()),
            "```",
            "",
        ]
    for argv, text in sections:
        title = " ".join(["lablib", *argv])
        lines += [f"## `{title}`", "", "```text", text, "```", ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    """Point relative links at repository files outside the site to the repository."""
    root = _root(config)
    src_uri = page.file.src_uri
    docs = pathlib.Path(config.docs_dir).resolve().relative_to(root).as_posix()
    repo_page = _sources.get(src_uri, f"{docs}/{src_uri}")
    repo_url = config.repo_url.rstrip("/")

    def rewrite(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):
            return match.group(0)  # a URL, an anchor on the page, an absolute path
        path, _, anchor = target.partition("#")
        if files.get_file_from_path(
            posixpath.normpath(posixpath.join(posixpath.dirname(src_uri), path))
        ):
            return match.group(0)  # a page or a file of the site
        in_repo = posixpath.normpath(posixpath.join(posixpath.dirname(repo_page), path))
        if in_repo.startswith("..") or not (root / in_repo).exists():
            return match.group(0)  # neither: left for the strict build to refuse
        kind = "tree" if (root / in_repo).is_dir() else "blob"
        url = f"{repo_url}/{kind}/main/{in_repo}" + (f"#{anchor}" if anchor else "")
        return f"{match.group(1)}{url}{match.group(3)}"

    return _LINK.sub(rewrite, markdown)
