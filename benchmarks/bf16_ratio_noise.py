"""Why PPO learned worse with the Nature CNN under bf16 autocast: how the bf16 forward sees small updates.

Loads a committed float32 PPO Nature model, collects a real rollout with it, and measures on that batch:

1. ``check``: the bf16 emulation used below against ``torch.autocast("cpu", dtype=torch.bfloat16)`` on the
   kit's real extractor (autocast forced on, so it runs on CPUs without native bf16, ~10x slower), and
   that the heads (features -> logits / value) run in float32 under the extractor's autocast.
2. ``one step``: warm Adam's moments (lr 0), take ONE float32 Adam step of PPO's loss at the schedule's
   learning rate, and compare the log-prob change each forward *sees* (``log p'(a|s) - log p(a|s)``, i.e.
   log of PPO's ratio) with the change in exact float32 arithmetic of the same master-weight step.
   ``noise`` = seen - float32; ``noise/signal`` = std(noise) / std(float32 change); ``>clip`` = the
   fraction of samples with |ratio - 1| beyond the schedule's clip range.
3. ``update``: one whole PPO update (4 epochs x minibatches of 256, SB3's loss, grad-norm clip 0.5) with
   each forward, the same minibatch order: SB3's clip fraction and approx KL, and the exact float32
   surrogate gain of the resulting weights (mean over the batch of normalised advantage x (ratio_f32 - 1)).
   A PPO update is chaotic (tiny differences reorder which samples get clipped), so each forward runs
   ``--orders`` minibatch orders and the spread is printed next to the mean.

Emulation (exact up to float32 summation order): every conv / linear computed in bf16 rounds its input,
weight, bias and output to bf16 and, in the backward pass, its gradients (what autocast's bf16 kernels
do, with float32 accumulation). Layers named in a variant's ``f32`` set run in float32 (their input may
still carry bf16 values from the layer before). This runs at float32 speed, so the whole script takes a
few minutes on one CPU thread. Run by hand::

    OMP_NUM_THREADS=1 python benchmarks/bf16_ratio_noise.py            # ~10 min, loaded 2-core VM
    OMP_NUM_THREADS=1 python benchmarks/bf16_ratio_noise.py --quick    # a smaller batch, ~2 min
"""

from __future__ import annotations

import argparse
import copy
import os
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("conv1", "conv2", "conv3", "fc")
# variant name -> layers kept in float32 (the rest of the trunk in bf16); heads are float32 in all
VARIANTS: dict[str, frozenset[str]] = {
    "float32": frozenset(LAYERS),
    "bf16 trunk (kit)": frozenset(),
    "bf16, conv1 f32": frozenset({"conv1"}),
    "bf16, fc f32": frozenset({"fc"}),
    "bf16, conv1+fc f32": frozenset({"conv1", "fc"}),
    "bf16 fc only": frozenset({"conv1", "conv2", "conv3"}),
}
UPDATE_VARIANTS = ("float32", "bf16 trunk (kit)", "bf16, conv1+fc f32")


class _RoundBF16(torch.autograd.Function):
    """Round to bf16 (kept in a float32 tensor) forward, and the incoming gradient likewise backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        return x.bfloat16().float()

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        return g.bfloat16().float()


def _r(x: torch.Tensor | None, on: bool) -> torch.Tensor | None:
    return _RoundBF16.apply(x) if on and x is not None else x


def trunk(net: torch.nn.Module, obs: torch.Tensor, f32: frozenset[str]) -> torch.Tensor:
    """The kit's Nature CNN forward with the layers outside ``f32`` computed as bf16 autocast does."""
    x = obs.float() * (1.0 / 255.0)  # the model's one division (retro_atari_kit.models._common)
    for name, conv in zip(LAYERS[:3], (net.cnn[0], net.cnn[2], net.cnn[4]), strict=True):
        b = name not in f32
        x = F.relu(_r(F.conv2d(_r(x, b), _r(conv.weight, b), _r(conv.bias, b), conv.stride), b))
    fc, b = net.fc[0], "fc" not in f32
    return F.relu(_r(F.linear(_r(x.flatten(1), b), _r(fc.weight, b), _r(fc.bias, b)), b))


