"""The main-process half shared by every backend: frame stacking, the autoreset, and the step's infos.

A *driver* owns N per-env stacks built with ``frame_stack=1`` (in this process or in worker processes)
and exposes their latest single frames in one ``(N, C, H, W)`` uint8 array. :class:`StackedVectorEnv`
stacks those frames exactly as :class:`retro_atari_kit.wrappers.FrameStack` does, so only one frame per
env and step has to cross a process boundary. It is the one layer that decides autoresets (a driver only
steps some envs and resets others when told), and the one place where a driver's :class:`BatchedInfos`
become gymnasium's info dict.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from retro_atari_kit.envs._validate import check_actions, check_seeds

Seeds = list[int | None]
_Method = TypeVar("_Method", bound=Callable[..., Any])


def one_thread_at_a_time(method: _Method) -> _Method:
    """``method`` of a :class:`StackedVectorEnv` refused, before anything changes, while another thread is
    inside a call on the same env (two threads on one set of workers' pipes would wait on each other's
    answers for ever); the same thread may nest calls."""

    @functools.wraps(method)
    def guarded(self: StackedVectorEnv, *args: Any, **kwargs: Any) -> Any:
        lock = self.__dict__.get("_in_call")
        if lock is None:  # __init__ did not finish (close() from __del__)
            return method(self, *args, **kwargs)
        if not lock.acquire(blocking=False):
            raise RuntimeError(
                f"{self!r}.{method.__name__}() refused: another thread is in a call on this vector env; one "
                "vector env serves one thread at a time: give each thread its own env, or guard every call "
                "with one threading.Lock"
            )
        try:  # plain try/finally, not a context manager: this runs on every step
            return method(self, *args, **kwargs)
        finally:
            lock.release()

    return guarded  # type: ignore[return-value]


class BatchedInfos(NamedTuple):
    """A step's infos as every driver returns them: ``common`` maps keys every env has to one value per env
    (an ``(N,)`` array); ``extra`` maps an env index to that env's other keys (e.g. ``episode``)."""

    common: dict[str, np.ndarray]
    extra: dict[int, dict]

    @classmethod
    def of(cls, infos: list[dict]) -> BatchedInfos:
        """The per-env infos of a driver that has them as dicts: a key that every env has, with values of
        one plain type (``int``, ``float`` or ``bool``), becomes one array."""
        if not infos:
            return cls({}, {})
        common: dict[str, np.ndarray] = {}
        for key, value in infos[0].items():  # in the first info's order, the same in every process
            kind = type(value)
            if kind in (int, float, bool) and all(key in info and type(info[key]) is kind for info in infos):
                common[key] = np.array([info[key] for info in infos])
        extra = {}
        for i, info in enumerate(infos):
            rest = {key: value for key, value in info.items() if key not in common}
            if rest:
                extra[i] = rest
        return cls(common, extra)

    def env(self, i: int) -> dict:
        """Env ``i``'s info as one dict, with plain Python values as a ``gym.make`` env returns them."""
        common = {key: values[i : i + 1].tolist()[0] for key, values in self.common.items()}  # any dtype
        return {**common, **self.extra.get(i, {})}


class Driver(Protocol):
    """What :class:`StackedVectorEnv` needs from a backend (``inprocess.py``, ``native_ale.py``, and over
    worker processes ``_pool.py``)."""

    num_envs: int
    frame_space: gym.spaces.Box  # one env's single frame, (C, H, W) uint8
    action_space: gym.Space  # one env's action space
    frames: np.ndarray  # (N, C, H, W): the latest frame of every env
    metadata: dict[str, Any]

    def reset(self, indices: list[int], seeds: Seeds, options: dict | None) -> list[dict]: ...

    def step(
        self, actions: np.ndarray, reset_mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, BatchedInfos]:
        """Step every env but those in ``reset_mask``, which are reset instead (reward 0, no flags, the
        reset's info); the new frames are in ``frames``."""

    def call(self, name: str, args: tuple, kwargs: dict) -> list[Any]: ...

    def set_attr(self, name: str, values: list[Any]) -> None: ...

    def close(self) -> None: ...


