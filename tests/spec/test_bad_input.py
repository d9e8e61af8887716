"""Bad input at the command line: exit code 2 and one clear line on stderr. A port that breaks
the contract or raises is not bad input: it is a verdict (exit 1) with a finding."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PONG_PORT, PONG_SPEC, ROOT, apply_patch, run_cli

from envforge.cli import __file__ as CLI_FILE


def envforge(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "envforge.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def assert_bad_input(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    [line] = lines
    assert line.startswith("envforge: error: "), line
    for needle in needles:
        assert needle in line, line
    return line


def reference_with_spec(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of pong.c with pong's env.toml beside it, edited (exact, unique match)."""
    text = PONG_SPEC.read_text()
    assert text.count(old) == 1
    (tmp_path / "env.toml").write_text(text.replace(old, new))
    ref = tmp_path / "pong.c"
    ref.write_text((PONG_SPEC.parent / "pong.c").read_text())
    return ref


def test_missing_reference_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "pong.c"
    assert_bad_input(envforge("verify", "--ref", str(missing)), "reference not found", str(missing))


def test_missing_spec_file(tmp_path: Path) -> None:
    missing = tmp_path / "env.toml"
    assert_bad_input(
        envforge("verify", "--ref", str(PONG_SPEC.parent / "pong.c"), "--spec", str(missing)),
        str(missing),
    )


def test_missing_port(tmp_path: Path) -> None:
    assert_bad_input(
        envforge("verify", "pong", "--port", str(tmp_path / "no_port")), "port not found"
    )


@pytest.mark.parametrize(
    ("old", "new", "needles"),
    [
        ("episode_cap = 10000", "episode_cap = = 10000", ["(syntax)", "valid TOML"]),
        ("episode_cap = 10000", 'episode_cap = "ten"', ["'episode_cap'", "integer", "'ten'"]),
        (
            "episode_cap = 10000",
            "episode_cap = 10000\nepisod_cap = 1",
            ["'episod_cap'", "no such key"],
        ),
    ],
    ids=["toml_syntax", "wrong_type", "unknown_key"],
)
def test_malformed_spec(tmp_path: Path, old: str, new: str, needles: list[str]) -> None:
    ref = reference_with_spec(tmp_path, old, new)
    line = assert_bad_input(envforge("verify", "--ref", str(ref)), *needles)
    assert str(tmp_path / "env.toml") in line


def test_unknown_env_name() -> None:
    assert_bad_input(envforge("verify", "pongg"), "unknown env 'pongg'", "pong")


@pytest.mark.parametrize("levels", ["0-9", "one", "3-1"])
def test_bad_levels(levels: str) -> None:
    assert_bad_input(envforge("verify", "pong", "--levels", levels), "--levels", repr(levels))


def verify_json(tmp_path: Path, *edits: tuple[str, str], extra: tuple[str, ...] = ()):
    port = apply_patch(PONG_PORT, tmp_path / "port", *edits)
    result = envforge(
        "verify",
        "--ref",
        str(PONG_SPEC.parent / "pong.c"),
        "--port",
        str(port.path),
        "--levels",
        "0-3",
        "--json",
        *extra,
    )
    return result.returncode, json.loads(result.stdout)


def test_port_with_wrong_shapes_fails_every_level(tmp_path: Path) -> None:
    """Each state field comes back with an extra axis. L0 names the contract item; with
    --all-levels the comparing levels fail on the contract too instead of crashing."""
    code, report = verify_json(
        tmp_path,
        (
            "    return state._asdict()",
            "    return {k: v[None] for k, v in state._asdict().items()}",
        ),
        extra=("--all-levels",),
    )
    assert code == 1
    assert report["verdict"] == "not equivalent"
    assert [lv["status"] for lv in report["levels"]] == ["fail"] * 4
    first = report["levels"][0]["findings"][0]
    assert first["check"] == "contract.reset"
    assert "has shape (1,), spec says ()" in first["message"]
    for level in report["levels"][1:]:
        [finding] = level["findings"]
        assert finding["check"] == "contract"
        assert finding["extra"]["side"] == "port"
        assert "spec says ()" in finding["message"]


