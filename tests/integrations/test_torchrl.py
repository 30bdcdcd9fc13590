"""TorchRL, unmodified, over the kit's IDs: ``GymEnv`` (single, ``num_envs``, ``ParallelEnv``),
``check_env_specs``, and ``GymWrapper`` over the kit's own vector envs in ``autoreset_mode="Disabled"``.

TorchRL passes ``frameskip`` to ``gym.make`` and drops it only when the ``TypeError`` says Python's
``unexpected keyword argument 'frameskip'``; the kit keeps its own frame skip (4), so TorchRL's stays 1.
Observations are checked against ``gym.make`` envs stepped by hand with the same actions. ``noop_max=0``
(ALE) and ``sticky_actions=0`` (retro) make resets deterministic, so seeds cannot hide a difference.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

# ``import torchrl`` sets the process-wide start method to spawn; collecting this file must not change
# how every later test in the session starts its processes, so it is put back, and set for these tests only
_START_METHOD = mp.get_start_method(allow_none=True)
import torch  # noqa: E402
from torchrl.envs import GymEnv, GymWrapper, ParallelEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

mp.set_start_method(_START_METHOD, force=True)

from retro_atari_kit.envs.ale import make_ale_env  # noqa: E402
from retro_atari_kit.envs.retro import make_retro_env  # noqa: E402

ALE_ID, ALE_KWARGS = "RetroKit/Pong-v0", {"noop_max": 0}
RETRO_ID, RETRO_KWARGS = "RetroKit/Pong-Atari2600-v0", {"sticky_actions": 0.0}
IDS = [(ALE_ID, ALE_KWARGS), (RETRO_ID, RETRO_KWARGS)]


@pytest.fixture(scope="module", autouse=True)
def torchrl_start_method():
    """TorchRL's own start method (spawn) while these tests run, the session's again afterwards."""
    before = mp.get_start_method(allow_none=True)
    mp.set_start_method("spawn", force=True)
    yield
    mp.set_start_method(before, force=True)


def in_fresh_processes(env_id: str) -> str:
    """The ID as TorchRL's worker processes need it. ``import torchrl`` makes ``spawn`` the start method,
    and a spawned worker imports only the main script: under pytest that never imports the kit, so the
    ``module:ID`` form (``gym.make`` imports the module first) is what a test, a notebook or a REPL uses.
    A script that imports ``retro_atari_kit`` itself can use the plain ID (see the last test)."""
    return f"retro_atari_kit:{env_id}"


def actions_of(td) -> np.ndarray:
    """TorchRL's one-hot actions as action indices."""
    return td["action"].argmax(-1).numpy()


def replay(env_id: str, kwargs: dict, actions: np.ndarray):
    """Observations of a ``gym.make`` env: the reset one, then one per action (no episode ends here)."""
    env = gym.make(env_id, **kwargs)
    try:
        observations = [env.reset(seed=0)[0]]
        for action in actions:
            obs, _, terminated, truncated, _ = env.step(int(action))
            assert not (terminated or truncated)
            observations.append(obs)
    finally:
        env.close()
    return np.stack(observations)


@pytest.mark.parametrize(("env_id", "kwargs"), IDS, ids=["ale", "retro"])
def test_gym_env_single(env_id, kwargs):
    env = GymEnv(env_id, **kwargs)
    try:
        assert env.wrapper_frame_skip == 1  # TorchRL dropped frameskip: the kit's frame skip is the only one
        check_env_specs(env)
        spec = env.observation_spec["observation"]
        assert spec.shape == (4, 84, 84) and spec.dtype == torch.uint8
        td = env.rollout(6)
    finally:
        env.close()
    expected = replay(env_id, kwargs, actions_of(td))
    np.testing.assert_array_equal(td["observation"].numpy(), expected[:-1])
    np.testing.assert_array_equal(td["next", "observation"].numpy(), expected[1:])


@pytest.mark.parametrize(("env_id", "kwargs"), IDS, ids=["ale", "retro"])
def test_gym_env_num_envs(env_id, kwargs):
    env = GymEnv(in_fresh_processes(env_id), num_envs=4, **kwargs)
    try:
        assert env.batch_size == torch.Size([4])
        check_env_specs(env)
        td = env.rollout(4)
    finally:
        env.close()
    assert td["next", "observation"].shape == (4, 4, 4, 84, 84)
    for i in range(4):
        expected = replay(env_id, kwargs, actions_of(td)[i])
        np.testing.assert_array_equal(td["next", "observation"][i].numpy(), expected[1:])


