"""Cost of one training step (forward + backward + Adam) of the kit's CNNs: memory format and bf16.

Batch of 256 uint8 frames (4, 84, 84), a 6-action linear head, squared-output loss. Three variants
alternate: default memory format, channels-last, and channels-last with the CNN under bfloat16 autocast
(what the extractors' ``autocast="bf16"`` does; measured only where the CPU has native bf16, see
``retro_atari_kit.integrations.sb3.native_bf16``). The median of ``--repeats`` is reported. Run by hand::

    python benchmarks/model_step.py
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch
from retro_atari_kit.integrations.sb3 import native_bf16

from retro_atari_kit.models import ImpalaCNN, NatureCNN

VARIANTS = {"default": (False, False), "channels-last": (True, False), "channels-last + bf16": (True, True)}


def step_time(cls: type, channels_last: bool, bf16: bool, x: torch.Tensor, n: int) -> float:
    torch.manual_seed(0)
    m = cls(channels_last=channels_last)
    head = torch.nn.Linear(m.features_dim, 6)
    opt = torch.optim.Adam([*m.parameters(), *head.parameters()], 2.5e-4)

    def step() -> None:
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with autocast:
            features = m(x)
        loss = head(features.float()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t0) / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    x = torch.randint(0, 256, (args.batch, 4, 84, 84), dtype=torch.uint8)
    variants = {k: v for k, v in VARIANTS.items() if not v[1] or native_bf16("cpu")}
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, batch {args.batch}, "
        f"native bf16: {native_bf16('cpu')}"
    )
    for cls in (NatureCNN, ImpalaCNN):
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.repeats):
            for name, (channels_last, bf16) in variants.items():
                times[name].append(step_time(cls, channels_last, bf16, x, args.steps))
        base = statistics.median(times["default"])
        cells = [
            f"{k} {statistics.median(v) * 1e3:7.1f} ms ({base / statistics.median(v):.2f}x)"
            for k, v in times.items()
        ]
        print(f"{cls.__name__:10s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
