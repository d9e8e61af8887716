"""The docs as a user's map: every link, repository path and cited section they name exists,
every ``envforge <command> --option`` they show is in the shipped CLI's ``--help``, guides stay
guides (listed under docs/README.md's "Guides", at most 300 lines), and nothing cites a tracker's
issue numbers. Each checker is first shown to catch a page broken on purpose."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer.main

from envforge.cli import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
GUIDE_LIMIT = 300

FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# a path into the repository, as the docs name them in prose and inline code
REPO_PATH = re.compile(
    r"(?<![\w./-])((?:docs|envforge|tests|benchmarks|examples|references|generated|\.ci)"
    r"/[^\s`'\"()|,;]*)"
)
PLACEHOLDER = re.compile(r"[<>*{}\[\]]|\.\.\.|…")
# `docs/SPEC.md, "Reviewing a draft"`: a section named by its heading
SECTION_CITED = re.compile(r"\b(docs/[A-Z_]+\.md|[A-Z_]+\.md)\)?,? [\"']([^\"'\n]{3,80})[\"']")
# a command as a line or a code span shows it, after any `VAR=value` settings
COMMAND = re.compile(r"^\s*(?:\$ )?(?:[A-Z_]+=\S+ )*envforge ([a-z][a-z_]*)\b([^`\n|]*)")
SUBCOMMAND = re.compile(r" ([a-z][a-z_]*)\b")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
ISSUE = re.compile(r"\bissues? \d|\(issue|\bissue #|(?<![\w&])#\d+\b(?! (?:at|random|on))")
NOT_AN_ISSUE = re.compile(r"\bdraws? #\d+|#\[|\"#\d")  # "draw #1 at step 0", Rust's #[cfg]


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _prose(text: str) -> str:
    """The page without its fenced code blocks (commands there may name paths they create)."""
    return FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _sections(page: Path) -> list[str]:
    """A page's headings and the bold leads of its paragraphs (``**Physics bodies (Box2D).**``)."""
    text = page.read_text()
    named = re.findall(r"^#{1,6} (.+)$", text, re.M) + re.findall(r"\*\*([^*\n]+?)\.?\*\*", text)
    return [re.sub(r"[`*]", "", name).strip().lower() for name in named]