@pytest.mark.parametrize(("env_id", "kwargs"), IDS, ids=["ale", "retro"])
def test_parallel_env(env_id, kwargs):
    env = ParallelEnv(2, functools.partial(GymEnv, in_fresh_processes(env_id), **kwargs))
    try:
        check_env_specs(env)
        td = env.rollout(4)
    finally:
        env.close()
    assert td["observation"].dtype == torch.uint8
    for i in range(2):
        expected = replay(env_id, kwargs, actions_of(td)[i])
        np.testing.assert_array_equal(td["next", "observation"][i].numpy(), expected[1:])


def reference_rollout(make, num_envs: int, actions: np.ndarray):
    """Per-env stacks reset by hand where an episode ended: the roots and next observations TorchRL's
    rollout must show, and the done flags."""
    envs = [make() for _ in range(num_envs)]
    roots, nexts, dones = [], [], []
    try:
        current = [env.reset()[0] for env in envs]
        for t in range(actions.shape[1]):
            roots.append(np.stack(current))
            row, done_row = [], []
            for i, env in enumerate(envs):
                obs, _, terminated, truncated, _ = env.step(int(actions[i, t]))
                row.append(obs)
                done_row.append(terminated or truncated)
                current[i] = env.reset()[0] if terminated or truncated else obs
            nexts.append(np.stack(row))
            dones.append(done_row)
    finally:
        for env in envs:
            env.close()
    # TorchRL's layout: (env, time, ...)
    return np.stack(roots, 1), np.stack(nexts, 1), np.array(dones).T


@pytest.mark.parametrize(
    ("env_id", "backend", "mode", "make"),
    [
        (
            "RetroKit/Breakout-v0",
            "native",
            "Disabled",
            lambda: make_ale_env("Breakout", noop_max=0, max_episode_steps=12),
        ),
        (
            RETRO_ID,
            "subprocess",
            "Disabled",
            lambda: make_retro_env("Pong-Atari2600", sticky_actions=0.0, max_episode_steps=7),
        ),
        (
            "RetroKit/Breakout-v0",
            "native",
            "SameStep",
            lambda: make_ale_env("Breakout", noop_max=0, max_episode_steps=12),
        ),
    ],
    ids=["ale-native-disabled", "retro-subprocess-disabled", "ale-native-samestep"],
)
def test_gym_wrapper_over_the_kits_vector_env(env_id, backend, mode, make):
    """``Disabled`` (TorchRL's preferred mode): TorchRL resets exactly the done envs with
    ``options={"reset_mask": ...}``. ``SameStep``: TorchRL takes the last observation from gymnasium's
    ``info["final_obs"]``. Breakout's life losses and the time limits end episodes at different steps in
    different envs; either way the rollout equals per-env stacks reset by hand."""
    steps = 12 if backend == "native" else 7
    venv = gym.make_vec(
        env_id,
        num_envs=3,
        backend=backend,
        autoreset_mode=mode,
        max_episode_steps=steps,
        **({"noop_max": 0} if backend == "native" else {"sticky_actions": 0.0}),
    )
    env = GymWrapper(venv)
    try:
        assert env.batch_size == torch.Size([3])
        check_env_specs(env)
        td = env.rollout(30, break_when_any_done=False)
    finally:
        env.close()
    roots, nexts, dones = reference_rollout(make, 3, actions_of(td))
    np.testing.assert_array_equal(td["next", "done"].squeeze(-1).numpy(), dones)
    np.testing.assert_array_equal(td["next", "observation"].numpy(), nexts)
    np.testing.assert_array_equal(td["observation"].numpy(), roots)
    assert dones.sum() >= 4  # episodes really ended (and were reset) inside the rollout


USER_SCRIPT = """
import retro_atari_kit  # registers RetroKit/ here and in every spawned worker (they import this script)
from torchrl.envs import GymEnv
from torchrl.envs.utils import check_env_specs

if __name__ == "__main__":
    env = GymEnv("RetroKit/Pong-v0", num_envs=4)
    check_env_specs(env)
    print("shape", tuple(env.rollout(3)["next", "observation"].shape))
    env.close()
"""


def test_a_user_script_with_the_plain_id(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(USER_SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "shape (4, 3, 4, 84, 84)" in proc.stdout.splitlines()
