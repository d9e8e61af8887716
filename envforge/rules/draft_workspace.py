"""The workspace in which a coding agent drafts one version of a reference from a rules text.

It holds the rules text, the task (AGENTS.md, and the same text as CLAUDE.md and GEMINI.md),
the spec to implement when one is given (later versions implement the first version's), and a
``./check`` that loads the spec and runs the agent's rule cases against its version. The agent
sees only the rules text: never another version, so versions stay independent.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from envforge.errors import BadInput
from envforge.rules.text import RulesText
from envforge.spec import EnvSpec
from envforge.untrusted.regular import NotPlainFile, read_file, write_file
from envforge.untrusted.scripts import entry_script

TASK_FILES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md")
CHECK = "check"

TASK = """# Task: write a Python reference of `{name}` from its rules text

`RULES.md` is the only description of the game; its lines are numbered below. Write
`{name}.py` with a class `{cls}` that plays exactly these rules, and `cases.toml` with rule
cases. Run `./check` after each change: it must end with every case passing.

## The class (envforge's Python reference contract)
- `{cls}()` takes no arguments; `reset(seed=None)` returns `(obs, info)`; `step(action)` returns
  `(obs, reward, terminated, truncated, info)`; `_get_obs()` returns the observation of the
  current state as a numpy array.
- The whole game state lives in plain attributes (ints, floats, bools or lists of them) that
  `env.toml` lists as `[[state]]` fields with `attr = "<attribute>"`: envforge writes a state into
  them and steps once. Nothing else may carry over from one step to the next.
- A list attribute whose field has a `pad` value in `env.toml` is written as the list up to its
  first pad value: a hand `[5, 20, 0, 0, 0, 0]` with `pad = 0` arrives as `[5, 20]`. Keep such
  lists variable-length, and pad them yourself where a fixed length is needed (the observation).
- Randomness: draw only from `self.np_random` (a `numpy.random.Generator`), made in `reset` as
  `numpy.random.default_rng(seed)`.
{spec_part}
## Cite the rules
Above the code that implements a rule, write a comment naming its lines: `# L12` or `# L12-14`
(a citation covers the code below it up to the next blank line; one at the end of a line covers
that line). When two versions of this game disagree, envforge shows a person which rules each
version's executed code cited, so cite every rule you implement.

## Rule cases (`cases.toml`)
One `[[case]]` per rule you can check in one step: `name`, `rules = "L12"`, `seed` (optional),
`set = {{ field = value }}` (state fields written over the reset state), `action`, and
`expect = {{ field = value, reward = ..., terminated = ... }}`. Quote only what the rules text
decides; do not invent outcomes it leaves open: write your question in `QUESTIONS.md` instead.

## The rules text, numbered
```
{numbered}
```
"""

WITH_SPEC = """
## The spec you implement
`env.toml` is given: implement exactly its state fields (names, `attr`s, shapes), its action
space and its observation. Do not change it.
"""

WITHOUT_SPEC = """
## The spec
Draft `env.toml` once the class works: `envforge init --ref {name}.py:{cls} --out env.toml`, then
read it, fix what it could not guess, and keep it passing `./check`.
"""

CHECK_USAGE = "runs your rule cases against {name}.py (envforge rules check)"
CHECK_FIRST = """here={here}
[ -f "$here/env.toml" ] || {{ echo "no env.toml yet: draft it (see AGENTS.md)"; exit 2; }}
[ -f "$here/cases.toml" ] || {{ echo "no cases.toml yet: write rule cases (see AGENTS.md)"; exit 2; }}
set -- "$here/RULES.md" --cases "$here/cases.toml" --spec "$here/env.toml" "$@"
"""


REPAIR = """
## This round: repair your version
The workspace starts from your version of an earlier round (`{name}.py`, `cases.toml`). The rules
text may have new answers under `## Clarifications`; {questions}Change the version so that it
follows the rules as they now read, add a rule case citing each answer, and keep `./check` passing.
"""
QUESTIONS_FILE = "QUESTIONS-ASKED.md"


COPIED_BYTES = 4 * 2**20
"""Largest file carried into a draft workspace (a version, its cases, the rules text)."""


def _read(path: Path, what: str, missing_ok: bool = False) -> bytes | None:
    """A file carried into the workspace (None when missing and ``missing_ok``), or one line
    (BadInput) naming what it is instead of a regular file."""
    try:
        return read_file(path, COPIED_BYTES)
    except NotPlainFile as e:
        if e.why == "not found" and missing_ok:
            return None
        raise BadInput(f"{what} {path}: {e.why}: envforge copies only regular files") from None


def class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) or "Env"


def write_draft_workspace(
    rules: RulesText,
    name: str,
    folder: Path,
    spec: EnvSpec | None,
    spec_path: Path | None,
    start: Path | None = None,
    questions: Path | None = None,
) -> Path:
    """Write the workspace; refuse a folder that already has files in it. ``start``: a
    version's folder to repair (its ``<name>.py`` and ``cases.toml`` are copied in);
    ``questions``: the rule questions of the round that asked (copied in for the agent)."""
    if folder.exists() and any(folder.iterdir()):
        raise BadInput(f"workspace folder {folder} is not empty")
    # what is copied in was written by an agent (a version's folder) or handed by the user:
    # read by the one rule, a regular file each, no link followed
    carried: dict[str, bytes | None] = {"RULES.md": _read(rules.path, "rules text")}
    if start is not None:
        for part in (f"{name}.py", "cases.toml"):
            carried[part] = _read(start / part, "--from", missing_ok=True)
        if carried[f"{name}.py"] is None:
            raise BadInput(f"--from {start}: no {name}.py there to start from")
    if questions is not None:
        carried[QUESTIONS_FILE] = _read(questions, "--questions")
    folder.mkdir(parents=True, exist_ok=True)
    cls = class_name(name)
    if spec is not None and spec_path is not None:
        text = spec_path.read_text()
        reference = f'reference = "{name}.py:{cls}"'
        lines = [reference if ln.startswith("reference") else ln for ln in text.splitlines()]
        (folder / "env.toml").write_text("\n".join(lines) + "\n")
        spec_part = WITH_SPEC
    else:
        spec_part = WITHOUT_SPEC.format(name=name, cls=cls)
    for part, data in carried.items():
        if data is not None:
            write_file(folder, part, data)
    if start is not None:
        asked = (
            f"`{QUESTIONS_FILE}` holds the rule questions this round asked. " if questions else ""
        )
        spec_part += REPAIR.format(name=name, questions=asked)
    task = TASK.format(name=name, cls=cls, spec_part=spec_part, numbered=rules.numbered())
    for task_file in TASK_FILES:
        (folder / task_file).write_text(task)
    check = folder / CHECK
    before = CHECK_FIRST.format(here=shlex.quote(str(folder.resolve())))
    command = ["-m", "envforge.cli", "rules", "check"]
    check.write_text(entry_script(CHECK, CHECK_USAGE.format(name=name), command, before))
    check.chmod(0o755)
    return folder
