"""The DQN Nature CNN (Mnih et al. 2015) as a plain torch module."""

from __future__ import annotations

import math

import torch
from torch import nn

from retro_atari_kit.models._common import (
    ChannelsLastMixin,
    check_positive_ints,
    conv_output_size,
    init_orthogonal,
)


class NatureCNN(ChannelsLastMixin, nn.Module):
    """Nature CNN: conv 32x8/4, conv 64x4/2, conv 64x3/1, fc ``features_dim``; ReLU after each.

    Input: a batch ``(B, C, H, W)`` of square images (or one ``(C, H, W)`` image: then the output has no
    batch dimension either), either **uint8 in [0, 255]** (divided by 255 here, once, on the tensor's
    device) or **float already in [0, 1]** (used as is, never divided again).
    Any size that survives the three strides works (36 and up); 84x84 is the standard.

    Output: ``(B, features_dim)`` features after the final ReLU.

    Initialisation: orthogonal weights with gain sqrt(2), zero biases (the baselines Atari convention).

    Memory format: with ``channels_last=True`` (default) weights and activations use
    ``torch.channels_last``: CPU convolution kernels run faster in that layout, so a training step is
    cheaper (figures in docs/performance.md). Outputs equal the default format's within float tolerance.

    Parameters for ``in_channels=4``, 84x84, ``features_dim=512``: **1,684,128**
    (conv 8,224 + 32,832 + 36,928; fc 3136*512 + 512 = 1,606,144).
    """

    def __init__(
        self,
        in_channels: int = 4,
        image_size: int = 84,
        features_dim: int = 512,
        channels_last: bool = True,
    ) -> None:
        super().__init__()
        in_channels, image_size, features_dim = check_positive_ints(
            in_channels=in_channels, image_size=image_size, features_dim=features_dim
        )
        size = image_size
        for k, s in ((8, 4), (4, 2), (3, 1)):
            size = conv_output_size(size, k, s)
        if size < 1:
            raise ValueError(f"image_size={image_size} is too small for the Nature CNN strides; use >= 36")
        self.in_channels = in_channels
        self.image_size = image_size
        self.features_dim = features_dim
        self.channels_last = bool(channels_last)
        self.cnn = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(inplace=True),
            nn.Flatten(),
        )
        self.n_flatten = 64 * size * size
        self.fc = nn.Sequential(nn.Linear(self.n_flatten, features_dim), nn.ReLU(inplace=True))
        init_orthogonal(self, math.sqrt(2))
        self._apply_weight_format()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._match_batch(self.fc(self.cnn(self._prepare_input(x))), x)
