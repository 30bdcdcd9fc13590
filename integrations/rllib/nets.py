"""The networks behind :class:`KitRLModule`, as plain torch (no Ray import), so a saved policy can be loaded
and run for evaluation with torch alone.

An encoder (the kit's ``NatureCNN`` or ``ImpalaCNN``: uint8 ``(B, C, H, W)`` in, divided by 255 once, on
the input's device) shared by linear heads, as in the kit's SB3 presets (``net_arch=[]``):

- actor-critic (PPO, APPO, IMPALA): ``pi`` (logits, orthogonal gain 0.01) and ``vf`` (gain 1.0), the
  gains of SB3's / baselines' ``CnnPolicy``, so the initial policy is near uniform;
- Q-learning (DQN): ``af`` (one Q-value, or advantage with ``dueling``, per action) and with ``dueling`` a
  ``vf`` stream (Wang et al. 2016: ``Q = V + A - mean(A)``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from retro_atari_kit.models import NETWORKS as _NETWORKS
from retro_atari_kit.models import network_class

NETWORKS = tuple(_NETWORKS)  # the core's list of network names

__all__ = ["NETWORKS", "build_encoder", "build_heads", "dueling_q", "linear_head"]


def build_encoder(
    network: str, obs_shape: tuple[int, ...], channels_last: bool = True, **kwargs: Any
) -> nn.Module:
    """The kit's CNN for ``(C, H, W)`` observations; ``kwargs`` go to the model (e.g. ``features_dim``)."""
    if len(obs_shape) != 3 or obs_shape[1] != obs_shape[2]:
        raise ValueError(
            f"the kit's CNNs take square channels-first frames (C, H, W), got observation shape {obs_shape}; "
            "use a RetroKit/ env (uint8 (4, 84, 84))"
        )
    cls = network_class(network)
    return cls(
        in_channels=int(obs_shape[0]), image_size=int(obs_shape[1]), channels_last=channels_last, **kwargs
    )


def linear_head(in_features: int, out_features: int, gain: float) -> nn.Linear:
    """One linear layer with orthogonal weights of ``gain`` and zero bias."""
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def build_heads(features: int, n_actions: int, q_learning: bool, dueling: bool) -> dict[str, nn.Module]:
    """The heads by attribute name: ``pi``, ``vf`` (actor-critic) or ``af`` [+ ``vf``] (Q-learning)."""
    if not q_learning:
        return {"pi": linear_head(features, n_actions, 0.01), "vf": linear_head(features, 1, 1.0)}
    heads: dict[str, nn.Module] = {"af": linear_head(features, n_actions, 1.0)}
    if dueling:
        heads["vf"] = linear_head(features, 1, 1.0)
    return heads


def dueling_q(advantages: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``V + A - mean(A)`` (the mean over actions keeps V and A identifiable)."""
    return value + advantages - advantages.mean(dim=-1, keepdim=True)
