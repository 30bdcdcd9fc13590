"""Files a stranger may have made (docs/cli.md, "Files from others"): pickles, torch globals, bombs, links out
of the run dir, RLlib state this user's kit did not sign."""

from __future__ import annotations

import pytest

from tests.sweep._sweep import (
    Case,
    bomb,
    check,
    ci_first,
    damage,
    link,
    no_marker,
    params,
    planted_pickles,
    rllib_run_copy,
    run_copy,
    tampered_rllib_state,
    torch_global,
)

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"


def stranger_cases() -> list[Case]:
    """Files a stranger may have made: pickles, torch globals, bombs, links out of the run dir."""
    cases: list[Case] = []
    works = {"expect": "clean", "exit_code": 0, "check": no_marker, "writes_nothing": False}

    def add(group: str, *argv: str, **kw) -> None:
        cases.append(Case(f"strangers: {group}", list(argv), **kw))

    planted = [run_copy(), planted_pickles("model.zip"), planted_pickles("checkpoints/*.zip")]
    g = "pickled values"
    add(g, "eval", "run", "--episodes", "1", setup=planted, **works)
    add(g, "export", "run", "out", setup=planted, **works)
    add(g, "train", "--resume", "run", "--timesteps", "96", setup=planted, **works)
    outside = [run_copy(), planted_pickles("model.zip")]
    add(g, "eval", "run/model.zip", "--env", ENV, setup=[*outside, damage("config.yaml", "remove")],
        needles=("--allow-pickle", "would unpickle"), check=no_marker)  # fmt: skip
    g = "torch globals"
    add(g, "eval", "run", setup=[run_copy(), torch_global("model.zip")], needles=("not plain weights",),
        check=no_marker)  # fmt: skip
    g = "bombs"
    add(g, "eval", "run", setup=[run_copy(), bomb("model.zip", "policy.pth", 1100)], needles=("compressed",))
    add(g, "eval", "run", setup=[run_copy(), bomb("model.zip", "data", 200)], needles=("would inflate",))
    add(g, "train", "--resume", "run", setup=[run_copy(), bomb("checkpoints/model_64_steps.zip", "policy.pth",
        1100)], needles=("compressed",))  # fmt: skip
    g = "export links"
    for name, target in (("monitor/9.monitor.csv", "secret.txt"), ("monitor/resume-1", "secrets"),
                         ("log.txt", "secret.txt"), ("model.zip", "secret.txt")):  # fmt: skip
        add(g, "export", "run", "out", setup=[run_copy(), link(name, target)], needles=("is a link to",))
    g = "rllib state"  # RLlib unpickles its state: only checkpoints this user's kit signed are resumed
    add(g, "train", "--resume", "run", "--timesteps", "160", setup=[rllib_run_copy(), tampered_rllib_state],
        needles=("no valid signature",), check=no_marker)  # fmt: skip
    return cases


@pytest.mark.parametrize("case", params(ci_first(stranger_cases())))
def test_case(case: Case, sweep, sweep_rllib_run, tmp_path) -> None:
    check(case, tmp_path)
