"""``FastA2C``: SB3's A2C on the device-resident rollout of FastPPO.

::

    from retro_atari_kit.integrations.sb3 import KitCnnPolicy, cnn_policy_kwargs, make_vec_env
    from retro_atari_kit.integrations.sb3.fast_a2c import FastA2C
    venv = make_vec_env("RetroKit/Pong-v0", n_envs=64, seed=0)
    model = FastA2C(KitCnnPolicy, venv, policy_kwargs=cnn_policy_kwargs("nature"), device="auto")
    model.learn(1_000_000)

or ``retrokit train a2c RetroKit/Pong-v0 --preset gpu``. The rollout is collected as FastPPO collects
it (:class:`~retro_atari_kit.integrations.sb3.fast_ppo.DeviceRollouts`: frames to the device once, GAE on
the device, one host synchronisation per env step, the acting step compiled and captured as a CUDA graph
where chosen); the update is SB3's ``A2C.train`` on the whole rollout as one function of tensors, its
statistics read from the device in one transfer. On the same rollout and weights it gives the same
parameters as ``A2C.train`` (a test checks it). A2C's rollouts are short (5 steps): what it saves per
rollout is the host round trip of every step's values and the numpy GAE.
"""

from __future__ import annotations

import torch
from retro_atari_kit.integrations.sb3.device_buffer import DeviceRolloutBuffer
from retro_atari_kit.integrations.sb3.fast_ppo import DeviceRollouts
from stable_baselines3 import A2C
from torch.nn import functional as F

__all__ = ["FastA2C"]


class FastA2C(DeviceRollouts, A2C):
    """SB3's ``A2C`` with a device-resident rollout (see the module docstring): the constructor of ``A2C``
    plus ``compile`` and ``cuda_graphs``
    (:class:`~retro_atari_kit.integrations.sb3.fast_ppo.DeviceRollouts`)."""

    def _loss(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        advantages: torch.Tensor,
        returns: torch.Tensor,
        ent_coef: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """SB3's A2C loss of the rollout, and ``[entropy, policy, value]`` losses as one tensor (``ent_coef``
        a tensor, so that the compiled update follows its schedule)."""
        values, log_prob, entropy = self._evaluate(observations, actions)
        if self.normalize_advantage:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        policy_loss = -(advantages * log_prob).mean()
        value_loss = F.mse_loss(returns, values)
        entropy_loss = -torch.mean(-log_prob) if entropy is None else -torch.mean(entropy)
        loss = policy_loss + ent_coef * entropy_loss + self.vf_coef * value_loss
        return loss, torch.stack([entropy_loss, policy_loss, value_loss]).detach()

    def train(self) -> None:
        if not isinstance(self.rollout_buffer, DeviceRolloutBuffer):  # SB3's train reads numpy buffers
            return super().train()
        update = self._learner_steps()[1]
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        ent_coef = torch.tensor(self._ent_coef_now(), device=self.device)
        # the whole rollout as one batch (SB3 draws one permutation for it, so numpy's RNG moves the same)
        for batch in self.rollout_buffer.get(batch_size=None):
            statistics = update(batch.observations, batch.actions, batch.advantages, batch.returns, ent_coef)
        self._n_updates += 1
        numbers = torch.cat([self._explained_variance()[None], statistics])
        explained, entropy_v, policy_v, value_v = numbers.cpu().tolist()  # the one transfer
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/explained_variance", explained)
        self.logger.record("train/entropy_loss", entropy_v)
        self.logger.record("train/policy_loss", policy_v)
        self.logger.record("train/value_loss", value_v)
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", torch.exp(self.policy.log_std).mean().item())
