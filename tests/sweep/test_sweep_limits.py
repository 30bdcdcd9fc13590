"""The machine's limits (docs/cli.md, "Limits"): sizes and counts without bounds, real limits (ulimit -v,
ulimit -u), damaged inputs of the kind."""

from __future__ import annotations

import pytest

from tests.sweep._checks import absent, quiet_plot
from tests.sweep._setups import deleted_cwd, rlimit, run_copy, set_field
from tests.sweep._sweep import Case, check, ci_first, params, without

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"


TINY_TRAIN = ["--n-envs", "1", "--set", "n_steps=32", "--set", "batch_size=32"]


# the same command in tests/cli/test_files_from_others.py, there with the message's words: that test is kept
WRONG_TYPE = "test_a_config_field_of_the_wrong_type_is_one_line"
IN_TESTS_CLI = {
    "retrokit eval run [config env_id: [a, b]]": WRONG_TYPE,
    "retrokit train --resume run --timesteps 96 [config env_id: [a, b]]": WRONG_TYPE,
    "retrokit eval run [config engine: [a, b]]": WRONG_TYPE,
    "retrokit train --resume run --timesteps 96 [config engine: [a, b]]": WRONG_TYPE,
    "retrokit plot run --title $\\foo{$ --out p.png": "test_a_title_mathtext_cannot_parse_is_drawn_literally",
    "retrokit plot run --out p.png": "test_an_unwritable_home_gives_no_matplotlib_warnings",
    "retrokit eval run": "test_a_deleted_working_directory_is_named",
}


def limit_cases() -> list[Case]:
    """Sizes and counts without bounds, real limits (ulimit -v, ulimit -u), damaged inputs of the kind."""
    cases: list[Case] = []
    good = [run_copy()]
    new = ["--timesteps", "64", *TINY_TRAIN]

    def add(group: str, *argv: str, **kw) -> None:
        cases.append(Case(f"limits: {group}", list(argv), **kw))

    g = "sizes"
    add(g, "train", "ppo", ENV, "--run-dir", "r", "--n-envs", "10000", "--timesteps", "64", needles=("4096",),
        check=absent("r"))  # fmt: skip
    add(g, "train", "ppo", ENV, "--run-dir", "r", *new, "--env-kwarg", "screen_size=20000",
        needles=("screen_size=20000",))  # fmt: skip
    add(g, "train", "ppo", ENV, "--run-dir", "r", *new, "--env-kwarg", "frame_stack=1000000",
        needles=("frame_stack=1000000",))  # fmt: skip
    add(g, "eval", "run", "--env-kwarg", "screen_size=20000", setup=good, needles=("screen_size=20000",))
    g = "real limits"
    add(g, "train", "ppo", ENV, "--run-dir", "r", "--n-envs", "64", "--backend", "subprocess", *new[:2],
        preexec=rlimit("NPROC", 8), needles=("RLIMIT_NPROC",))  # fmt: skip
    add(g, "train", "dqn", ENV, "--run-dir", "r", "--set", "buffer_size=3000000", "--timesteps", "64",
        preexec=rlimit("AS", 6 << 30), needles=("RLIMIT_AS",))  # fmt: skip
    g = "damaged inputs"
    for field in ("env_id", "algo", "engine", "n_envs", "env_kwargs"):
        for argv in (
            ["eval", "run"],
            ["train", "--resume", "run", "--timesteps", "96"],
            ["export", "run", "o"],
        ):
            add(
                g,
                *argv,
                setup=[run_copy(), set_field(field, "[a, b]")],
                needles=(f"{field}: ['a', 'b'] is not",),
            )
    add(g, "plot", "run", "--title", "$\\foo{$", "--out", "p.png", setup=good, expect="warning",
        needles=("not valid mathtext",), writes_nothing=False)  # fmt: skip
    add(g, "plot", "run", "--out", "p.png", setup=good, expect="clean", exit_code=0, writes_nothing=False,
        env={"HOME": "/dev/null", "MPLCONFIGDIR": ""}, check=quiet_plot)  # fmt: skip
    add(g, "eval", "run", setup=good, preexec=deleted_cwd, needles=("was deleted",))
    return cases


@pytest.mark.parametrize("case", params(ci_first(without(limit_cases(), IN_TESTS_CLI))))
def test_case(case: Case, sweep, tmp_path) -> None:
    check(case, tmp_path)
