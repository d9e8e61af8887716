"""Localization: the lines that assign a diverging field, then the definitions those lines read."""

from __future__ import annotations

from pathlib import Path

from conftest import PONG_PORT, PONG_SPEC

from envforge.spec import EnvSpec
from envforge.verify.findings import Finding, SourceLocation
from envforge.verify.localize import assignments, locate, names_for

PONG_C = PONG_SPEC.parent / "pong.c"

PY_SOURCE = """\
LIMIT = 3.0  # a constant
SCALE = LIMIT * 2


def helper(v):
    t = 99  # another function's local: not what step reads
    return v * SCALE


def step(s, action):
    # x = 0 in a comment is not an assignment
    t = helper(s.x)
    if s.x == 1.0:
        pass
    a, x = 1, t
    s.y += 1
    return s._replace(x=x, y=s.y)
"""

C_SOURCE = """\
#define GAIN 2.0f
#define LIMIT (GAIN * 4.0f)
typedef struct { float x; int n; } S;

static float bounded(float v) {
    return v > LIMIT ? LIMIT : v;
}

/*
 * x = 0 inside a block comment
 */
void s_step(S* env, float* reward) {
    float dx = bounded(env->x + 1.0f);
    env->x = dx;
    env->n++;
    *reward = dx; /* a pointer write is code */
    if (env->x == 3.0f) { env->n = 0; }
}
"""


RUST_SOURCE = """\
const LIMIT: f32 = 4.0;

fn seed_hash(seed: u32) -> u32 {
    let x = seed.wrapping_mul(747796405);
    if x == 0 {
        1
    } else {
        x
    }
}

impl S {
    pub fn reset(&mut self, seed: u32) {
        let t = 99; // the argument reset passes to bounded
        self.rng = seed_hash(seed);
        self.pos = self.bounded(t as f32);
    }

    fn bounded(&self, v: f32) -> f32 {
        let t = v * 2.0;
        if t > LIMIT {
            return LIMIT;
        }
        t
    }
}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def lines_of(locs: list[SourceLocation]) -> list[int]:
    return [loc.line for loc in locs]


def test_python_assignment_forms(tmp_path: Path) -> None:
    path = write(tmp_path, "env.py", PY_SOURCE)
    found = {loc.line: loc.text for loc in assignments(path, ("x",))}
    # tuple unpacking and a keyword argument in a functional update; not comments, not ==
    assert sorted(found) == [15, 17]
    assert found[15] == "a, x = 1, t"
    assert lines_of(assignments(path, ("y",))) == [16, 17]  # augmented, and replace(y=...)


def test_c_assignment_forms(tmp_path: Path) -> None:
    path = write(tmp_path, "env.c", C_SOURCE)
    assert lines_of(assignments(path, ("x",))) == [14]  # env->x =, not the comment or ==
    assert lines_of(assignments(path, ("n",))) == [15, 17]  # env->n++ and env->n = 0
    assert lines_of(assignments(path, ("reward",))) == [16]  # *reward = is not a comment line


def test_names_for_uses_aliases_and_c_field(pong_spec: EnvSpec) -> None:
    field = pong_spec.field("ball_x").model_copy(update={"aliases": ("bx",), "c_field": "ballX"})
    spec = pong_spec.model_copy(update={"state": (field, *pong_spec.state[1:])})
    assert names_for(spec, "ball_x") == ("ball_x", "bx", "ballX")
    assert names_for(spec, "terminated")[:2] == ("terminated", "terminal")


def test_python_dependencies_follow_locals_calls_and_constants(
    tmp_path: Path, pong_spec: EnvSpec
) -> None:
    path = write(tmp_path, "env.py", PY_SOURCE)
    spec = pong_spec.model_copy(
        update={"state": (pong_spec.field("ball_x").model_copy(update={"name": "x"}),)}
    )
    found = locate(spec, ["x"], [path])
    texts = [loc.text for loc in found]
    # direct assignments first, then (breadth first) what they read
    assert texts[:2] == ["a, x = 1, t", "return s._replace(x=x, y=s.y)"]
    assert "t = helper(s.x)" in texts  # the local the assignment reads
    assert "return v * SCALE" in texts  # the helper's return value
    assert "SCALE = LIMIT * 2" in texts and "LIMIT = 3.0  # a constant" in texts
    assert "t = 99  # another function's local: not what step reads" not in texts


def test_c_dependencies_follow_defines_and_functions(tmp_path: Path, pong_spec: EnvSpec) -> None:
    path = write(tmp_path, "env.c", C_SOURCE)
    spec = pong_spec.model_copy(
        update={"state": (pong_spec.field("ball_x").model_copy(update={"name": "x"}),)}
    )
    texts = [loc.text for loc in locate(spec, ["x"], [path])]
    assert texts[0] == "env->x = dx;"
    assert "float dx = bounded(env->x + 1.0f);" in texts
    assert "return v > LIMIT ? LIMIT : v;" in texts
    assert "#define LIMIT (GAIN * 4.0f)" in texts and "#define GAIN 2.0f" in texts
    assert not any("comment" in t for t in texts)


def test_rust_dependencies_follow_methods_and_tail_expressions(
    tmp_path: Path, pong_spec: EnvSpec
) -> None:
    """A Rust function's value is its tail expression (no `return`), and methods sit indented
    in `impl` blocks: both are followed, so a mutated `1` in a seed guard is named."""
    path = write(tmp_path, "env.rs", RUST_SOURCE)
    field = pong_spec.field("rng")
    spec = pong_spec.model_copy(
        update={"state": (field, field.model_copy(update={"name": "pos", "dtype": "float32"}))}
    )
    texts = [loc.text for loc in locate(spec, ["rng"], [path])]
    assert texts[0] == "self.rng = seed_hash(seed);"
    assert {"if x == 0 {", "1", "x", "let x = seed.wrapping_mul(747796405);"} <= set(texts)
    texts = [loc.text for loc in locate(spec, ["pos"], [path])]
    assert texts[0] == "self.pos = self.bounded(t as f32);"
    assert {"return LIMIT;", "t", "let t = v * 2.0;", "const LIMIT: f32 = 4.0;"} <= set(texts)
    assert "let t = 99; // the argument reset passes to bounded" in texts  # the argument


def test_pong_constant_is_localized_on_both_sides(pong_spec: EnvSpec) -> None:
    """paddle_yl's assignment reads `chase`, which reads OPPONENT_SPEED: both files name it."""
    port = locate(pong_spec, ["paddle_yl"], [PONG_PORT])
    ref = locate(pong_spec, ["paddle_yl"], [PONG_C])
    assert port[0].text.startswith("paddle_yl=")  # the reset's assignment comes first
    assert any(loc.text.startswith("OPPONENT_SPEED = f32(5.0)") for loc in port)
    assert any(loc.text.startswith("#define OPPONENT_SPEED 5.0f") for loc in ref)
    assert all(Path(loc.file) == PONG_PORT for loc in port)


