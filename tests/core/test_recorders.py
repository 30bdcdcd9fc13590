"""gymnasium's RecordEpisodeStatistics around kit envs: no crash, one record per real game, the true score.

SpaceInvaders has lives and rewards of 5-30 points per invader: a recorder that summed what it sees would
report per-life counts of hits (clipped to 1), not the game's score. The retro check compares against the
same env with ``clip_reward=False`` driven by the same seed and actions (its rewards are the true ones).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics as VectorRecordEpisodeStatistics

import retro_atari_kit  # noqa: F401
from retro_atari_kit.recorders import vector_reports_true_scores
from retro_atari_kit.registration import make_env
from retro_atari_kit.wrappers.true_score import reports_true_scores

GAME = "RetroKit/SpaceInvaders-v0"
RETRO = "RetroKit/Airstriker-Genesis-v0"


def _space_invaders_score_ok(score: float, hits: int) -> None:
    # every hit is worth 5-30 points: the true score is a multiple of 5 and at least 5 per clipped reward
    assert score % 5 == 0 and score >= 5 * hits, (score, hits)


def test_single_recorder_reports_each_real_game_once_with_its_true_score():
    env = gym.wrappers.RecordEpisodeStatistics(gym.make(GAME))
    rng = np.random.default_rng(0)
    env.reset(seed=3)
    records, life_ends, hits, seen = [], 0, 0, 0
    while len(records) < 3:
        _, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        hits += int(reward > 0)
        seen += 1
        assert reward in (-1.0, 0.0, 1.0)  # the agent still trains on clipped rewards
        if terminated or truncated:
            if "episode" in info:
                assert info["lives"] == 0  # only the real game over carries a record
                record = info["episode"]
                _space_invaders_score_ok(record["r"], hits)
                assert record["l"] >= seen  # steps taken inside the kit's resets count too
                records.append(record)
                hits = seen = 0
            else:
                life_ends += 1
            env.reset()
    assert life_ends >= 2 * len(records)  # three lives per game: the life losses made no records
    assert env.episode_count == 3
    assert list(env.return_queue) == [r["r"] for r in records]
    assert list(env.length_queue) == [r["l"] for r in records]
    assert max(env.return_queue) >= 50  # real scores, not counts of hits
    env.close()


def test_single_recorder_with_its_own_key_and_around_other_wrappers():
    env = gym.wrappers.RecordEpisodeStatistics(
        gym.wrappers.TransformReward(gym.make(GAME), lambda r: r), stats_key="stats"
    )
    assert reports_true_scores(env)
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    while env.episode_count < 1:
        _, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            assert ("stats" in info) == ("episode" in info)
            if "stats" in info:
                assert info["stats"] == info["episode"]
            env.reset()
    env.close()


def test_single_recorder_around_other_envs_is_gymnasiums():
    env = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
    assert not reports_true_scores(env)
    env.reset(seed=0)
    ends = 0
    while ends < 3:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        if terminated or truncated:
            ends += 1
            assert info["episode"]["l"] == info["episode"]["r"]  # CartPole: reward 1 per step
            env.reset()
    assert env.episode_count == 3


def test_retro_recorder_reports_unclipped_scores_and_the_worker_env_too():
    """Two retro envs in one process: the second runs in a worker process; both are recognised."""
    kwargs = {"max_episode_steps": 120}  # the kit's own limit, inside the stack (make_env, not gym.make's)
    clipped = gym.wrappers.RecordEpisodeStatistics(make_env(RETRO, **kwargs))
    true = make_env(RETRO, clip_reward=False, **kwargs)  # stable-retro's one emulator: a worker env
    try:
        assert reports_true_scores(clipped) and reports_true_scores(true)
        clipped.reset(seed=5)
        true.reset(seed=5)
        rng = np.random.default_rng(2)
        total, records, sums = 0.0, [], []
        while len(records) < 3:
            action = int(rng.integers(clipped.action_space.n))
            _, r_clip, term, trunc, info = clipped.step(action)
            _, r_true, t_term, t_trunc, _ = true.step(action)
            assert (term, trunc) == (t_term, t_trunc)
            assert r_clip == np.sign(r_true)
            total += float(r_true)
            if term or trunc:
                records.append(info["episode"]["r"])
                sums.append(total)
                total = 0.0
                clipped.reset()
                true.reset()
        assert records == sums
        assert list(clipped.return_queue) == sums
        assert max(sums) > 1  # the scores were not +-1 sums (the check would be empty otherwise)
    finally:
        clipped.close()
        true.close()


def _vector_games(venv, games: int = 3, max_steps: int = 3000) -> tuple[VectorRecordEpisodeStatistics, list]:
    recorder = VectorRecordEpisodeStatistics(venv)
    recorder.reset(seed=1)
    rng = np.random.default_rng(0)
    seen = []
    for _ in range(max_steps):
        _, _, _, _, infos = recorder.step(rng.integers(0, venv.single_action_space.n, venv.num_envs))
        source = infos if "_episode" in infos else infos.get("final_info", {})
        if "_episode" in source:
            seen += [float(source["episode"]["r"][i]) for i in np.flatnonzero(source["_episode"])]
        if recorder.episode_count >= games:
            break
    recorder.close()
    return recorder, seen


VECTOR_CASES = {
    "native": lambda: gym.make_vec(GAME, num_envs=2, backend="native"),
    "subprocess": lambda: gym.make_vec(GAME, num_envs=2, backend="subprocess"),
    "inprocess-same-step": lambda: gym.make_vec(
        GAME, num_envs=2, backend="inprocess", autoreset_mode=AutoresetMode.SAME_STEP
    ),
    "sync": lambda: gym.vector.SyncVectorEnv([lambda: gym.make(GAME)] * 2),
    "async-with-single-recorders": lambda: gym.vector.AsyncVectorEnv(
        [lambda: gym.wrappers.RecordEpisodeStatistics(gym.make(GAME))] * 2
    ),
}


@pytest.mark.parametrize("case", sorted(VECTOR_CASES))
def test_vector_recorder_reports_true_games_on_every_backend(case):
    venv = VECTOR_CASES[case]()
    assert vector_reports_true_scores(venv)
    recorder, seen = _vector_games(venv)
    assert recorder.episode_count == len(seen) >= 3
    assert list(recorder.return_queue) == seen
    assert all(score % 5 == 0 for score in seen) and max(seen) >= 50


def test_vector_recorder_on_retro_ids():
    venv = gym.make_vec(RETRO, num_envs=2, max_episode_steps=100, clip_reward=True)
    recorder, seen = _vector_games(venv, games=4)
    assert recorder.episode_count == len(seen) >= 4
    assert list(recorder.length_queue) == [100] * len(seen)  # every game ended at the time limit


def test_vector_recorder_around_other_envs_is_gymnasiums():
    venv = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    assert not vector_reports_true_scores(venv)
    recorder, _ = _vector_games(venv, games=2, max_steps=500)
    assert recorder.episode_count >= 2
    assert list(recorder.return_queue) == list(recorder.length_queue)


# -- gymnasium's RecordVideo: games, not lives ---------------------------------------------------------


def _video_frames(path) -> int:
    import imageio.v3 as imageio  # a package dependency

    return sum(1 for _ in imageio.imiter(path))


def test_record_video_clips_are_whole_games_with_every_life(tmp_path):
    import moviepy  # noqa: F401  (the dev extra: gymnasium's RecordVideo writes with it)

    from retro_atari_kit.recording import has_ffmpeg

    assert has_ffmpeg(), "imageio-ffmpeg (a package dependency) gives no ffmpeg to write mp4 with"
    # as docs/cleanrl.md keeps it: around the kit env, RecordEpisodeStatistics outside; games 0 and 1 filmed
    env = gym.make("RetroKit/Breakout-v0", render_mode="rgb_array")
    env = gym.wrappers.RecordVideo(
        env, str(tmp_path), episode_trigger=lambda game: game < 2, disable_logger=True
    )
    env = gym.wrappers.RecordEpisodeStatistics(env)
    video = env.env
    env.action_space.seed(0)
    env.reset(seed=0)
    games, life_ends, steps, resets = [], 0, 0, 1  # a clip has a frame per step and per reset of its game
    while len(games) < 3:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            life_ends += 1
            if "episode" in info:  # the real game over
                assert resets == 5  # Breakout's 5 lives: 4 life losses continued the game
                if len(games) < 2:
                    assert video.recording and len(video.recorded_frames) == steps + resets
                games.append(steps + resets)
                steps, resets = 0, 0
            env.reset()
            resets += 1
    env.close()
    assert life_ends == 3 * 5  # each life a training episode of its own
    assert video.episode_id == 3  # the 4th game started: it counts games
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4"]
    # the whole first and second games, every life (moviepy 2 writes a clip of n frames with n - 1 of them)
    assert games[0] - 1 <= _video_frames(tmp_path / files[0]) <= games[0]
    assert games[1] - 1 <= _video_frames(tmp_path / files[1]) <= games[1]
