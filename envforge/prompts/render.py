"""Render the prompt templates in this folder. Prompt text lives in the templates; this module
only gathers the data they need (spec, sources, findings) and fills them in.

Templates use StrictUndefined: a missing variable is an error, never an empty string.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from envforge.errors import BadInput
from envforge.kit import contract
from envforge.native.rust_crates import RUST_CRATES
from envforge.prompts.large_arrays import cut_large_arrays
from envforge.prompts.other_groups import other_groups
from envforge.prompts.sources import SourceFile, reference_sources
from envforge.rng.draws import RUST_DRAWS
from envforge.spec import EnvSpec
from envforge.targets import get_target, target_names
from envforge.verify.findings import Finding
from envforge.verify.levels import LEVEL_NAMES, LEVELS
from envforge.verify.verdict import Report

TEMPLATE_DIR = Path(__file__).parent
CHARS_PER_TOKEN = 4
"""Token estimate for prompt sizes: about four characters per token for English and code."""

_environment = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    autoescape=False,
)
_environment.globals["contract"] = contract  # the port contract, quoted from its Protocols
_environment.globals["LEVELS"] = (
    LEVELS  # the verifier's levels, named as envforge.verify.levels does
)


@dataclass(frozen=True)
class Target:
    name: str
    template: str
    language: str


TARGETS = target_names()
"""Every target a prompt can be written for."""


def target(name: str) -> Target:
    """What the prompts need of a target (``envforge/targets``): its title, template, fence."""
    registered = get_target(name)
    return Target(registered.title, registered.prompt_template, registered.code_lang)


def render(template: str, **context: Any) -> str:
    try:
        return _environment.get_template(template).render(**context)
    except jinja2.TemplateNotFound:
        raise BadInput(f"no prompt template {template!r} in {TEMPLATE_DIR}") from None


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class TranslationPrompt:
    system: str
    context: str
    """The stable prefix: reference source, spec, target contract. Identical in every episode
    of a run, so providers with prompt caching read it from the cache after the first call."""
    task: str

    def estimated_tokens(self) -> int:
        return estimate_tokens(self.system + self.context + self.task)


def spec_view(spec: EnvSpec, target_key: str, spec_file: str | None = None) -> dict[str, Any]:
    """What the spec partial needs beyond the spec: which optional table columns carry anything
    (the field table replaces the whole env.toml, which repeated it next to L4 settings, events
    and policies the port never sees)."""
    if spec_file is None:
        try:
            spec_file = str((spec.root / "env.toml").relative_to(spec.root.parent.parent))
        except ValueError:
            spec_file = "env.toml"
    return {
        "spec": spec,
        "spec_file": spec_file,
        "target_key": target_key,
        "where_kept": any(f.attr or f.c_field for f in spec.state),
        "field_tolerances": any(
            f.atol is not None or f.rtol is not None or f.period for f in spec.state
        ),
        "field_pads": any(f.pad is not None for f in spec.state),
        "large_arrays": [f.name for f in spec.state if int(np.prod(f.shape)) > RUST_DEFAULT_MAX],
    }


RUST_DEFAULT_MAX = 32
"""Rust derives ``Default`` for arrays of at most 32 elements: a larger array field needs a
hand-written ``impl Default``."""


def rust_identifier(name: str) -> str:
    """An env name as a Rust module name (``mountain-car`` -> ``mountain_car``)."""
    ident = re.sub(r"\W", "_", name)
    return ident if ident[:1].isalpha() else f"env_{ident}"


def translation_context(
    spec: EnvSpec,
    target_name: str,
    port_path: str,
    sources: list[SourceFile] | None = None,
    verify_name: str = "run_verify",
    spec_file: str | None = None,
    quote_sources: bool = True,
) -> str:
    """The stable prefix: reference, spec and the target's contract. ``verify_name`` is how the
    agent runs the verifier: envforge's tool, or a command in an external agent's workspace.
    ``quote_sources=False``: the reference's files are named, not quoted (a workspace has them)."""
    chosen = target(target_name)
    return render(
        chosen.template,
        **spec_view(spec, target_name, spec_file),
        sources=sources if sources is not None else reference_sources(spec),
        port_file=port_path,
        port_dir=port_path,
        env_module=rust_identifier(spec.name),
        module_name=f"{rust_identifier(spec.name)}_rust",
        rust_crates=RUST_CRATES,
        rust_draws=RUST_DRAWS.read_text() if quote_sources else "",  # else kit/draws.rs
        verify_name=verify_name,
        quote_sources=quote_sources,
        port_language=chosen.language,
    )


def translation_prompt(
    spec: EnvSpec,
    target_name: str,
    port_path: str,
    levels: str = "0-3",
    reference_copy: str | None = None,
    sources: list[SourceFile] | None = None,
) -> TranslationPrompt:
    """The first episode's prompt. ``port_path`` is where the agent writes the port."""
    context = translation_context(spec, target_name, port_path, sources)
    task = render(
        "task_translate.j2",
        target_name=target(target_name).name,
        port_path=port_path,
        reference_copy=reference_copy,
        levels=levels,
        verify_name="run_verify",
    )
    return TranslationPrompt(render("system.j2", max_level=levels[-1]), context, task)


# ---- findings and reports as the agent sees them ------------------------------------------


