"""Each wrapper's own behaviour, on the real ALE emulator."""

import gymnasium as gym
import numpy as np
from ale_py import AtariEnv

from retro_atari_kit.wrappers import (
    ClipReward,
    EpisodicLife,
    FireReset,
    FrameStack,
    MaxAndSkip,
    NoopReset,
    TrueScoreStatistics,
    WarpFrame,
)


def raw(game: str) -> AtariEnv:
    return AtariEnv(game=game, frameskip=1, repeat_action_probability=0.0, max_num_frames_per_episode=108_000)


class RawRewardSum(gym.Wrapper):
    """Test probe: sums every raw emulator reward since the last emulator reset."""

    def reset(self, **kwargs):
        self.total = 0.0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.total += reward
        return obs, reward, terminated, truncated, info


def test_noop_reset_count_in_range_and_seeded():
    env = NoopReset(raw("pong"), noop_max=30)
    counts = []
    for seed in range(30):
        env.reset(seed=seed)
        counts.append(env.last_noop_count)
    assert all(1 <= c <= 30 for c in counts) and len(set(counts)) > 5
    again = []
    for seed in range(30):
        env.reset(seed=seed)
        again.append(env.last_noop_count)
    assert counts == again
    # The frames after reset are exactly the emulator after that many NOOPs.
    obs, _ = env.reset(seed=3)
    reference = raw("pong")
    reference.reset(seed=3)
    for _ in range(env.last_noop_count):
        expected = reference.step(0)[0]
    np.testing.assert_array_equal(obs, expected)


def test_max_and_skip_pools_last_two_frames_and_sums_rewards():
    env = MaxAndSkip(raw("breakout"), skip=4)
    reference = raw("breakout")
    env.reset(seed=0)
    reference.reset(seed=0)
    for action in [1, 2, 2, 3, 3, 0, 1, 2]:
        obs, reward, *_ = env.step(action)
        frames, total = [], 0.0
        for _ in range(4):
            frame, r, *_ = reference.step(action)
            frames.append(frame)
            total += r
        np.testing.assert_array_equal(obs, np.maximum(frames[-2], frames[-1]))
        assert reward == total


def test_max_and_skip_stops_at_episode_end():
    capped = AtariEnv(game="pong", frameskip=1, repeat_action_probability=0.0, max_num_frames_per_episode=10)
    env = MaxAndSkip(capped, skip=4)
    reference = AtariEnv(game="pong", frameskip=1, repeat_action_probability=0.0)
    env.reset(seed=0)
    reference.reset(seed=0)
    frames = [reference.step(0)[0] for _ in range(10)]
    assert not any(env.step(0)[2:4]) and not any(env.step(0)[2:4])
    obs, _, terminated, truncated, _ = env.step(0)  # only 2 of its 4 frames fit under the cap
    assert truncated and not terminated
    assert capped.ale.getEpisodeFrameNumber() == 10
    np.testing.assert_array_equal(obs, np.maximum(frames[8], frames[9]))


def test_life_loss_ends_training_episode_but_not_the_game():
    env = FireReset(EpisodicLife(MaxAndSkip(raw("breakout"), 4)))
    env.reset(seed=0)
    ale = env.unwrapped.ale
    assert ale.lives() == 5
    for _ in range(2000):
        _, _, terminated, truncated, _ = env.step(0)
        if terminated:
            break
    assert terminated and not truncated
    assert ale.lives() == 4 and not ale.game_over()
    frame_before = ale.getEpisodeFrameNumber()
    env.reset()
    assert ale.lives() == 4, "reset after a life loss continues the same game"
    assert ale.getEpisodeFrameNumber() > frame_before


def test_true_score_counts_every_life_and_returned_rewards_are_clipped():
    probe = RawRewardSum(raw("space_invaders"))
    env = FrameStack(
        ClipReward(WarpFrame(FireReset(EpisodicLife(TrueScoreStatistics(MaxAndSkip(NoopReset(probe), 4))))))
    )
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    clipped_sum, training_episodes = 0.0, 1
    for _ in range(20_000):
        _, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        assert reward in (-1.0, 0.0, 1.0)
        clipped_sum += reward
        if "episode" in info:
            break
        if terminated or truncated:
            training_episodes += 1
            env.reset()
    assert "episode" in info, "the game should end within 20k steps"
    assert training_episodes >= 3, "several lives were lost before the game ended"
    assert info["episode"]["r"] == probe.total
    assert info["episode"]["r"] > clipped_sum  # Space Invaders scores 5-30 per alien
    assert info["episode"]["l"] > 0 and info["episode"]["t"] >= 0


def test_episode_info_only_when_the_game_really_ends():
    env = gym.make("RetroKit/Breakout-v0")
    env.reset(seed=0)
    ends_without_info = 0
    for _ in range(5000):
        _, _, terminated, truncated, info = env.step(0)
        if terminated or truncated:
            if "episode" in info:
                break
            ends_without_info += 1
            env.reset()
    assert ends_without_info == 4  # 5 lives: four life losses, then the game over carries the score
    assert env.unwrapped.ale.game_over()


def test_frame_stack_repeats_first_frame_and_shifts():
    env = FrameStack(WarpFrame(MaxAndSkip(raw("pong"), 4)), k=4)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    for i in range(1, 4):
        np.testing.assert_array_equal(obs[i], obs[0])
    frames = [obs[-1]]
    for _ in range(60):
        new, *_ = env.step(2)
        np.testing.assert_array_equal(new[:-1], obs[1:])
        frames.append(new[-1])
        obs = new
    np.testing.assert_array_equal(obs, np.stack(frames[-4:]))
    obs[:] = 0  # returned arrays are copies: mutating one must not change the next
    assert env.step(0)[0][:-1].any()


def test_warp_frame_gray_rgb_and_crop():
    gray = WarpFrame(raw("pong"))
    rgb = WarpFrame(raw("pong"), grayscale=False)
    cropped = WarpFrame(raw("pong"), size=42, crop=(34, 194, 0, 160))
    assert gray.reset(seed=0)[0].shape == (1, 84, 84)
    assert rgb.reset(seed=0)[0].shape == (3, 84, 84)
    assert cropped.reset(seed=0)[0].shape == (1, 42, 42)
    for env in (gray, rgb, cropped):
        assert env.observation_space.dtype == np.uint8
