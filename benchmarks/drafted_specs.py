"""Draft a spec for each shipped gymnasium reference with `envforge init`, then verify the
shipped JAX port against the drafted spec (the check that init's drafts are usable).

    python benchmarks/drafted_specs.py [--scale 0.2] [env ...]

For each env: the fields the draft found against the hand-written spec's, the self-check's
wall time, and the verify verdict per level. Field names the draft could not read from the
source are renamed to the port's (RENAMES, as a reviewer of the draft would), and nothing else
in the draft is touched.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envforge.init.draft import draft_spec  # noqa: E402
from envforge.init.render import render_toml  # noqa: E402
from envforge.spec import load_spec  # noqa: E402
from envforge.verify.context import VerifyOptions  # noqa: E402
from envforge.verify.runner import verify  # noqa: E402

ENVS = ("cartpole", "mountaincar", "mountaincar_continuous", "pendulum", "acrobot")
RENAMES = {"pendulum": {"th": "theta", "thdot": "theta_dot"}}
"""Pendulum's source unpacks ``th, thdot = self.state``; its port calls them theta, theta_dot."""


def renamed(text: str, renames: dict[str, str]) -> str:
    for old, new in renames.items():
        text = re.sub(rf"\bname = \"{old}\"", f'name = "{new}"', text)
        text = re.sub(rf"\bafter\.{old}\b", f"after.{new}", text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("envs", nargs="*", default=list(ENVS))
    parser.add_argument("--scale", type=float, default=0.2)
    args = parser.parse_args()
    for env in args.envs:
        shipped = load_spec(ROOT / "references" / env / "env.toml")
        out = Path(tempfile.mkdtemp(prefix=f"draft-{env}-"))
        start = time.perf_counter()
        draft = draft_spec(shipped.reference, env, out)
        draft_s = time.perf_counter() - start
        assert draft.check is not None
        (out / "env.toml").write_text(renamed(render_toml(draft), RENAMES.get(env, {})))
        spec = load_spec(out / "env.toml")
        print(f"== {env} ({shipped.reference})")
        print(f"   hand-written fields: {', '.join(shipped.field_names)}")
        print(f"   drafted fields:      {', '.join(spec.field_names)}")
        print(f"   left out: {', '.join(n for n, _ in draft.left_out) or '-'}")
        print(f"   termination drafted: {spec.termination is not None}")
        print(f"   {draft.check.summary()}; whole draft {draft_s:.1f} s")
        port = ROOT / "generated" / env / "jax"
        start = time.perf_counter()
        report = verify(spec, port, [0, 1, 2, 3], VerifyOptions(scale=args.scale))
        levels = ", ".join(f"L{r.level} {r.status}" for r in report.levels)
        print(
            f"   verify {port.relative_to(ROOT)} (scale {args.scale}): {levels} "
            f"({time.perf_counter() - start:.0f} s)"
        )
        for r in report.levels:
            if r.status != "pass":
                print(f"     {r.summary}")
                for f in r.findings[:1]:
                    print(f"     {f.message}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
