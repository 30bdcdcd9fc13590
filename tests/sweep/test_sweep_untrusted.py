"""Files anyone may have made (docs/cli.md, "Files from others"): pickles, torch globals, bombs, links out
of the run dir, RLlib state this user's kit did not sign."""

from __future__ import annotations

import pytest

from tests.sweep._checks import no_marker
from tests.sweep._setups import (
    bomb,
    damage,
    link,
    named,
    planted_pickles,
    rllib_run_copy,
    run_copy,
    tampered_rllib_state,
    torch_global,
)
from tests.sweep._sweep import Case, check, ci_first, params, without

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"


# the same command in tests/cli/test_files_from_others.py, there with the message's words: that test is kept
PICKLES = "[pickles in run/model.zip; pickles in run/checkpoints/*.zip]"
LINKS = "test_export_publishes_no_link_out_of_the_run_dir"
TORCH = "test_weights_that_ask_torch_to_run_code_are_refused"
OUTSIDE = "test_a_model_file_outside_a_run_dir_is_refused_unless_allowed"
BOMB = "test_a_compression_bomb_is_refused_before_inflating"
IN_TESTS_CLI = {
    f"retrokit train --resume run --timesteps 96 {PICKLES}": "test_pickled_values_in_a_run_dir_never_run",
    f"retrokit eval run/model.zip --env {ENV} [pickles in run/model.zip; run/config.yaml: remove]": OUTSIDE,
    "retrokit eval run [run/model.zip: a torch global]": TORCH,
    "retrokit eval run [run/model.zip policy.pth: 1100 MB of zeros]": BOMB,
    "retrokit eval run [run/model.zip data: 200 MB of zeros]": "test_an_oversized_data_member_is_refused",
    "retrokit export run out [run/monitor/9.monitor.csv -> secret.txt]": LINKS,
    "retrokit export run out [run/monitor/resume-1 -> secrets]": LINKS,
    "retrokit export run out [run/model.zip -> secret.txt]": LINKS,
}


def untrusted_cases() -> list[Case]:
    """Files an untrusted source may have made: pickles, torch globals, bombs, links out of the run dir."""
    cases: list[Case] = []
    works = {"expect": "clean", "exit_code": 0, "check": no_marker, "writes_nothing": False}

    def add(group: str, *argv: str, **kw) -> None:
        cases.append(Case(f"untrusted: {group}", list(argv), **kw))

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
    return cases


# RLlib unpickles its state: only checkpoints this user's kit signed are resumed
RLLIB_STATE = Case(
    "untrusted: rllib state", ["train", "--resume", "run", "--timesteps", "160"],
    setup=[rllib_run_copy(), named("its state tampered with", tampered_rllib_state)],
    needles=("no valid signature",), check=no_marker,
)  # fmt: skip


@pytest.mark.parametrize("case", params(ci_first(without(untrusted_cases(), IN_TESTS_CLI))))
def test_case(case: Case, sweep, tmp_path) -> None:
    check(case, tmp_path)


@pytest.mark.parametrize("case", params([RLLIB_STATE]))
def test_rllib_state(case: Case, sweep, sweep_rllib_run, tmp_path) -> None:
    check(case, tmp_path)
