"""One door for untrusted code: every path that imports, builds, runs or
times a port goes through the sandbox the user chose, and the host trusts no number it says.

Each case is a hostile port (the pong JAX port with code run when it is imported) that reads a
0600 secret file, writes a marker outside its folder and, for the throughput, registers an
``atexit`` hook that prints a huge measurement as the last line. Driven through L4's training
(case 1), the MCP server's ``bench`` tool (case 2) and the ``--optimize`` measurement (case 3),
in the process and docker sandboxes: the secret is in no reply, no marker is on the host, and
the figure is the host's own timing. The last tests keep the door the only one: a walk over
the source tree's ``ast`` (with a small broken package it must catch).
"""

from __future__ import annotations

import ast
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from envforge.sandbox.confine import probe
from envforge.sandbox.docker import docker_available
from envforge.spec import spec_for_name
from envforge.translate.orchestrate import RepairConfig, RepairLoop
from envforge.translate.throughput import Throughput
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
from envforge.workspace.write import load_config, write_workspace

ROOT = Path(__file__).resolve().parents[2]
PONG_PORT = ROOT / "generated/pong/jax/pong.py"
DOCKER = pytest.mark.skipif(not docker_available(), reason="no docker engine")
KINDS = ["process", pytest.param("docker", marks=DOCKER)]
HUGE = 1e18
IN_TRAINER = '"envforge.train.ppo" in _s.modules'
"""True only where L4's trainer imports the port (the driver server does not import it)."""


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "process" and not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")
    return str(request.param)


def secret_file(folder: Path) -> tuple[Path, str]:
    folder.mkdir(parents=True, exist_ok=True)
    marker = "the-secret-is-" + uuid.uuid4().hex
    path = folder / "secret.txt"
    path.write_text(marker + "\n")
    path.chmod(0o600)
    return path, marker


def hostile_port(
    folder: Path, secret: Path, marker: Path, when: str = "True", then: str = ""
) -> Path:
    """The pong JAX port with hostile code run at import (when ``when`` holds): it reads
    ``secret``, writes ``marker`` (with what it read), prints the secret, registers an atexit
    hook printing a huge throughput, then runs ``then``."""
    code = f"""
import atexit as _a, sys as _s
if {when}:
    try:
        _leak = open({str(secret)!r}).read().strip()
    except OSError as _e:
        _leak = "unreadable: " + type(_e).__name__
    try:
        open({str(marker)!r}, "w").write(_leak)
    except OSError:
        pass
    print("Measured:", _leak, flush=True)
    _line = '{{"steps_per_second": {HUGE}, "batch": 1, "steps": 1, "device": "cpu", "compile_s": 0}}'
    _a.register(print, _line)
    {then or "pass"}
"""
    future = "from __future__ import annotations\n"
    source = PONG_PORT.read_text()
    assert source.count(future) == 1
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pong.py").write_text(source.replace(future, future + code.strip() + "\n"))
    return folder


# ---- case 1: L4 trains on the port in the chosen sandbox -----------------------------------


def test_l4_trains_on_the_port_inside_the_sandbox(tmp_path: Path, kind: str) -> None:
    secret, told = secret_file(tmp_path / "private")
    marker = tmp_path / "marker.txt"
    then = 'raise RuntimeError("trainer imported the port: " + _leak)'
    port = hostile_port(tmp_path / "port", secret, marker, IN_TRAINER, then)
    options = VerifyOptions(sandbox=kind, timeout_s=60)
    report = verify(spec_for_name("pong"), port, [4], options)
    text = str(report.to_dict())
    level = report.levels[0]
    assert level.status == "error" and "trainer imported the port" in text  # it did run
    assert "unreadable" in text  # where it ran, the secret was not there to read
    assert told not in text
    assert not marker.exists()


# ---- case 2: the MCP server's bench tool ------------------------------------------------------


