"""SB3 feature extractors around the kit's torch models: normalise exactly once, whatever SB3 does.

Usage::

    from stable_baselines3 import PPO
    from retro_atari_kit.integrations.sb3 import ImpalaCNN
    # net_arch=[]: linear heads; without it SB3 adds tanh 64x64 heads to any non-SB3 extractor (Pong stalls)
    PPO("CnnPolicy", env, policy_kwargs=dict(features_extractor_class=ImpalaCNN,
                                             features_extractor_kwargs=dict(features_dim=256), net_arch=[]))

SB3's contract, and how these extractors honour it (SB3 2.x ``preprocess_obs`` / ``BaseModel``):

- Observations travel to the device as uint8 (``obs_as_tensor`` keeps the numpy dtype), then
  ``preprocess_obs`` casts them to float **on the device**.
- ``normalize_images=True`` (default): SB3 divides by 255; the extractor receives [0, 1] and does not divide.
- ``normalize_images=False``: SB3 only casts, so the extractor receives float values in [0, 255] for a
  uint8 space. SB3 tells the extractor by passing ``normalized_image=True`` to subclasses of its own
  ``NatureCNN`` (which is why these classes derive from it); the extractor then divides by 255 itself.
- A float observation space (frames already in [0, 1]) is never divided.

Either way the first conv sees values in [0, 1]. ``divides_by_255`` says which case applies.

**Heads.** SB3 gives ``CnnPolicy`` single linear policy / value / Q heads only when the extractor *is* its
own ``NatureCNN`` class; with any other extractor it adds two 64-unit tanh layers per head, which saturate on
the CNN's ReLU features (PPO on Pong stayed at -21 for 900k steps). Pass ``net_arch=[]`` with these
extractors: :func:`cnn_policy_kwargs` and the kit's presets do.

``autocast="bf16"`` runs the network under bfloat16 autocast when its input is on a device with native
bf16 arithmetic (:func:`native_bf16`: CUDA GPUs from Ampere on, x86 CPUs with AVX512-BF16 or AMX) and is
a no-op elsewhere, where emulated bf16 would be slower than float32. The features come back as float32,
so SB3's heads, losses and optimizer stay float32 and no loss scaling is needed (bf16 keeps float32's
exponent range). Opt-in (the PPO ``bf16`` preset): see ``docs/sb3.md`` for why it is not the default.
"""

from __future__ import annotations

import functools
import warnings

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.torch_layers import NatureCNN as _SB3NatureCNN

from retro_atari_kit import models
from retro_atari_kit.models import NETWORKS, check_network

__all__ = ["ImpalaCNN", "NatureCNN", "cnn_policy_kwargs", "native_bf16"]


@functools.cache
def _native_bf16(device_type: str, index: int | None) -> bool:
    if device_type == "cuda":
        if not torch.cuda.is_available():
            return False
        with torch.cuda.device(index):  # None: the current device
            try:
                return torch.cuda.is_bf16_supported(including_emulation=False)
            except TypeError:  # torch < 2.4 has no emulation flag and reports native support only
                return torch.cuda.is_bf16_supported()
    if device_type == "cpu":
        # private but long-standing torch helpers (torch >= 2.1); an older torch simply gets float32
        is_avx512_bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
        is_amx = getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
        return bool(is_avx512_bf16() or is_amx())
    return False


def native_bf16(device: torch.device | str) -> bool:
    """Whether ``device`` does bfloat16 arithmetic in hardware (so bf16 autocast makes convs faster)."""
    device = torch.device(device)
    return _native_bf16(device.type, device.index)


# the widest observation a kit env gives with its default stack: 4 RGB frames; more is a second stack
MAX_KIT_CHANNELS = 12


def _check_space(observation_space: gym.Space, who: str) -> tuple[int, int]:
    if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 3:
        raise TypeError(
            f"{who} needs a Box observation space of channel-first images (C, H, W), got "
            f"{observation_space}; use CnnPolicy with a RetroKit/ env"
        )
    c, h, w = observation_space.shape
    if h != w:
        raise ValueError(
            f"{who} needs square channel-first images (C, H, W) with H == W, got shape "
            f"{observation_space.shape}; the kit's envs give (4, 84, 84)"
        )
    dtype = np.dtype(observation_space.dtype)
    if dtype != np.uint8 and not np.issubdtype(dtype, np.floating):
        raise TypeError(f"{who} needs uint8 frames or float frames in [0, 1], got dtype {dtype}")
    if c > MAX_KIT_CHANNELS:
        warnings.warn(
            f"{who}: observations have {c} channels, more than the kit's 4-frame stack gives "
            "(4 gray, 12 RGB): frames stacked twice? The kit's envs already stack frames; "
            "remove SB3's VecFrameStack",
            UserWarning,
            stacklevel=4,
        )
    return int(c), int(h)


