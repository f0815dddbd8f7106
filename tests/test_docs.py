"""The docs name only what exists: every repository path, Python name, C name, IOASSESS_*
variable and command-line option written in backticks in README.md and docs/*.md is checked
against the checkout and the installed package."""
import importlib
import re

import pytest

from recorder_helpers import REPO

DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
TOP_LEVEL = ("plugin/", "models/", "report/", "ioassess/", "tests/", "docs/", "bench/", "contrib/", "demo/", ".ci/")
SOURCES = [path for pattern in ("plugin/*.c", "plugin/*.h", "ioassess/**/*.py", "models/**/*.py", "report/**/*.py",
                                "bench/*.py", "Makefile", "tests/conftest.py", "tests/*.py")
           for path in REPO.glob(pattern)]
CODE = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^(?:\.\./)?[\w.-]+(?:/[\w.-]+)+/?$")
PYTHON_NAME = re.compile(r"^(?:ioassess|models|report)(?:\.\w+)+$")
# The last part of a file name, not of a Python name (report.html, ioassess.lua).
FILE_SUFFIXES = {"html", "j2", "lua", "sh", "so", "json", "py", "md", "iot", "darshan", "txt", "conf", "c", "h"}
# Paths that the build, the install or the bench make (absent from a fresh clone).
INSTALLED = ("ioassess/lib/", "plugin/out/", "bench/out/")
C_NAME = re.compile(r"\b(ioassess_[a-z0-9_]+|IOASSESS_[A-Z0-9_]+)\b")


def spans(doc):
    """The backticked spans of a doc."""
    return CODE.findall(doc.read_text())


@pytest.fixture(scope="module")
def source_text():
    return "\n".join(path.read_text(errors="replace") for path in SOURCES)


def _python_object(name):
    """The object a dotted name names in the installed package (models.x is ioassess.models.x)."""
    parts = name.split(".")
    if parts[0] != "ioassess":
        parts = ["ioassess", *parts]
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(name)


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_the_repository_paths_the_docs_name_exist(doc):
    missing = []
    for word in doc.read_text().split():
        word = word.strip("`*()[],;\"'").rstrip(".:").split(":")[0]
        if PATH.match(word) and word.startswith(TOP_LEVEL) and not word.startswith(INSTALLED) and \
                not (REPO / word).exists():
            missing.append(word)
    assert not missing, f"{doc.name} names files that do not exist: {sorted(set(missing))}"


def test_the_readme_lists_every_doc():
    listed = set(re.findall(r"docs/[\w.-]+\.md", (REPO / "README.md").read_text()))
    assert listed >= {f"docs/{path.name}" for path in (REPO / "docs").glob("*.md")}


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_the_python_names_the_docs_name_exist(doc):
    missing = []
    for span in spans(doc):
        for word in re.findall(r"[\w.]+", span):
            if PYTHON_NAME.match(word) and word.rsplit(".", 1)[1] not in FILE_SUFFIXES:
                try:
                    _python_object(word)
                except (ImportError, AttributeError):
                    missing.append(word)
    assert not missing, f"{doc.name} names Python objects that do not exist: {sorted(set(missing))}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_the_c_names_and_variables_the_docs_name_exist(doc, source_text):
    # a Prometheus counter is exported with _total after the name the source gives it
    missing = {name for span in spans(doc) for name in C_NAME.findall(span)
               if not re.search(rf"\b{re.escape(name.removesuffix('_total'))}\b", source_text)}
    assert not missing, f"{doc.name} names C names or variables that no source has: {sorted(missing)}"


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# Programs other than ioassess's whose options the docs show, and those options.
OTHER_TOOLS_FLAGS = {"stress-ng": {"--cpu"}, "spack develop": {"--path"}, "systemctl enable": {"--now"}}
C_LONG_OPTION = re.compile(r'\{"([a-z][a-z0-9-]*)",\s*(?:no|required|optional)_argument')


def _parser_flags(parser):
    """Every option string of an argparse parser and its subcommands."""
    import argparse
    flags = set()
    for action in parser._actions:
        flags.update(option for option in action.option_strings if option.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags |= _parser_flags(sub)
    return flags


@pytest.fixture(scope="module")
def known_flags():
    """The options of `ioassess` and its subcommands, and those the C programs (getopt_long's
    table) and bench scripts (a string "--x") take."""
    from ioassess.cli import _build_parser as build_parser
    programs = "\n".join(path.read_text() for pattern in ("plugin/programs/*.c", "bench/*.py", "bench/*.c")
                         for path in REPO.glob(pattern))
    return _parser_flags(build_parser()) | set(re.findall(r'"(--[a-z][a-z0-9-]*)', programs)) | \
        {f"--{name}" for name in C_LONG_OPTION.findall(programs)} | set().union(*OTHER_TOOLS_FLAGS.values())


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.name)
def test_the_flags_the_docs_name_exist(doc, known_flags):
    missing = {flag for span in spans(doc) for flag in FLAG.findall(span)} - known_flags
    assert not missing, f"{doc.name} names options that no ioassess command or program takes: {sorted(missing)}"