def test_mcp_bench_runs_the_port_in_the_servers_sandbox(tmp_path: Path, kind: str) -> None:
    from envforge.mcp.server import VerifierSession

    secret, told = secret_file(tmp_path / "private")
    marker = tmp_path / "marker.txt"
    ws = write_workspace(spec_for_name("pong"), "jax", tmp_path / "ws").root
    session = VerifierSession(load_config(ws), kind)
    hostile_port(session.config.port_path(), secret, marker)
    reply = session.bench(16)
    assert "port: " in reply and f"({kind} sandbox;" in reply, reply
    assert "reference: " in reply and "steps/s" in reply
    assert told not in reply and "1,000,000,000,000,000,000" not in reply
    assert not marker.exists()


# ---- case 3: the optimize measurement ---------------------------------------------------------


def test_optimize_throughput_is_the_hosts_timing_in_the_chosen_sandbox(
    tmp_path: Path, kind: str
) -> None:
    secret, _ = secret_file(tmp_path / "private")
    marker = tmp_path / "marker.txt"
    port = hostile_port(tmp_path / "port", secret, marker)
    # the translate loop's own measurer, configured as `translate --sandbox <kind>` configures it
    loop = SimpleNamespace(config=RepairConfig(verify=VerifyOptions(sandbox=kind)))
    measured = RepairLoop.measure(loop, spec_for_name("pong"), port, 16)  # type: ignore[arg-type]
    assert isinstance(measured, Throughput), measured
    assert measured.device == f"{kind} sandbox"
    assert 0 < measured.steps_per_second < 1e10  # a 2-core machine, not the port's word
    assert not marker.exists()


# ---- the door stays the only one: a rule over the source tree --------------------------------

PORT_RUNNERS = {
    "load_module": "imports a Python file",
    "load_port": "imports a JAX port",
    "exec_module": "executes a module",
    "spec_from_file_location": "imports a file",
    "build_driver": "builds a driver in this process (imports or compiles its code)",
    "compile_step": "compiles a driver's code in this process",
    "open_driver": "opens a driver unsandboxed (in this process or a plain child)",
    "IsolatedDriver": "runs a driver in a plain child process",
    "serve_recipe": "builds and serves a driver",
    "build_extension": "runs cargo on a crate",
    "JaxDriver": "imports a JAX port",
    "RustDriver": "builds and loads a Rust port",
    "train_port_isolated": "trains on a port in a plain child process",
    "trained_payload": "imports a port and trains on it",
    "measure_jax": "imports a JAX port and runs it",
    "measure_rust": "builds and runs a Rust port",
    "_job_jax": "a bench job that imports a JAX port (handed to a runner)",
    "_job_rust": "a bench job that builds a Rust port (handed to a runner)",
    "_job_profile": "a profile job that imports a JAX port (handed to a runner)",
    "_job_profile_rust": "a profile job that builds and steps a Rust port (handed to a runner)",
    "load_code": "imports a target's code (driver, build step, bench job: envforge/targets)",
    "load_ref": "imports the code a target names (envforge/targets)",
    "CPortDriver": "compiles and loads a C port",
    "measure_c_loop": "compiles and runs a C implementation in a timed loop",
    "time_driver": "times a driver's calls on the host (a port's must come from open_sandboxed)",
}
"""Calls that import, build or run an implementation's code where they are made."""

