"""Frame-exact comparison of the kit's ALE stack against SB3's AtariWrapper (the oracle).

Both stacks run the same ROM with the same seed (so the no-op counts, drawn from the unwrapped env's
``np_random``, are identical) and the same scripted actions, through several life losses until the game
ends. Observations (the newest frame of the kit's stack against SB3's single warped frame), rewards,
``terminated`` and ``truncated`` must be equal at every step.

Intended difference: on the step that ends the *game*, max-and-skip may stop before the last two
sub-frames. SB3 then max-pools frames left over from the previous step; the kit max-pools the last two
frames the emulator really produced. That single terminal observation is never used for bootstrapping,
so it is compared only when the step ran all its sub-frames.
"""

import ale_py
import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.atari_wrappers import AtariWrapper  # the oracle

gym.register_envs(ale_py)


def _run_pair(game: str, seed: int, max_steps: int):
    ours = gym.make(f"RetroKit/{game}-v0")
    oracle = AtariWrapper(gym.make(f"{game}NoFrameskip-v4"), noop_max=30, frame_skip=4, screen_size=84)
    obs_ours, _ = ours.reset(seed=seed)
    obs_oracle, _ = oracle.reset(seed=seed)
    np.testing.assert_array_equal(obs_ours[-1], obs_oracle[..., 0])
    np.testing.assert_array_equal(obs_ours, np.repeat(obs_oracle[None, ..., 0], 4, axis=0))
    actions = np.random.default_rng(seed).integers(ours.action_space.n, size=max_steps)
    life_losses, game_over = 0, False
    for t, action in enumerate(actions):
        obs_ours, r_ours, term_ours, trunc_ours, info_ours = ours.step(int(action))
        obs_oracle, r_oracle, term_oracle, trunc_oracle, _ = oracle.step(int(action))
        assert (r_ours, term_ours, trunc_ours) == (r_oracle, term_oracle, trunc_oracle), f"step {t}"
        game_over = "episode" in info_ours
        if not game_over:
            np.testing.assert_array_equal(obs_ours[-1], obs_oracle[..., 0], err_msg=f"step {t}")
        if term_ours or trunc_ours:
            if game_over:
                break
            life_losses += 1
            obs_ours, _ = ours.reset()
            obs_oracle, _ = oracle.reset()
            np.testing.assert_array_equal(obs_ours[-1], obs_oracle[..., 0], err_msg=f"reset after {t}")
    ours.close()
    oracle.close()
    return life_losses, game_over


@pytest.mark.parametrize("game", ["Breakout", "SpaceInvaders"])
def test_stack_equals_sb3_atari_wrapper_through_life_losses(game):
    life_losses, game_over = _run_pair(game, seed=3, max_steps=5000)
    assert life_losses >= 1
    assert game_over


def test_pong_equals_sb3_atari_wrapper():
    _run_pair("Pong", seed=1, max_steps=600)
