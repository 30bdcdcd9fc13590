"""Helpers shared by the kit's torch models: input scaling, memory format, initialisation."""

from __future__ import annotations

import math

import torch
from torch import nn

from retro_atari_kit.errors import as_int

__all__ = ["ChannelsLastMixin", "conv_output_size", "init_orthogonal", "to_unit_float"]


def to_unit_float(x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """uint8 frames -> float32 in [0, 1] (the ONE division by 255); float input is returned as is.

    The memory format is switched before the cast, so a uint8 tensor (4x fewer bytes) is what gets permuted.
    """
    if x.dim() != 4:
        raise ValueError(
            f"expected a batch of images (B, C, H, W) or one image (C, H, W), got shape {tuple(x.shape)}"
        )
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    if x.dtype == torch.uint8:
        return x.float().mul_(1.0 / 255.0)
    if not x.is_floating_point():
        raise TypeError(f"expected uint8 frames or float frames in [0, 1], got dtype {x.dtype}")
    return x


def check_positive_ints(**values: object) -> tuple[int, ...]:
    """The values as Python ints, in order; ValueError naming the first argument that is not a positive
    int (numpy integers are ints, bools are not)."""
    out = []
    for name, value in values.items():
        number = as_int(value)
        if number is None or number < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
        out.append(number)
    return tuple(out)


def conv_output_size(size: int, kernel: int, stride: int, padding: int = 0) -> int:
    """Spatial size after a conv / pool layer (floor division, as torch computes it)."""
    return (size + 2 * padding - kernel) // stride + 1


def init_orthogonal(module: nn.Module, gain: float = math.sqrt(2)) -> None:
    """Orthogonal weights with ``gain`` and zero biases for every Conv2d / Linear (the Atari convention)."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.orthogonal_(m.weight, gain)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class ChannelsLastMixin:
    """Memory-format handling shared by the models (``self.channels_last`` set by the model).

    With ``channels_last`` the weights are converted once (at construction, or at the first forward after
    :meth:`defer_channels_last`) and every input batch is converted before the cast to float.
    """

    channels_last: bool
    _weights_channels_last: bool = False

    def defer_channels_last(self) -> None:
        """Keep the weights contiguous until the first forward.

        For frameworks that re-initialise weights in place after construction with ops that need a
        contiguous tensor (SB3's orthogonal init uses ``view``). The conversion keeps the ``Parameter``
        objects, so an optimizer built in between stays valid.
        """
        self.to(memory_format=torch.contiguous_format)  # type: ignore[attr-defined]
        self._weights_channels_last = False

    def _apply_weight_format(self) -> None:
        if self.channels_last and not self._weights_channels_last:
            self.to(memory_format=torch.channels_last)  # type: ignore[attr-defined]
            self._weights_channels_last = True

    def _prepare_input(self, x: torch.Tensor) -> torch.Tensor:
        self._apply_weight_format()
        return to_unit_float(x.unsqueeze(0) if x.dim() == 3 else x, self.channels_last)

    @staticmethod
    def _match_batch(features: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        # one image in (as torch's convolutions accept, and TorchRL's single envs give), one vector out
        return features.squeeze(0) if x.dim() == 3 else features
