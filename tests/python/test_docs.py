"""docs/settings.md against the installed m0serve's --help: every long flag
--help lists is in the page's flags table with its M0SERVE_* variable, and
every flag and variable the table lists is one --help has, so the page
cannot drift from the command line. And every M0_* knob the Rust sources
read is in the page's knobs table."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from helpers import run_m0serve

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "docs" / "settings.md"

# clap's long help: a flag's line is indented two spaces (`-h, --help`) or
# six (`--host <HOST>`); its description, further in, holds `[env: NAME=]`.
FLAG_LINE = re.compile(r"^  (?:-[A-Za-z], |    )(--[a-z0-9][a-z0-9-]*)")
ARGUMENT_LINE = re.compile(r"^  \[?([A-Z][A-Z_]*)\]?\s*$")
ENV = re.compile(r"\[env: ([A-Z0-9_]+)=")


def help_options(text: str) -> Dict[str, Optional[str]]:
    """Each long flag (and each positional, by its name) in `--help`'s
    output, with the variable it reads (None: none)."""
    options: Dict[str, Optional[str]] = {}
    current = None
    for line in text.splitlines():
        flag = FLAG_LINE.match(line)
        argument = ARGUMENT_LINE.match(line)
        if flag or argument:
            current = flag.group(1) if flag else argument.group(1)
            options[current] = None
            continue
        env = ENV.search(line)
        if env and current is not None:
            options[current] = env.group(1)
    return options


def table_rows(text: str, heading: str) -> List[List[str]]:
    """The cells of each body row of the first table under `heading`."""
    lines = text.splitlines()
    start = lines.index(heading)
    rows: List[List[str]] = []
    in_table = False
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            in_table = True
            # A `\|` inside a cell (`auto\|wsgi`) is not a column.
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not all(set(c) <= set("-:") for c in cells):
                rows.append(cells)
        elif in_table:
            break
    return rows[1:]  # past the header row


def documented_flags(text: str) -> List[Tuple[List[str], List[str]]]:
    """Each row of the flags table: the flags (or positional) its first
    cell names, and the variables its second cell names."""
    rows = []
    for cells in table_rows(text, "## Flags"):
        names = re.findall(r"`(--[a-z0-9-]+|[A-Z][A-Z_]*)\b", cells[0])
        rows.append((sorted(set(names)), re.findall(r"M0SERVE_[A-Z0-9_]+", cells[1])))
    return rows


@pytest.fixture(scope="module")
def options() -> Dict[str, Optional[str]]:
    done = run_m0serve("--help")
    assert done.returncode == 0, done.stderr
    found = help_options(done.stdout)
    # The parser must have read the help: a flag of each kind and the APP.
    assert found.get("--host") == "M0SERVE_HOST", found
    assert found.get("--uring") == "M0SERVE_URING", found
    assert "--no-ws" in found and found["--no-ws"] is None, found
    assert found.get("APP") == "M0SERVE_APP", found
    return found


@pytest.fixture(scope="module")
def rows() -> List[Tuple[List[str], List[str]]]:
    found = documented_flags(SETTINGS.read_text())
    assert len(found) > 50, f"the flags table of {SETTINGS} was not read: {found}"
    return found


def test_every_flag_in_help_is_documented_with_its_variable(options, rows):
    missing = []
    for name, variable in options.items():
        row = next((r for r in rows if name in r[0]), None)
        if row is None:
            missing.append(f"{name}: no row")
        elif variable is not None and variable not in row[1]:
            missing.append(f"{name}: its row does not name {variable}")
        elif variable is None and row[1] and not any(n in options and options[n] for n in row[0]):
            missing.append(f"{name}: reads no variable, its row names {row[1]}")
    assert not missing, "docs/settings.md lags `m0serve --help`:\n" + "\n".join(missing)


def test_every_documented_flag_and_variable_is_in_help(options, rows):
    variables = {v for v in options.values() if v}
    unknown = [n for names, _ in rows for n in names if n not in options]
    unknown += [v for _, vs in rows for v in vs if v not in variables]
    assert not unknown, f"docs/settings.md names what `m0serve --help` does not: {unknown}"


def test_every_knob_the_sources_read_is_documented():
    sources = [ROOT / d for d in ("src", "pool", "uring")]
    if not all(d.is_dir() for d in sources):
        pytest.skip("no Rust sources beside the tests")
    read = set()
    for d in sources:
        for path in d.rglob("*.rs"):
            read.update(re.findall(r"\bM0_[A-Z0-9_]+\b", path.read_text()))
    knobs = {k for cells in table_rows(SETTINGS.read_text(), "## Mechanism knobs (`M0_*`)")
             for k in re.findall(r"M0_[A-Z0-9_]+", cells[0])}
    assert read, "no M0_* knob found in the sources"
    assert not read - knobs, f"knobs read but not in docs/settings.md: {sorted(read - knobs)}"
    assert not knobs - read, f"knobs in docs/settings.md that nothing reads: {sorted(knobs - read)}"
