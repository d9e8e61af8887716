"""Handler-level localization of mutation campaigns: chip8's ``[verify] handlers`` maps the lines
of its reference, JAX port and Rust port to opcode handlers, and ``judge`` asks whether a kill's
finding names the mutated line's handler."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from rich.console import Console

from envforge.backends.jax import load_module
from envforge.mutate.execute import MutantJob, MutantRun
from envforge.mutate.handlers import HandlerMap, finding_text, names_in, scope_at
from envforge.mutate.mutant import Mutant
from envforge.mutate.mutation_report import MutationReport, judge
from envforge.mutate.workspace import Target
from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions

CHIP8 = ROOT / "references" / "chip8"
RUST = ROOT / "generated" / "chip8" / "rust" / "src"
JAX = ROOT / "generated" / "chip8" / "jax" / "chip8.py"
hooks = load_module(CHIP8 / "handlers.py")
SKIPS = ["3XNN", "4XNN", "5XY0", "9XY0", "EX9E", "EXA1"]
ALU = ["8XY0", "8XY1", "8XY2", "8XY3", "8XY4", "8XY5", "8XY6", "8XY7", "8XYE"]
FLAGGED = ["8XY4", "8XY5", "8XY6", "8XY7", "8XYE"]


def line_of(source: str, text: str) -> int:
    """The 1-based line holding ``text`` (exactly one does)."""
    found = [i for i, line in enumerate(source.splitlines(), 1) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


def chip8_map() -> HandlerMap:
    files = {f"src/{p.name}": p.read_text() for p in sorted(RUST.glob("*.rs"))}
    mapped = HandlerMap.for_spec(load_spec(CHIP8), files)
    assert mapped is not None
    return mapped


def at(mapped: HandlerMap, file: str, source: str, text: str) -> list[str]:
    return mapped.at(file, source, line_of(source, text))


@pytest.mark.parametrize(
    ("text", "handlers"),
    [
        ("self.v[0xF] = b & 1;", ["8XY6"]),  # an inline arm of `alu`
        ("0x0 => self.v[x] = b,", ["8XY0"]),  # a one-line arm
        ("let (a, b) = (self.v[x], self.v[y]);", ALU),  # shared by every `alu` arm
        ("if self.keys[(self.v[x] & 0xF) as usize] != 0 {", ["EX9E"]),  # execute [0xE => 0x9E]
        ("0x1 => self.pc = nnn,", ["1NNN"]),
        ("0x00EE => self.op_00ee(),", ["00EE"]),
        ("_ => {} // 0NNN: ignored", []),
        (
            "_ => self.misc(nn, x),",
            ["FX07", "FX0A", "FX15", "FX18", "FX1E", "FX29", "FX33", "FX55", "FX65"],
        ),  # fmt: skip
        ("0x1E => self.i = (self.i + self.v[x] as i32) & 0xFFF,", ["FX1E"]),
        ("erased |= self.framebuffer[at];", ["DXYN"]),
        ("self.memory[((i + 1) & 0xFFF) as usize] = value / 10 % 10;", ["FX33"]),
        ("self.pc = (self.pc + 2) & 0xFFF;", SKIPS),  # the `skip` helper
        ("let op = (self.mem(pc) as u16) << 8", []),  # fetch
        ("self.delay_timer = (self.delay_timer - 1).max(0);", []),  # the step's timers
        ("self.rng = seed_to_rng(seed);", []),  # reset
        ("*o = self.v[4 + k] as f32 / 255.0;", []),  # observe
    ],
)
def test_rust_port_lines_map_to_their_opcode_handler(text: str, handlers: list[str]) -> None:
    mapped = chip8_map()
    assert at(mapped, "src/chip8.rs", mapped.files["src/chip8.rs"], text) == sorted(handlers)


@pytest.mark.parametrize(
    ("text", "handlers"),
    [
        ("return set_v_flag(m, op.x, b >> 1, b & 1)", ["8XY6"]),
        ("held = m.keys[op.vx & 0xF] != 0", ["EX9E", "EXA1"]),  # one branch for both
        ('return {"pc": jnp.where(condition, (m.pc + 2) & 0xFFF, m.pc)}', SKIPS),  # skip_if
        ('return {"vx": value & 0xFF, "vf": flag.astype(jnp.int32)}', FLAGGED),  # set_v_flag
        ("0x4: op_8xy4, 0x5: op_8xy5", ALU),  # the module-level table of family 8
        ("0x29: op_fx29, 0x33: op_fx33", hooks.MISC.values()),  # ... and of family F
        ("0x1: op_1nnn, 0x2: op_2nnn", [*hooks.FAMILY.values(), *hooks.KEYS.values()]),
        ("stack = jnp.where(e.push", ["2NNN"]),  # the Effect applied after the dispatch
        ("written = jnp.where(e.write_mask, e.write_value", ["FX33", "FX55"]),
        ("framebuffer, erased = draw_sprite(m.framebuffer, op)", ["DXYN"]),
        ("bits = ((sprite[:, None] >> (7 - cols[None, :])) & 1)", ["DXYN"]),  # draw_sprite
        ("for hit, handler in handlers(op):", []),  # dispatch of every handler
        ("memory = m.memory.at[(m.I + k) & 0xFFF].set(written)", []),  # every instruction
        ("delay_timer=jnp.maximum(state.delay_timer - 1, 0),", []),
        ("x = (seed.astype(jnp.uint32) ^ jnp.uint32(0x9E3779B9))", []),
        ("return jnp.asarray(BYTE_SCALE)[state.V[4:12]]", []),
    ],
)
def test_jax_port_lines_map_to_their_opcode_handler(text: str, handlers: Any) -> None:
    mapped, source = chip8_map(), JAX.read_text()
    assert at(mapped, "chip8.py", source, text) == sorted(handlers)


def test_reference_lines_map_to_their_opcode_handler() -> None:
    mapped, source = chip8_map(), (CHIP8 / "chip8.py").read_text()
    assert at(mapped, "chip8.py", source, "self.reg[0xF] = b & 1") == ["8XY6"]
    assert at(mapped, "chip8.py", source, "self.pc = (self.pc - 2) & 0xFFF") == ["FX0A"]
    assert at(mapped, "chip8.py", source, "0x4: C.op_8xy4, 0x5: C.op_8xy5") == ALU
    assert at(mapped, "chip8.py", source, "self.delay_timer = max(int(") == []
    assert at(mapped, "chip8.py", source, "DISPATCH[op >> 12](self, op)") == []


def test_every_handler_has_code_in_each_implementation_and_the_reference_names_them() -> None:
    chip8 = load_module(CHIP8 / "chip8.py")
    named = {chip8.opcode_name(op) for op in range(1 << 16)}
    assert {n for n in named if " " not in n and n != "0NNN"} == set(hooks.HANDLERS)
    assert len(hooks.HANDLERS) == 34
    for file, path in (("src/chip8.rs", RUST / "chip8.rs"), ("chip8.py", JAX)):
        assert HandlerMap(hooks.handlers_at, {file: path.read_text()}).universe == sorted(
            hooks.HANDLERS
        ), file
    reference = HandlerMap(hooks.handlers_at, {"chip8.py": (CHIP8 / "chip8.py").read_text()})
    assert reference.universe == sorted(hooks.HANDLERS)
    assert (
        HandlerMap(hooks.handlers_at, {"src/lib.rs": (RUST / "lib.rs").read_text()}).universe == []
    )


def test_scope_names_module_level_tables_and_words_are_whole_tokens() -> None:
    source = "def f():\n    return 1\n\n\nT = [\n    1,\n]\nfor k in range(3):\n    U[k] = k\n"
    assert [scope_at(source, n, ".py") for n in (2, 6, 9)] == ["f", "T", "U"]
    assert names_in("by 8XY6 (op_8xy6) at PC 0x35A; 8XY61", ["8XY6", "8XY4"]) == ["8XY6"]
    finding = {
        "message": "differs in V; V written by 6XNN (op_6xnn) at PC 0x200: V[1]",
        "extra": {"explain": "V written by 6XNN (op_6xnn) at PC 0x200: V[1]\nran: 8XY6@202"},
    }
    assert "8XY6" not in finding_text(finding)  # the trace of every instruction run is not said
    mapped = chip8_map()
    assert mapped.first_named(finding) == "6XNN"
    finding["message"] = "differs in V, memory; memory by FX55 (op_fx55); V by 8XY6 (op_8xy6)"
    assert mapped.first_named(finding) == "FX55"  # the message comes before the explain text
    assert mapped.named(finding) == ["6XNN", "8XY6", "FX55"]


SHR = "self.v[0xF] = b & 1;"
KEY = "if self.keys[(self.v[x] & 0xF) as usize] != 0 {"
TIMER = "self.delay_timer = (self.delay_timer - 1).max(0);"


def rust_kill(
    text: str, finding: dict[str, Any], affected: dict[str, int] | None = None
) -> MutantRun:
    source = (RUST / "chip8.rs").read_text()
    line = line_of(source, text)
    m = Mutant(f"src/chip8.rs:arith:{line}:1", "arith", "src/chip8.rs", line, "x", source)
    target = Target(load_spec(CHIP8), "port", RUST.parent, (), RUST.parent)
    job = MutantJob(target, m, Path("."), (0, 1), VerifyOptions())
    report = {"verdict": "not equivalent", "levels": [{"level": 1, "status": "fail"}]}
    diff = {"effort": "light", "differing": affected or {"V": 3}}
    return MutantRun(job, report=report, first_finding=finding, differential=diff)


def step_finding(*handlers: str) -> dict[str, Any]:
    writes = "; ".join(f"{h} (op_{h.lower()}) at PC 0x330: V[15]" for h in handlers)
    explain = f"V written in the reference's step by {writes}\ninstructions run: 8XY6@330 6XNN@332"
    message = (
        f"one step differs in V (first at V[15]); V written in the reference's step by {writes}"
    )
    return {"check": "step.mismatch", "fields": ["V"], "message": message,
            "extra": {"explain": explain}}  # fmt: skip


def test_judge_asks_whether_the_finding_names_the_mutated_handler() -> None:
    mapped, source = chip8_map(), (RUST / "chip8.rs").read_text()
    fields = load_spec(CHIP8).field_names

    def judged(run: MutantRun) -> Any:
        return judge(run, source, fields, mapped)

    right = judged(rust_kill(SHR, step_finding("8XY4", "8XY6")))
    assert (right.status, right.mutated_handlers, right.handler_localized) == (
        "killed",
        ["8XY6"],
        True,
    )
    assert right.named_handlers == ["8XY4", "8XY6"] and "8XY6 (op_8xy6)" in right.finding_message
    assert right.first_named_handler == "8XY4"  # named, but not first
    assert right.finding_explain.endswith("6XNN@332")
    # names a field the mutant changes, but another handler: field-localized, not by handler
    wrong = judged(rust_kill(SHR, step_finding("6XNN")))
    assert wrong.field_localized and wrong.handler_localized is False
    assert wrong.named_handlers == ["6XNN"]  # 8XY6 only in the trace of instructions run
    # a line in no handler: no handler verdict; field localization stands for it
    timer_finding = {"check": "step.mismatch", "fields": ["delay_timer"], "message": "x"}
    timer = judged(rust_kill(TIMER, timer_finding, {"delay_timer": 1}))
    assert (timer.mutated_handlers, timer.handler_localized, timer.field_localized) == (
        [],
        None,
        True,
    )
    # a crash whose site lies in the mutated arm names its handler
    thrown = {"file": "/tmp/m/src/chip8.rs", "line": line_of(source, KEY) + 1, "text": "x"}
    crash = {"check": "exception", "fields": [], "message": "panicked", "port_lines": [thrown],
             "extra": {"side": "port", "call": "step", "handler": "execute [0xE => 0x9E]"}}  # fmt: skip
    crashed = judged(rust_kill(KEY, crash, {}))
    assert crashed.named_handlers == ["EX9E"] and crashed.handler_localized is True
    assert crashed.first_named_handler == "EX9E"

    report = MutationReport("chip8", "port", ["src/chip8.rs"], [0, 1], {}, 4, 0, handlers=True)
    report.outcomes = [right, wrong, timer, crashed]
    loc = report.localization()
    assert loc["localized"] == 0.75 and loc["handler"] == pytest.approx(2 / 3)
    assert loc["field"] == 0.75  # right, wrong and timer name a changed field
    data = report.to_dict()
    assert data["handlers"] == {
        "declared": True,
        "kills_in_handlers": 3,
        "handler_localized": 2,
        "first_named_localized": 1,
        "mean_named": pytest.approx(4 / 3),
    }
    assert data["mutants"][1]["named_handlers"] == ["6XNN"]
    out = io.StringIO()
    report.render(Console(file=out, width=400))
    assert "by handler: 2 of 3 kills of mutants in a handler named it, 1 named it first" in (
        out.getvalue()
    )
    # without the env's handlers, the same kills are judged by field and crash site
    plain = judge(rust_kill(SHR, step_finding("6XNN")), source, fields)
    assert plain.mutated_handlers is None and plain.handler_localized is None
    report.outcomes = [plain]
    assert report.localization()["localized"] == 1.0 and report.localization()["handler"] is None


def results_page() -> Any:
    spec = importlib.util.spec_from_file_location(
        "mutation_results", ROOT / "benchmarks" / "mutation_results.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_page_renders_the_handler_measure_and_old_campaigns() -> None:
    page = results_page()
    recorded = json.loads((ROOT / "docs" / "mutate" / "chip8-rust.json").read_text())
    # a campaign from before the handler measure: no "handlers" key, no handler keys per mutant
    old = {k: v for k, v in recorded.items() if k != "handlers"}
    old["localization"] = {"localized": 0.8, "field": 0.75, "site": 0.05, "line": 0.25}
    handler_keys = {"mutated_handlers", "named_handlers", "handler_localized"}
    old["mutants"] = [
        {k: v for k, v in m.items() if k not in handler_keys} for m in recorded["mutants"]
    ]
    text = "\n".join(page.section(old, "cmd"))
    assert "**localized 80.0%**" in text and "by handler" not in text
    summary = {"declared": True, "kills_in_handlers": 2, "handler_localized": 1,
               "first_named_localized": 0, "mean_named": 2.5}  # fmt: skip
    new = dict(old, handlers=summary)
    new["localization"] = dict(old["localization"], handler=0.5)
    kill = next(m for m in old["mutants"] if m["id"].endswith("logic:196:1"))
    kill = dict(kill, mutated_handlers=["5XY0"], named_handlers=["6XNN"])
    new["mutants"] = [dict(kill, handler_localized=False)]
    text = "\n".join(page.section(new, "cmd"))
    assert (
        "named that handler for 1 (50.0%; a finding named 2.5 handlers on average; named it "
        "first for 0)" in text
    )
    assert "(in 5XY0): L1 `step.mismatch` named 6XNN" in text
