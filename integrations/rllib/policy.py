"""Load a trained RLlib policy for evaluation and recording with torch alone (no Ray, no cluster).

Every checkpoint the kit writes (``checkpoints/model_<steps>_steps/``, a directory RLlib restores from)
also holds ``policy.pt``: the module's inference weights and what is needed to rebuild its networks
(:mod:`.nets`). :func:`load_model` returns a :class:`KitPolicy` with SB3's ``predict`` signature, so the
CLI's eval / record loops use it unchanged.
"""

from __future__ import annotations

import os
import warnings
import zipfile
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from retro_atari_kit.integrations.rllib.nets import build_encoder, build_heads, dueling_q

from retro_atari_kit.files import read_error_message
from retro_atari_kit.runs import RunError, final_model_path, list_checkpoints, load_config

POLICY_FILE = "policy.pt"
FORMAT = 1

__all__ = [
    "POLICY_FILE",
    "KitPolicy",
    "load_model",
    "policy_payload",
    "read_policy_file",
    "resolve_policy_path",
]


def policy_payload(
    state_dict: dict[str, Any],
    model_config: dict[str, Any],
    obs_shape: tuple[int, ...],
    n_actions: int,
    algo: str,
    env_id: str,
    steps: int,
) -> dict[str, Any]:
    """What ``policy.pt`` stores: a ``KitRLModule``'s inference weights (no target nets; no value head for
    actor-critic algorithms, acting needs none) as CPU tensors, and how to rebuild its networks."""
    q_learning = bool(model_config.get("q_learning", False))
    state = {}
    for key, value in state_dict.items():
        if key.startswith("_target") or (not q_learning and key.startswith("vf.")):
            continue
        state[key] = torch.as_tensor(value).detach().cpu().contiguous()
    return {
        "format": FORMAT,
        "algo": algo,
        "env_id": env_id,
        "steps": int(steps),
        "obs_shape": tuple(int(d) for d in obs_shape),
        "n_actions": int(n_actions),
        "network": model_config.get("network", "nature"),
        "encoder_kwargs": dict(model_config.get("encoder_kwargs") or {}),
        "q_learning": q_learning,
        "dueling": q_learning and bool(model_config.get("dueling", False)),
        "state_dict": state,
    }


class KitPolicy(torch.nn.Module):
    """A trained policy: ``predict(obs, deterministic) -> (actions, None)`` like an SB3 model.

    ``obs`` is a uint8 batch ``(N, C, H, W)`` (or one ``(C, H, W)`` frame stack); actions are sampled from
    the policy (actor-critic) unless ``deterministic``, which takes the most likely action. For DQN,
    ``deterministic=False`` acts epsilon-greedy with ``epsilon`` (0.01 by default, DQN's final exploration).
    ``num_timesteps`` is the number of env steps it was trained for.
    """

    def __init__(self, payload: dict[str, Any], device: str = "auto") -> None:
        super().__init__()
        if payload.get("format") != FORMAT:
            raise RunError(
                f"unsupported policy file format {payload.get('format')!r}; retrain or update the kit"
            )
        self.algo = payload["algo"]
        self.env_id = payload["env_id"]
        self.num_timesteps = int(payload["steps"])
        # the spaces it was trained on, named as SB3's models name them (checked before a game is played)
        self.observation_space = gym.spaces.Box(0, 255, tuple(payload["obs_shape"]), np.uint8)
        self.action_space = gym.spaces.Discrete(int(payload["n_actions"]))
        self.q_learning = bool(payload["q_learning"])
        self.epsilon = 0.01
        self.encoder = build_encoder(
            payload["network"], tuple(payload["obs_shape"]), True, **payload["encoder_kwargs"]
        )
        heads = build_heads(
            self.encoder.features_dim, payload["n_actions"], self.q_learning, payload["dueling"]
        )
        if not self.q_learning:
            heads.pop("vf")
        for name, head in heads.items():
            self.add_module(name, head)
        self.load_state_dict(payload["state_dict"])
        self.device = torch.device(
            "cuda"
            if device == "auto" and torch.cuda.is_available()
            else ("cpu" if device == "auto" else device)
        )
        self.to(self.device).eval()

    @torch.no_grad()
    def predict(
        self, obs: np.ndarray, state: Any = None, episode_start: Any = None, deterministic: bool = False
    ) -> tuple[np.ndarray, None]:
        single = obs.ndim == 3
        x = torch.as_tensor(obs[None] if single else obs, device=self.device)  # stays uint8 until the CNN
        features = self.encoder(x)
        if self.q_learning:
            q = self.af(features)
            if hasattr(self, "vf"):
                q = dueling_q(q, self.vf(features))
            actions = q.argmax(dim=-1)
            if not deterministic:
                explore = torch.rand(actions.shape, device=q.device) < self.epsilon
                actions = torch.where(explore, torch.randint_like(actions, q.shape[-1]), actions)
        else:
            logits = self.pi(features)
            actions = (
                logits.argmax(-1)
                if deterministic
                else torch.distributions.Categorical(logits=logits).sample()
            )
        out = actions.cpu().numpy()
        return (out[0] if single else out), None