def broken_links(text: str, folder: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(text)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (folder / path).resolve()
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md":
            headings = re.findall(r"^#{1,6} (.+)$", _prose(resolved.read_text()), re.M)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(f"{target} (no such heading)")
    return broken


def missing_paths(text: str) -> list[str]:
    missing = []
    prose = _prose(text)
    for match in REPO_PATH.finditer(prose):
        mention = match.group(1)
        if PLACEHOLDER.search(mention) or prose[: match.start()].endswith("--out "):
            continue  # a pattern, or a folder the command shown creates
        if not (ROOT / mention.split(":")[0].rstrip(".")).exists():
            missing.append(mention)
    return sorted(set(missing))


def missing_sections(text: str) -> list[str]:
    missing = []
    for doc, section in SECTION_CITED.findall(" ".join(text.split())):
        target = ROOT / (doc if doc.startswith("docs/") else f"docs/{doc}")
        if not target.exists():
            continue  # an env's README.md or RULES.md: not a docs page
        wanted = re.sub(r"[`*]", "", section).strip().lower()
        if not any(wanted in name or name in wanted for name in _sections(target)):
            missing.append(f"{doc}, {section!r}")
    return missing


@cache
def _cli() -> dict[str, frozenset[str]]:
    """Every command path of the shipped CLI (``verify``, ``batch run``) and the options its
    ``--help`` lists."""
    commands: dict[str, frozenset[str]] = {}

    def walk(command: Any, path: str) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            commands[path] = frozenset({"--help"})
            for name, sub in subcommands.items():
                walk(sub, f"{path} {name}".strip())
            return
        options = {"--help"}
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                options.update(o for o in param.opts + param.secondary_opts if o.startswith("--"))
        commands[path] = frozenset(options)

    walk(typer.main.get_command(app), "")
    return commands


def _code(text: str) -> list[str]:
    """The lines of the page's fenced blocks and its inline code spans: where commands are shown."""
    blocks = [line for block in FENCE.findall(text) for line in block.splitlines()]
    return blocks + re.findall(r"`([^`\n]+)`", FENCE.sub("", text))


def shown_commands(text: str) -> list[tuple[str, list[str]]]:
    """Each ``envforge <command>`` the page shows, with the options written after it."""
    groups = {c.split()[0] for c in _cli() if " " in c}
    shown = []
    for line in _code(text):
        for name, rest in COMMAND.findall(line):
            sub = SUBCOMMAND.match(rest)
            if name in groups and sub:  # `envforge batch run jobs.toml`
                name, rest = f"{name} {sub.group(1)}", rest[sub.end() :]
            shown.append((name, OPTION.findall(rest.split(" # ")[0])))
    return shown


def unknown_commands(text: str) -> list[str]:
    cli = _cli()
    wrong = []
    for name, options in shown_commands(text):
        if name not in cli:
            wrong.append(f"envforge {name}: no such command")
            continue
        wrong += [f"envforge {name} {o}" for o in options if o not in cli[name]]
    return wrong


def issue_citations(text: str) -> list[str]:
    return [
        line.strip()[:80] for line in text.splitlines() if ISSUE.search(NOT_AN_ISSUE.sub("", line))
    ]


def test_each_checker_catches_a_page_broken_on_purpose(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A section\n")
    page = (
        "See [the other](other.md#a-section), [gone](gone.md), [no anchor](other.md#nowhere),\n"
        "`envforge/verify/tape.py`, `envforge/no_such_module.py`, `docs/bench/<env>.json`,\n"
        'docs/SPEC.md, "Reviewing a draft"; docs/SPEC.md, "No such section".\n'
        "```bash\nenvforge verify pong --levels 1 --no-such-flag   # --help\n"
        "envforge frobnicate --x\nenvforge batch run jobs.toml --workers 2\n```\n"
        "`envforge bench pong --plot p.png`, as the tracker's issue 12 asked (#34); draw #1 at step 0\n"
    )
    assert broken_links(page, tmp_path) == ["gone.md", "other.md#nowhere (no such heading)"]
    assert missing_paths(page) == ["envforge/no_such_module.py"]
    assert missing_sections(page) == ["docs/SPEC.md, 'No such section'"]
    assert unknown_commands(page) == [
        "envforge verify --no-such-flag",
        "envforge frobnicate: no such command",
    ]
    assert len(issue_citations(page)) == 1


def test_the_cli_walk_sees_every_command_and_its_options() -> None:
    cli = _cli()
    assert {"--levels", "--ref", "--port", "--scale", "--json", "--fast"} <= cli["verify"]
    assert {"batch run", "rules compare", "bench", "init", "train"} <= cli.keys()
    assert "--levels" not in cli["cost"]


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_a_page_links_and_names_only_what_exists(page: Path) -> None:
    text = page.read_text()
    assert not broken_links(text, page.parent), f"{_rel(page)}: broken links"
    assert not missing_paths(text), f"{_rel(page)}: paths that do not exist"
    assert not missing_sections(text), f"{_rel(page)}: cited sections that do not exist"


def test_messages_and_provenance_cite_existing_sections() -> None:
    """The code's messages and the ports' PROVENANCE.md send users to docs sections too."""
    citing = [*sorted((ROOT / "envforge").rglob("*.py")), *sorted(ROOT.glob("generated/*/*/*.md"))]
    missing = {_rel(p): found for p in citing if (found := missing_sections(p.read_text()))}
    assert not missing


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_command_a_page_shows_is_in_the_cli(page: Path) -> None:
    assert not unknown_commands(page.read_text()), _rel(page)


def test_every_command_is_shown_somewhere() -> None:
    shown = {name for page in PAGES for name, _ in shown_commands(page.read_text())}
    cli = _cli()
    leaves = [c for c in cli if c and not any(k.startswith(c + " ") for k in cli)]
    assert len(leaves) >= 15 and not [c for c in leaves if c not in shown], "commands no page shows"


def test_cli_md_lists_every_command() -> None:
    """docs/CLI.md is the reference of every command: a command added gets its row."""
    table = (ROOT / "docs" / "CLI.md").read_text()
    cli = _cli()
    leaves = [c for c in cli if c and not any(k.startswith(c + " ") for k in cli)]
    missing = [c for c in leaves if f"`envforge {c}" not in table and f"`{c}`" not in table]
    assert not missing, "commands docs/CLI.md does not list"


def _guides() -> list[Path]:
    index = (ROOT / "docs" / "README.md").read_text()
    section = re.search(r"^## Guides$(.*?)(?=^## )", index, re.M | re.S)
    assert section, 'docs/README.md has no "## Guides" heading'
    return [ROOT / "docs" / name for name in LINK.findall(section.group(1))]


def test_docs_readme_lists_the_guides_and_every_page() -> None:
    assert len(_guides()) >= 6
    index = ROOT / "docs" / "README.md"
    linked = {
        (index.parent / t.partition("#")[0]).resolve() for t in LINK.findall(index.read_text())
    }
    unlisted = [_rel(p) for p in PAGES[1:] if p != index and p.resolve() not in linked]
    assert not unlisted, "pages docs/README.md does not list"


@pytest.mark.parametrize("guide", _guides(), ids=lambda p: p.name)
def test_a_guide_is_short(guide: Path) -> None:
    lines = len(guide.read_text().splitlines())
    assert lines <= GUIDE_LIMIT, f"{guide.name}: {lines} lines; move reference or results out"


def test_no_issue_numbers_in_docs_readme_or_code() -> None:
    """A user cannot look a tracker's number up: say what the thing is instead."""
    roots = ["README.md", "docs", "envforge", "tests", "benchmarks", "examples", "generated"]
    suffixes = {".md", ".py", ".rs", ".j2", ".toml", ".c", ".h", ".js", ".txt"}
    found = {}
    for path in [p for root in [*roots, "references", ".ci"] for p in _files(ROOT / root)]:
        if path.suffix not in suffixes or path == Path(__file__).resolve():
            continue
        if cited := issue_citations(path.read_text(errors="replace")):
            found[_rel(path)] = cited
    assert not found


def _files(base: Path) -> list[Path]:
    if base.is_file():
        return [base]
    return [p for p in sorted(base.rglob("*")) if p.is_file() and "target" not in p.parts]
