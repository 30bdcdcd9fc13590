"""SB3 actor-critic policy that hands uint8 frames straight to the kit's extractors.

SB3's ``BaseModel.extract_features`` runs ``preprocess_obs`` before any extractor: it casts the uint8 batch
to float32 and divides it by 255, so a channels-last extractor then permutes 4x more bytes and the batch is
written twice in float32. The kit's extractors divide by 255 themselves when they receive uint8 frames, so
:class:`KitCnnPolicy` skips SB3's preprocessing for them: the batch is permuted as uint8 and cast once.
The first conv still sees values in [0, 1] (the one division happens in the model), whatever
``normalize_images`` says. Any other extractor, or a float observation, takes SB3's usual path.

Fewer bytes written and permuted per batch make PPO's training steps faster (figures in
``docs/performance.md``). Usage::

    from stable_baselines3 import PPO
    from retro_atari_kit.integrations.sb3 import KitCnnPolicy, cnn_policy_kwargs
    PPO(KitCnnPolicy, venv, policy_kwargs=cnn_policy_kwargs("nature"))
"""

from __future__ import annotations

import torch
from retro_atari_kit.integrations.sb3.extractors import KitExtractor
from stable_baselines3.common.policies import ActorCriticCnnPolicy, BaseModel
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.dqn.policies import CnnPolicy as DQNCnnPolicy
from stable_baselines3.dqn.policies import QNetwork

__all__ = ["KitCnnPolicy", "KitDQNPolicy"]


class _RawFramesToKitExtractor(BaseModel):
    """Placed after SB3's policy classes in the MRO, so that their ``extract_features`` (which picks the
    shared, actor or critic extractor) ends up here instead of in ``BaseModel.extract_features``."""

    def extract_features(self, obs: torch.Tensor, features_extractor: BaseFeaturesExtractor) -> torch.Tensor:
        if isinstance(features_extractor, KitExtractor) and obs.dtype == torch.uint8:
            return features_extractor(obs)  # the model divides by 255 once, after the uint8 permute
        return super().extract_features(obs, features_extractor)


class KitCnnPolicy(ActorCriticCnnPolicy, _RawFramesToKitExtractor):
    """SB3's ``ActorCriticCnnPolicy`` (PPO, A2C) that passes uint8 frames to the kit's extractors as they
    are (see the module docstring). Same constructor and state dict; the PPO and A2C presets use it."""


class KitQNetwork(QNetwork, _RawFramesToKitExtractor):
    """SB3's DQN ``QNetwork`` (online and target) taking uint8 frames straight to the kit's extractor."""


class KitDQNPolicy(DQNCnnPolicy):
    """SB3's DQN ``CnnPolicy`` whose Q-networks pass uint8 frames to the kit's extractors as they are (see
    the module docstring). Same constructor and state dict as ``CnnPolicy``."""

    def make_q_net(self) -> QNetwork:
        # as SB3: a separate extractor for the online and the target network
        net_args = self._update_features_extractor(self.net_args, features_extractor=None)
        return KitQNetwork(**net_args).to(self.device)
