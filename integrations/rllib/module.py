"""``KitRLModule``: RLlib's (new API stack) torch RLModule around the kit's Nature / Impala CNN.

Observations arrive as the env makes them, uint8 ``(B, C, H, W)``: RLlib's ``NumpyToTensor`` connector keeps
the dtype, so a batch crosses to the runner's or learner's device as uint8 (4x fewer bytes than float32) and
the CNN divides by 255 exactly once, there. RLlib's default Atari model cannot take this input: it rejects
uint8 and reads ``(4, 84, 84)`` as channels-last.

``model_config`` keys (``algo_config`` fills them): ``network`` (``"nature"`` | ``"impala"``),
``channels_last`` (memory format, default True: faster on CPU, see docs/performance.md), ``encoder_kwargs``
(passed to the CNN), ``q_learning`` (DQN heads instead of actor-critic), ``dueling``, ``double_q`` and
``epsilon`` (DQN; RLlib's DQN config adds them), ``num_atoms`` (1 only: no distributional Q).

APIs: ``ValueFunctionAPI`` (PPO, APPO, IMPALA), ``TargetNetworkAPI`` (APPO's old policy, DQN's target
net), ``QNetAPI`` (DQN), ``InferenceOnlyAPI`` (runners do not hold the value head or target nets).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.utils import make_target_network
from ray.rllib.core.rl_module.apis import (
    TARGET_NETWORK_ACTION_DIST_INPUTS,
    InferenceOnlyAPI,
    QNetAPI,
    TargetNetworkAPI,
    ValueFunctionAPI,
)
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.schedules.scheduler import Scheduler
from retro_atari_kit.integrations.rllib.nets import build_encoder, build_heads, dueling_q

# Output keys RLlib's DQN learner reads (ray.rllib.algorithms.dqn.default_dqn_rl_module).
QF_PREDS = "qf_preds"
QF_NEXT_PREDS = "qf_next_preds"
QF_TARGET_NEXT_PREDS = "qf_target_next_preds"

__all__ = ["KitRLModule"]


class KitRLModule(TorchRLModule, ValueFunctionAPI, TargetNetworkAPI, QNetAPI, InferenceOnlyAPI):
    """The kit's CNN with linear heads, for PPO / APPO / IMPALA (actor-critic) or DQN (``q_learning``)."""

    def setup(self) -> None:
        cfg: dict[str, Any] = dict(self.model_config or {})
        space = self.observation_space
        if not isinstance(space, gym.spaces.Box) or space.dtype != np.uint8 or len(space.shape) != 3:
            raise ValueError(
                f"KitRLModule takes uint8 (C, H, W) frames, got {space}; use a RetroKit/ env "
                "(gym.make('RetroKit/Pong-v0'))"
            )
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise ValueError(f"KitRLModule needs a Discrete action space, got {self.action_space}")
        self.q_learning = bool(cfg.get("q_learning", False))
        self.uses_dueling = self.q_learning and bool(cfg.get("dueling", False))
        self.uses_double_q = self.q_learning and bool(cfg.get("double_q", False))
        if self.q_learning and int(cfg.get("num_atoms", 1) or 1) != 1:
            raise ValueError("KitRLModule does expectation Q-learning only; set num_atoms=1")
        self.encoder = build_encoder(
            cfg.get("network", "nature"),
            tuple(space.shape),
            bool(cfg.get("channels_last", True)),
            **dict(cfg.get("encoder_kwargs") or {}),
        )
        for name, head in build_heads(
            self.encoder.features_dim, int(self.action_space.n), self.q_learning, self.uses_dueling
        ).items():
            setattr(self, name, head)
        if self.q_learning:
            # RLlib's DQN config passes its epsilon schedule ([[t, eps], ...]) in the model config
            self.epsilon_schedule = Scheduler(
                cfg.get("epsilon", [(0, 1.0), (10_000, 0.05)]), framework="torch"
            )

    # ---- forward passes -------------------------------------------------------------------------------
    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if self.q_learning:  # greedy actions (inference)
            return {Columns.ACTIONS: self.compute_q_values(batch)[QF_PREDS].argmax(dim=-1)}
        return {Columns.ACTION_DIST_INPUTS: self.pi(self.encoder(batch[Columns.OBS]))}

    def _forward_exploration(self, batch: dict[str, Any], t: int = 0, **kwargs: Any) -> dict[str, Any]:
        if not self.q_learning:
            return self._forward(batch)
        q = self.compute_q_values(batch)[QF_PREDS]
        self.epsilon_schedule.update(t)
        epsilon = self.epsilon_schedule.get_current_value()
        greedy = q.argmax(dim=-1)
        random = torch.randint(0, q.shape[-1], greedy.shape, device=q.device)
        explore = torch.rand(greedy.shape, device=q.device) < epsilon
        return {Columns.ACTIONS: torch.where(explore, random, greedy)}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if self.inference_only:
            raise RuntimeError(
                "an inference-only KitRLModule cannot train; build it with inference_only=False"
            )
        if not self.q_learning:
            features = self.encoder(batch[Columns.OBS])
            # the value head reuses these features (compute_values(embeddings=...)): one encoder pass
            return {Columns.EMBEDDINGS: features, Columns.ACTION_DIST_INPUTS: self.pi(features)}
        out: dict[str, Any] = {}
        obs = batch[Columns.OBS]
        if self.uses_double_q:  # one encoder pass over obs and next obs (the online net picks a')
            q = self._q(
                torch.cat([obs, batch[Columns.NEXT_OBS]]), self.encoder, self.af, getattr(self, "vf", None)
            )
            out[QF_PREDS], out[QF_NEXT_PREDS] = torch.chunk(q, 2, dim=0)
        else:
            out[QF_PREDS] = self._q(obs, self.encoder, self.af, getattr(self, "vf", None))
        out[QF_TARGET_NEXT_PREDS] = self.forward_target({Columns.OBS: batch[Columns.NEXT_OBS]})[QF_PREDS]
        return out

    # ---- ValueFunctionAPI -----------------------------------------------------------------------------
    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """State values ``(B,)``; ``embeddings`` are the encoder features of ``_forward_train`` if given."""
        if self.q_learning:
            raise NotImplementedError("a Q-learning KitRLModule has no value function API")
        if embeddings is None:
            embeddings = self.encoder(batch[Columns.OBS])
        return self.vf(embeddings).squeeze(-1)

    # ---- QNetAPI --------------------------------------------------------------------------------------
    def compute_q_values(self, batch: dict[str, Any]) -> dict[str, Any]:
        """``{"qf_preds": (B, n_actions)}`` from the online network."""
        return {QF_PREDS: self._q(batch[Columns.OBS], self.encoder, self.af, getattr(self, "vf", None))}

    @staticmethod
    def _q(obs: torch.Tensor, encoder: torch.nn.Module, af: torch.nn.Module, vf: torch.nn.Module | None):
        features = encoder(obs)
        return af(features) if vf is None else dueling_q(af(features), vf(features))

    # ---- TargetNetworkAPI -----------------------------------------------------------------------------
    def make_target_networks(self) -> None:
        """APPO: a copy of encoder + policy head (the "old" policy); DQN: of encoder + Q head(s)."""
        self._target_encoder = make_target_network(self.encoder)
        if self.q_learning:
            self._target_af = make_target_network(self.af)
            if self.uses_dueling:
                self._target_vf = make_target_network(self.vf)
        else:
            self._target_pi = make_target_network(self.pi)

    def get_target_network_pairs(self) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
        pairs = [(self.encoder, self._target_encoder)]
        if self.q_learning:
            pairs.append((self.af, self._target_af))
            if self.uses_dueling:
                pairs.append((self.vf, self._target_vf))
        else:
            pairs.append((self.pi, self._target_pi))
        return pairs

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        if self.q_learning:
            vf = self._target_vf if self.uses_dueling else None
            return {QF_PREDS: self._q(batch[Columns.OBS], self._target_encoder, self._target_af, vf)}
        return {TARGET_NETWORK_ACTION_DIST_INPUTS: self._target_pi(self._target_encoder(batch[Columns.OBS]))}

    # ---- InferenceOnlyAPI -----------------------------------------------------------------------------
    def get_non_inference_attributes(self) -> list[str]:
        targets = ["_target_encoder", "_target_pi", "_target_af", "_target_vf"]
        # actor-critic runners only sample actions: values are computed on the learner
        return targets if self.q_learning else ["vf", *targets]