class KitExtractor(_SB3NatureCNN):
    """Shared SB3 plumbing. Derives from SB3's ``NatureCNN`` only so that SB3 passes ``normalized_image``.

    ``BaseFeaturesExtractor.__init__`` is called directly: SB3's Nature layers are never built.
    """

    net: torch.nn.Module

    def __init__(
        self, observation_space: gym.Space, features_dim: int, normalized_image: bool, autocast: str | None
    ) -> None:
        if autocast not in (None, "bf16"):
            raise ValueError(f"autocast must be None or 'bf16', got {autocast!r}")
        BaseFeaturesExtractor.__init__(self, observation_space, features_dim)
        self.autocast = autocast
        uint8_space = np.dtype(observation_space.dtype) == np.uint8
        # SB3 sets normalized_image=True exactly when the policy has normalize_images=False: then a uint8
        # space reaches us as float 0..255 and the one division by 255 is ours.
        self.divides_by_255 = bool(uint8_space and normalized_image)

    def runs_in_bf16(self, device: torch.device) -> bool:
        """Whether a forward pass on ``device`` runs under bf16 autocast (asked for, and native there)."""
        return bool(self.autocast) and native_bf16(device)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        # uint8 (called directly with raw frames): the model divides once itself
        if observations.dtype != torch.uint8 and self.divides_by_255:
            observations = observations * (1.0 / 255.0)
        if self.runs_in_bf16(observations.device):
            with torch.autocast(observations.device.type, dtype=torch.bfloat16):
                return self.net(observations).float()
        return self.net(observations)


class NatureCNN(KitExtractor):
    """The kit's Nature CNN (``retro_atari_kit.models.NatureCNN``) as an SB3 features extractor.

    :param observation_space: channel-first image Box, uint8 (or float in [0, 1])
    :param features_dim: width of the fc layer (512)
    :param normalized_image: set by SB3 (True when the policy has ``normalize_images=False``)
    :param channels_last: use the channels-last memory format (faster on CPU)
    :param autocast: ``"bf16"`` for bfloat16 autocast where the device has native bf16 (see the module
        docstring), None for float32
    """

    def __init__(
        self,
        observation_space: gym.Space,
        features_dim: int = 512,
        normalized_image: bool = False,
        channels_last: bool = True,
        autocast: str | None = None,
    ) -> None:
        c, size = _check_space(observation_space, "NatureCNN")
        super().__init__(observation_space, features_dim, normalized_image, autocast)
        self.net = models.NatureCNN(c, size, features_dim, channels_last=channels_last)
        self.net.defer_channels_last()  # SB3 re-initialises the weights after construction


class ImpalaCNN(KitExtractor):
    """The kit's IMPALA CNN (``retro_atari_kit.models.ImpalaCNN``) as an SB3 features extractor.

    :param observation_space: channel-first image Box, uint8 (or float in [0, 1])
    :param features_dim: width of the fc layer (256)
    :param depths: channels per stage ((16, 32, 32))
    :param blocks_per_stage: residual blocks per stage (2)
    :param dropout: CoinRun-style dropout after every conv (0 = off)
    :param batch_norm: CoinRun-style batch norm after every conv
    :param normalized_image: set by SB3 (True when the policy has ``normalize_images=False``)
    :param channels_last: use the channels-last memory format (faster on CPU)
    :param autocast: ``"bf16"`` for bfloat16 autocast where the device has native bf16 (see the module
        docstring), None for float32
    """

    def __init__(
        self,
        observation_space: gym.Space,
        features_dim: int = 256,
        depths: tuple[int, ...] = (16, 32, 32),
        blocks_per_stage: int = 2,
        dropout: float = 0.0,
        batch_norm: bool = False,
        normalized_image: bool = False,
        channels_last: bool = True,
        autocast: str | None = None,
    ) -> None:
        c, size = _check_space(observation_space, "ImpalaCNN")
        super().__init__(observation_space, features_dim, normalized_image, autocast)
        self.net = models.ImpalaCNN(
            c,
            size,
            tuple(depths),
            blocks_per_stage,
            features_dim,
            dropout,
            batch_norm,
            channels_last=channels_last,
        )
        self.net.defer_channels_last()  # SB3 re-initialises the weights after construction


def cnn_policy_kwargs(network: str = "nature", **extractor_kwargs: object) -> dict[str, object]:
    """``policy_kwargs`` for SB3's ``CnnPolicy`` with the kit's ``network`` (``"nature"`` or ``"impala"``).

    Sets ``net_arch=[]`` (linear heads, as SB3 uses with its own Nature CNN; see the module docstring)::

        PPO("CnnPolicy", venv, policy_kwargs=cnn_policy_kwargs("impala", features_dim=256))
    """
    check_network(network)
    return {
        "features_extractor_class": globals()[NETWORKS[network]],
        "features_extractor_kwargs": dict(extractor_kwargs),
        "net_arch": [],
    }