def test_pong_multiline_statement_lines_are_all_named(pong_spec: EnvSpec) -> None:
    """ball_vx reads hit_r, which reads the multi-line overlaps_r: each of its lines is named."""
    texts = [loc.text for loc in locate(pong_spec, ["ball_vx"], [PONG_PORT])]
    assert "& (ball_y + BALL >= paddle_yr)" in texts
    assert "& (ball_y <= paddle_yr + PADDLE_H)" in texts


def test_localized_finding() -> None:
    where = [SourceLocation("p.py", 3, "x = 1")]
    assert Finding(1, "step.mismatch", "m", fields=["x"], port_lines=where).localized
    assert not Finding(1, "step.mismatch", "m", fields=["x"]).localized
    assert not Finding(0, "contract", "m", port_lines=where).localized


def test_pong_parameter_leads_to_the_argument_callers_pass(pong_spec: EnvSpec) -> None:
    """serve() assigns ball_vx from its `direction` parameter: the callers' arguments for it are
    named (reset's drawn direction, the post-point serve), their other arguments are not."""
    texts = [loc.text for loc in locate(pong_spec, ["ball_vx"], [PONG_PORT])]
    assert "served = serve(moved, jnp.where(scored_r, f32(1.0), f32(-1.0)))" in texts
    assert "direction = jnp.where(u < HALF, f32(-1.0), f32(1.0))" in texts
    assert "moved = state._replace(" not in texts


def test_reference_lines_reach_the_library_modules_the_spec_names() -> None:
    """UNO's reference is an adapter over rlcard: the deck's lines are rlcard's own (its
    dealer and round), found as files of the environment without importing rlcard."""
    from envforge.backends.library_files import library_files
    from envforge.spec import spec_for_name

    spec = spec_for_name("uno")
    files = library_files(spec)
    assert {"dealer.py", "round.py"} <= {f.name for f in files}
    located = locate(spec, ["deck"], [*files], phase="step")
    named = {(Path(loc.file).name, loc.text) for loc in located}
    assert ("dealer.py", "self.deck = init_deck()") in named, named
