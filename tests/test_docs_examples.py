"""The ```python examples in README.md and docs/*.md run as written (training budgets shrunk).

Each file's examples run in order as one script, in a fresh interpreter in a temporary directory (files
they write land there), with ``HOME`` pointing at it. An example with an ``if __name__ == "__main__":`` guard
(it starts processes) runs as a script of its own after them, as a user runs it: in one script, every
process it starts would run the other examples' unguarded code again on import. ``.learn(...)`` budgets are
replaced by a few hundred steps so the examples finish in seconds; everything else is the text users copy.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"```python\n(.*?)```", re.S)
LEARN = re.compile(r"\.learn\((?:[^()]|\([^()]*\))*\)")
MAIN_GUARD = 'if __name__ == "__main__":'


def examples(page: Path) -> list[str]:
    return FENCE.findall(page.read_text())


@pytest.mark.parametrize("page", [p for p in PAGES if examples(p)], ids=lambda p: p.name)
def test_examples_run(page: Path, tmp_path: Path):
    blocks = [LEARN.sub(".learn(300)", block) for block in examples(page)]
    guarded = [block for block in blocks if MAIN_GUARD in block]
    scripts = ["\n".join(block for block in blocks if MAIN_GUARD not in block), *guarded]
    (tmp_path / "roms").mkdir()  # for `import_roms("~/roms")`
    env = {**os.environ, "HOME": str(tmp_path)}
    for k, script in enumerate(s for s in scripts if s.strip()):
        (tmp_path / f"example{k}.py").write_text(script)
        proc = subprocess.run(
            [sys.executable, f"example{k}.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        failure = f"{page.name} examples failed:\n{script}\n--- stderr ---\n{proc.stderr[-3000:]}"
        assert proc.returncode == 0, failure
