"""The IMPALA CNN (Espeholt et al. 2018) with the CoinRun options (dropout, batch norm), in torch."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from retro_atari_kit.errors import as_int
from retro_atari_kit.models._common import (
    ChannelsLastMixin,
    check_positive_ints,
    conv_output_size,
    init_orthogonal,
)


def _conv_block(in_ch: int, out_ch: int, batch_norm: bool, dropout: float) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(in_ch, out_ch, 3, padding=1)]
    if dropout > 0:
        layers.append(nn.Dropout2d(dropout))
    if batch_norm:
        layers.append(nn.BatchNorm2d(out_ch))
    return nn.Sequential(*layers)


class ResidualBlock(nn.Module):
    """``x + conv(relu(conv(relu(x))))`` with 3x3 convs keeping the channel count and spatial size."""

    def __init__(self, channels: int, batch_norm: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.conv0 = _conv_block(channels, channels, batch_norm, dropout)
        self.conv1 = _conv_block(channels, channels, batch_norm, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(F.relu(self.conv0(F.relu(x))))


class ImpalaStage(nn.Module):
    """conv 3x3 -> max-pool 3 stride 2 (padding 1) -> ``blocks`` residual blocks."""

    def __init__(self, in_ch: int, out_ch: int, blocks: int, batch_norm: bool, dropout: float) -> None:
        super().__init__()
        self.conv = _conv_block(in_ch, out_ch, batch_norm, dropout)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.blocks = nn.Sequential(*(ResidualBlock(out_ch, batch_norm, dropout) for _ in range(blocks)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.pool(self.conv(x)))


class ImpalaCNN(ChannelsLastMixin, nn.Module):
    """IMPALA CNN: per depth a stage (conv 3x3, max-pool 3/2, ``blocks_per_stage`` residual blocks), then
    ReLU, flatten, fc ``features_dim``, ReLU.

    Input: a batch ``(B, C, H, W)`` of square images (or one ``(C, H, W)`` image: then the output has no
    batch dimension either), either **uint8 in [0, 255]** (divided by 255 here, once, on the tensor's
    device) or **float already in [0, 1]** (used as is, never divided again).
    Each stage halves the size (rounding up): 84 -> 42 -> 21 -> 11.

    CoinRun variants (Cobbe et al. 2019): ``dropout`` > 0 adds channel dropout (``nn.Dropout2d``) after every
    conv; ``batch_norm=True`` adds ``BatchNorm2d`` after every conv. Both are off by default (as in IMPALA).
    Remember ``model.eval()`` for evaluation when either is on.

    Initialisation: orthogonal weights with gain sqrt(2), zero biases (the Atari convention).

    Memory format: ``channels_last=True`` (default) uses ``torch.channels_last`` for weights and activations.

    Parameters for ``in_channels=4``, 84x84, ``depths=(16, 32, 32)``, ``blocks_per_stage=2``,
    ``features_dim=256``: **1,089,232** (convs 97,744; fc 32*11*11*256 + 256 = 991,488); 1,090,032 with
    batch norm.
    """

    def __init__(
        self,
        in_channels: int = 4,
        image_size: int = 84,
        depths: Sequence[int] = (16, 32, 32),
        blocks_per_stage: int = 2,
        features_dim: int = 256,
        dropout: float = 0.0,
        batch_norm: bool = False,
        channels_last: bool = True,
    ) -> None:
        super().__init__()
        in_channels, image_size, features_dim = check_positive_ints(
            in_channels=in_channels, image_size=image_size, features_dim=features_dim
        )
        given = tuple(depths)
        depths = tuple(as_int(d) for d in given)  # numpy integers too
        if not depths or any(d is None or d < 1 for d in depths):
            raise ValueError(f"depths must be a non-empty sequence of positive ints, got {given!r}")
        blocks = as_int(blocks_per_stage)
        if blocks is None or blocks < 0:
            raise ValueError(f"blocks_per_stage must be an int >= 0, got {blocks_per_stage!r}")
        blocks_per_stage = blocks
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.in_channels = in_channels
        self.image_size = image_size
        self.depths = depths
        self.features_dim = features_dim
        self.channels_last = bool(channels_last)
        stages, ch, size = [], in_channels, image_size
        for d in depths:
            stages.append(ImpalaStage(ch, d, blocks_per_stage, bool(batch_norm), float(dropout)))
            ch, size = d, conv_output_size(size, 3, 2, padding=1)
        self.stages = nn.Sequential(*stages)
        self.n_flatten = ch * size * size
        self.fc = nn.Sequential(nn.Linear(self.n_flatten, features_dim), nn.ReLU(inplace=True))
        init_orthogonal(self, math.sqrt(2))
        self._apply_weight_format()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.stages(self._prepare_input(x)))
        return self._match_batch(self.fc(torch.flatten(h, 1)), x)