class StackedVectorEnv(VectorEnv):
    """A gymnasium ``VectorEnv`` over a frame driver, stacking ``frame_stack`` frames in this process.

    Observations equal those of N ``gym.make`` envs: ``(N, k*C, H, W)`` uint8, oldest frame first, the
    first frame repeated ``k`` times after a reset. Autoreset follows gymnasium's ``autoreset_mode`` and
    its info layout (that of gymnasium's ``SyncVectorEnv`` over ``gym.make`` envs):

    - ``NEXT_STEP`` (default): the step after an episode end resets that env, ignoring its action, and
      returns reward 0. ``info["episode"]`` (true game score), with mask ``info["_episode"]``, is present
      on the step where an env's real game ended.
    - ``SAME_STEP``: the env is reset within the ending step, which returns the reset observation; the top
      level of ``info`` holds the reset info, ``info["final_obs"]`` and ``info["final_info"]`` (with their
      ``_`` masks) the last observation and info, so the true score is ``info["final_info"]["episode"]``.
    - ``DISABLED``: never resets by itself; ``reset(options={"reset_mask": mask})`` resets only the envs
      in ``mask`` (the others keep their state and observation). Stepping an env whose episode ended
      without resetting it steps the finished episode, as with gymnasium's own vector envs.
    """

    reports_true_scores = True  # info["episode"] is the kit's true-score record (retro_atari_kit.recorders)

    def __init__(self, driver: Driver, frame_stack: int, autoreset_mode: AutoresetMode | str, backend: str):
        self.driver = driver
        self.backend = backend
        self.num_envs = driver.num_envs
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = {**dict(driver.metadata), "autoreset_mode": self.autoreset_mode}
        self.render_mode = driver.metadata.get("render_mode")
        channels, height, width = driver.frame_space.shape
        self.k = frame_stack
        self.channels = channels
        self.single_observation_space = gym.spaces.Box(
            0, 255, (frame_stack * channels, height, width), dtype=np.uint8
        )
        self.single_action_space = driver.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._stacks = np.zeros((self.num_envs, *self.single_observation_space.shape), dtype=np.uint8)
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._every_env = np.ones(self.num_envs, dtype=bool)  # the mask of a key every env has
        self.closed = False
        self._in_call = threading.RLock()  # held during every call; see one_thread_at_a_time

    # -- stacking ----------------------------------------------------------------------------------
    def _fill(self, index: int | np.ndarray, frame: np.ndarray) -> None:
        self._stacks[index] = (
            np.tile(frame, (self.k, 1, 1)) if np.ndim(index) == 0 else np.tile(frame, (1, self.k, 1, 1))
        )

    def _push(self, mask: np.ndarray | None) -> np.ndarray:
        """Append the driver's newest frame to the stacks in ``mask`` (None: every env); returns a copy of
        every stack (the observation batch). Built in a fresh array and copied back: two plain copies, where
        shifting in place makes numpy buffer the overlapping copy and a third copy returns it."""
        c = self.channels
        out = np.empty_like(self._stacks)
        out[:, :-c] = self._stacks[:, c:]
        out[:, -c:] = self.driver.frames
        if mask is not None:  # envs that did not step (reset this step) keep their stacks
            out[~mask] = self._stacks[~mask]
        self._stacks[...] = out
        return out

    # -- gymnasium API -----------------------------------------------------------------------------
    @one_thread_at_a_time
    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every env, or only those in ``options["reset_mask"]`` (a bool array of shape ``(N,)``).

        Seeds as gymnasium's vector envs: an int ``s`` gives env ``i`` the seed ``s + i`` (also with a mask,
        where only the masked envs use theirs); a list gives one seed per env. The other options go to
        every reset env. Unmasked envs keep their observation, which the returned batch repeats.
        """
        self._check_open()
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        seeds = check_seeds(seed, self.num_envs)  # before any env is reset: a refused seed changes nothing
        if mask is None:
            indices = list(range(self.num_envs))
        else:
            indices = [int(i) for i in np.flatnonzero(self._check_reset_mask(mask))]
            seeds = [seeds[i] for i in indices]
        env_infos = self.driver.reset(indices, seeds, options or None)
        infos: dict[str, Any] = {}
        for i, info in zip(indices, env_infos, strict=True):
            self._fill(i, self.driver.frames[i])
            self._autoreset[i] = False
            infos = self._add_info(infos, info, i)
        return self._stacks.copy(), infos

    def _check_reset_mask(self, mask: Any) -> np.ndarray:
        """gymnasium's rules for ``reset_mask``, as one clear error instead of an assertion."""
        n = self.num_envs
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (n,):
            got = f"{type(mask).__name__}" + (
                f" of dtype {mask.dtype} and shape {mask.shape}" if isinstance(mask, np.ndarray) else ""
            )
            raise ValueError(f"options['reset_mask'] must be a numpy bool array of shape ({n},); got {got}")
        if not mask.any():
            raise ValueError("options['reset_mask'] selects no env: set at least one True, or skip the reset")
        return mask

    @one_thread_at_a_time
    def step(self, actions):
        self._check_open()
        # checked here, before any env steps or any worker hears of it: a refused action changes nothing
        actions = check_actions(actions, self.single_action_space, self.num_envs)
        reset_mask = self._autoreset  # NEXT_STEP: the envs whose episode ended at the last step
        rewards, terminations, truncations, batched = self.driver.step(actions, reset_mask)
        for i in reset_mask.nonzero()[0].tolist():
            self._fill(i, self.driver.frames[i])
        ended = terminations | truncations
        if self.autoreset_mode == AutoresetMode.SAME_STEP and ended.any():
            observations, infos = self._reset_within_step(ended, batched)
        else:
            observations, infos = self._push(~reset_mask if reset_mask.any() else None), self._infos(batched)
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            self._autoreset = ended
        return observations, rewards, terminations, truncations, infos

    def _infos(self, batched: BatchedInfos, masks: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """gymnasium's info dict (``VectorEnv._add_info`` for every env) from the driver's batched infos."""
        infos: dict[str, Any] = {}
        for key, values in batched.common.items():
            infos[key] = values
            infos[f"_{key}"] = masks[key] if masks is not None else self._every_env.copy()
        for i, extra in batched.extra.items():
            infos = self._add_info(infos, extra, i)
        return infos

    def _reset_within_step(
        self, ended: np.ndarray, batched: BatchedInfos
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """SAME_STEP: the ended envs are reset now; the top level of ``info`` holds their reset info, and
        ``final_obs`` / ``final_info`` their last observation and info (gymnasium's ``SyncVectorEnv``)."""
        c = self.channels
        envs = ended.nonzero()[0].tolist()
        finals = {
            i: (np.concatenate([self._stacks[i, c:], self.driver.frames[i]]), batched.env(i)) for i in envs
        }
        observations = self._push(None)
        reset_infos = self.driver.reset(envs, [None] * len(envs), None)
        common, extra = batched.common, dict(batched.extra)
        masks = {key: self._every_env.copy() for key in common}
        for i, info in zip(envs, reset_infos, strict=True):
            self._fill(i, self.driver.frames[i])
            observations[i] = self._stacks[i]
            rest = {}
            for key, value in info.items():
                if key in common and type(value) in (int, float, bool):
                    common[key][i] = value
                else:
                    rest[key] = value
            for key in common.keys() - info.keys():
                masks[key][i] = False
            final_obs, final_info = finals[i]
            extra[i] = {**rest, "final_obs": final_obs, "final_info": final_info}
        return observations, self._infos(BatchedInfos(common, extra), masks)

    @one_thread_at_a_time
    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call ``name`` on every per-env stack (or read it, if it is not callable)."""
        self._check_open()
        return tuple(self.driver.call(name, args, kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    @one_thread_at_a_time
    def set_attr(self, name: str, values: Any) -> None:
        self._check_open()
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr needs one value per env ({self.num_envs}), got {len(values)}")
        self.driver.set_attr(name, list(values))

    def render(self):
        return self.call("render")

    def close_extras(self, **kwargs: Any) -> None:
        self.driver.close()

    @one_thread_at_a_time
    def close(self, **kwargs: Any) -> None:
        """Shut the backend down (workers terminated and joined). Safe to call more than once."""
        if self.closed:
            return
        self.closed = True
        self.close_extras(**kwargs)

    def __reduce_ex__(self, protocol: Any) -> Any:
        # copy.copy, copy.deepcopy and pickle all come here: refused before anything is touched, as the
        # copy would share (shallow) or fail half-way through duplicating (deep) the workers and emulators
        raise TypeError(
            f"{self!r} cannot be copied or pickled: it owns running emulators (threads, worker processes, "
            "shared memory); make another with gym.make_vec(env_id, num_envs=...)"
        )

    def __deepcopy__(self, memo: dict) -> Any:
        self.__reduce_ex__(4)

    def __copy__(self) -> Any:
        self.__reduce_ex__(4)

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"this {type(self).__name__} ({self.backend} backend) is closed")

    def __del__(self):
        if not getattr(self, "closed", True):
            try:
                self.close()
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(backend={self.backend!r}, num_envs={self.num_envs})"
