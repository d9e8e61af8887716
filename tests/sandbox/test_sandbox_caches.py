"""No sandboxed run leaves a file that a later run loads. The docker sandbox gave every
container one writable ``$ENVFORGE_CACHE`` (the ``docker/`` realm): a C port found the shipped
CartPole's library in its ``c/`` folder and wrote its own over it, and the next ``verify
cartpole --target c --sandbox docker`` loaded the planted one. Each run's envforge cache is now
its own (the process sandbox's already was)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

from envforge.sandbox.base import Sandbox, SandboxLimits
from envforge.sandbox.confine import probe
from envforge.sandbox.docker import docker_available
from envforge.sandbox.select import open_sandbox
from envforge.spec import spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

CARTPOLE_C = ROOT / "generated" / "cartpole" / "c" / "cartpole.h"
DOCKER = [pytest.mark.skipif(not docker_available(), reason="no docker engine"), pytest.mark.slow]
KINDS = ["process", pytest.param("docker", marks=DOCKER)]

PLANT = """
set -e
mkdir -p "$ENVFORGE_CACHE/c"
echo planted > "$ENVFORGE_CACHE/c/cartpole-0123456789abcdef.so"
echo "PLANTED $ENVFORGE_CACHE"
"""
LOOK = 'cat "$ENVFORGE_CACHE/c/cartpole-0123456789abcdef.so" 2>/dev/null || echo ABSENT'


def opened(kind: str) -> Sandbox:
    if kind == "process" and not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")
    sandbox = open_sandbox(kind, SandboxLimits(wall_s=30.0, output_chars=4000))
    assert sandbox is not None
    return sandbox


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_cannot_leave_a_library_in_the_cache_of_the_next(kind: str, tmp_path: Path) -> None:
    sandbox = opened(kind)
    ws = tmp_path / "ws"
    ws.mkdir()
    planted = sandbox.run(PLANT, ws)
    assert "PLANTED" in planted.output, planted.output
    later = sandbox.run(LOOK, ws)
    assert later.output.strip() == "ABSENT", later.output  # no planted file is seen


HOSTILE_C = r"""
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* overwrite every library in the cache, by rename (its own stays mapped) */
__attribute__((constructor)) static void plant_over_every_library(void) {
    const char* root = getenv("ENVFORGE_CACHE");
    char dir[4096], path[8192], tmp[8192];
    if (root == NULL) return;
    snprintf(dir, sizeof dir, "%s/c", root);
    DIR* d = opendir(dir);
    if (d == NULL) return;
    for (struct dirent* e; (e = readdir(d)) != NULL;) {
        if (strstr(e->d_name, ".so") == NULL) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(tmp, sizeof tmp, "%s.planted", path);
        FILE* f = fopen(tmp, "w");
        if (f == NULL) continue;
        fputs("not a library", f);
        fclose(f);
        rename(tmp, path);
    }
    closedir(d);
}
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_c_port_cannot_plant_a_library_the_next_verify_loads(kind: str, tmp_path: Path) -> None:
    """The shipped CartPole C port is verified, then a hostile one that overwrites every
    library it can find in the cache, then the shipped one again: it must still load its own."""
    opened(kind)
    spec = spec_for_name("cartpole")
    options = VerifyOptions(sandbox=kind, timeout_s=60)
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    source = CARTPOLE_C.read_text()
    (hostile / "cartpole.h").write_text(
        source.replace("#include <stdint.h>\n", "#include <stdint.h>\n" + HOSTILE_C, 1)
    )
    first = verify(spec, CARTPOLE_C.parent, [0], options)
    assert first.passed, first.levels[0].summary
    verify(spec, hostile, [0], options)  # its verdict does not matter: what it leaves does
    again = verify(spec, CARTPOLE_C.parent, [0], options)
    assert again.passed, again.levels[0].summary


def test_a_job_that_builds_a_crate_gets_the_host_step_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bench battle --target rust`` on an empty cache failed: its sandboxed job built the
    crate with no network while ``verify`` fetched the crate's dependencies on the host first.
    Now a job on a port takes the driver's host step too (one build path): here a crate with no
    dependencies, whose lock file is vendored (marked) on the host before the job runs."""
    from envforge.sandbox.jobs import run_job

    sandbox = opened("process")
    cache = tmp_path / "cache" / "rust"  # an empty cache, as on a fresh machine
    monkeypatch.setenv("ENVFORGE_RUST_CACHE", str(cache))
    monkeypatch.delenv("ENVFORGE_RUST_VENDOR", raising=False)
    crate = tmp_path / "crate"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "lone"\nversion = "0.1.0"\nedition = "2021"\n\n[lib]\n'
        'crate-type = ["cdylib"]\n'
    )
    (crate / "src" / "lib.rs").write_text("pub fn f() {}\n")
    value = run_job(
        sandbox, "math:hypot", (3.0, 4.0), readable=(crate,), timeout_s=60, what="bench", port=crate
    )
    assert value == 5.0
    assert (crate / "Cargo.lock").is_file()  # locked on the host, where there is network
    assert list((cache / "vendor" / ".envforge").iterdir())  # and vendored there
