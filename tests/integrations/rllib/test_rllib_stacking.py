"""Single-frame DQN replay on RLlib, checked frame by frame against the env's own frame stack: the real
Breakout emulator (five lives, so episodes end at life losses and restart with FIRE) is played twice with
the same seed and actions, at ``frame_stack=4`` (the reference) and at ``frame_stack=1`` (what RLlib stores);
RLlib's real episodes, chunked as an env runner chunks them, go through the kit's connector and replay."""

from __future__ import annotations

import numpy as np
import pytest
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from retro_atari_kit.integrations.rllib.stacking import (
    FrameStackEpisodeReplayBuffer,
    FrameStackToModule,
)

from retro_atari_kit.registration import make_env

GAME = "RetroKit/Breakout-v0"
FRAMES = 4
CHUNK = 4  # DQN's rollout_fragment_length: the runner cuts episodes every 4 steps


def play(frame_stack: int, actions: np.ndarray) -> tuple[list[list[np.ndarray]], list[list[int]]]:
    """Observations and actions per episode (one life each), the final observation included."""
    env = make_env(GAME, frame_stack=frame_stack)
    obs, _ = env.reset(seed=3)
    observations, taken = [[obs]], [[]]
    for action in actions:
        obs, _, terminated, truncated, _ = env.step(int(action))
        observations[-1].append(obs)
        taken[-1].append(int(action))
        if terminated or truncated:
            obs, _ = env.reset()
            observations.append([obs])
            taken.append([])
    env.close()
    return observations[:-1], taken[:-1]  # whole episodes only


@pytest.fixture(scope="module")
def lives():
    actions = np.random.default_rng(0).integers(0, 4, size=900)
    stacked, taken = play(FRAMES, actions)
    single, taken_again = play(1, actions)
    assert taken == taken_again and len(stacked) >= 3, "the same seed and actions replay the same games"
    for ref, frames in zip(stacked, single, strict=True):
        assert frames[0].shape == (1, 84, 84) and ref[0].shape == (FRAMES, 84, 84)
    return stacked, single, taken


def chunks_of(frames: list[np.ndarray], actions: list[int], space, on_step=None) -> list[SingleAgentEpisode]:
    """The chunks an env runner ships for one episode: cut every CHUNK steps, FRAMES - 1 frames of lookback
    (``episode_lookback_horizon``). ``on_step(episode, t)`` is called wherever the runner would act."""
    import gymnasium as gym

    episode = SingleAgentEpisode(observation_space=space, action_space=gym.spaces.Discrete(4))
    episode.add_env_reset(observation=frames[0])
    shipped = []
    for t, action in enumerate(actions):
        if on_step:
            on_step(episode, t)
        episode.add_env_step(
            observation=frames[t + 1], action=action, reward=0.0, terminated=t + 1 == len(actions)
        )
        if episode.is_done:
            break
        if len(episode) == CHUNK:
            shipped.append(episode)
            episode = episode.cut(len_lookback_buffer=FRAMES - 1)
    return shipped + [episode]


def test_connector_gives_the_module_the_env_s_own_stacks(lives):
    import gymnasium as gym

    stacked, single, taken = lives
    space = gym.spaces.Box(0, 255, (1, 84, 84), np.uint8)
    connector = FrameStackToModule(space, gym.spaces.Discrete(4), frames=FRAMES)
    assert connector.observation_space.shape == (FRAMES, 84, 84)
    checked = 0

    for ref, frames, actions in zip(stacked, single, taken, strict=True):

        def on_step(episode, t, ref=ref):
            nonlocal checked
            batch = connector(rl_module=None, batch={}, episodes=[episode], explore=True, shared_data={})
            (items,) = batch[Columns.OBS].values()
            assert items[0].dtype == np.uint8
            np.testing.assert_array_equal(items[0], ref[t], err_msg=f"step {t}")
            checked += 1

        chunks_of(frames, actions, space, on_step)
    assert checked == sum(len(a) for a in taken)


@pytest.mark.parametrize("n_step", [1, 3])
@pytest.mark.parametrize("first_chunk", [0, 2], ids=["whole-episodes", "from-a-later-chunk"])
def test_replay_stores_single_frames_and_samples_the_env_s_stacks(lives, n_step, first_chunk):
    import gymnasium as gym

    stacked, single, taken = lives
    space = gym.spaces.Box(0, 255, (1, 84, 84), np.uint8)
    buffer = FrameStackEpisodeReplayBuffer(100_000, frames=FRAMES)
    reference = {}
    for life, (frames, actions) in enumerate(zip(single, taken, strict=True)):
        chunks = chunks_of(frames, actions, space)
        reference[chunks[0].id_] = stacked[life]
        # from a later chunk: the stored episode starts mid-game with FRAMES - 1 frames of lookback (what the
        # buffer keeps of an episode whose start it never saw, e.g. after evicting it while it still ran)
        for chunk in chunks[first_chunk:]:
            buffer.add([chunk])
            sampled = buffer.sample(num_items=16, n_step=n_step, gamma=0.99, sample_episodes=True)
            for item in sampled:
                stored = buffer.episodes[buffer.episode_id_to_index[item.id_] - buffer._num_episodes_evicted]
                ref = reference[item.id_]
                t = stored.t_started + item.t_started  # in the whole episode
                # the n-step next observation is cut at the end of what is stored so far, as RLlib cuts it
                last = min(t + n_step, stored.t_started + len(stored))
                first, after = item.get_observations(0), item.get_observations(-1)
                assert first.shape == (FRAMES, 84, 84) and first.dtype == np.uint8
                np.testing.assert_array_equal(first, ref[t])
                np.testing.assert_array_equal(after, ref[last])
    for episode in buffer.episodes:
        assert np.asarray(episode.get_observations(0)).shape == (1, 84, 84)  # one frame per step stored
        assert episode.observations.lookback == (FRAMES - 1 if first_chunk else 0)


def test_replay_refuses_sequences():
    buffer = FrameStackEpisodeReplayBuffer(100, frames=FRAMES)
    with pytest.raises(NotImplementedError, match="single_frame_replay=false"):
        buffer.sample(num_items=4, batch_length_T=8, sample_episodes=True)