def _relative(file: str, roots: list[Path]) -> str:
    if scrub_paths(file, []) != file:  # in the Python installation, wherever that is
        return scrub_paths(file, [])
    path = Path(file)
    for root in roots:
        for base in (root, root.resolve()):
            try:
                return str(path.relative_to(base))
            except ValueError:
                continue
    return file


def scrub_paths(text: str, roots: list[Path]) -> str:
    """Absolute workspace/project paths become relative: prompts must not depend on where a
    run happens (cassettes replay elsewhere), nor show the machine's layout."""
    # the Python installation first: a virtualenv inside the project reads as one outside it
    for prefix in {sys.prefix, sys.exec_prefix} - {"/usr", "/usr/local"}:
        text = text.replace(prefix + "/", "<python-env>/")
    for root in roots:
        for base in {str(root), str(root.resolve())}:
            text = text.replace(base + "/", "").replace(base, ".")
    return text


LINES_SHOWN = 10
"""Source lines a prompt shows per side. Localization lists the lines assigning the diverging
fields first, then what they read, nearest first; past ten the rest is rarely the cause (a
finding on many fields listed 62)."""

_ALIAS = re.compile(
    r"^(?:(?:pub\s+)?(?:const|static|let)\s+)?(\w+)\s*(?::\s*[\w.<>\[\]]+)?\s*=\s*"
    r"[A-Za-z_][\w.]*(?:::\w+)*\s*;?$"
)
"""``f32 = np.float32``, ``const F: T = other::NAME;``: a name for another name, no arithmetic."""


def ranked_lines(
    locations: list[dict[str, Any]], fields: list[str], limit: int = LINES_SHOWN
) -> tuple[list[dict[str, Any]], int]:
    """Localization's lines minus trivial aliases of other names, cut to ``limit`` in its order;
    returns them and how many were cut. An alias of a diverging field itself is kept."""
    kept = []
    for loc in locations:
        alias = _ALIAS.match(loc["text"].strip())
        if alias is None or alias.group(1) in fields:
            kept.append(loc)
    return kept[:limit], max(0, len(kept) - limit)


def finding_view(finding: Finding, roots: list[Path]) -> dict[str, Any]:
    """The finding as template data, with source paths relative to the given roots, its
    source lines ranked and cut (``<side>_lines_cut`` says how many are not shown), and large
    array values cut to the elements that differ (``large_arrays.cut_large_arrays``)."""
    view = finding.to_dict()
    cut_large_arrays(view)
    for key in ("reference_lines", "port_lines"):
        lines = [dict(loc, file=_relative(loc["file"], roots)) for loc in view[key]]
        view[key], view[f"{key}_cut"] = ranked_lines(lines, finding.fields)
    view["message"] = scrub_paths(view["message"], roots)
    view["detail"] = scrub_paths(view["detail"], roots)
    return view


def numbered(source: str) -> str:
    lines = source.splitlines()
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}}  {line}" for i, line in enumerate(lines, start=1))


def repair_task(
    finding: Finding,
    report: Report | None,
    iteration: int | None,
    port_path: str,
    port_source: str | None,
    levels: str,
    roots: list[Path],
    language: str = "python",
    verify_name: str = "run_verify",
) -> str:
    return render(
        "repair.j2",
        verify_name=verify_name,
        verdict=report.verdict if report is not None else "not equivalent",
        finding=finding_view(finding, roots),
        level_name=LEVEL_NAMES.get(finding.level, f"L{finding.level}"),
        other_levels=[{"level": lv.level, "status": lv.status} for lv in report.levels]
        if report is not None
        else [],
        other_groups=other_groups(report, finding, lambda t: scrub_paths(t, roots)),
        iteration=iteration,
        port_path=port_path,
        port_listing=numbered(port_source) if port_source else "",
        port_language=language,
        levels=levels,
    )


def verify_result(report: Report, roots: list[Path]) -> str:
    """What run_verify returns to the agent: verdict, level lines and the first finding."""
    finding = report.first_finding()
    return render(
        "verify_result.j2",
        verdict=report.verdict,
        verdict_line=report.verdict_line(),
        levels=[
            {
                "level": lv.level,
                "name": lv.name,
                "status": lv.status,
                # never what depends on machine speed: a replayed run must read the same
                "summary": scrub_paths(lv.portable_summary or lv.summary, roots),
            }
            for lv in report.levels
        ],
        finding=finding_view(finding, roots) if finding else None,
        level_name=LEVEL_NAMES.get(finding.level, "") if finding else "",
        other_groups=other_groups(report, finding, lambda t: scrub_paths(t, roots)),
        # what a passing run left unchecked; a failing one stopped early, so its gaps say nothing
        unchecked=[scrub_paths(line, roots) for line in report.coverage_lines() if "never" in line]
        if report.passed
        else [],
        unchecked_quotes=[scrub_paths(line, roots) for line in report.unrun_lines()]
        if report.passed
        else [],
    )


def missing_port_task(error: str, port_path: str) -> str:
    return render("missing_port.j2", error=error, port_path=port_path)


def optimize_task(
    port_path: str,
    levels: str,
    steps_per_second: float,
    batch_size: int,
    device: str,
    language: str = "python",
) -> str:
    """The optimize round's task; ``language`` is the target's code fence (python, rust)."""
    return render(
        "optimize.j2",
        port_path=port_path,
        levels=levels,
        steps_per_second=steps_per_second,
        batch_size=batch_size,
        device=device,
        language=language,
    )