ALLOWED = {
    # the server side: code that runs inside a sandbox (or in the plain child of --sandbox none)
    ("backends/recipe.py", "build_driver"): "the one place that builds drivers",
    ("backends/recipe.py", "load_code"): "build_driver and compile_step, in the driver's server",
    ("backends/recipe.py", "IsolatedDriver"): "open_driver: --sandbox none and references",
    ("backends/isolated.py", "build_driver"): "serve_recipe: the driver server's body",
    ("backends/isolated.py", "compile_step"): "serve_recipe: the driver server's body",
    ("backends/jax.py", "load_module"): "JaxDriver, built only by build_driver",
    ("backends/jax.py", "exec_module"): "load_module",
    ("backends/jax.py", "spec_from_file_location"): "load_module",
    ("backends/python.py", "load_module"): "a Python reference's driver (build_driver)",
    ("backends/rust.py", "build_extension"): "RustDriver, built only by build_driver",
    ("backends/rust.py", "spec_from_file_location"): "RustDriver loads the built extension",
    ("backends/rust.py", "exec_module"): "RustDriver loads the built extension",
    ("bench/rust_loop.py", "RustDriver"): "measure_rust, in a bench job (sandboxed by suite.py)",
    ("sandbox/serve.py", "serve_recipe"): "the sandboxed driver server",
    ("sandbox/driver.py", "open_driver"): "--sandbox none: open_sandboxed without one",
    ("train/port_env.py", "load_module"): "load_port",
    ("train/child.py", "load_port"): "trained_payload: run as a sandboxed job (sandbox/jobs.py)",
    ("train/child.py", "trained_payload"): "the plain child of --sandbox none and envforge train",
    ("bench/jax_loop.py", "load_module"): "load_port, in a bench job (sandboxed by suite.py)",
    ("bench/jax_loop.py", "load_port"): "measure_jax, in a bench job",
    ("bench/suite.py", "load_port"): "_job_jax: run as a sandboxed job (sandbox/jobs.py)",
    ("bench/suite.py", "measure_jax"): "_job_jax: run as a sandboxed job",
    ("bench/suite.py", "measure_rust"): "_job_rust: run as a sandboxed job",
    ("bench/profile.py", "load_port"): "_job_profile: run as a sandboxed job (sandbox/jobs.py)",
    # --sandbox none: the user chose a plain child process (only under `if sandbox is None`)
    ("verify/level4_transfer.py", "train_port_isolated"): "--sandbox none: L4's trainer",
    ("bench/suite.py", "load_ref"): "--sandbox none: a bench job in a spawned process",
    ("bench/profile.py", "_job_profile"): "--sandbox none: a profile job, spawned",
    ("bench/profile_rust.py", "RustDriver"): "_job_profile_rust: run as a sandboxed job",
    ("bench/profile_rust.py", "_job_profile_rust"): "--sandbox none: a profile job, spawned",
    # the reference side: our own code, or the user's reference (init, a spec's hooks)
    ("verify/runner.py", "open_driver"): "the reference",
    ("verify/strategies.py", "load_module"): "a spec's own [verify] hook file",
    ("backends/reference_check.py", "open_driver"): "the reference",
    ("init/selfcheck.py", "build_driver"): "the reference (init's self-check)",
    ("mcp/server.py", "open_driver"): "the reference, beside the sandboxed port",
    ("commands/rules.py", "open_driver"): "the reference the rule cases run on first",
    (
        "commands/profile.py",
        "load_code",
    ): "a target's profiler (it runs the port as a sandboxed job)",
    ("rules/versions.py", "open_driver"): "the reference side of two versions compared",
    ("mutate/sweep_plan.py", "build_driver"): "the reference's sweep digests",
    ("mutate/sweep_plan.py", "open_driver"): "the reference's sweep digests",
    # the deliberate exception: a user's own port, in the user's own process
    ("envs/make.py", "load_port"): "envforge.make (documented exception)",
    ("envs/make.py", "load_code"): "envforge.make (documented exception)",
    ("backends/c_port_batch.py", "CPortDriver"): "envforge.make of a C port (documented exception)",
    ("bench/c_port_loop.py", "measure_c_loop"): "job_c_port, a bench job (sandboxed by suite.py)",
    ("bench/suite.py", "measure_c_loop"): "the reference's C loop",
    # the host side of a target, which runs no port code: its tool check, its dependency fetch
    ("targets/registry.py", "load_ref"): "Target.load_code, whose every call is listed here",
    (
        "translate/preflight.py",
        "load_code",
    ): "a target's preflight: tools on the host, no port code",
    ("sandbox/driver.py", "load_code"): "a target's host_prepare (cargo fetch: no build script)",
    ("envs/batches.py", "RustDriver"): "envforge.make of a Rust port (documented exception)",
    ("commands/train.py", "load_port"): "envforge train (documented exception)",
    ("commands/train.py", "open_driver"): "envforge train (documented exception)",
    ("translate/throughput.py", "time_driver"): "measure_sandboxed: the port by open_sandboxed",
    ("mcp/server.py", "time_driver"): "the reference, timed beside the sandboxed port",
    ("bench/train_sides.py", "load_port"): "envforge train --time-split, train_speed.py: as train",
    ("bench/train_sides.py", "open_driver"): "the reference (train_speed.py, --time-split)",
}
REFERENCE_ONLY = {
    key
    for key, why in ALLOWED.items()
    if why.startswith(("the reference", "a spec's", "a Python reference"))
}
"""Entries for the reference side: a call there whose arguments name a port is refused."""
NONE_ONLY = {key for key, why in ALLOWED.items() if why.startswith("--sandbox none")}
"""Entries allowed only inside ``if <...sandbox...> is None:`` (the user chose no sandbox)."""


