"""Native ALE backend: ale-py's ``AtariVectorEnv`` (C++ threads) with the kit's semantics.

Not yet enabled: :func:`native_incompatibilities` reports why, and ``auto`` then uses the subprocess
backend.
"""

from __future__ import annotations

from typing import Any

from gymnasium.vector import AutoresetMode, VectorEnv


def native_incompatibilities(game: str, kwargs: dict[str, Any]) -> list[str]:
    """Reasons why ``AtariVectorEnv`` cannot reproduce the kit's stack for these kwargs (empty: it can)."""
    return ["the kit's stack (native backend under verification)"]


def make_native_vector_env(
    game: str, num_envs: int, autoreset_mode: AutoresetMode, **kwargs: Any
) -> VectorEnv:
    problems = native_incompatibilities(game, kwargs)
    raise ValueError(f"backend='native' cannot express {'; '.join(problems)}; use backend='subprocess'")
