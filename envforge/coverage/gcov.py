"""A C reference built a second time with gcc's coverage instrumentation, and read with gcov.

The instrumented library computes exactly what the plain one does (same flags, plus counters);
the C driver switches to it for the stretches whose coverage is asked for. Counters live in the
process: ``start`` zeroes them and removes the data file; ``read`` writes them out
(``__gcov_dump``, which adds them to the data file), zeroes them again, and runs ``gcov`` on the
file, which therefore holds everything counted since ``start``. Each driver process builds into
its own temporary folder, so concurrent verifications never add to each other's counts.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path

from envforge.coverage.lines import LineCoverage
from envforge.errors import ContractViolation
from envforge.native.cc import c_compiler
from envforge.untrusted.owned_names import owned_prefix

HOOKS = """
/* envforge: write out / zero the coverage counters from ctypes (libgcov's own are hidden) */
extern void __gcov_dump(void);
extern void __gcov_reset(void);
void envforge_gcov_dump(void) { __gcov_dump(); }
void envforge_gcov_reset(void) { __gcov_reset(); }
"""


class GcovBuild:
    def __init__(self, shim: str, flags: list[str], sources: list[Path]) -> None:
        """``shim``: the C backend's batch shim (it includes the reference); ``sources``: the
        reference files whose lines are reported (the included reference and extra sources)."""
        compiler = c_compiler()
        if compiler is None or shutil.which("gcov") is None:
            raise ContractViolation("reference", "coverage", "needs gcc and gcov on the PATH")
        self.sources = [p.resolve() for p in sources]
        # named after its owner: a reference process killed before close leaves it to the next
        # run's sweep of leftovers (envforge/sandbox/leftovers.py)
        self.dir = Path(tempfile.mkdtemp(prefix=owned_prefix("gcov")))
        shim_path = self.dir / "shim.c"
        shim_path.write_text(shim + HOOKS)
        objects = []
        # the shim includes the first source; the others are compiled as units of their own
        for i, unit in enumerate([shim_path, *self.sources[1:]]):
            obj = self.dir / f"unit{i}.o"
            self._run([compiler, *flags, "--coverage", "-fPIC", "-c", str(unit), "-o", str(obj)])
            objects.append(obj)
        self.library = self.dir / "reference-coverage.so"
        self._run(
            [compiler, "-shared", "--coverage", "-o", str(self.library), *map(str, objects), "-lm"]
        )
        self.lib = ctypes.CDLL(str(self.library))
        # removed at close, or when the process exits without closing (a killed verify's is not)
        self._cleanup = weakref.finalize(self, _remove, self.lib, self.dir)
        self._units = [(shim_path, objects[0]), *zip(self.sources[1:], objects[1:], strict=True)]

    @staticmethod
    def _run(cmd: list[str]) -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise ContractViolation(
                "reference", "coverage", f"coverage build failed:\n{proc.stderr[-2000:]}"
            )

    def start(self) -> None:
        for data in self.dir.glob("*.gcda"):
            data.unlink()
        self.lib.envforge_gcov_reset()

    def read(self) -> list[LineCoverage]:
        self.lib.envforge_gcov_dump()
        self.lib.envforge_gcov_reset()
        wanted = {str(p): p for p in self.sources}
        out: dict[str, LineCoverage] = {}
        for unit, obj in self._units:
            proc = subprocess.run(
                ["gcov", "-b", "--json-format", "--stdout", "-o", str(obj), str(unit)],
                capture_output=True,
                text=True,
                cwd=self.dir,
                timeout=120,
            )
            if proc.returncode != 0:
                raise ContractViolation("reference", "coverage", f"gcov failed: {proc.stderr}")
            for doc in proc.stdout.splitlines():
                if doc.strip():
                    for entry in json.loads(doc)["files"]:
                        path = str(Path(self.dir, entry["file"]).resolve())
                        if path in wanted:
                            out[path] = _line_coverage(path, entry["lines"])
        return [out[str(p)] for p in self.sources if str(p) in out]

    def close(self) -> None:
        self._cleanup()


def _remove(lib: ctypes.CDLL, folder: Path) -> None:
    """Delete the build. A dump first: libgcov writes the counters out again when the process
    exits (recreating the folder) unless they were dumped since the last reset."""
    lib.envforge_gcov_dump()
    shutil.rmtree(folder, ignore_errors=True)


def _line_coverage(path: str, lines: list[dict]) -> LineCoverage:
    counts: dict[int, int] = {}
    branches: dict[int, list[int]] = {}
    for line in lines:
        number = int(line["line_number"])
        counts[number] = counts.get(number, 0) + int(line["count"])
        if line.get("branches"):
            # an inlined function's line appears once per copy: add the copies up
            taken = [int(b["count"]) for b in line["branches"]]
            mine = branches.get(number)
            branches[number] = taken if mine is None else _add(mine, taken)
    return LineCoverage(path, "file", counts, branches)


def _add(a: list[int], b: list[int]) -> list[int]:
    if len(a) != len(b):
        return a + b
    return [x + y for x, y in zip(a, b, strict=True)]
