"""Verification reports and throughput measurements, remembered by what they depend on.

A resumed job re-runs its iterations from the call log; its verifications are answered from
the batch store by (envforge version, spec and reference sources, port files, levels, options)
instead of being run again. The remembered answer is also what keeps the replay exact: the
repair prompt built from it is the one the first run sent.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from dataclasses import asdict
from pathlib import Path

from envforge import __version__
from envforge.batch.gate import Channel, ProgressUpdate
from envforge.prompts.sources import reference_sources
from envforge.spec import EnvSpec
from envforge.translate.orchestrate import Measurer, Verifier
from envforge.translate.throughput import Throughput
from envforge.untrusted.port_files import list_port
from envforge.verify.context import VerifyOptions
from envforge.verify.verdict import Report


def port_digest(port_dir: Path) -> str:
    """Content hash of a port folder (paths and bytes; caches and build output skipped)."""
    digest = hashlib.sha256()
    listed = list_port(port_dir, follow_root=False)  # regular files: no link, no FIFO read
    for name in listed.names:
        digest.update(name.encode() + b"\0" + (listed.read_bytes(name, 1 << 30) or b"") + b"\0")
    for refused in listed.refused:
        digest.update(refused.line().encode() + b"\0")
    return digest.hexdigest()


def spec_digest(spec: EnvSpec) -> str:
    digest = hashlib.sha256(spec.model_dump_json().encode())
    for source in reference_sources(spec):
        digest.update(source.name.encode() + b"\0" + source.text.encode() + b"\0")
    return digest.hexdigest()


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps([__version__, *parts], default=str).encode()).hexdigest()


def passed_prefix(report: Report) -> int | None:
    """The highest level of the run of passing levels the report starts with."""
    best = None
    for level in report.levels:
        if level.status != "pass":
            break
        best = level.level
    return best


class CachedVerifier:
    """A Verifier that asks the batch store first and remembers what it had to run."""

    def __init__(self, channel: Channel, job: str, verify: Verifier) -> None:
        self.channel = channel
        self.job = job
        self.verify = verify
        self.hits = 0
        self._spec_digests: dict[str, str] = {}

    def __call__(
        self, spec: EnvSpec, port_dir: Path, levels: list[int], options: VerifyOptions
    ) -> Report:
        if spec.name not in self._spec_digests:
            self._spec_digests[spec.name] = spec_digest(spec)
        # the folder is part of the key: reports name it, and prompts must not see another job's
        key = _key(
            self._spec_digests[spec.name], str(port_dir), port_digest(port_dir), levels,
            asdict(options),
        )  # fmt: skip
        remembered = self.channel.memo_get("verify", key)
        if remembered is not None:
            self.hits += 1
            report: Report = pickle.loads(remembered)
        else:
            activity = f"verifying L{','.join(str(lv) for lv in levels)}"
            self.channel.progress(self.job, ProgressUpdate(activity=activity))
            report = self.verify(spec, port_dir, levels, options)
            self.channel.memo_put("verify", key, pickle.dumps(report))
        self.channel.progress(self.job, ProgressUpdate(level=passed_prefix(report)))
        return report


def cached_measurer(channel: Channel, measure: Measurer) -> Measurer:
    """A Measurer that measures a given port (by content) once per batch."""

    def measured(spec: EnvSpec, port_dir: Path, batch: int) -> Throughput | str:
        key = _key(spec.name, str(port_dir), port_digest(port_dir), batch)
        remembered = channel.memo_get("throughput", key)
        if remembered is not None:
            result: Throughput | str = pickle.loads(remembered)
            return result
        result = measure(spec, port_dir, batch)
        channel.memo_put("throughput", key, pickle.dumps(result))
        return result

    return measured
