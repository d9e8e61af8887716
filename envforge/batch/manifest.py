"""The batch manifest (TOML): one budget and many translation jobs.

    [batch]                      name, total_budget_usd, workers, executor, address
    [defaults]                   any job key, applied to every job that does not set it
    [[job]]                      name, ref, target, model, budget_usd, max_iters, levels, out, ...

Validated with pydantic; a problem is one line naming the file, the key and what was expected.
Relative paths (``ref``, ``spec``, ``out``, ``scripted:`` scripts) are relative to the manifest.
"""

from __future__ import annotations

import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, field_validator

from envforge.errors import BadInput, SpecError
from envforge.spec import bounds
from envforge.targets import target_names
from envforge.untrusted.input_files import InputFileError, load_toml
from envforge.verify.levels import parse_levels

NAME_RULE = bounds.NAME_RULE


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _known_target(value: str | None) -> str | None:
    if value is not None and value not in target_names():
        raise ValueError(f"unknown target {value!r} (known: {', '.join(target_names())})")
    return value


def _money(value: Any) -> Any:
    """TOML floats become exact decimals by their text (0.1 stays 0.1)."""
    if isinstance(value, bool):
        raise ValueError("expected a number of USD")
    return str(value) if isinstance(value, float | int) else value


class BatchSettings(_Strict):
    name: str | None = None
    """Default: the manifest file's stem."""
    total_budget_usd: Annotated[Decimal, bounds.field(bounds.USD)]
    """Most the whole batch may spend; enforced across all workers before every call."""
    workers: Annotated[int, bounds.field(bounds.WORKERS)] = 2
    """Jobs running at once."""
    executor: Literal["local", "ray"] = "local"
    address: str | None = None
    """Ray cluster address (``auto``, ``ray://host:10001``); None starts a local Ray."""

    @field_validator("total_budget_usd", mode="before")
    @classmethod
    def exact_money(cls, value: Any) -> Any:
        return _money(value)


class JobFields(_Strict):
    """Every key a job (or ``[defaults]``) may set; ``None`` means "not set here"."""

    name: str | None = None
    ref: str | None = None
    """Reference, as for ``envforge translate --ref``: path/to/env.c, gymnasium:<id>, file.py:Class."""
    spec: str | None = None
    """env.toml to use (default: beside the reference)."""
    target: Annotated[str | None, AfterValidator(_known_target)] = None
    """A registered target (``envforge/targets``): jax, rust, c."""
    model: str | None = None
    """claude-…, gemini-…, openai:<name>, replay:<cassette.jsonl> or scripted:<script.json>."""
    budget_usd: Annotated[Decimal | None, bounds.field(bounds.USD)] = None
    """This job's own limit (the batch total applies too)."""
    max_iters: Annotated[int | None, bounds.field(bounds.AT_LEAST_ONE)] = None
    max_steps: Annotated[int | None, bounds.field(bounds.AT_LEAST_ONE)] = None
    max_tokens: Annotated[int | None, bounds.field(bounds.AT_LEAST_ONE)] = None
    max_minutes: Annotated[float | None, bounds.field(bounds.MINUTES)] = None
    levels: str | None = None
    scale: Annotated[float | None, bounds.field(bounds.SCALE)] = None
    seed: Annotated[int | None, bounds.field(bounds.SEED)] = None
    optimize: Annotated[int | None, bounds.field(bounds.NON_NEGATIVE)] = None
    out: str | None = None
    """Where the final port lands (default ``generated/<env>/<target>-<job>`` here)."""
    price_in: Annotated[float | None, bounds.field(bounds.USD_PER_MTOK)] = None
    price_out: Annotated[float | None, bounds.field(bounds.USD_PER_MTOK)] = None
    price_cache_read: Annotated[float | None, bounds.field(bounds.USD_PER_MTOK)] = None
    price_cache_write: Annotated[float | None, bounds.field(bounds.USD_PER_MTOK)] = None
    num_cpus: Annotated[float | None, bounds.field(bounds.POSITIVE)] = None
    """Ray resources of the job's task."""
    num_gpus: Annotated[float | None, bounds.field(bounds.RESOURCES)] = None
    """Ray GPUs of the job's task (set 1 when L4 trains on a GPU)."""
    reference_steps_per_second: Annotated[float | None, bounds.field(bounds.POSITIVE)] = None
    """The reference's measured steps/s (e.g. from ``envforge bench``): the report's speedup."""

    @field_validator("budget_usd", mode="before")
    @classmethod
    def exact_money(cls, value: Any) -> Any:
        return _money(value)


class JobEntry(_Strict):
    """One job with defaults applied and everything required present."""

    name: str
    ref: str
    spec: str | None
    target: Annotated[str, AfterValidator(_known_target)]
    model: str
    budget_usd: Decimal | None
    max_iters: int
    max_steps: int
    max_tokens: int
    max_minutes: float | None
    levels: str
    scale: float
    seed: int
    optimize: int
    out: str | None
    price_in: float | None
    price_out: float | None
    price_cache_read: float | None
    price_cache_write: float | None
    num_cpus: float
    num_gpus: float
    reference_steps_per_second: float | None


