"""The docs agree with the tool and with themselves: every command `dimster --help` lists (and each of
its subcommands) has its section in docs/cli.md, and every link between the repo's Markdown files
reaches a file that exists and, where it names one, a heading of that file."""

import re
from pathlib import Path

import pytest
import typer

from dimster.cli.app import app
from tests.cli import REPO

pytestmark = pytest.mark.unit

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
MARKDOWN = sorted([REPO / "README.md", *REPO.glob("docs/**/*.md"), *REPO.glob("run/**/*.md")])


def command_paths() -> list[str]:
    """`cluster up`, `import omb`, `run`, ...: each command a user can type, as --help lists them."""
    root = typer.main.get_command(app)
    context = root.make_context("dimster", ["--help"], resilient_parsing=True)
    paths = []
    for name in root.list_commands(context):
        command = root.get_command(context, name)
        subcommands = getattr(command, "commands", None)
        paths += [f"{name} {sub}" for sub in subcommands] if subcommands else [name]
    return paths


def test_every_command_of_the_help_has_its_section_in_the_cli_reference():
    headings = [line for line in (REPO / "docs" / "cli.md").read_text().splitlines() if line.startswith("#")]
    text = " ".join(headings).replace("|", " ")
    missing = []
    for path in command_paths():
        group, _, sub = path.partition(" ")
        # a heading may name several subcommands of a group: `dimster cluster kill|pause ENV`
        pattern = rf"`dimster {group}\b[^`]*\b{sub}\b" if sub else rf"`dimster {group}\b"
        if not re.search(pattern, text):
            missing.append(path)
    assert len(command_paths()) > 30
    assert missing == []


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces become hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found | set(re.findall(r'<a (?:id|name)="([^"]+)"', path.read_text()))


def test_every_link_between_the_docs_reaches_its_file_and_heading():
    broken = []
    for source in MARKDOWN:
        text = re.sub(r"```.*?```", "", source.read_text(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            destination = (source.parent / file_part).resolve() if file_part else source
            if not destination.exists():
                broken.append(f"{source.relative_to(REPO)}: {target} (no such file)")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{source.relative_to(REPO)}: {target} (no such heading)")
    assert len(MARKDOWN) > 20
    assert broken == []