def test_port_that_raises_is_an_error_verdict(tmp_path: Path) -> None:
    code, report = verify_json(
        tmp_path,
        (
            "    total = f32(0.0) + jnp.zeros((), jnp.float32)",
            '    raise NotImplementedError("frameskip")',
        ),
    )
    assert code == 1
    [level] = report["levels"]
    assert level["status"] == "error"
    [finding] = level["findings"]
    assert finding["check"] == "exception"
    # where it was raised: the port function holding the raise (verify/thrown.py)
    assert finding["extra"] == {"side": "port", "call": "step", "handler": "step"}
    assert "NotImplementedError: frameskip" in finding["message"]


def test_bad_seed_sweep() -> None:
    assert_bad_input(envforge("verify", "pong", "--seed-sweep", "2^40"), "--seed-sweep", "2^32")


# ---- the probe: bad input of every kind, in-process, rejected before any build or JIT ------
# Each row is one bad input a careless or hostile user could type. Every one must end with
# exit code 2, exactly one line on stderr starting "envforge: error: " (with the row's needle
# in it), and no traceback on either stream. They run in this process through cli.main (no
# interpreter start per row), and each is refused before a port is built or a JIT compiles.

PONG_C = str(PONG_SPEC.parent / "pong.c")
CARTPOLE_SPEC = str(ROOT / "references" / "cartpole" / "env.toml")
PONG_JAX = str(PONG_PORT.parent)
POINTER_STRUCT = "typedef struct { float *paddle_yl; } Pong;\n"
MANIFEST_HEAD = '[batch]\ntotal_budget_usd = 1\n[[job]]\nname = "a"\nmodel = "scripted:s.json"\n'


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files the rows name as ``{dir}/...``: broken references, specs, manifests, ledgers."""
    root = tmp_path_factory.mktemp("probe")
    spec_text = PONG_SPEC.read_text()
    pong_source = (PONG_SPEC.parent / "pong.c").read_text()

    def reference(folder: str, source: bytes, spec: str = spec_text) -> None:
        (root / folder).mkdir()
        (root / folder / "pong.c").write_bytes(source)
        (root / folder / "env.toml").write_text(spec)

    reference("pointer", POINTER_STRUCT.encode())
    reference("empty", b"")
    reference("binary", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    reference("latin1", "/* caf\xe9 */\n".encode("latin-1") + pong_source.encode())
    reference("no_member", pong_source.replace("uint32_t rng;", "uint32_t seed;").encode())
    reference("no_struct", b"int pong_reset(void) { return 0; }\n")
    reference("uncompilable", pong_source.replace("static uint32_t next_rng", "static ;").encode())

    def spec(folder: str, old: str, new: str) -> None:
        assert spec_text.count(old) == 1, old
        reference(folder, pong_source.encode(), spec_text.replace(old, new))

    spec("toml_syntax", "episode_cap = 10000", "episode_cap = = 1")
    spec("negative_timeout", "[c]", "[verify]\ntimeout_s = -1\n\n[c]")
    spec("infinite_timeout", "[c]", "[verify]\ntimeout_s = inf\n\n[c]")
    spec("zero_examples", "[c]", "[verify]\nl1_examples = 0\n\n[c]")
    spec("nan_alpha", "[c]", "[verify]\nalpha = nan\n\n[c]")
    spec("rust_reference", 'reference = "pong.c"', 'reference = "pong.rs"')
    spec("no_c_table", '[c]\nstruct = "Pong"\nprefix = "pong"', "")
    (root / "binary_toml").mkdir()
    (root / "binary_toml" / "env.toml").write_bytes(b"\xff\xfe\x00name = 1\x00\x80")
    (root / "empty_dir").mkdir()
    (root / "notes.txt").write_text("not a reference")
    (root / "python_ref").mkdir()  # file.py:Class with its env.toml beside it
    (root / "python_ref" / "cart.py").write_text(
        "from gymnasium.envs.classic_control.cartpole import CartPoleEnv as Cart\n"
    )
    (root / "python_ref" / "env.toml").write_text(
        Path(CARTPOLE_SPEC).read_text().replace('"gymnasium:CartPole-v1"', '"cart.py:Cart"')
    )
    (root / "garbage.sqlite").write_bytes(bytes(range(256)) * 8)
    (root / "s.json").write_text(json.dumps([{"text": "never asked"}]))
    manifests = {
        "scale_inf": f'ref = "{PONG_C}"\nscale = inf\n',
        "scale_nan": f'ref = "{PONG_C}"\nscale = nan\n',
        "seed_negative": f'ref = "{PONG_C}"\nseed = -5\n',
        "minutes_nan": f'ref = "{PONG_C}"\nmax_minutes = nan\n',
        "iters_zero": f'ref = "{PONG_C}"\nmax_iters = 0\n',
        "price_inf": f'ref = "{PONG_C}"\nprice_in = inf\nprice_out = 1\n',
        "missing_ref": f'ref = "nowhere/pong.c"\nspec = "{PONG_SPEC}"\n',
        "pointer_ref": 'ref = "pointer/pong.c"\nprice_in = 1\nprice_out = 1\n',
        "uncompilable_ref": 'ref = "uncompilable/pong.c"\nprice_in = 1\nprice_out = 1\n',
        "unknown_key": f'ref = "{PONG_C}"\nbudget = 3\n',
    }
    for name, job in manifests.items():
        (root / f"{name}.toml").write_text(MANIFEST_HEAD + job)
    (root / "workers_inf.toml").write_text(
        MANIFEST_HEAD.replace("[[job]]", "workers = 1000\n[[job]]") + f'ref = "{PONG_C}"\n'
    )
    (root / "binary_manifest.toml").write_bytes(b"\x00\xff" * 64)
    return root


BAD_INPUTS: list[tuple[str, str, str]] = [
    # (id, command line ({dir}: the probe folder), what the error line must say)
    # -- the command line itself
    ("no_command", "", "no command given"),
    ("unknown_command", "frobnicate", "No such command"),
    ("unknown_option", "verify pong --bogus", "No such option: --bogus"),
    ("list_unknown_option", "list --bogus", "--bogus"),
    # -- verify: what to verify
    ("verify_nothing", "verify", "name an env"),
    ("unknown_env", "verify pongg", "unknown env 'pongg'"),
    ("env_and_other_ref", f"verify cartpole --ref {PONG_C}", "env 'cartpole'"),
    ("missing_port", "verify pong --port {dir}/no_port", "port not found"),
    ("port_of_no_kind", "verify pong --port {dir}/empty_dir", "cannot tell the port's target"),
    ("unknown_target", "verify pong --target cobol", "unsupported target 'cobol'"),
    ("bad_sandbox", "verify pong --sandbox chroot", "--sandbox"),
    # -- verify: numbers (one rule each, envforge/spec/bounds.py)
    ("seed_negative", "verify pong --seed -5", "--seed: expected an integer in [0, 2^32)"),
    ("seed_too_big", "verify pong --seed 4294967296", "--seed"),
    ("seed_not_a_number", "verify pong --seed abc", "'--seed'"),
    ("scale_nan", "verify pong --scale nan", "--scale: expected a finite number > 0, got nan"),
    ("scale_inf", "verify pong --scale inf", "--scale: expected a finite number > 0, got inf"),
    ("scale_negative", "verify pong --scale -1", "--scale: expected a finite number > 0"),
    ("scale_zero", "verify pong --scale 0", "--scale"),
    ("scale_word", "verify pong --scale lots", "'--scale'"),
    ("timeout_negative", "verify pong --timeout -1", "--timeout: expected a finite number"),
    ("timeout_zero", "verify pong --timeout 0", "--timeout"),
    ("timeout_nan", "verify pong --timeout nan", "--timeout"),
    ("levels_out_of_range", "verify pong --levels 0-9", "--levels"),
    ("levels_word", "verify pong --levels one", "--levels"),
    ("levels_reversed", "verify pong --levels 3-1", "--levels"),
    ("levels_empty", "verify pong --levels ,", "--levels"),
    ("seed_sweep_too_big", "verify pong --seed-sweep 2^40", "--seed-sweep"),
    ("seed_sweep_word", "verify pong --seed-sweep lots", "--seed-sweep"),
    # -- verify: the reference (--ref is what is verified, with or without --spec)
    ("missing_reference", "verify --ref {dir}/nowhere/pong.c", "reference not found"),
    (
        "missing_reference_with_spec",
        f"verify --ref {{dir}}/nowhere.c --spec {PONG_SPEC}",
        "reference not found",
    ),
    (
        "unknown_gymnasium_id_with_spec",
        f"verify --ref gymnasium:NoSuchEnv-v9 --spec {CARTPOLE_SPEC} --sandbox none",
        "reference error",
    ),
    ("unknown_gymnasium_id", "verify --ref gymnasium:NoSuchEnv-v9", "declares reference"),
    ("unknown_id", "verify --ref foo:bar", "declares reference"),
    ("reference_without_spec", "verify --ref {dir}/notes.txt", "no env.toml beside"),
    (
        "c_reference_with_gymnasium_spec",
        f"verify --ref {PONG_C} --spec {CARTPOLE_SPEC}",
        "does not fit",
    ),
    ("pointer_member", "verify --ref {dir}/pointer/pong.c --sandbox none", "reference error"),
    ("empty_reference", "verify --ref {dir}/empty/pong.c --sandbox none", "is empty"),
    ("binary_reference", "verify --ref {dir}/binary/pong.c --sandbox none", "binary file"),
    ("latin1_reference", "verify --ref {dir}/latin1/pong.c --sandbox none", "not UTF-8"),
    ("struct_lacks_field", "verify --ref {dir}/no_member/pong.c --sandbox none", "rng"),
    ("no_struct", "verify --ref {dir}/no_struct/pong.c --sandbox none", "struct Pong not found"),
    (
        "python_reference_beside_its_spec",  # the spec is found beside cart.py; the port is not
        "verify --ref {dir}/python_ref/cart.py:Cart --port {dir}/no_port",
        "port not found",
    ),
    # -- verify: the spec
    ("missing_spec", "verify --ref " + PONG_C + " --spec {dir}/nothing.toml", "env.toml"),
    ("binary_spec", f"verify --ref {PONG_C} --spec {{dir}}/binary_toml/env.toml", "UTF-8"),
    ("spec_folder_without_toml", "verify --spec {dir}/empty_dir", "an existing env.toml"),
    ("toml_syntax", "verify --ref {dir}/toml_syntax/pong.c", "valid TOML"),
    ("spec_timeout_negative", "verify --ref {dir}/negative_timeout/pong.c", "verify.timeout_s"),
    ("spec_timeout_inf", "verify --ref {dir}/infinite_timeout/pong.c", "verify.timeout_s"),
    ("spec_zero_examples", "verify --ref {dir}/zero_examples/pong.c", "verify.l1_examples"),
    ("spec_alpha_nan", "verify --ref {dir}/nan_alpha/pong.c", "verify.alpha"),
    ("spec_unknown_language", "verify --ref {dir}/rust_reference/pong.c", "key 'reference'"),
    ("spec_without_c_table", "verify --ref {dir}/no_c_table/pong.c", "key 'c'"),
    # -- translate: refused before the first model call
    ("translate_no_ref", "translate", "--ref"),
    ("translate_missing_ref", "translate --ref {dir}/nowhere.c", "reference not found"),
    (
        "translate_missing_ref_with_spec",
        f"translate --ref {{dir}}/nowhere.c --spec {PONG_SPEC}",
        "reference not found",
    ),
    ("translate_broken_ref", "translate --ref {dir}/pointer/pong.c", "declarator"),
    ("budget_nan", f"translate --ref {PONG_C} --budget-usd nan", "--budget-usd"),
    ("init_budget_nan", "init --ref gymnasium:CartPole-v1 --budget-usd nan", "--budget-usd"),
    ("init_episodes_negative", "init --ref gymnasium:CartPole-v1 --episodes -2", "--episodes"),
    ("budget_negative", f"translate --ref {PONG_C} --budget-usd -1", "--budget-usd"),
    ("budget_word", f"translate --ref {PONG_C} --budget-usd lots", "--budget-usd"),
    ("max_iters_zero", f"translate --ref {PONG_C} --max-iters 0", "--max-iters"),
    ("max_steps_negative", f"translate --ref {PONG_C} --max-steps -1", "--max-steps"),
    ("max_tokens_zero", f"translate --ref {PONG_C} --max-tokens 0", "--max-tokens"),
    ("max_minutes_negative", f"translate --ref {PONG_C} --max-minutes -5", "--max-minutes"),
    ("max_minutes_inf", f"translate --ref {PONG_C} --max-minutes inf", "--max-minutes"),
    ("translate_scale_inf", f"translate --ref {PONG_C} --scale inf", "--scale"),
    ("translate_seed_negative", f"translate --ref {PONG_C} --seed -1", "--seed"),
    ("price_nan", f"translate --ref {PONG_C} --price-in nan --price-out 1", "--price-in"),
    ("price_negative", f"translate --ref {PONG_C} --price-in -1 --price-out 1", "--price-in"),
    ("price_half", f"translate --ref {PONG_C} --price-in 1", "--price-out"),
    ("optimize_negative", f"translate --ref {PONG_C} --optimize -1", "--optimize"),
    ("translate_only_l4", f"translate --ref {PONG_C} --levels 4", "--levels"),
    # -- cost
    ("missing_ledger", "cost --ledger {dir}/missing.sqlite", "no ledger at"),
    ("garbage_ledger", "cost --ledger {dir}/garbage.sqlite", "garbage.sqlite"),
    ("cost_by_week", "cost --by week", "--by"),
    # -- batch: refused before any job runs
    ("missing_manifest", "batch run {dir}/missing.toml", "manifest not found"),
    ("binary_manifest", "batch run {dir}/binary_manifest.toml", "binary_manifest.toml"),
    ("manifest_scale_inf", "batch run {dir}/scale_inf.toml", "'job[a].scale'"),
    ("manifest_scale_nan", "batch status {dir}/scale_nan.toml", "'job[a].scale'"),
    ("manifest_seed_negative", "batch run {dir}/seed_negative.toml", "'job[a].seed'"),
    ("manifest_minutes_nan", "batch run {dir}/minutes_nan.toml", "'job[a].max_minutes'"),
    ("manifest_iters_zero", "batch run {dir}/iters_zero.toml", "'job[a].max_iters'"),
    ("manifest_price_inf", "batch run {dir}/price_inf.toml", "'job[a].price_in'"),
    ("manifest_workers", "batch run {dir}/workers_inf.toml", "'batch.workers'"),
    ("manifest_unknown_key", "batch run {dir}/unknown_key.toml", "'job[a].budget'"),
    ("manifest_missing_ref", "batch run {dir}/missing_ref.toml", "reference not found"),
    ("manifest_broken_ref", "batch run {dir}/pointer_ref.toml", "declarator"),
    ("manifest_uncompilable_ref", "batch run {dir}/uncompilable_ref.toml", "C compilation failed"),
    ("batch_workers_zero", "batch run {dir}/scale_inf.toml --workers 0", "--workers"),
    ("batch_executor", "batch run {dir}/scale_inf.toml --executor slurm", "--executor"),
    ("batch_no_manifest", "batch status", "Missing argument 'manifest'"),
    ("batch_report_two_formats", "batch report {dir}/scale_inf.toml --json --markdown", "one of"),
    # -- bench, mutate, train
    ("bench_unknown_env", "bench pongg", "unknown env"),
    ("bench_repeats_zero", "bench pong --repeats 0", "--repeats"),
    ("bench_min_run_nan", "bench pong --min-run nan", "--min-run"),
    ("bench_policy", "bench pong --policy greedy", "--policy"),
    ("mutate_unknown_env", "mutate pongg", "unknown env"),
    ("mutate_scale_nan", "mutate pong --scale nan", "--scale"),
    ("mutate_seed_negative", "mutate pong --seed -1", "--seed"),
    ("mutate_time_limit", "mutate pong --time-limit -1", "--time-limit"),
    ("mutate_side", "mutate pong --side both", "--side"),
    ("train_missing_port", "train --port {dir}/no_port", "port not found"),
    ("train_seeds_zero", f"train --port {PONG_JAX} --seeds 0", "--seeds"),
    ("train_timesteps_negative", f"train --port {PONG_JAX} --timesteps -1", "--timesteps"),
]


@pytest.mark.parametrize(
    ("args", "needle"), [row[1:] for row in BAD_INPUTS], ids=[row[0] for row in BAD_INPUTS]
)
def test_every_bad_input_is_one_line_and_exit_2(
    args: str,
    needle: str,
    probe_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(probe_dir)  # ledgers, workspaces and runs/ would land here
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(args.replace("{dir}", str(probe_dir)).split(), capsys)
    assert "Traceback" not in out + err, out + err
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("envforge: error: "), lines[0]
    assert needle in lines[0], lines[0]


def test_the_probe_is_big_and_distinct() -> None:
    assert len(BAD_INPUTS) >= 70
    assert (
        len({row[0] for row in BAD_INPUTS})
        == len({row[1] for row in BAD_INPUTS})
        == len(BAD_INPUTS)
    )


# ---- a broken reference is a "reference error", never a verdict about the port -------------


def test_a_reference_that_does_not_compile_is_a_reference_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copy of pong.c with a C syntax error, named by --ref beside pong's own --spec: the
    copy is what is verified (not the spec's pong.c, which would pass), and its build failure
    is exit 2 with the compiler's first error in one line, not "not equivalent" (exit 1)."""
    source = (PONG_SPEC.parent / "pong.c").read_text()
    old = "static uint32_t next_rng(uint32_t x) {"
    assert source.count(old) == 1
    broken = tmp_path / "pong_copy.c"
    broken.write_text(source.replace(old, old + "\n    int missing_semicolon = 1"))
    args = ["verify", "--ref", str(broken), "--spec", str(PONG_SPEC), "--levels", "0"]
    # found by the spec self-check (which builds the reference first), and by verify itself
    for extra in ([], ["--no-self-check", "--json"]):
        code, out, err = run_cli([*args, "--sandbox", "none", *extra], capsys)
        assert "Traceback" not in out + err
        assert code == 2, (code, out, err)
        [line] = err.strip().splitlines()
        assert line.startswith("envforge: error: reference error: ")
        assert "C compilation failed" in line and "error:" in line and "pong_copy.c" in line
    report = json.loads(out)
    assert report["verdict"] == "reference error"
    assert report["reference"] == str(broken.resolve())
    [level] = report["levels"]
    assert level["reference_failed"] and level["findings"][0]["extra"]["side"] == "reference"


