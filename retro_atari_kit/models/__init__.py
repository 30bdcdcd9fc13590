"""Torch models for Atari-style frames: uint8 in, normalised once, on the device (no SB3 import here).

``NatureCNN`` and ``ImpalaCNN`` accept ``(B, C, H, W)`` (or one ``(C, H, W)``) uint8 frames (divided by
255 once, inside the module) or float frames already in [0, 1] (used as is). The SB3 adapters live in
``retro_atari_kit.integrations.sb3.extractors``.

``NETWORKS`` (the one list of network names, ``--network`` choices) is importable without torch; the
classes load torch on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

from retro_atari_kit.errors import RunError

# network name (``--network``) -> class name in this package
NETWORKS: dict[str, str] = {"nature": "NatureCNN", "impala": "ImpalaCNN"}

_CLASSES = {
    "NatureCNN": "retro_atari_kit.models.nature",
    "ImpalaCNN": "retro_atari_kit.models.impala",
    "ImpalaStage": "retro_atari_kit.models.impala",
    "ResidualBlock": "retro_atari_kit.models.impala",
}

__all__ = [
    "NETWORKS",
    "ImpalaCNN",
    "ImpalaStage",
    "NatureCNN",
    "ResidualBlock",
    "check_network",
    "cuda_devices",
    "network_class",
]


def cuda_devices() -> tuple[int, str]:
    """``(number of CUDA devices torch can use here, torch version)``, for device checks outside models/."""
    import torch

    return (torch.cuda.device_count() if torch.cuda.is_available() else 0), torch.__version__


def check_network(name: object) -> None:
    """The one check of a network name (``--network``, every engine): RunError (a ValueError) naming the
    choices unless ``name`` is in :data:`NETWORKS`."""
    if not isinstance(name, str) or name not in NETWORKS:
        raise RunError(f"unknown network {name!r}; choose one of {', '.join(NETWORKS)}")


def network_class(name: str) -> type:
    """The torch module class of network ``name`` (``"nature"`` or ``"impala"``); ValueError otherwise."""
    check_network(name)
    return __getattr__(NETWORKS[name])


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        return getattr(importlib.import_module(_CLASSES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
