"""Stop signals, lost output and writes cut short: the command runs in its own session, and a signal goes to
its whole process group, as systemd, Slurm's scancel and `kill -TERM -PGID` send it (docs/cli.md,
"Stopping and resuming")."""

from __future__ import annotations

import pytest

from tests.cli._run import RLLIB_TINY
from tests.sweep._checks import stopped_and_saved, trained_to
from tests.sweep._setups import cut_copy, folder, run_copy
from tests.sweep._sweep import Case, check, params, without

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"
BACKENDS = ("native", "subprocess", "inprocess")


def stop_cases() -> list[Case]:
    cases: list[Case] = []
    run = ["--run-dir", "run"]
    ppo = ["--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=32", "--checkpoint-every", "64"]

    def live(group: str, *argv: str, **kw) -> None:
        kw = {"expect": "clean", "writes_nothing": False, "exit_code": 0, **kw}
        cases.append(Case(group, ["train", *argv], **kw))

    g = "train: SIGTERM to the process group"
    stop = {"send_signal": "SIGTERM", "check": stopped_and_saved()}
    forever = ["--timesteps", "1e6", *run]
    for backend in BACKENDS:
        live(g, "ppo", ENV, "--backend", backend, *ppo, *forever, **stop)
    live(g, "ppo", "RetroKit/Airstriker-Genesis-v0", *ppo, *forever, **stop)
    live(
        g, "dqn", ENV, "--preset", "pong-dqn-fast", "--set", "parallel_play.when=always", "--set",
        "learning_starts=64", "--set", "buffer_size=1000", "--n-envs", "2", "--checkpoint-every", "128",
        *forever, **stop,
    )  # fmt: skip
    live(g, "appo", ENV, *RLLIB_TINY, "--checkpoint-every", "32", *forever, **stop)
    g = "train: SIGHUP to the process group (terminal closed)"
    live(g, "ppo", ENV, *ppo, *forever, send_signal="SIGHUP", check=stopped_and_saved())
    gone = {"send_signal": "SIGHUP", "closed": ("stdout", "stderr"), "check": stopped_and_saved("run", False)}
    live(f"{g}, stdout and stderr closed", "ppo", ENV, *ppo, *forever, **gone)  # nothing can be written
    # importing, parsing, checking, building envs (or, on a fast machine, training has begun: a stop)
    for delay in ("0.3", "0.6", "1", "2", "4"):
        g = f"train: Ctrl-C {delay} s after the start"
        cases.append(
            Case(g, ["train", "ppo", ENV, "--n-envs", "2", *ppo[2:], *run], expect="interrupted",
                 send_signal="SIGINT", signal_when=delay, writes_nothing=False, ci=delay == "1")
        )  # fmt: skip
    for closed in (("stdout",), ("stderr",), ("stdout", "stderr")):
        g = f"train: lost output ({' and '.join(closed)} closed at the start)"
        live(g, "ppo", ENV, *ppo, "--timesteps", "128", *run, closed=closed, check=trained_to(128))
    g = "train: lost output (the reader of stdout goes away)"
    live(g, "ppo", ENV, *ppo, "--timesteps", "128", *run, close_stdout=True, check=trained_to(128))
    g = "train --resume: writes cut short"
    live(
        g, "--resume", "run", "--timesteps", "96",
        setup=[
            run_copy(), cut_copy("checkpoints/.model_96_steps.tmp-999999.zip"),
            folder("run/checkpoints/.model_128_steps.tmp-999998"), cut_copy("checkpoints/model_96_steps.zip"),
        ],
        check=trained_to(96, "model_64_steps.zip (64 steps)", "tmp-999999.zip: a write cut short"), ci=True,
    )  # fmt: skip
    return cases


# the same stop in tests/cli/test_stop_signals.py: that test is kept, not this case
SIGTERM = "test_sigterm_to_the_process_group_saves_and_exits_0"
PPO = "--n-envs 2 --set n_steps=32 --set batch_size=32 --checkpoint-every 64"
FOREVER = "--timesteps 1e6 --run-dir run"
RLLIB = "test_rllib_run_stopped_by_its_group_resumes_by_its_relative_path_then_eval_record_plot"
CLOSED = "test_closed_output_does_not_stop_or_fail_a_run"
IN_TESTS_CLI = {
    **{f"retrokit train ppo {ENV} --backend {backend} {PPO} {FOREVER}": SIGTERM for backend in BACKENDS},
    f"retrokit train ppo RetroKit/Airstriker-Genesis-v0 {PPO} {FOREVER}": SIGTERM,
    f"retrokit train dqn {ENV} --preset pong-dqn-fast --set parallel_play.when=always "
    f"--set learning_starts=64 --set buffer_size=1000 --n-envs 2 --checkpoint-every 128 {FOREVER}": SIGTERM,
    f"retrokit train appo {ENV} {' '.join(RLLIB_TINY)} --checkpoint-every 32 {FOREVER}": RLLIB,
    f"retrokit train ppo {ENV} {PPO} {FOREVER}": "test_sighup_with_the_terminal_gone_saves_and_exits_0",
    f"retrokit train ppo {ENV} {PPO} --timesteps 128 --run-dir run": CLOSED,
}


@pytest.mark.parametrize("case", params(without(stop_cases(), IN_TESTS_CLI)))
def test_case(case: Case, sweep, tmp_path) -> None:
    check(case, tmp_path)
