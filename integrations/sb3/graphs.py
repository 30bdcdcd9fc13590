"""One learner step replayed as a CUDA graph: the acting forward or one minibatch update of the kit's fast
learners (:mod:`~retro_atari_kit.integrations.sb3.fast_ppo`), launched as one graph instead of hundreds of
small kernels, each a few microseconds of Python and launch overhead on the host.

::

    step = StepGraph(update, enabled=device.type == "cuda")
    stats = step(obs, actions, advantages)     # warm-up calls run eagerly, then one capture, then replays

torch's recipe (``torch.cuda.graphs``, "whole network capture"): a few eager calls on a side stream warm up
the allocator, cuDNN's choice of kernels and the optimizer's state; the next call is captured with static
input tensors and then replayed; every later call copies its inputs into those tensors and replays. The
captured work includes ``backward`` and ``optimizer.step``, so the optimizer must be capturable with its
learning rate in a tensor (:func:`make_capturable`), and nothing in the step may read a value on the host
(``.item()``, a distribution's argument checks: :func:`unchecked_distributions`).

Outputs are the graph's own tensors, overwritten by the next replay: use or copy them before the next call.
A call whose inputs differ in shape or dtype from the captured ones (a last, shorter minibatch) runs
eagerly. Where ``enabled`` is false (any device but CUDA) every call is eager: the same function, the same
results, which is what the CPU tests check. A capture that fails (an operation that cannot be captured)
warns once and leaves the step eager for the rest of the run.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.distributions import Distribution

__all__ = [
    "StepGraph",
    "graphs_choice",
    "make_capturable",
    "plain_optimizer_state",
    "set_learning_rate",
    "unchecked_distributions",
]

WARMUP_CALLS = 3  # torch's docs warm up with 3 iterations before a capture


def graphs_choice(cuda_graphs: bool | str, device: torch.device) -> bool:
    """Whether to replay the learner's steps as CUDA graphs: only ever on CUDA; ``"auto"`` and ``True``
    there, ``False`` never. Elsewhere the steps run eagerly (the same functions)."""
    if cuda_graphs not in (True, False, "auto"):
        raise ValueError(f"cuda_graphs must be true, false or 'auto', got {cuda_graphs!r}")
    return bool(cuda_graphs) and torch.device(device).type == "cuda"


@contextlib.contextmanager
def unchecked_distributions() -> Iterator[None]:
    """``torch.distributions`` without argument checks: by default each distribution checks its
    parameters and every sample against their constraints and reads the answer on the host, two or three
    device synchronisations per forward and an error inside a CUDA graph capture. The policy's logits come
    from its own network; SB3's training loop checks nothing they would catch either."""
    previous = Distribution._validate_args
    Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        Distribution.set_default_validate_args(previous)


def make_capturable(optimizer: torch.optim.Optimizer) -> bool:
    """Make ``optimizer`` (torch's Adam, AdamW, RMSprop, ...) safe to capture in a CUDA graph, in place:
    its ``capturable`` flag on, its learning rate a tensor on the parameters' device (so that a schedule
    changes it by ``fill_`` without a new capture) and its step counters on that device too. False, and
    nothing changed, for an optimizer without a ``capturable`` option (SB3's ``RMSpropTFLike``)."""
    if any("capturable" not in group for group in optimizer.param_groups):
        return False
    for group in optimizer.param_groups:
        device = group["params"][0].device
        group["capturable"] = True
        if not isinstance(group["lr"], torch.Tensor):
            group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            if "step" in state:
                state["step"] = torch.as_tensor(state["step"], dtype=torch.float32).to(device)
    return True


def set_learning_rate(optimizer: torch.optim.Optimizer, value: float) -> None:
    """SB3's ``update_learning_rate``, also for a learning rate held in a tensor (written in place)."""
    for group in optimizer.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(value)
        else:
            group["lr"] = value


def plain_optimizer_state(state: dict[str, Any]) -> dict[str, Any]:
    """An optimizer state dict as an uncaptured optimizer has it (learning rates as floats, ``capturable``
    off), for saving: a zip loads on any device, a CPU included."""
    groups = []
    for group in state["param_groups"]:
        group = dict(group)
        if isinstance(group.get("lr"), torch.Tensor):
            group["lr"] = float(group["lr"])
        if group.get("capturable"):
            group["capturable"] = False
        groups.append(group)
    return {**state, "param_groups": groups}


class StepGraph:
    """``fn(*tensors)`` replayed as one CUDA graph where ``enabled`` (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], enabled: bool, name: str = "step") -> None:
        self.fn, self.enabled, self.name = fn, enabled, name
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.inputs: tuple[torch.Tensor, ...] = ()
        self.outputs: Any = None
        self.signature: tuple | None = None

    @property
    def captured(self) -> bool:
        return self.graph is not None

    def __call__(self, *tensors: torch.Tensor) -> Any:
        if not self.enabled:
            return self.fn(*tensors)
        signature = tuple((t.shape, t.dtype, t.device) for t in tensors)
        if self.graph is not None:
            if signature != self.signature:
                return self.fn(*tensors)  # another shape: eager, the graph stays for the usual one
            for static, tensor in zip(self.inputs, tensors, strict=True):
                static.copy_(tensor)
            self.graph.replay()
            return self.outputs
        self.calls += 1
        if self.calls <= WARMUP_CALLS:
            return self._on_side_stream(tensors)
        try:
            self._capture(tensors, signature)
        except Exception as exc:  # noqa: BLE001 - any capture failure: the step stays eager, said once
            self.enabled, self.graph = False, None
            torch.cuda.synchronize()
            warnings.warn(
                f"CUDA graph of the learner's {self.name} not captured ({type(exc).__name__}: {exc}); "
                "it runs eagerly",
                stacklevel=2,
            )
            return self.fn(*tensors)
        return self(*tensors)  # the capture ran nothing: this call's work is its first replay

    def _on_side_stream(self, tensors: tuple[torch.Tensor, ...]) -> Any:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = self.fn(*tensors)
        torch.cuda.current_stream().wait_stream(side)
        return out

    def _capture(self, tensors: tuple[torch.Tensor, ...], signature: tuple) -> None:
        self.inputs = tuple(t.clone() for t in tensors)
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            self.outputs = self.fn(*self.inputs)
        self.graph, self.signature = graph, signature
