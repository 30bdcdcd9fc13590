"""Native ALE backend: ale-py's ``AtariVectorEnv`` C++ emulation threads under the kit's exact semantics.

What runs in C++ (one single-env ``AtariVectorEnv`` per env, each with its own thread, driven with
non-blocking ``send``/``recv`` so all envs emulate in parallel): the emulator, no-op starts, frame skip with
max-pooling over the last two **RGB** frames, the 108k-frame cap and sticky actions. Its own fire reset
(one FIRE frame), episodic life (which resets the whole game), reward clipping and grayscale/resize are
switched off, because they differ from the kit's stack:

- ALE's grayscale is not ``cv2.COLOR_RGB2GRAY`` (Pong frames differ by up to 16 levels), and gray
  max-pooling differs from max-pooling RGB then converting. So C++ returns the max-pooled 210x160 RGB
  frame and this module applies the kit's :class:`~retro_atari_kit.wrappers.WarpFrame` steps (crop,
  ``cv2.COLOR_RGB2GRAY``, ``cv2.INTER_AREA`` resize) in the main process.
- Time limit, true-score statistics, episodic life (continue the game with a NOOP after a life loss),
  fire reset (FIRE then action 2) and reward clipping are re-implemented per env below, line for line
  with the wrappers, so observations, rewards, terminations and ``info["episode"]`` equal ``gym.make``'s.
- No-op starts: ale-py draws 0..``n-1`` no-op frames; the kit draws 1..``noop_max``. We ask C++ for
  ``noop_max + 1`` and reset again when it drew 0, which gives exactly the kit's distribution. The random
  generator differs from ``gym.make``'s, so the same seed gives different no-op counts (and sticky-action
  draws): tests of frame equality use ``noop_max=0`` and no sticky actions.
- ``info["frame_number"]``/``info["episode_frame_number"]`` come from the native env.

Not expressible (the dispatcher then uses the subprocess backend): ``render_mode="rgb_array"``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from retro_atari_kit.catalog import ale_game
from retro_atari_kit.vector._stacked import Seeds, StackedVectorEnv
from retro_atari_kit.wrappers.fire_reset import fire_reset_enabled
from retro_atari_kit.wrappers.warp_frame import crop_and_resize

NOOP, FIRE = 0, 1
MAX_FRAMES_PER_EPISODE = 108_000


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


class _NativeEnv:
    """One env: a single-env ``AtariVectorEnv`` plus the kit's wrapper logic above max-and-skip."""

    def __init__(self, rom: str, cfg: dict[str, Any]):
        from ale_py.vector_env import AtariVectorEnv

        self.noop_max = cfg["noop_max"]
        self.core = AtariVectorEnv(
            rom,
            1,
            num_threads=1,
            frameskip=cfg["frame_skip"],
            maxpool=cfg["frame_skip"] > 1,
            noop_max=self.noop_max + 1 if self.noop_max > 0 else 0,
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
        self.max_steps = cfg["max_episode_steps"]
        self.episodic = cfg["terminal_on_life_loss"]
        self.clip = cfg["clip_reward"]
        self.size, self.grayscale, self.crop = cfg["screen_size"], cfg["grayscale"], cfg["crop_score"]
        self.fire = False  # set by the driver from the action meanings
        self._action = np.zeros(1, dtype=np.int64)
        self._paddle = np.ones(1, dtype=np.float32)
        # state of TimeLimit, TrueScoreStatistics and EpisodicLife
        self.elapsed = 0
        self.score = 0.0
        self.length = 0
        self.start = time.perf_counter()
        self.lives = 0
        self.continue_game = False

    # -- max-and-skip level: the C++ env (+ TimeLimit + TrueScoreStatistics) -------------------------
    def _core_reset(self, seed: int | None):
        obs, info = self.core.reset(seed=None if seed is None else np.array([seed]))
        while self.noop_max > 0 and int(info["episode_frame_number"][0]) == 0:
            obs, info = self.core.reset()  # C++ drew 0 no-ops; the kit draws 1..noop_max
        self.elapsed = 0
        self.score, self.length, self.start = 0.0, 0, time.perf_counter()
        return obs[0, 0], self._info(info)

    def send(self, action: int) -> None:
        self._action[0] = action
        self.core.ale.send(self._action, self._paddle)

    def _core_finish(self):
        obs, reward, terminated, truncated, info = self.core.ale.recv()
        reward, terminated, truncated = float(reward[0]), bool(terminated[0]), bool(truncated[0])
        info = self._info(info)
        self.elapsed += 1
        if self.max_steps is not None and self.elapsed >= self.max_steps:
            truncated = True
        self.score += reward
        self.length += 1
        if terminated or truncated:
            info["episode"] = {
                "r": self.score,
                "l": self.length,
                "t": round(time.perf_counter() - self.start, 6),
            }
        return obs[0, 0], reward, terminated, truncated, info

    def _core_step(self, action: int):
        self.send(action)
        return self._core_finish()

    @staticmethod
    def _info(native: dict[str, np.ndarray]) -> dict[str, Any]:
        return {
            "lives": int(native["lives"][0]),
            "episode_frame_number": int(native["episode_frame_number"][0]),
            "frame_number": int(native["frame_number"][0]),
        }

    # -- episodic life ------------------------------------------------------------------------------
    def _life_step(self, result):
        obs, reward, terminated, truncated, info = result
        if not self.episodic:
            return result
        lives = info["lives"]
        lost_life = 0 < lives < self.lives
        self.lives = lives
        self.continue_game = lost_life and not (terminated or truncated)
        return obs, reward, terminated or lost_life, truncated, info

    def _life_reset(self, seed: int | None):
        if self.episodic and self.continue_game and seed is None:
            self.continue_game = False
            obs, _, terminated, truncated, info = self._core_step(NOOP)
            if not (terminated or truncated):
                self.lives = info["lives"]
                return obs, info
        self.continue_game = False
        obs, info = self._core_reset(seed)
        self.lives = info["lives"]
        return obs, info

    # -- fire reset, warp, clip: the public per-env API ----------------------------------------------
    def reset(self, seed: int | None):
        obs, info = self._life_reset(seed)
        if self.fire:
            obs, _, terminated, truncated, info = self._life_step(self._core_step(FIRE))
            if terminated or truncated:
                self._life_reset(None)
            obs, _, terminated, truncated, info = self._life_step(self._core_step(2))
            if terminated or truncated:
                obs, info = self._life_reset(None)
        return self.warp(obs), info

    def finish(self):
        obs, reward, terminated, truncated, info = self._life_step(self._core_finish())
        if self.clip:
            reward = float(np.sign(reward))
        return self.warp(obs), reward, terminated, truncated, info

    def warp(self, frame: np.ndarray) -> np.ndarray:
        """Exactly :class:`retro_atari_kit.wrappers.WarpFrame`: crop, RGB2GRAY, INTER_AREA resize."""
        return crop_and_resize(frame, self.size, self.grayscale, self.crop)

    def close(self) -> None:
        self.core.close()


class NativeDriver:
    """Frame driver over N :class:`_NativeEnv`: sends every action first, so the C++ threads overlap."""

    def __init__(self, game: str, num_envs: int, cfg: dict[str, Any]):
        import gymnasium as gym

        rom = ale_game(game).rom
        self.envs: list[_NativeEnv] = []
        try:
            for _ in range(num_envs):
                self.envs.append(_NativeEnv(rom, cfg))
        except BaseException:
            self.close()
            raise
        action_set = self.envs[0].core.ale.get_action_set()
        meanings = [action.name for action in action_set]
        fire = fire_reset_enabled(meanings, cfg["fire_reset"])
        for env in self.envs:
            env.fire = fire
        self.num_envs = num_envs
        channels = 1 if cfg["grayscale"] else 3
        size = cfg["screen_size"]
        self.frame_space = gym.spaces.Box(0, 255, (channels, size, size), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(len(action_set))
        self.metadata = {"render_modes": [], "render_mode": None}
        self.frames = np.zeros((num_envs, channels, size, size), dtype=np.uint8)
        self.action_meanings = meanings

    def reset(self, indices: list[int], seeds: Seeds, options: dict | None) -> list[dict]:
        infos = []
        for i, seed in zip(indices, seeds, strict=True):
            self.frames[i], info = self.envs[i].reset(seed)
            infos.append(info)
        return infos

    def step(self, actions: np.ndarray, reset_mask: np.ndarray, same_step: bool):
        n = self.num_envs
        actions = np.asarray(actions)
        if actions.shape != (n,):
            raise ValueError(f"actions must have shape ({n},), got {actions.shape}")
        rewards = np.zeros(n, dtype=np.float64)
        terms = np.zeros(n, dtype=bool)
        truncs = np.zeros(n, dtype=bool)
        infos: list[dict] = [{} for _ in range(n)]
        finals: dict[int, tuple[np.ndarray, dict]] = {}
        for i in range(n):
            if not reset_mask[i]:
                self.envs[i].send(int(actions[i]))
        for i in np.flatnonzero(reset_mask):  # overlaps with the other envs' emulation
            self.frames[i], infos[i] = self.envs[i].reset(None)
        for i in range(n):
            if reset_mask[i]:
                continue
            frame, rewards[i], terms[i], truncs[i], infos[i] = self.envs[i].finish()
            if same_step and (terms[i] or truncs[i]):
                finals[i] = (frame, infos[i])
                frame, infos[i] = self.envs[i].reset(None)
            self.frames[i] = frame
        return rewards, terms, truncs, infos, finals

    def call(self, name: str, args: tuple, kwargs: dict) -> list[Any]:
        if name == "get_action_meanings":
            return [list(self.action_meanings) for _ in self.envs]
        raise AttributeError(
            f"the native ALE backend has no per-env {name!r}; use backend='subprocess' for per-env calls"
        )

    def set_attr(self, name: str, values: list[Any]) -> None:
        raise AttributeError(
            f"the native ALE backend cannot set per-env {name!r}; "
            "use backend='subprocess' for per-env attributes"
        )

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []


def make_native_vector_env(
    game: str, num_envs: int, autoreset_mode: AutoresetMode, cfg: dict[str, Any]
) -> StackedVectorEnv:
    """Build the native backend from resolved kwargs (``validate_ale_kwargs``); raises ``ValueError``
    naming kwargs it cannot express exactly."""
    problems = native_incompatibilities(cfg)
    if problems:
        raise ValueError(
            f"backend='native' cannot express {'; '.join(problems)}; use backend='subprocess' or 'auto'"
        )
    return StackedVectorEnv(NativeDriver(game, num_envs, cfg), cfg["frame_stack"], autoreset_mode, "native")
