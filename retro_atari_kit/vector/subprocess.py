"""The subprocess backend: one env per worker process, for stable-retro (one emulator per process) and for
ALE kwargs the native backend cannot express.

Each worker hosts an :class:`~retro_atari_kit.vector.inprocess.InProcessDriver` over its one env, whose
stack is built *without* its frame stack: one ``(C, H, W)`` frame per env and step is written into shared
memory, and frames are stacked in the main process (:class:`~retro_atari_kit.vector._stacked.
StackedVectorEnv`). Observations, rewards, flags and infos are those of the per-env stacks. The workers,
their shared memory, their wake-up and their errors: :mod:`._pool`.
"""

from __future__ import annotations

from functools import partial

from gymnasium.vector import AutoresetMode

from retro_atari_kit.vector._factory import EnvFactory
from retro_atari_kit.vector._pool import START_METHODS, Block, WorkerDiedError, WorkerDriver, WorkerVectorEnv
from retro_atari_kit.vector.inprocess import InProcessDriver

__all__ = ["START_METHODS", "WorkerDiedError", "make_subprocess_vector_env"]


def make_subprocess_vector_env(
    factories: list[EnvFactory],
    frame_stack: int,
    autoreset_mode: AutoresetMode | str,
    start_method: str | None = None,
) -> WorkerVectorEnv:
    """The subprocess backend over these env factories (see the module docstring)."""
    workers = []
    for rank, factory in enumerate(factories):
        game = getattr(factory, "game", None)  # a test's env class has none
        env = f"env rank {rank} (RetroKit/{game}-v0)" if game else f"env rank {rank}"
        workers.append(
            Block(rank, rank + 1, partial(InProcessDriver, [factory]), f"{env}: its worker process")
        )
    driver = WorkerDriver(workers, "subprocess", "retrokit-env", start_method)
    return WorkerVectorEnv(driver, frame_stack, autoreset_mode, "subprocess")
