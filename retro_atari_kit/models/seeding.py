"""torch's random draws while an agent plays, taken from the evaluation's seed and given back after.

A policy that samples its actions (SB3's ``predict(deterministic=False)``, the RLlib engine's ``KitPolicy``)
draws from torch's global generators: the CPU one, or the CUDA one of the device its network runs on.
:func:`torch_draws_from` seeds those generators for the length of a game loop and restores their states
after, so the same seed replays the same actions, and a training run that evaluates between updates
continues with the draws it would have had without the evaluation. torch is imported only when it runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["torch_draws_from"]


@contextlib.contextmanager
def torch_draws_from(seed: int) -> Iterator[None]:
    """torch's CPU generator, and those of the CUDA devices once CUDA is in use, seeded with ``seed``
    inside the block; their previous states restored after it.

    CUDA not yet initialised is left alone: ``torch.manual_seed`` would queue a seed for it that outlives
    the block (and starting CUDA only to seed it costs seconds). A network moved to a CUDA device
    initialises CUDA before any game is played, so its generator is seeded here.
    """
    import torch

    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    devices = range(torch.cuda.device_count()) if cuda else range(0)
    cpu_state = torch.get_rng_state()
    cuda_states = [torch.cuda.get_rng_state(d) for d in devices]
    torch.default_generator.manual_seed(seed)
    if cuda:  # each device's generator, set from the host: no device is switched to or started
        torch.cuda.manual_seed_all(seed)
    try:
        yield
    finally:
        torch.set_rng_state(cpu_state)
        for d, state in zip(devices, cuda_states, strict=True):
            torch.cuda.set_rng_state(state, d)