BUILTIN_DEFAULTS: dict[str, Any] = {
    "target": "jax",
    "max_iters": 20,
    "max_steps": 40,
    "max_tokens": 16000,
    "levels": "0-3",
    "scale": 1.0,
    "seed": 0,
    "optimize": 0,
    "num_cpus": 1.0,
    "num_gpus": 0.0,
}
REQUIRED = ("name", "ref", "model")


class Manifest(_Strict):
    path: Path
    name: str
    settings: BatchSettings
    jobs: tuple[JobEntry, ...]

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def state_dir(self) -> Path:
        return self.root / ".envforge"

    @property
    def db_path(self) -> Path:
        return self.state_dir / f"batch-{self.name}.sqlite"

    def resolve(self, relative: str) -> Path:
        path = Path(relative).expanduser()
        return path if path.is_absolute() else self.root / path


def _first_problem(error: ValidationError) -> tuple[str, str, Any]:
    problem = error.errors()[0]
    key = ".".join(str(part) for part in problem["loc"])
    expected = problem["msg"]
    if problem["type"] == "extra_forbidden":
        expected = "no such key (a typo?)"
    if problem["type"] == "missing":
        return key, "a value (required)", None
    expected = expected.removeprefix("Value error, ").removeprefix("Input should be ")
    return key, expected, problem.get("input")


def _validated(model: type[_Strict], data: Any, path: Path, where: str) -> Any:
    if not isinstance(data, dict):
        raise SpecError(path, where, "a table", data)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        key, expected, got = _first_problem(e)
        raise SpecError(path, f"{where}.{key}", expected, got) from None


def load_manifest(path: str | Path) -> Manifest:
    """Read and validate a manifest; raises SpecError/BadInput (exit 2) on any problem."""
    path = Path(path).resolve()
    try:
        data = load_toml(path, "manifest")
    except InputFileError as e:
        if e.reason == "not found":
            raise BadInput(f"manifest not found: {path}") from None
        raise
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{path}: not valid TOML: {e}") from None
    unknown = sorted(set(data) - {"batch", "defaults", "job"})
    if unknown:
        raise SpecError(path, unknown[0], "one of [batch], [defaults], [[job]]")
    if "batch" not in data:
        raise SpecError(path, "batch", "a [batch] table with total_budget_usd")
    settings: BatchSettings = _validated(BatchSettings, data["batch"], path, "batch")
    name = settings.name or path.stem
    if not bounds.is_name(name):
        raise SpecError(path, "batch.name", NAME_RULE, name)
    defaults: JobFields = _validated(JobFields, data.get("defaults", {}), path, "defaults")
    if defaults.name is not None:
        raise SpecError(path, "defaults.name", "no name in [defaults] (each job names itself)")
    raw_jobs = data.get("job", [])
    if not isinstance(raw_jobs, list) or not raw_jobs:
        raise SpecError(path, "job", "at least one [[job]] table")
    jobs: list[JobEntry] = []
    for index, raw in enumerate(raw_jobs, 1):
        where = f"job[#{index}]"
        if (
            isinstance(raw, dict)
            and isinstance(raw.get("name"), str)
            and bounds.is_name(raw["name"])
        ):
            where = f"job[{raw['name']}]"
        fields: JobFields = _validated(JobFields, raw, path, where)
        jobs.append(_merge(path, where, fields, defaults))
    names = [job.name for job in jobs]
    for job in jobs:
        if names.count(job.name) > 1:
            raise SpecError(path, f"job[{job.name}].name", "a name no other job has")
    return Manifest(path=path, name=name, settings=settings, jobs=tuple(jobs))


def _merge(path: Path, where: str, fields: JobFields, defaults: JobFields) -> JobEntry:
    given = fields.model_dump(exclude_none=True)
    merged = {**BUILTIN_DEFAULTS, **defaults.model_dump(exclude_none=True), **given}
    for key in REQUIRED:
        if key not in merged:
            raise SpecError(path, f"{where}.{key}", "a value (in the job or in [defaults])")
    if not bounds.is_name(merged["name"]):
        raise SpecError(path, f"{where}.name", NAME_RULE, merged["name"])
    try:
        parse_levels(merged["levels"])
    except BadInput:
        raise SpecError(
            path, f"{where}.levels", "levels like '0-3' or '1,3'", merged["levels"]
        ) from None
    if not [lv for lv in parse_levels(merged["levels"]) if lv < 4]:
        raise SpecError(path, f"{where}.levels", "some of levels 0-3 (4 is added after them)")
    has_in, has_out = "price_in" in merged, "price_out" in merged
    if has_in != has_out:
        raise SpecError(path, f"{where}.price_out", "price_in and price_out together, or neither")
    full = {key: merged.get(key) for key in JobEntry.model_fields}
    return JobEntry.model_validate(full)
