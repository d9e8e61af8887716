"""envforge's verifier as a Model Context Protocol server (stdio), for agent CLIs.

Tools: ``verify`` (levels, scale) runs the verifier on the workspace's port and keeps the
report; ``repair_prompt`` turns the latest report's most localized finding into the next
repair prompt; ``latest_report`` is that report as JSON; ``spec`` and ``reference`` show the
env spec and the reference source; ``bench`` measures steps/s of the port (in the server's
sandbox) beside the reference, each timed by the server around driver calls. The latest
report is also written to ``.envforge/last-report.json`` in the workspace, so a restarted
server (agent CLIs start one per session) still has it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from envforge.errors import EnvforgeError
from envforge.prompts import render as prompts
from envforge.prompts.sources import SourceFile, reference_sources
from envforge.untrusted.input_files import TOML_BYTES, read_text
from envforge.untrusted.port_files import list_port, read_regular
from envforge.verify.context import VerifyOptions
from envforge.verify.levels import DEFAULT_LEVELS, LEVELS, parse_levels
from envforge.verify.runner import verify
from envforge.verify.verdict import Report
from envforge.workspace.next_prompt import PACKAGE_ROOT, levels_text, next_repair_prompt
from envforge.workspace.pinned import COPY, check_pin, load_pin, shown_in_workspace
from envforge.workspace.write import WorkspaceConfig

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

REPORT_FILE = Path(".envforge") / "last-report.json"
LEVELS_LINE = ", ".join(f"{lv.number} {lv.name} ({lv.question})" for lv in LEVELS)
"""The levels as the verify tool describes them (``envforge/verify/levels.py``)."""
BENCH_STEPS = 100
"""Batched steps per timed call of the ``bench`` tool."""
INSTRUCTIONS = (
    "envforge verifies a port of a reinforcement-learning environment against its reference. "
    f"Call verify (levels '0' first, then '{DEFAULT_LEVELS}'); while the port is not equivalent, "
    "repair_prompt says what differs and which reference and port lines assign it."
)


class VerifierSession:
    """The workspace being verified and its latest report (verify calls run one at a time)."""

    def __init__(self, config: WorkspaceConfig, sandbox: str | None) -> None:
        self.config = config
        self.pin = load_pin(config.root) if config.pinned else None
        self.spec = config.load_spec()
        self.sandbox = sandbox
        self.roots = [config.root, self.spec.root.parent.parent, PACKAGE_ROOT]
        self._lock = threading.Lock()

    def _shown(self, text: str) -> str:
        """Paths as the agent knows them: the real reference as its copy, the rest relative."""
        if self.pin is not None:
            text = shown_in_workspace(text, self.pin)
        return prompts.scrub_paths(text, self.roots)

    def _unedited(self) -> None:
        """Refuse (WorkspaceEdited) a workspace whose reference copy is not what envforge wrote."""
        if self.pin is not None:
            check_pin(self.pin)

    @property
    def report_path(self) -> Path:
        return self.config.root / REPORT_FILE

    def verify(self, levels: str, scale: float) -> str:
        try:
            wanted = parse_levels(levels)
            if not scale > 0:
                return "error: scale must be positive (1.0 = the spec's counts, 0.2 = quick)"
            options = VerifyOptions(scale=scale, sandbox=self.sandbox)
            with self._lock:
                self._unedited()
                report = verify(self.spec, self.config.port_path(), wanted, options)
        except EnvforgeError as e:  # bad levels, no port yet: the agent can act on the line
            return f"error: {self._shown(str(e))}"
        self.report_path.parent.mkdir(exist_ok=True)
        self.report_path.write_text(json.dumps(report.to_dict(), indent=2))
        return self._shown(prompts.verify_result(report, [self.config.root]))

    def latest(self) -> Report | None:
        data = read_regular(self.report_path, 64 << 20)  # no link, no FIFO: the agent's folder
        return Report.from_dict(json.loads(data)) if data is not None else None

    def repair_prompt(self) -> str:
        report = self.latest()
        if report is None:
            return "No report yet: call verify first."
        levels = levels_text(report.requested) if report.requested else self.config.levels
        return self._shown(
            next_repair_prompt(
                report,
                self.spec,
                self.config.port_path(),
                levels,
                'verify(levels="{levels}")',
                [self.config.root],
                follow_port=False,  # the workspace's port/ is the agent's: never through a link
            )
        )

    def latest_report(self) -> str:
        report = self.latest()
        if report is None:
            return "No report yet: call verify first."
        return self._shown(json.dumps(report.to_dict(), indent=2))

    def spec_text(self) -> str:
        """The spec as the agent's copy holds it (checked unedited, read without following a
        link), or the spec a workspace-less server was started with."""
        try:
            if self.pin is None:
                return read_text(self.config.spec_path(), "spec", TOML_BYTES)
            self._unedited()
            text = list_port(self.config.root / COPY, follow_root=False).read_text("env.toml")
            return text if text is not None else "error: reference/env.toml cannot be read"
        except EnvforgeError as e:
            return f"error: {self._shown(str(e))}"

    def reference_text(self) -> str:
        """The real reference's sources (what is verified against), named as the agent's copy."""
        try:
            self._unedited()
            sources = reference_sources(self.spec)
        except EnvforgeError as e:
            return f"error: {self._shown(str(e))}"
        return self._shown(
            "\n\n".join(f"### {self._label(s)}\n\n{s.text.rstrip()}" for s in sources)
        )

    def _label(self, source: SourceFile) -> str:
        if self.pin is None or source.path is None:
            return source.name
        if source.library is not None:
            return f"{COPY}/{source.library}"
        return shown_in_workspace(str(source.path.resolve()), self.pin)

    def bench(self, batch_size: int) -> str:
        """Steps/s of the port (in the server's sandbox) and of the reference, each timed by
        this process around one driver call of random batched steps: nothing the port prints
        or returns is read as a number."""
        from envforge.backends.recipe import open_driver, reference_recipe
        from envforge.translate.throughput import measure_sandboxed, time_driver

        if batch_size < 1:
            return "error: batch_size must be positive"
        steps = BENCH_STEPS
        try:
            port = self.config.port_path()
            with self._lock:
                self._unedited()
                ported = measure_sandboxed(self.spec, port, batch_size, steps, self.sandbox)
                reference = time_driver(
                    open_driver(reference_recipe(self.spec)), batch_size, steps, "reference"
                )
        except EnvforgeError as e:
            return f"error: {self._shown(str(e))}"
        lines = [
            f"Environment steps per second at batch {batch_size}, uniform random actions, "
            f"{steps} steps per call timed by the verifier (compile excluded):"
        ]
        for name, result in (("port", ported), ("reference", reference)):
            if isinstance(result, str):
                lines.append(f"  {name}: {result}")
            else:
                lines.append(
                    f"  {name}: {result.steps_per_second:,.0f} steps/s ({result.device}; "
                    f"first call, with compiling: {result.compile_s:.1f} s)"
                )
        if not isinstance(ported, str) and not isinstance(reference, str):
            ratio = ported.steps_per_second / max(reference.steps_per_second, 1e-9)
            lines.append(f"  port / reference: {ratio:.2f}x")
        return self._shown("\n".join(lines))


def build_server(session: VerifierSession) -> MCPServer:
    """The MCP server over ``session`` (``mcp`` is imported here: only this command needs it)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(
        name="envforge", instructions=INSTRUCTIONS, log_level="WARNING", version="0.1.0"
    )
    config = session.config

    @server.tool(
        description=f"Run envforge's verifier on the port ({config.port}) against the reference "
        f"({config.env}). levels: {LEVELS_LINE}; '0' first, then '{config.levels}'; "
        "scale: example/episode counts (1.0 full, 0.2 quick). Returns "
        "the verdict, each level's status and the first finding."
    )
    def verify(levels: str = config.levels, scale: float = 1.0) -> str:
        return session.verify(levels, scale)

    @server.tool(
        description="The next repair prompt from the latest verify report: its most localized "
        "finding with the reference and port lines that assign the differing fields."
    )
    def repair_prompt() -> str:
        return session.repair_prompt()

    @server.tool(description="The latest verify report as JSON (every level and finding).")
    def latest_report() -> str:
        return session.latest_report()

    @server.tool(description="The env spec (env.toml): canonical state fields, spaces, RNG mode.")
    def spec() -> str:
        return session.spec_text()

    @server.tool(description="The reference implementation's source, file by file.")
    def reference() -> str:
        return session.reference_text()

    @server.tool(
        description="Environment steps per second of the port and of the reference at one "
        "batch size, measured side by side (takes a minute or more)."
    )
    def bench(batch_size: int = 4096) -> str:
        return session.bench(batch_size)

    return server
