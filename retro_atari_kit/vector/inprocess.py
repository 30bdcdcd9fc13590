"""In-process backend: N per-env stacks stepped one after another in this process (for debugging); its
driver also runs each subprocess-backend worker's env."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from retro_atari_kit.vector._factory import EnvFactory
from retro_atari_kit.vector._stacked import BatchedInfos, Seeds, StackedVectorEnv


class InProcessDriver:
    """Steps N envs sequentially in the calling process. Breakpoints and tracebacks work as usual."""

    def __init__(self, factories: list[EnvFactory]):
        self.envs = []
        try:
            for factory in factories:
                self.envs.append(factory())
        except BaseException:
            self.close()
            raise
        self.num_envs = len(self.envs)
        self.frame_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self.metadata = dict(self.envs[0].metadata)
        self.metadata["render_mode"] = self.envs[0].render_mode
        self.frames = np.zeros((self.num_envs, *self.frame_space.shape), dtype=np.uint8)

    def reset(self, indices: list[int], seeds: Seeds, options: dict | None) -> list[dict]:
        infos = []
        for i, seed in zip(indices, seeds, strict=True):
            self.frames[i], info = self.envs[i].reset(seed=seed, options=options)
            infos.append(info)
        return infos

    def step(self, actions: np.ndarray, reset_mask: np.ndarray) -> tuple:
        n = self.num_envs
        rewards = np.zeros(n, dtype=np.float64)
        terms = np.zeros(n, dtype=bool)
        truncs = np.zeros(n, dtype=bool)
        infos: list[dict] = []
        for i, env in enumerate(self.envs):
            if reset_mask[i]:
                self.frames[i], info = env.reset()
            else:
                self.frames[i], rewards[i], terms[i], truncs[i], info = env.step(actions[i])
            infos.append(info)
        return rewards, terms, truncs, BatchedInfos.of(infos)

    def call(self, name: str, args: tuple, kwargs: dict) -> list[Any]:
        results = []
        for env in self.envs:
            attr = getattr(env, name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        return results

    def set_attr(self, name: str, values: list[Any]) -> None:
        for env, value in zip(self.envs, values, strict=True):
            setattr(env, name, value)

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []


def make_inprocess_vector_env(
    factories: list[EnvFactory], frame_stack: int, autoreset_mode: AutoresetMode | str
) -> StackedVectorEnv:
    """Build the in-process backend (see :class:`InProcessDriver`)."""
    return StackedVectorEnv(InProcessDriver(factories), frame_stack, autoreset_mode, backend="inprocess")
