"""The RLlib engine: ``--set`` values refused before Ray starts, ``--address`` at services that are not a Ray
head, ``--resume`` of an RLlib run whose config.yaml was edited."""

from __future__ import annotations

import pytest

from tests.cli._run import RLLIB_TINY
from tests.sweep._setups import Setup, damage, edit_config, named, rllib_run_copy
from tests.sweep._sweep import Case, check, ci_first, params

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"
RLLIB_SMALL = [*RLLIB_TINY, "--checkpoint-every", "0"]


def rllib_cases() -> list[Case]:
    cases: list[Case] = []
    quick = ["--engine", "rllib", "--run-dir", "run", "--timesteps", "64"]
    g = "train rllib: --set"
    for algo, item in [
        ("ppo", "gamma=abc"), ("ppo", "lr=abc"), ("ppo", "num_epochs=1.5"), ("ppo", "use_kl_loss=abc"),
        ("ppo", "kl_coeff=-1"), ("ppo", "entropy_coeff=[[0, 0.01], [1e6, -1]]"),
        ("ppo", "minibatch_size=100000"), ("ppo", "grad_clip_by=bogus"), ("ppo", "num_env_runners=2"),
        ("ppo", "encoder_kwargs={bogus: 1}"), ("ppo", "encoder_kwargs={features_dim: 0}"),
        ("ppo", "channels_last=abc"), ("ppo", "sample_timeout_s=0"),
        ("appo", "circular_buffer_num_batches=0"), ("appo", "broadcast_interval=0"),
        ("appo", "minibatch_size=7"),
        ("impala", "vtrace_clip_rho_threshold=-1"), ("impala", "learner_queue_size=0"),
        ("dqn", "training_intensity=0"), ("dqn", "replay_buffer_config.capacity=0"),
        ("dqn", "replay_buffer_config={capacity: 0}"), ("dqn", "epsilon=2"), ("dqn", "epsilon=[[0, 1.5]]"),
        ("dqn", "num_atoms=51"), ("dqn", "td_error_loss_fn=bogus"), ("dqn", "dueling=abc"),
        ("dqn", "single_frame_replay=abc"), ("dqn", "n_step=0"),
    ]:  # fmt: skip
        key = item.split("=")[0].split(".")[0]
        cases.append(Case(g, ["train", algo, ENV, *quick, "--set", item], needles=(key,)))
    if not _cuda():
        gpu = ["train", "ppo", ENV, *quick, "--set", "num_gpus_per_learner=1"]
        cases.append(Case(g, gpu, needles=("GPU",)))
    g = "train rllib: --address"
    for kind in ("listener", "web", "grpc", "closed"):  # the fixture not_ray_heads
        address = f"{{address:{kind}}}"
        argv = ["train", "appo", ENV, *RLLIB_SMALL, "--address", address, "--run-dir", "run"]
        cases.append(Case(g, [*argv, "--timesteps", "64"], needles=(address,)))
    cases.append(Case(g, ["train", "appo", ENV, *quick, "--address", "abc"], needles=("HOST:PORT",)))
    return cases


def rllib_resume_cases() -> list[Case]:
    """An edited or damaged RLlib run (an edited network or algo: tests/cli/test_train_faults.py)."""
    cases: list[Case] = []
    g = "train --resume rllib"

    def add(line: str) -> Setup:  # a line under hyperparameters:
        setup = edit_config(lambda t: t.replace("  gamma: 0.99", f"  gamma: 0.99\n  {line}"))
        return named(f"config + {line}", setup)

    def gamma(value: str) -> Setup:
        return named(
            f"config gamma: {value}", edit_config(lambda t: t.replace("  gamma: 0.99", f"  gamma: {value}"))
        )

    for setup, needles in [
        (gamma("2"), ("gamma",)),
        (gamma("abc"), ("gamma",)),
        (add("encoder_kwargs: {features_dim: 256}"), ("encoder_kwargs",)),
        (add("dueling: abc"), ("dueling",)),
        (damage("checkpoints/*/policy.pt", "text"), ("cannot read checkpoint",)),
        (damage("checkpoints", "remove"), ("no checkpoint",)),
    ]:  # fmt: skip
        argv = ["train", "--resume", "run", "--timesteps", "640"]
        cases.append(Case(g, argv, setup=[rllib_run_copy(), setup], needles=needles))
    return cases


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.parametrize("case", params(ci_first(rllib_cases())))
def test_case(case: Case, sweep, not_ray_heads, tmp_path) -> None:
    check(case, tmp_path)


@pytest.mark.parametrize("case", params(rllib_resume_cases()))
def test_resume(case: Case, sweep, sweep_rllib_run, tmp_path) -> None:
    check(case, tmp_path)