def test_translate_builds_the_reference_before_paying_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same non-compiling copy of pong.c given to translate: refused as a reference error
    before the first model call (the endpoint below does not even listen), no ledger written."""
    source = (PONG_SPEC.parent / "pong.c").read_text()
    broken = tmp_path / "pong_copy.c"
    broken.write_text(source.replace("static uint32_t next_rng(uint32_t x) {", "static int ;"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing answers here
    ledger = tmp_path / "ledger.sqlite"
    args = ["translate", "--ref", str(broken), "--spec", str(PONG_SPEC), "--model"]
    args += ["openai:local", "--price-in", "1", "--price-out", "1", "--ledger", str(ledger)]
    code, out, err = run_cli([*args, "--sandbox", "none"], capsys)
    assert "Traceback" not in out + err
    assert code == 2, (code, out, err)
    [line] = err.strip().splitlines()
    assert line.startswith("envforge: error: reference error: the reference failed in build")
    assert "C compilation failed" in line
    assert not ledger.exists()


def test_ref_beside_spec_names_the_reference_that_is_verified(tmp_path: Path) -> None:
    from envforge.spec import spec_for_reference

    copy = tmp_path / "elsewhere" / "pong.c"
    copy.parent.mkdir()
    copy.write_text((PONG_SPEC.parent / "pong.c").read_text())
    spec = spec_for_reference(str(copy), str(PONG_SPEC))
    assert spec.reference_path() == copy.resolve() and spec.name == "pong"
    cartpole = ROOT / "references" / "cartpole" / "env.toml"
    other_id = spec_for_reference("gymnasium:CartPole-v0", str(cartpole))
    assert other_id.reference == "gymnasium:CartPole-v0"
    # the spec's own reference named either way leaves the spec as it is
    assert spec_for_reference(str(PONG_SPEC.parent / "pong.c"), str(PONG_SPEC)).reference == (
        "pong.c"
    )


# ---- Ctrl-C --------------------------------------------------------------------------------


def test_ctrl_c_during_verify_exits_130() -> None:
    """SIGINT while verify builds its drivers: exit code 130 and one line, no traceback (the
    interrupt's code used to be dropped, so Ctrl-C exited 0 as if the port were equivalent)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "envforge.cli", "verify", "pong", "--sandbox", "none"],
        cwd=Path(CLI_FILE).resolve().parents[1],  # the envforge under test
        env=dict(os.environ, COLUMNS="200"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as a shell starts it: SIGINT not ignored (a child inherits an ignored SIGINT, and an
        # earlier test's library may have left it so in this process)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed once the command runs, before any build
        assert first.startswith("sandbox: none"), first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "Traceback" not in out + err
    assert err.strip().splitlines() == ["envforge: interrupted"]