def _under_no_sandbox(parents: dict[ast.AST, ast.AST], node: ast.AST) -> bool:
    """Is ``node`` in the body of an ``if`` that tests a ``...sandbox...`` for ``is None``?"""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.If) and child in parent.body:
            for test in ast.walk(parent.test):
                if (
                    isinstance(test, ast.Compare)
                    and isinstance(test.ops[0], ast.Is)
                    and isinstance(test.comparators[0], ast.Constant)
                    and test.comparators[0].value is None
                    and "sandbox" in ast.unparse(test.left)
                ):
                    return True
        child, parent = parent, parents.get(parent)
    return False


def port_runner_calls(package: Path) -> list[tuple[str, str, int, bool, bool]]:
    """(module relative to ``package``, primitive, line, whether its arguments name a port,
    whether it is under ``if ...sandbox... is None``) for every call of a PORT_RUNNERS name
    under ``package`` (and every reference to a bench job's function)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func, args = node.func, [*node.args, *(k.value for k in node.keywords)]
            elif isinstance(node, ast.Name) and node.id.startswith("_job_"):
                func, args = node, []
                if isinstance(parents.get(node), ast.Call) and parents[node].func is node:
                    continue  # counted as the call
            else:
                continue
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name not in PORT_RUNNERS:
                continue
            words = [
                n.id if isinstance(n, ast.Name) else n.attr
                for arg in args
                for n in ast.walk(arg)
                if isinstance(n, ast.Name | ast.Attribute)
            ]
            names_port = any("port" in w.lower() for w in words)
            guarded = _under_no_sandbox(parents, node)
            module = path.relative_to(package).as_posix()
            found.append((module, name, node.lineno, names_port, guarded))
    return found


def door_violations(package: Path) -> list[str]:
    problems = []
    for module, name, line, names_port, guarded in port_runner_calls(package):
        key, where = (module, name), f"{module}:{line}: {name}"
        if key not in ALLOWED:
            problems.append(f"{where} {PORT_RUNNERS[name]} outside the door")
        elif key in REFERENCE_ONLY and names_port:
            problems.append(f"{where} is allowed for the reference, given a port")
        elif key in NONE_ONLY and not guarded:
            problems.append(f"{where} is allowed only when no sandbox was chosen")
    return problems


def test_no_module_runs_a_port_outside_the_sandboxs_door() -> None:
    package = ROOT / "envforge"
    assert door_violations(package) == []
    seen = {(module, name) for module, name, *_ in port_runner_calls(package)}
    assert sorted(set(ALLOWED) - seen) == []  # every allowance still needed (none stale)


def test_the_door_rule_catches_a_port_run_outside_it(tmp_path: Path) -> None:
    package = tmp_path / "envforge"
    (package / "bench").mkdir(parents=True)
    (package / "verify").mkdir()
    (package / "bench" / "quick.py").write_text(
        "from envforge.backends.recipe import open_driver, port_recipe\n"
        "def quick(spec, port):\n"
        "    return open_driver(port_recipe(spec, port)).run_steps(8, 8, 0)\n"
    )
    (package / "verify" / "runner.py").write_text(
        "def open_both(spec, port, ref_recipe, port_recipe):\n"
        "    return open_driver(ref_recipe), open_driver(port_recipe)\n"
    )
    (package / "mcp").mkdir()
    (package / "mcp" / "server.py").write_text(
        "def bench(session, port):\n    return time_driver(session.driver(port), 8, 8, 'x')\n"
    )
    (package / "verify" / "level4_transfer.py").write_text(
        "def train_on_port(ctx, sandbox, port):\n"
        "    if sandbox is None:\n"
        "        return train_port_isolated(port)\n"
        "    return train_port_isolated(port)\n"
    )
    assert door_violations(package) == [
        "bench/quick.py:3: open_driver opens a driver unsandboxed (in this process or a plain "
        "child) outside the door",
        "mcp/server.py:2: time_driver is allowed for the reference, given a port",
        "verify/level4_transfer.py:4: train_port_isolated is allowed only when no sandbox was "
        "chosen",
        "verify/runner.py:2: open_driver is allowed for the reference, given a port",
    ]


@pytest.mark.slow  # 1.5-2 minutes on a loaded 2-core machine (JAX tracing in the sandbox)
def test_l4_policy_trained_in_the_sandbox_comes_back_as_plain_data() -> None:
    # a small budget: the point is the path (sandboxed job, allow-listed reply, Policy rebuilt)
    spec = spec_for_name("cartpole")
    spec = spec.model_copy(update={"l4": {**spec.l4, "total_timesteps": 2048, "seeds": 2}})
    options = VerifyOptions(sandbox="process", scale=0.05)  # the fewest episodes
    report = verify(spec, ROOT / "generated/cartpole/jax", [4], options)
    level = report.levels[0]
    assert level.status in ("pass", "inconclusive"), level.summary  # a verdict, not an error
    training = level.stats["directions"][0]["training"]
    assert training["env_steps"] >= 2 * 2048 and training["train_s"] > 0


def test_make_and_train_say_they_are_the_exception() -> None:
    from typer.testing import CliRunner

    from envforge.cli import app
    from envforge.envs.make import make

    shown = CliRunner().invoke(app, ["train", "--help"], terminal_width=200).output
    assert "Not sandboxed: the port runs in this process" in shown
    assert "Not sandboxed" in (make.__doc__ or "")


@pytest.mark.slow  # 23 s on a loaded 2-core machine (measures the machine twice, compiles the port)
def test_envforge_bench_runs_the_port_inside_the_sandbox(tmp_path: Path) -> None:
    from envforge.bench.measure import BenchSettings
    from envforge.bench.suite import run_bench
    from envforge.sandbox.select import open_sandbox

    if not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")
    secret, told = secret_file(tmp_path / "private")
    marker = tmp_path / "marker.txt"
    port = hostile_port(tmp_path / "port", secret, marker)
    settings = BenchSettings(
        batch_sizes=(16,), repeats=1, min_run_s=0.05, policies=("random",), reset_modes=("fresh",)
    )
    report = run_bench(
        spec_for_name("pong"), settings, [("jax", port)], sandbox=open_sandbox("process")
    )
    assert any(
        m.role == "port" and m.implementation.startswith("jax port") for m in report.measurements
    )
    assert told not in str(report.to_dict())
    assert not marker.exists()


# ---- the job channel: plain data only, within its time ---------------------------------------


def test_a_sandboxed_job_sends_back_plain_data_only_and_within_its_time(tmp_path: Path) -> None:
    from envforge.errors import ContractViolation, DriverRaised, DriverTimeout
    from envforge.sandbox.jobs import run_job
    from envforge.sandbox.select import open_sandbox

    if not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")
    sandbox = open_sandbox("process")
    assert sandbox is not None

    def job(target: str, *args: object, timeout_s: float = 60) -> object:
        return run_job(sandbox, target, args, readable=(), timeout_s=timeout_s, what="job")

    assert job("math:hypot", 3.0, 4.0) == 5.0
    with pytest.raises(ContractViolation, match="forbidden object pathlib"):
        job("pathlib:Path", "/")  # an object whose unpickling would call code on the host
    with pytest.raises(DriverRaised, match="raised ValueError"):
        job("math:sqrt", -1.0)
    with pytest.raises(DriverTimeout, match="did not finish within 3 s"):
        job("time:sleep", 60.0, timeout_s=3)
