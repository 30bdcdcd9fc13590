"""The kit's one thread rule (``retro_atari_kit.models.threads``): the numbers it picks for given cores,
env workers, torch counts and environment variables, and that playing an agent (eval, record, periodic
evaluation) runs torch on one thread. No timings: what is checked holds on an idle and a loaded machine."""

from __future__ import annotations

import pytest
import torch

from retro_atari_kit.models.threads import (
    PLAYING_THREADS,
    choose_threads,
    learner_threads,
    playing_threads,
    usable_cores,
    user_thread_setting,
)

NO_ENV: dict[str, str] = {}


@pytest.fixture
def torch_threads(monkeypatch):
    """No user setting in the environment; torch's thread count put back after the test."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(
    ("cores", "workers", "current", "expected"),
    [
        (2, 0, None, 2),  # nothing else runs: every usable core
        (2, 4, None, 1),  # quick-train on 2 cores: 4 env workers, one thread
        (2, 1, 2, 1),  # a play process beside the trainer: cores - 1
        (16, 8, 16, 8),  # 8 env workers on 16 cores: the other 8
        (16, 8, 4, 4),  # torch has fewer already (a user's torch.set_num_threads, physical cores): kept
        (16, 0, 32, 16),  # never more than the cores this process may use
        (1, 0, 8, 1),
        (1, 3, 1, 1),  # never below one
    ],
)
def test_the_rule_leaves_the_env_workers_their_cores(cores, workers, current, expected):
    assert choose_threads(cores, workers, current, environ=NO_ENV) == expected


@pytest.mark.parametrize(
    ("cores", "workers", "busy", "expected"),
    [
        (2, 1, 0.0, 2),  # DQN's one env on an idle 2-core machine: the caller waits, every core
        (2, 0, 0.0, 2),  # in-process env / the update phase: every core
        (2, 4, 0.0, 1),  # PPO's rollout, 4 env workers on 2 cores
        (2, 8, 0.0, 1),
        (16, 8, 0.0, 9),  # 8 workers stepping while the caller waits: 8 cores + the caller's thread
        (16, 1, 0.0, 16),
        (2, 1, 1.6, 1),  # a loaded machine (others keep 1.6 of 2 cores busy): one thread, as before
        (2, 0, 2.0, 1),  # ... also while learning: the loaded-machine gains of docs/install.md stay
        (2, 1, 0.4, 2),  # a little load rounds away
        (16, 0, 6.0, 10),  # free cores = usable - busy elsewhere
        (16, 4, 30.0, 1),  # never below one
    ],
)
def test_synchronous_workers_leave_the_waiting_callers_core_to_torch(cores, workers, busy, expected):
    assert choose_threads(cores, workers, environ=NO_ENV, busy=busy, synchronous=True) == expected


@pytest.mark.parametrize(
    ("cores", "workers", "busy", "expected"),
    [(2, 1, 0.0, 1), (16, 8, 0.0, 8), (16, 8, 4.0, 4), (2, 0, 1.0, 1), (4, 1, 0.0, 3)],
)
def test_workers_that_run_beside_torch_take_their_cores(cores, workers, busy, expected):
    # a play process beside the trainer, RLlib's env runners: they run while torch computes
    assert choose_threads(cores, workers, environ=NO_ENV, busy=busy) == expected


def test_busy_elsewhere_is_a_share_of_the_usable_cores():
    from retro_atari_kit.models.threads import busy_elsewhere

    busy = busy_elsewhere(0.05)
    assert 0.0 <= busy <= usable_cores() + 0.5  # rounding of the OS's tick counts


@pytest.mark.parametrize(
    "environ", [{"OMP_NUM_THREADS": "3"}, {"MKL_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "8", "X": "1"}]
)
def test_a_thread_count_set_by_the_user_always_wins(environ):
    assert choose_threads(2, 4, 2, environ=environ) is None  # None: torch is left as it is
    assert user_thread_setting(environ) is not None


def test_empty_thread_variables_are_not_a_setting():
    assert user_thread_setting({"OMP_NUM_THREADS": "", "MKL_NUM_THREADS": "  "}) is None
    assert choose_threads(4, 1, environ={"OMP_NUM_THREADS": ""}) == 3


@pytest.mark.parametrize(("cores", "workers", "current"), [(0, 0, None), (2, -1, None), (2, 0, 0)])
def test_the_rule_refuses_impossible_inputs(cores, workers, current):
    with pytest.raises(ValueError, match="need cores >= 1"):
        choose_threads(cores, workers, current, environ=NO_ENV)
    with pytest.raises(ValueError, match="busy >= 0"):
        choose_threads(2, 0, environ=NO_ENV, busy=-1.0)


def test_usable_cores_are_the_affinity_mask():
    import os

    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert usable_cores() == expected >= 1


def test_learner_threads_apply_the_rule_to_torch(torch_threads):
    torch.set_num_threads(64)
    assert learner_threads(workers=0) == torch.get_num_threads() == usable_cores()
    torch.set_num_threads(64)
    assert learner_threads(workers=usable_cores()) == torch.get_num_threads() == 1


def test_learner_threads_leave_a_user_setting_alone(torch_threads, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    torch.set_num_threads(3)
    assert learner_threads(workers=8) == torch.get_num_threads() == 3


def test_playing_uses_one_thread_and_restores_the_count(torch_threads):
    torch.set_num_threads(2)
    with playing_threads() as threads:
        assert threads == torch.get_num_threads() == PLAYING_THREADS == 1
    assert torch.get_num_threads() == 2


def test_playing_leaves_a_user_setting_alone(torch_threads, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    torch.set_num_threads(2)
    with playing_threads() as threads:
        assert threads == torch.get_num_threads() == 2


class ThreadRecorder:
    """An SB3 model whose ``predict`` notes torch's thread count each time it is asked to act."""

    def __init__(self, model) -> None:
        self.model, self.observation_space, self.action_space = (
            model,
            model.observation_space,
            model.action_space,
        )
        self.threads: set[int] = set()

    def predict(self, obs, state=None, episode_start=None, deterministic=False):
        self.threads.add(torch.get_num_threads())
        return self.model.predict(obs, state=state, episode_start=episode_start, deterministic=deterministic)