def heads(policy, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001
    latent_pi, latent_vf = policy.mlp_extractor(features)  # identity with net_arch=[]
    return policy.action_net(latent_pi), policy.value_net(latent_vf).flatten()


def evaluate(policy, obs, actions, f32, batch=256):  # noqa: ANN001, ANN201
    """(log-probs, entropies, values) of ``actions``, in minibatches (the same numbers as one batch)."""
    out = []
    for i in range(0, len(obs), batch):
        logits, values = heads(policy, trunk(policy.features_extractor.net, obs[i : i + batch], f32))
        dist = torch.distributions.Categorical(logits=logits)
        out.append((dist.log_prob(actions[i : i + batch]), dist.entropy(), values))
    return tuple(torch.cat(t) for t in zip(*out, strict=True))


def collect(
    model, env_id: str, n_envs: int, n_steps: int, seed: int, backend: str
) -> dict[str, torch.Tensor]:  # noqa: ANN001
    """A rollout with the float32 policy (sampled actions) and its GAE advantages (SB3's 0.99 / 0.95)."""
    from retro_atari_kit.integrations.sb3 import make_vec_env

    venv = make_vec_env(env_id, n_envs=n_envs, seed=seed, backend=backend)
    obs_l, act_l, rew_l, done_l, val_l = [], [], [], [], []
    try:
        obs = venv.reset()
        for _ in range(n_steps):
            with torch.no_grad():
                actions, values, _ = model.policy(torch.as_tensor(obs))
            obs_l.append(obs)
            act_l.append(actions.numpy())
            val_l.append(values.flatten().numpy())
            obs, rewards, dones, _ = venv.step(actions.numpy())
            rew_l.append(rewards)
            done_l.append(dones)
        with torch.no_grad():
            last_value = model.policy.predict_values(torch.as_tensor(obs)).flatten().numpy()
    finally:
        venv.close()
    rew, done, val = np.array(rew_l), np.array(done_l, dtype=np.float32), np.array(val_l)
    adv, gae = np.zeros_like(rew, dtype=np.float32), 0.0
    for t in reversed(range(n_steps)):
        next_value = last_value if t == n_steps - 1 else val[t + 1]
        delta = rew[t] + 0.99 * next_value * (1.0 - done[t]) - val[t]
        gae = delta + 0.99 * 0.95 * (1.0 - done[t]) * gae
        adv[t] = gae
    return {
        "obs": torch.as_tensor(np.concatenate(obs_l)),
        "actions": torch.as_tensor(np.concatenate(act_l)),
        "advantages": torch.as_tensor(adv.reshape(-1)),
        "returns": torch.as_tensor((adv + val).reshape(-1)),
    }


def ppo_step(policy, opt, batch, old_logp, idx, f32, lr, clip) -> tuple[float, float]:  # noqa: ANN001
    """One SB3 PPO minibatch step (normalised advantages, clipped surrogate, entropy 0.01, value 0.5)."""
    logp, ent, values = evaluate(policy, batch["obs"][idx], batch["actions"][idx], f32, batch=len(idx))
    adv = batch["advantages"][idx]
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = torch.exp(logp - old_logp[idx])
    pg = -torch.min(adv * ratio, adv * ratio.clamp(1 - clip, 1 + clip)).mean()
    loss = pg + 0.5 * F.mse_loss(batch["returns"][idx], values) - 0.01 * ent.mean()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
    for group in opt.param_groups:
        group["lr"] = lr
    opt.step()
    with torch.no_grad():
        log_ratio = logp - old_logp[idx]
        return (ratio - 1).abs().gt(clip).float().mean().item(), ((ratio - 1) - log_ratio).mean().item()


def warmed(model, batch, n: int, batch_size: int, seed: int):  # noqa: ANN001, ANN201
    """A copy of the policy with Adam (eps 1e-5, as the presets) whose moments saw ``n`` float32 minibatch
    gradients at lr 0 (the committed model has no optimizer state)."""
    policy = copy.deepcopy(model.policy)
    opt = torch.optim.Adam(policy.parameters(), lr=0.0, eps=1e-5)
    with torch.no_grad():
        old, _, _ = evaluate(policy, batch["obs"], batch["actions"], VARIANTS["float32"])
    order = torch.randperm(len(old), generator=torch.Generator().manual_seed(seed + 1))
    for k in range(n):
        idx = order[(k * batch_size) % len(old) :][:batch_size]
        ppo_step(policy, opt, batch, old, idx, VARIANTS["float32"], 0.0, 0.1)
    return policy, opt


def _copy(policy, opt):  # noqa: ANN001, ANN202
    """Independent copies of the policy and its Adam (the state dict maps Adam's moments by position)."""
    p = copy.deepcopy(policy)
    o = torch.optim.Adam(p.parameters(), lr=0.0, eps=1e-5)
    o.load_state_dict(copy.deepcopy(opt.state_dict()))  # load_state_dict would share the moment tensors
    return p, o


def one_step(policy, opt, batch, lr: float, clip: float, batch_size: int, seed: int) -> list[str]:  # noqa: ANN001
    p, o = _copy(policy, opt)
    obs, act = batch["obs"], batch["actions"]
    with torch.no_grad():
        before = {v: evaluate(p, obs, act, f32)[0] for v, f32 in VARIANTS.items()}
    idx = torch.randperm(len(obs), generator=torch.Generator().manual_seed(seed + 2))[:batch_size]
    ppo_step(p, o, batch, before["float32"], idx, VARIANTS["float32"], lr, clip)
    rows = []
    with torch.no_grad():
        true = evaluate(p, obs, act, VARIANTS["float32"])[0] - before["float32"]
        # how many trunk weights the bf16 cast sees move at all (the rest look unchanged to it)
        pairs = list(
            zip(p.features_extractor.parameters(), policy.features_extractor.parameters(), strict=True)
        )
        flips = sum((new.bfloat16() != old.bfloat16()).sum().item() for new, old in pairs) / sum(
            new.numel() for new, _ in pairs
        )
        for v, f32 in VARIANTS.items():
            seen = evaluate(p, obs, act, f32)[0] - before[v]
            noise = seen - true
            rows.append(
                f"| {lr:.2e} | {v} | {true.std():.2e} | {seen.std():.2e} | {noise.std():.2e} | "
                f"{noise.std() / true.std():.2f} | {torch.corrcoef(torch.stack([seen, true]))[0, 1]:.3f} | "
                f"{(seen.exp() - 1).abs().gt(clip).float().mean():.3f} | "
                f"{(true.exp() - 1).abs().gt(clip).float().mean():.3f} | {flips:.3%} |"
            )
    return rows


def update(policy, opt, batch, variant: str, lr: float, clip: float, batch_size: int, seed: int):  # noqa: ANN001, ANN201
    """One PPO update with ``variant``'s forward; (clip fraction, approx KL, f32 gain, mean |f32 change|)."""
    p, o = _copy(policy, opt)
    f32, obs, act = VARIANTS[variant], batch["obs"], batch["actions"]
    with torch.no_grad():
        old = evaluate(p, obs, act, f32)[0]  # the rollout's log-probs in this precision: ratio starts at 1
        start = evaluate(p, obs, act, VARIANTS["float32"])[0]
    gen = torch.Generator().manual_seed(seed + 3)
    clips, kls = [], []
    for _ in range(4):
        order = torch.randperm(len(obs), generator=gen)
        for i in range(0, len(obs), batch_size):
            c, k = ppo_step(p, o, batch, old, order[i : i + batch_size], f32, lr, clip)
            clips.append(c)
            kls.append(k)
    with torch.no_grad():
        change = evaluate(p, obs, act, VARIANTS["float32"])[0] - start
    adv = batch["advantages"]
    gain = ((adv - adv.mean()) / (adv.std() + 1e-8) * (change.exp() - 1)).mean().item()
    return np.mean(clips), np.mean(kls), gain, change.abs().mean().item()


def _spread(values: list[float], fmt: str) -> str:
    return f"{np.mean(values):{fmt}} ({min(values):{fmt}}..{max(values):{fmt}})"


def gradients(policy, batch, batch_size: int, seed: int) -> list[str]:  # noqa: ANN001
    """Cosine between each forward's gradient and float32's on the same minibatch (two minibatches,
    the lower shown), per trunk weight; the last row, for scale: float32 on two different minibatches."""
    obs, act = batch["obs"], batch["actions"]
    order = torch.randperm(len(obs), generator=torch.Generator().manual_seed(seed + 4))
    idxs = [order[:batch_size], order[batch_size : 2 * batch_size]]
    names = [n for n, _ in policy.features_extractor.named_parameters() if n.endswith("weight")]

    def grads(f32: frozenset[str], idx: torch.Tensor) -> dict[str, torch.Tensor]:
        p = copy.deepcopy(policy)
        full_old = torch.zeros(len(obs))
        with torch.no_grad():
            full_old[idx] = evaluate(p, obs[idx], act[idx], f32)[0]  # ratio 1, as in a real first step
        ppo_step(p, torch.optim.SGD(p.parameters(), lr=0.0), batch, full_old, idx, f32, 0.0, 0.0125)
        return {n: q.grad.flatten() for n, q in p.features_extractor.named_parameters() if n in names}

    ref = [grads(VARIANTS["float32"], idx) for idx in idxs]
    rows = []
    for v, f32 in list(VARIANTS.items())[1:]:
        got = [grads(f32, idx) for idx in idxs]
        cos = [
            min(F.cosine_similarity(g[n], r[n], dim=0).item() for g, r in zip(got, ref, strict=True))
            for n in names
        ]
        rows.append(f"| {v} | " + " | ".join(f"{c:.4f}" for c in cos) + " |")
    cos = [F.cosine_similarity(ref[0][n], ref[1][n], dim=0).item() for n in names]
    rows.append("| float32, another minibatch | " + " | ".join(f"{c:.3f}" for c in cos) + " |")
    return rows


def check_emulation(model, batch, n: int) -> list[str]:  # noqa: ANN001
    """The emulation against real torch.autocast on the kit's extractor (forced on), on ``n`` samples."""
    policy = model.policy
    ext = policy.features_extractor
    obs, act = batch["obs"][:n], batch["actions"][:n]
    ext.runs_in_bf16 = lambda device: True  # force the autocast path on a CPU without native bf16
    dtypes = {}
    hook = policy.action_net.register_forward_hook(lambda m, i, o: dtypes.update(i=i[0].dtype, o=o.dtype))
    try:
        with torch.no_grad():
            _, logp_autocast, _ = policy.evaluate_actions(obs, act)
    finally:
        hook.remove()
        del ext.runs_in_bf16
    with torch.no_grad():
        logp_emul = evaluate(policy, obs, act, VARIANTS["bf16 trunk (kit)"])[0]
        logp_f32 = evaluate(policy, obs, act, VARIANTS["float32"])[0]
        _, logp_kit32, _ = policy.evaluate_actions(obs, act)
    return [
        f"emulation vs autocast, {n} samples: max |log p diff| {(logp_emul - logp_autocast).abs().max():.2e} "
        f"(bf16 vs float32: {(logp_f32 - logp_autocast).abs().max():.2e}; "
        f"emulated float32 vs the kit's: {(logp_f32 - logp_kit32).abs().max():.2e})",
        f"heads under the extractor's autocast: action_net input {dtypes['i']}, logits {dtypes['o']}",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=str(REPO / "results/pong-retro-ppo-nature-0/model.zip"))
    p.add_argument("--env", default=None, help="env ID (default: the model's run config)")
    p.add_argument("--n-envs", type=int, default=8)
    p.add_argument("--n-steps", type=int, default=256, help="rollout steps per env")
    p.add_argument(
        "--progress",
        type=float,
        nargs="+",
        default=[1.0, 0.5, 0.125],
        help="schedule points (progress remaining): lr 2.5e-4 x p, clip 0.1 x p",
    )
    p.add_argument(
        "--update-progress",
        type=float,
        nargs="+",
        default=[0.125],
        help="schedule points of the whole-update comparison",
    )
    p.add_argument("--orders", type=int, default=3, help="minibatch orders per whole-update comparison")
    p.add_argument("--check-samples", type=int, default=64, help="samples for the autocast check")
    p.add_argument("--backend", default="auto", help="make_vec_env backend")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-batch", help="write the collected rollout here (torch.save)")
    p.add_argument("--load-batch", help="use a rollout written by --save-batch instead of collecting one")
    p.add_argument("--quick", action="store_true", help="4 envs x 64 steps, one schedule point")
    args = p.parse_args()
    if args.quick:
        args.n_envs, args.n_steps, args.progress, args.check_samples, args.orders = 4, 64, [0.125], 16, 2

    from retro_atari_kit.integrations.sb3.training.models import load_model

    from retro_atari_kit.runs import find_run_dir, load_config

    if not os.path.exists(args.model):
        raise SystemExit(f"no model at {args.model}; pass --model path/to/model.zip of a PPO Nature run")
    run = find_run_dir(args.model)
    config = load_config(run) if run else {}
    if config.get("network", "nature") != "nature" or config.get("algo", "ppo") != "ppo":
        raise SystemExit(
            f"{args.model} is not a PPO Nature-CNN model; pass one (e.g. results/pong-retro-ppo-nature-0)"
        )
    env_id = args.env or config.get("env_id") or "RetroKit/Pong-v0"
    torch.manual_seed(args.seed)
    model = load_model(args.model, device="cpu", algo="ppo")
    if args.load_batch:
        batch = torch.load(args.load_batch)
    else:
        for attempt in range(3):  # subprocess workers may miss their start-up deadline on a busy machine
            try:
                batch = collect(model, env_id, args.n_envs, args.n_steps, args.seed, args.backend)
                break
            except RuntimeError as exc:
                if attempt == 2:
                    raise SystemExit(
                        f"could not collect a rollout: {exc}; retry on a less busy machine"
                    ) from exc
        if args.save_batch:
            torch.save(batch, args.save_batch)
    bs = 256
    print(
        f"# bf16 ratio noise: {args.model}, {env_id}, {len(batch['obs'])} samples, torch {torch.__version__}"
    )
    print(*check_emulation(model, batch, args.check_samples), sep="\n")
    policy, opt = warmed(model, batch, max(len(batch["obs"]) // bs * 4, 4), bs, args.seed)
    print("\n## one float32 Adam step, log-prob change seen by each forward\n")
    print(
        "| lr | forward | std f32 change | std seen | std noise | noise/signal | corr | >clip seen | "
        ">clip f32 | bf16 weights flipped |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for prog in args.progress:
        print(*one_step(policy, opt, batch, 2.5e-4 * prog, 0.1 * prog, bs, args.seed), sep="\n")
    print("\n## gradient of one minibatch: cosine to float32's (lowest of 2 minibatches)\n")
    print("| forward | " + " | ".join(LAYERS) + " |\n|---|---|---|---|---|")
    print(*gradients(policy, batch, bs, args.seed), sep="\n")
    print(f"\n## one PPO update (4 epochs, minibatch 256), mean (min..max) over {args.orders} orders\n")
    print(
        "| lr / clip | forward | clip fraction | approx KL | f32 surrogate gain | mean abs f32 log-p change |"
    )
    print("|---|---|---|---|---|---|")
    for prog in args.update_progress:
        lr, clip = 2.5e-4 * prog, 0.1 * prog
        for v in UPDATE_VARIANTS:
            runs = [
                update(policy, opt, batch, v, lr, clip, bs, args.seed + 10 * k) for k in range(args.orders)
            ]
            cells = [_spread([r[i] for r in runs], f) for i, f in enumerate((".3f", ".1e", ".1e", ".1e"))]
            print(f"| {lr:.2e} / {clip:.4f} | {v} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
