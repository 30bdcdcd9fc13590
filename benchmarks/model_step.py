"""Cost of one training step (forward + backward + Adam) of the kit's CNNs: channels-last vs default format.

Batch of 256 uint8 frames (4, 84, 84), a 6-action linear head, squared-output loss. Formats alternate,
the median of ``--repeats`` is reported. Run by hand::

    python benchmarks/model_step.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from retro_atari_kit.models import ImpalaCNN, NatureCNN


def step_time(cls: type, channels_last: bool, x: torch.Tensor, n: int) -> float:
    torch.manual_seed(0)
    m = cls(channels_last=channels_last)
    head = torch.nn.Linear(m.features_dim, 6)
    opt = torch.optim.Adam([*m.parameters(), *head.parameters()], 2.5e-4)

    def step() -> None:
        loss = head(m(x)).pow(2).mean()
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
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, batch {args.batch}")
    for cls in (NatureCNN, ImpalaCNN):
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for cl in (False, True):
                times[cl].append(step_time(cls, cl, x, args.steps))
        d, c = statistics.median(times[False]), statistics.median(times[True])
        print(f"{cls.__name__:10s} default {d * 1e3:7.1f} ms  channels-last {c * 1e3:7.1f} ms  "
              f"-> {d / c:.2f}x faster")


if __name__ == "__main__":
    main()