def resolve_policy_path(path: str) -> str:
    """``policy.pt`` of a run dir (final model, else newest checkpoint), of a checkpoint dir, or the file."""
    if os.path.isfile(path):
        return path
    if os.path.isfile(os.path.join(path, POLICY_FILE)):
        return os.path.join(path, POLICY_FILE)
    if os.path.isdir(path):
        load_config(path)  # RunError if not a kit run dir
        final = final_model_path(path, suffix="")
        if os.path.isfile(os.path.join(final, POLICY_FILE)):
            return os.path.join(final, POLICY_FILE)
        ckpts = [c for c in list_checkpoints(path) if os.path.isfile(os.path.join(c[1], POLICY_FILE))]
        if ckpts:
            return os.path.join(ckpts[-1][1], POLICY_FILE)
        raise RunError(f"{path} has no RLlib checkpoint with {POLICY_FILE} yet; train longer or resume it")
    raise RunError(f"{path}: no such run dir, checkpoint dir or {POLICY_FILE}")


def read_policy_file(
    file: str, advice: str = "use another checkpoint of the run", what: str = ""
) -> dict[str, Any]:
    """The payload of a ``policy.pt`` (:func:`policy_payload`); one-line RunError ``cannot read {what}{file}``
    with the reason and ``advice`` if it is not one (not torch's zip format, not a mapping with the
    payload's ``steps`` and ``algo``), or the OS's reason if it cannot be read.

    ``weights_only``: plain tensors and built-in types, no pickled code. ``mmap``: tensors are read from the
    file only when used, so a caller that needs only ``steps`` or ``algo`` reads a few bytes."""
    try:
        if not zipfile.is_zipfile(file):  # torch.save writes a zip; anything else is not the kit's file
            open(file, "rb").close()  # an unreadable file says so, not "not a policy file"
            raise ValueError("not a file torch.save wrote")
        with warnings.catch_warnings():  # torch's notes on a file it refuses: the line below says it
            warnings.simplefilter("ignore")
            payload = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
        if not isinstance(payload, dict) or not {"steps", "algo"} <= payload.keys():
            raise ValueError("not the kit's policy payload")
    except OSError as exc:
        raise RunError(read_error_message(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign file: one line, whatever torch raised
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RunError(f"cannot read {what}{file}: {why}; {advice}") from None
    return payload


def load_model(path: str, device: str = "auto", algo: str | None = None) -> KitPolicy:
    """The policy of an RLlib run dir, checkpoint dir or ``policy.pt`` (torch only; ``algo`` is checked)."""
    file = resolve_policy_path(path)
    payload = read_policy_file(file)  # one RunError line for a damaged or foreign file
    if algo is not None and payload.get("algo") != algo:
        raise RunError(f"{file} holds a {payload.get('algo')} policy, not {algo}")
    return KitPolicy(payload, device=device)
