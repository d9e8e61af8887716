"""Crash sites: the line a Rust panic, a Python traceback or a node stack names, and the
handler (function, Rust ``match`` arm) holding it."""

from __future__ import annotations

from pathlib import Path

from envforge.verify.thrown import handler_at, thrown_at

DISPATCH_RS = """\
impl Machine {
    pub fn execute(&mut self) {
        match op >> 12 {
            0x1 => self.pc = nnn,
            0xE => match nn {
                0x9E => {
                    if self.keys[x] != 0 {
                        self.skip()
                    }
                }
                _ => {}
            },
            _ => self.misc(nn, x),
        }
    }

    fn step(
        &mut self,
        actions: &[i32],
    ) -> PyResult<()> {
        let n = actions.len();
        Ok(())
    }
}
"""

HANDLERS_PY = """\
import jax


def op_8xy6(state, x, y):
    flag = state.v[y] & 1
    return state


TABLE = 3
"""


def crate(tmp_path: Path) -> Path:
    source = tmp_path / "crate" / "src" / "machine.rs"
    source.parent.mkdir(parents=True)
    source.write_text(DISPATCH_RS)
    return source


def test_rust_handlers_are_functions_and_their_match_arms() -> None:
    lines = DISPATCH_RS.splitlines()
    assert handler_at(lines, 7, ".rs") == "execute [0xE => 0x9E]"
    assert handler_at(lines, 4, ".rs") == "execute [0x1]"  # an arm on one line
    assert handler_at(lines, 13, ".rs") == "execute [_]"
    assert handler_at(lines, 3, ".rs") == "execute"
    assert handler_at(lines, 21, ".rs") == "step"  # past a multi-line signature
    assert handler_at(lines, 1, ".rs") is None


def test_python_handlers_are_functions() -> None:
    lines = HANDLERS_PY.splitlines()
    assert handler_at(lines, 5, ".py") == "op_8xy6"
    assert handler_at(lines, 9, ".py") is None


def test_a_rust_panic_names_its_line_in_the_crate(tmp_path: Path) -> None:
    source = crate(tmp_path)
    stderr = (
        "thread '<unnamed>' panicked at src/machine.rs:7:24:\n"
        "index out of bounds: the len is 16 but the index is 31\n"
        "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n"
    )
    [loc] = thrown_at(stderr, [source])
    assert (loc.file, loc.line, loc.text) == (str(source), 7, "if self.keys[x] != 0 {")
    old_style = "thread 'main' panicked at 'attempt to subtract', src/machine.rs:21:17"
    assert [loc.line for loc in thrown_at(old_style, [source])] == [21]
    # a file of another crate (or none of the side's sources) is not this side's line
    assert thrown_at("panicked at src/other.rs:7:1:\nboom", [source]) == []
    assert thrown_at(stderr, []) == []


def test_a_rust_error_that_says_where_it_was_made_names_that_line(tmp_path: Path) -> None:
    # a port's #[track_caller] length check (generated/*/rust expect_len): a PyValueError, not a
    # panic, so no "panicked at"; before, such an error named no line at all
    source = crate(tmp_path)
    message = (
        "port observe: raised ValueError: obs has 48 elements, expected 5 (at src/machine.rs:7:9)"
    )
    [loc] = thrown_at(message, [source])
    assert (loc.line, loc.text) == (7, "if self.keys[x] != 0 {")
    # only that form: a bare path in the words, or another crate's file, names nothing
    assert thrown_at("obs has 48 elements; see src/machine.rs:7:9", [source]) == []
    assert thrown_at("obs has 48 elements (at src/other.rs:7:9)", [source]) == []


def test_a_python_traceback_names_the_innermost_frame_in_the_sources(tmp_path: Path) -> None:
    port = tmp_path / "port.py"
    port.write_text(HANDLERS_PY)
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/somewhere/envforge/backends/isolated.py", line 103, in serve_recipe\n'
        f'  File "{port}", line 9, in step\n'
        f'  File "{port}", line 5, in op_8xy6\n'
        "IndexError: index 16 is out of bounds\n"
    )
    assert [loc.line for loc in thrown_at(traceback, [port])] == [5, 9]