@pytest.fixture(scope="module")
def untrained_ppo():
    import stable_baselines3 as sb3
    from stable_baselines3.common.vec_env import DummyVecEnv

    from retro_atari_kit.registration import make_env

    env = DummyVecEnv([lambda: make_env("RetroKit/Pong-v0")])
    yield sb3.PPO("CnnPolicy", env, n_steps=8, batch_size=8, seed=0, device="cpu")
    env.close()


@pytest.mark.timeout(300)
def test_evaluation_and_recording_play_on_one_thread(untrained_ppo, torch_threads, tmp_path):
    from retro_atari_kit.evaluation import evaluate_model
    from retro_atari_kit.recording import record_video

    kwargs = {"max_episode_steps": 20}  # short games: the thread count is what is checked
    torch.set_num_threads(2)
    model = ThreadRecorder(untrained_ppo)
    scores = evaluate_model(model, "RetroKit/Pong-v0", kwargs, episodes=2, seed=0)
    assert len(scores) == 2 and model.threads == {1}
    assert torch.get_num_threads() == 2  # the learner's count is back (periodic evaluation)
    model.threads.clear()
    record_video(model, "RetroKit/Pong-v0", kwargs, str(tmp_path / "a.gif"), max_steps=10)
    assert model.threads == {1} and torch.get_num_threads() == 2


def test_phase_threads_leave_a_user_setting_alone(torch_threads, monkeypatch):
    from retro_atari_kit.models.threads import PhaseThreads

    monkeypatch.setenv("MKL_NUM_THREADS", "2")
    torch.set_num_threads(2)
    phases = PhaseThreads(workers=8)
    assert phases.acting() == phases.learning() == phases.restore() == 2
    assert "MKL_NUM_THREADS=2 set" in phases.describe()


class UpdateThreads:
    """Wraps a model's ``train`` to note torch's thread count while it updates."""

    def __init__(self, model) -> None:
        self.seen: set[int] = set()
        self.train = model.train
        model.train = self

    def __call__(self) -> None:
        self.seen.add(torch.get_num_threads())
        self.train()


@pytest.mark.timeout(300)
def test_a_real_ppo_run_learns_on_every_core_and_acts_on_fewer(torch_threads):
    """SB3's PPO with 4 env workers (subprocesses, stepping while the learner waits): the thread count the
    rule gives each phase, read inside the rollout (every env step) and inside ``train``."""
    import stable_baselines3 as sb3  # a package dependency: a broken install fails here, not skips
    from retro_atari_kit.integrations.sb3.training.callbacks import ThreadsByPhase
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import SubprocVecEnv

    from retro_atari_kit.registration import make_env

    cores = usable_cores()
    if cores < 2:
        pytest.skip("one usable core: both phases get one thread")

    class RolloutThreads(BaseCallback):
        seen: set[int] = set()

        def _on_step(self) -> bool:
            self.seen.add(torch.get_num_threads())
            return True

    torch.set_num_threads(cores)
    venv = SubprocVecEnv([lambda: make_env("RetroKit/Pong-v0") for _ in range(4)], start_method="fork")
    try:
        model = sb3.PPO("CnnPolicy", venv, n_steps=8, batch_size=16, n_epochs=1, seed=0, device="cpu")
        update = UpdateThreads(model)
        rollout = RolloutThreads()
        model.learn(64, callback=[ThreadsByPhase(4, measure=False), rollout])  # idle machine assumed
    finally:
        venv.close()
    assert rollout.seen == {max(1, cores - 3)}  # 2 cores: 1 while 4 workers step
    assert update.seen == {cores}  # every core while nothing else of the run runs
    assert torch.get_num_threads() == cores  # the count from before training is back
