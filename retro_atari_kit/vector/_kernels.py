"""The per-step batch work of the vector backends as numba kernels: one call per step, GIL released.

What a vector step does for every env besides emulation is small (a few bytes of rules, one frame copied
into a stack), but done as dozens of numpy calls on ``(N,)`` arrays it held the GIL for most of the calling
thread's time (docs/performance.md has the profile). Each kernel here does its whole batch in one
``nogil`` call, so the calling thread holds the GIL only to dispatch it:

- :func:`finish_steps`: the native backend's rules for the envs that stepped, in the stack's order: the
  time limit (gymnasium's ``TimeLimit``), the true-score sums (:class:`~retro_atari_kit.wrappers.
  TrueScoreStatistics`), episodic life (:func:`~retro_atari_kit.wrappers.episodic_life.life_loss_step`,
  compiled from the same function) and the reward clip (:func:`~retro_atari_kit.wrappers.clip_reward.
  clip_to_sign`'s sign rule). ``tests/core/test_native_batch.py`` checks it against the wrappers.

The kernels compile on first use (about a second, then numba's on-disk cache) in the processes that build
a vector env; ``gym.make`` never loads numba for them.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

from retro_atari_kit.wrappers.episodic_life import life_loss_step

_lock = threading.Lock()
_compiled: SimpleNamespace | None = None


def _compile() -> SimpleNamespace:
    import numba
    import numpy as np

    life_rule = numba.njit(life_loss_step, nogil=True, cache=True)

    @numba.njit(nogil=True, cache=True)
    def finish_steps(
        envs, floats, ints, flags, max_steps, episodic, clip, rewards, terms, truncs
    ):  # pragma: no cover
        # envs: indices of the envs that stepped. Per-env rows (NativeDriver's packed state): floats = score,
        # the raw reward received; ints = elapsed steps, episode length, lives before the step, lives now;
        # flags = terminated and truncated as received, continue the game on reset, game over (a
        # true-score record is due). max_steps <= 0: no time limit. rewards / terms / truncs: the stack's
        # step results, indexed by env. Returns how many games ended.
        score, raw_reward = floats[0], floats[1]
        elapsed, length, lives, lives_now = ints[0], ints[1], ints[2], ints[3]
        raw_term, raw_trunc, continue_game, game_over = flags[0], flags[1], flags[2], flags[3]
        ended = 0
        for k in range(envs.shape[0]):
            i = envs[k]
            reward = raw_reward[i]
            terminated = raw_term[i]
            truncated = raw_trunc[i]
            elapsed[i] += 1
            if max_steps > 0 and elapsed[i] >= max_steps:
                truncated = True
            score[i] += reward
            length[i] += 1
            game_over[i] = terminated or truncated
            if game_over[i]:
                ended += 1
            if episodic:
                terminated, go_on = life_rule(lives_now[i], lives[i], terminated, truncated)
                lives[i] = lives_now[i]
                continue_game[i] = go_on
            rewards[i] = np.sign(reward) if clip else reward
            terms[i] = terminated
            truncs[i] = truncated
        return ended

    return SimpleNamespace(finish_steps=finish_steps)


def kernels() -> SimpleNamespace:
    """The compiled kernels (``finish_steps``), compiled or loaded once per process."""
    global _compiled
    if _compiled is None:
        with _lock:
            if _compiled is None:
                _compiled = _compile()
    return _compiled
