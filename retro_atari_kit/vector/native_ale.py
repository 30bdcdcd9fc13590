"""Native ALE backend: ale-py's ``AtariVectorEnv`` C++ emulation threads under the kit's exact semantics.

What runs in C++ (one single-env ``AtariVectorEnv`` per env, each with its own thread; every action is sent
before any result is collected, so all envs emulate in parallel): the emulator, no-op starts, frame skip
with max-pooling over the last two **RGB** frames, the 108k-frame cap and sticky actions. Its own fire
reset (one FIRE frame), episodic life (which resets the whole game), reward clipping and grayscale/resize
are off: they differ from the kit's stack.

Why one single-env ``AtariVectorEnv`` per env: an N-env one steps all of its envs together (only ``reset``
takes a subset), while the kit's resets step one env on its own (the NOOP that continues a game after a
life loss, then FIRE and action 2).

What runs in the calling thread, for all envs at once (no thread of the kit's own: docs/vectorization.md
says which figure dropped the warp threads):

- The warp (crop, ``cv2.COLOR_RGB2GRAY``, ``cv2.INTER_AREA`` resize) of each max-pooled RGB frame as soon
  as its env's step arrives, while the later envs still emulate, through the same function as
  :class:`~retro_atari_kit.wrappers.WarpFrame` (its resize by the exact numba kernel of
  :mod:`retro_atari_kit.wrappers.area_resize`, loaded when the backend starts). ALE's own grayscale is not
  ``cv2.COLOR_RGB2GRAY`` and gray max-pooling differs from max-pooling RGB, so C++ cannot do it.
- Time limit (gymnasium's ``TimeLimit`` rule), true-score sums, episodic life and reward clipping for
  all the envs that stepped in one compiled call (:func:`finish_steps_kernel`, whose life rule is compiled
  from :func:`~retro_atari_kit.wrappers.episodic_life.life_loss_step`); the true-score record of a game that
  ended is :func:`~retro_atari_kit.wrappers.true_score.episode_record`. Resets (rare) run env by env with
  the wrappers' reset rules (:func:`~retro_atari_kit.wrappers.episodic_life.continue_or_reset`,
  :func:`~retro_atari_kit.wrappers.fire_reset.fire_start`) while the other envs keep emulating.
- No-op starts: ale-py draws 0..``n-1`` no-op frames; the kit draws 1..``noop_max``. We ask C++ for
  ``noop_max + 1`` and reset again when it drew 0, which gives exactly the kit's distribution. The random
  generator differs from ``gym.make``'s, so the same seed gives different no-op counts (and sticky-action
  draws): tests of frame equality use ``noop_max=0`` and no sticky actions.
- ``info["frame_number"]``/``info["episode_frame_number"]`` come from the native env.

Not expressible (the dispatcher then uses the subprocess backend): ``render_mode="rgb_array"``.

The same driver runs over several worker processes, one block of envs each, in
:mod:`retro_atari_kit.vector.native_shards` (``shards=``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from retro_atari_kit.catalog import ale_game
from retro_atari_kit.envs.ale import MAX_FRAMES_PER_EPISODE
from retro_atari_kit.vector._stacked import BatchedInfos, Seeds
from retro_atari_kit.wrappers.area_resize import load_kernel
from retro_atari_kit.wrappers.episodic_life import continue_or_reset, life_loss_step
from retro_atari_kit.wrappers.fire_reset import fire_reset_enabled, fire_start
from retro_atari_kit.wrappers.true_score import episode_record
from retro_atari_kit.wrappers.warp_frame import warp_into

NOOP = 0
_PADDLE = [1.0]  # paddle strength of a discrete action
COUNTERS = ("lives", "episode_frame_number", "frame_number")  # ALE's info keys, present for every env


_kernel_lock = threading.Lock()
_kernel = None


def finish_steps_kernel():
    """The rules of a step for every env that stepped, in the stack's order, as one numba call: the time
    limit (gymnasium's ``TimeLimit``), the true-score sums (:class:`~retro_atari_kit.wrappers.
    TrueScoreStatistics`), episodic life (:func:`~retro_atari_kit.wrappers.episodic_life.life_loss_step`,
    compiled from the same function) and the reward clip (:func:`~retro_atari_kit.wrappers.clip_reward.
    clip_to_sign`'s sign rule). Dozens of small numpy calls per step were most of the calling thread's time
    before (docs/performance.md). Compiled on first use (about a second, then numba's on-disk cache), only
    in processes that build a native vector env."""
    global _kernel
    if _kernel is None:
        with _kernel_lock:
            if _kernel is None:
                _kernel = _compile_finish_steps()
    return _kernel


def _compile_finish_steps():
    import numba

    life_rule = numba.njit(life_loss_step, cache=True)

    @numba.njit(cache=True)
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

    return finish_steps


def native_incompatibilities(cfg: dict[str, Any]) -> list[str]:
    """Reasons why the native backend cannot reproduce the kit's stack for these resolved kwargs
    (``validate_ale_kwargs``'s result; empty: it can)."""
    problems = []
    try:
        from ale_py.vector_env import AtariVectorEnv  # noqa: F401
    except ImportError:
        problems.append("anything: this ale-py has no AtariVectorEnv (needs ale-py >= 0.10)")
    if cfg["render_mode"] is not None:
        problems.append(f"render_mode={cfg['render_mode']!r} (AtariVectorEnv does not render)")
    return problems


def _extra(info: dict) -> dict:
    """The keys of one env's info beyond the counters that :class:`BatchedInfos` carries for all envs."""
    return {key: value for key, value in info.items() if key not in COUNTERS}


def _native_seed(seed: int) -> int:
    """A kit seed (any int >= 0, see ``check_seeds``) as the seed ale-py's C++ reset takes: a 32-bit signed
    int, where -1 means unseeded. Hashed (numpy's ``SeedSequence``, as ale-py's own ``AtariEnv`` derives its
    emulator seed) into [0, 2**31 - 1], so every kit seed is accepted and seeds that differ by a multiple of
    2**31 do not give the same run."""
    return int(np.random.SeedSequence(seed).generate_state(1, np.uint32)[0] >> 1)


def make_core(rom: str, cfg: dict[str, Any], num_envs: int = 1, num_threads: int = 1):
    """One env in C++: emulator, no-op starts, frame skip with RGB max-pooling, frame cap, sticky actions.
    (``num_envs`` / ``num_threads``: the same settings for a batch of envs stepped together, which
    ``benchmarks/ale_core_cost.py`` compares with the one-env cores.)"""
    from ale_py.vector_env import AtariVectorEnv

    noop_max = cfg["noop_max"]
    return AtariVectorEnv(
        rom,
        num_envs,
        num_threads=num_threads,
        frameskip=cfg["frame_skip"],
        maxpool=cfg["frame_skip"] > 1,
        noop_max=noop_max + 1 if noop_max > 0 else 0,
        use_fire_reset=False,
        episodic_life=False,
        reward_clipping=False,
        grayscale=False,
        img_height=210,
        img_width=160,
        stack_num=1,
        repeat_action_probability=cfg["sticky_actions"],
        full_action_space=cfg["full_action_space"],
        max_num_frames_per_episode=MAX_FRAMES_PER_EPISODE,
        autoreset_mode=AutoresetMode.NEXT_STEP,
    )


class NativeDriver:
    """Frame driver over N single-env ``AtariVectorEnv`` cores with the kit's stack above max-and-skip.

    Per-env state (time limit, true score, lives) lives in arrays indexed by env. Layers, bottom up, as
    in the wrapper stack: *core* (C++ env + time limit + true score), *life* (episodic life), then fire
    reset, warp and reward clip.
    """

    def __init__(self, game: str, num_envs: int, cfg: dict[str, Any]):
        import gymnasium as gym

        rom = ale_game(game).rom
        self.cores: list[Any] = []
        try:
            for _ in range(num_envs):
                self.cores.append(make_core(rom, cfg))
            load_kernel()  # the warp's exact INTER_AREA resize, cheaper than cv2's own
        except BaseException:
            self.close()
            raise
        self.grayscale, self.crop = cfg["grayscale"], cfg["crop_score"]
        self._ales = [core.ale for core in self.cores]
        action_set = self._ales[0].get_action_set()
        self.action_meanings = [action.name for action in action_set]
        self.fire = fire_reset_enabled(self.action_meanings, cfg["fire_reset"])
        self.noop_max = cfg["noop_max"]
        self.max_steps = cfg["max_episode_steps"]
        self.episodic = cfg["terminal_on_life_loss"]
        self.clip = cfg["clip_reward"]
        self.num_envs = num_envs
        channels = 1 if cfg["grayscale"] else 3
        size = cfg["screen_size"]
        self.frame_space = gym.spaces.Box(0, 255, (channels, size, size), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(len(action_set))
        self.metadata = {"render_modes": [], "render_mode": None}
        # where the warp writes each env's frame; the sharded backend points it into shared memory
        self.frames = np.zeros((num_envs, channels, size, size), dtype=np.uint8)
        self._all = list(range(num_envs))
        # Per-env state, one entry per env, packed by dtype so the rules kernel takes three arrays (the names
        # are row views): TimeLimit, TrueScoreStatistics and EpisodicLife's state, and the latest step
        # received from each env; the row order is the kernel's
        self._ints = np.zeros((4, num_envs), dtype=np.int64)
        self.elapsed, self.length, self.lives, self._lives_now = self._ints
        self._floats = np.zeros((2, num_envs), dtype=np.float64)
        self.score, self._reward = self._floats
        self._flags = np.zeros((4, num_envs), dtype=bool)
        # _game_over: the env's game ended at its last _finish
        self._terminated, self._truncated, self.continue_game, self._game_over = self._flags
        self.start = np.zeros(num_envs, dtype=np.float64)
        self._raw: list[np.ndarray | None] = [None] * num_envs  # latest max-pooled RGB frame per env
        self._episode_frame = np.zeros(num_envs, dtype=np.int64)
        self._frame_number = np.zeros(num_envs, dtype=np.int64)
        self._one = (np.zeros(num_envs), np.zeros(num_envs, dtype=bool), np.zeros(num_envs, dtype=bool))
        self._all_envs = np.arange(num_envs, dtype=np.intp)
        self._finish_steps = finish_steps_kernel()

    # -- core level: the C++ envs + TimeLimit + TrueScoreStatistics, for a list of envs ---------------
    def _send(self, envs: list[int], actions: list[int]) -> None:
        for i, action in zip(envs, actions, strict=True):
            self._ales[i].send([action], _PADDLE)

    def _receive(self, i: int) -> np.ndarray:
        """Block until env ``i``'s step or reset arrives (ale-py releases the GIL meanwhile); keep its numbers
        and return its RGB frame."""
        obs, reward, terminated, truncated, info = self._ales[i].recv()
        self._reward[i] = reward[0]
        self._terminated[i] = terminated[0]
        self._truncated[i] = truncated[0]
        self._lives_now[i] = info["lives"][0]
        self._episode_frame[i] = info["episode_frame_number"][0]
        self._frame_number[i] = info["frame_number"][0]
        self._raw[i] = frame = obs[0, 0]
        return frame

    def _finish(
        self,
        envs: np.ndarray,
        rewards: np.ndarray,
        terms: np.ndarray,
        truncs: np.ndarray,
        life: bool,
        clip: bool,
    ) -> int:
        """The received steps of ``envs`` through the time limit, the true-score sums, episodic life (if
        ``life``) and the reward clip (if ``clip``), into ``rewards`` / ``terms`` / ``truncs`` (indexed by
        env), in one kernel call (:func:`finish_steps_kernel`). Returns how many
        games ended; :meth:`_episodes` has their records."""
        state = (self._floats, self._ints, self._flags, self.max_steps or 0, life and self.episodic, clip)
        return self._finish_steps(envs, *state, rewards, terms, truncs)

    def _episodes(self, envs: np.ndarray) -> dict[int, dict]:
        """``info["episode"]`` of each env in ``envs`` whose game ended at its last :meth:`_finish`."""
        return {
            i: episode_record(float(self.score[i]), int(self.length[i]), float(self.start[i]))
            for i in envs[self._game_over[envs]].tolist()
        }

    def _info(self, i: int, episodes: dict[int, dict] | None = None) -> dict:
        """Env ``i``'s info, as the wrapper stack's: ALE's counters, and the true score if its game ended."""
        info = {
            "lives": int(self._lives_now[i]),
            "episode_frame_number": int(self._episode_frame[i]),
            "frame_number": int(self._frame_number[i]),
        }
        if episodes and i in episodes:
            info["episode"] = episodes[i]
        return info

    def _core_reset(self, i: int, seed: int | None) -> tuple[np.ndarray, dict]:
        core = self.cores[i]
        obs, info = core.reset(seed=None if seed is None else np.array([_native_seed(seed)]))
        while self.noop_max > 0 and int(info["episode_frame_number"][0]) == 0:
            obs, info = core.reset()  # C++ drew 0 no-ops; the kit draws 1..noop_max
        self.elapsed[i] = 0
        self.score[i], self.length[i], self.start[i] = 0.0, 0, time.perf_counter()
        self._lives_now[i] = info["lives"][0]
        self._episode_frame[i] = info["episode_frame_number"][0]
        self._frame_number[i] = info["frame_number"][0]
        self._raw[i] = obs[0, 0]
        return self._raw[i], self._info(i)

    def _step_one(self, i: int, action: int, life: bool):
        """One step of env ``i`` alone (during its reset): below EpisodicLife (``life=False``, as the
        wrapper's own NOOP continuation) or above it (``life=True``, as FireReset's steps)."""
        self._send([i], [action])
        self._receive(i)
        env = np.array([i], dtype=np.intp)
        rewards, terms, truncs = self._one
        episodes = self._episodes(env) if self._finish(env, rewards, terms, truncs, life, False) else None
        return self._raw[i], float(rewards[i]), bool(terms[i]), bool(truncs[i]), self._info(i, episodes)

    # -- life level: EpisodicLife --------------------------------------------------------------------
    def _life_reset(self, i: int, seed: int | None) -> tuple[np.ndarray, dict]:
        continue_game = self.episodic and bool(self.continue_game[i])
        self.continue_game[i] = False
        obs, info = continue_or_reset(
            continue_game,
            seed,
            lambda: self._step_one(i, NOOP, life=False),
            lambda: self._core_reset(i, seed),
        )
        self.lives[i] = info["lives"]
        return obs, info

    # -- fire reset; the full reset of one env ---------------------------------------------------------
    def _reset_env(self, i: int, seed: int | None) -> dict:
        """Reset env ``i`` as the wrapper stack does; its new RGB frame is left in ``_raw[i]``."""
        _, info = self._life_reset(i, seed)
        if self.fire:
            _, info = fire_start(
                lambda action: self._step_one(i, action, life=True), lambda: self._life_reset(i, None)
            )
        return info

    def _warp(self, envs: list[int]) -> None:
        frames, grayscale, crop, raw = self.frames, self.grayscale, self.crop, self._raw
        for i in envs:
            warp_into(raw[i], frames[i], grayscale, crop)

    def counters(self) -> dict[str, np.ndarray]:
        """ALE's counters of every env after its last step or reset (:data:`COUNTERS`), not copied."""
        return {
            "lives": self._lives_now,
            "episode_frame_number": self._episode_frame,
            "frame_number": self._frame_number,
        }

    # -- Driver API ----------------------------------------------------------------------------------
    def reset(self, indices: list[int], seeds: Seeds, options: dict | None) -> list[dict]:
        infos = [self._reset_env(i, seed) for i, seed in zip(indices, seeds, strict=True)]
        self._warp(list(indices))
        return infos

    def step(self, actions: np.ndarray, reset_mask: np.ndarray) -> tuple:
        """Step every env but those in ``reset_mask``, which are reset instead (reward 0, no episode end:
        the next-step autoreset that :class:`~retro_atari_kit.vector._stacked.StackedVectorEnv` decides).
        Every action is sent first, so all envs emulate while the resets run and each frame is warped as
        soon as its env is done."""
        n = self.num_envs
        resetting = reset_mask.nonzero()[0].tolist()
        stepping = [i for i in self._all if not reset_mask[i]] if resetting else self._all
        # StackedVectorEnv.step has checked the actions (check_actions): one ale-py refuses would fail in its
        # thread and never answer
        todo = actions.tolist()
        self._send(stepping, todo if not resetting else [todo[i] for i in stepping])
        extra: dict[int, dict] = {}  # per-env info keys beyond the counters every env has
        grayscale, crop, frames, receive = self.grayscale, self.crop, self.frames, self._receive
        try:
            for i in resetting:  # while the other envs emulate
                extra[i] = _extra(self._reset_env(i, None))
        finally:  # every sent step is received, so no answer is left for a later call
            for i in stepping:
                warp_into(receive(i), frames[i], grayscale, crop)
        self._warp(resetting)
        rewards, terms, truncs = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        if stepping:
            envs = self._all_envs if not resetting else np.asarray(stepping, dtype=np.intp)
            if self._finish(envs, rewards, terms, truncs, True, self.clip):
                for i, episode in self._episodes(envs).items():
                    extra[i] = {"episode": episode}
        common = {key: values.copy() for key, values in self.counters().items()}
        return rewards, terms, truncs, BatchedInfos(common, {i: e for i, e in extra.items() if e})

    def call(self, name: str, args: tuple, kwargs: dict) -> list[Any]:
        if name == "get_action_meanings":
            return [list(self.action_meanings) for _ in self.cores]
        raise AttributeError(
            f"the native ALE backend has no per-env {name!r}; use backend='subprocess' for per-env calls"
        )

    def set_attr(self, name: str, values: list[Any]) -> None:
        raise AttributeError(
            f"the native ALE backend cannot set per-env {name!r}; "
            "use backend='subprocess' for per-env attributes"
        )

    def close(self) -> None:
        for core in self.cores:
            core.close()
        self.cores = []
