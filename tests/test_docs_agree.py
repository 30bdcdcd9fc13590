"""The figures a new user reads in two places say the same, and say what the code does.

- docs/cli.md's quick start gives the README's time for the same command, and its ``retrokit train`` synopsis
  the ``--timesteps`` default ``retro_atari_kit.runs.TrainSpec`` has;
- README's install note and docs/install.md say how to get torch's CPU build on a machine without a GPU,
  while README's command 1 (which CI runs, ``.ci/run``) stays as it is;
- every link from one markdown page to another (or to a heading) lands on a file and heading that exist.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from retro_atari_kit.cli.arguments import parse_timesteps
from retro_atari_kit.runs import TrainSpec

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
INSTALL = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
CPU_INDEX = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
QUICK_TRAIN = "retrokit train ppo RetroKit/Pong-v0 --timesteps 2e4 --n-envs 4 --run-dir runs/quickstart"


def test_the_quick_starts_time_is_the_readmes():
    readme = re.search(r"quick-train on Pong, (\d+ s) of training on 2 idle CPU cores", README)
    cli = re.search(r"^## Quick start \((\d+ s) of training on 2 idle CPU cores\)$", CLI, re.M)
    assert readme and cli, "a quick start without its time"
    assert cli.group(1) == readme.group(1)
    assert QUICK_TRAIN in README and QUICK_TRAIN in CLI  # the same command is timed


def test_the_train_synopsis_gives_the_codes_timesteps_default():
    default = TrainSpec.__dataclass_fields__["timesteps"].default
    synopsis = re.search(r"^retrokit train ALGO ENV_ID .*\[--timesteps (\S+)\]", CLI, re.M)
    assert synopsis and parse_timesteps(synopsis.group(1)) == default
    stated = re.search(r"`--timesteps`\s+\(default `(\S+)`\)", CLI)
    assert stated and parse_timesteps(stated.group(1)) == default


def test_the_install_notes_give_the_cpu_build_and_keep_command_1():
    assert CPU_INDEX in README and CPU_INDEX in INSTALL
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for step in ("pip install torch==2.13.0", 'pip install -e ".[dev,contrib,zoo,rllib,eval]"'):
        assert f"{step} &&" in README and f"\n{step}\n" in ci


LINK = re.compile(r"\]\(([^()\s#]*)(?:#([^()\s]+))?\)")


def prose_lines(page: Path) -> list[str]:
    """The page's lines outside fenced code blocks (a ``# comment`` in a shell block is no heading)."""
    lines, in_code = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code:
            lines.append(line)
    return lines


@functools.cache
def heading_anchors(page: Path) -> frozenset[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = (re.match(r"#+\s+(.*)", line) for line in prose_lines(page))
    return frozenset(
        re.sub(r"[^\w\- ]", "", h.group(1).strip().lower()).replace(" ", "-") for h in headings if h
    )


def test_links_between_the_docs_land_on_a_file_and_heading():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target, anchor in (link for line in prose_lines(page) for link in LINK.findall(line)):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path = (page.parent / target).resolve() if target else page
            if not path.exists() or (anchor and path.suffix == ".md" and anchor not in heading_anchors(path)):
                broken.append(f"{page.relative_to(ROOT)}: ({target}{'#' + anchor if anchor else ''})")
    assert broken == []
