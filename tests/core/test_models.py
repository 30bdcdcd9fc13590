"""Pure-torch models: parameter counts, shapes, uint8 vs float input, memory formats, initialisation."""

from __future__ import annotations

import math

import pytest
import torch

from retro_atari_kit.models import ImpalaCNN, NatureCNN


def _count(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def test_parameter_counts_match_docstrings():
    assert _count(NatureCNN()) == 1_684_128
    assert _count(ImpalaCNN()) == 1_089_232
    assert _count(ImpalaCNN(batch_norm=True)) == 1_090_032
    assert "1,684,128" in NatureCNN.__doc__ and "1,089,232" in ImpalaCNN.__doc__


@pytest.mark.parametrize("cls, dim", [(NatureCNN, 512), (ImpalaCNN, 256)])
@pytest.mark.parametrize("size", [84, 64])
def test_output_shape_for_square_sizes(cls, dim, size):
    m = cls(image_size=size)
    out = m(torch.randint(0, 256, (3, 4, size, size), dtype=torch.uint8))
    assert out.shape == (3, dim) and out.dtype == torch.float32


@pytest.mark.parametrize("cls", [NatureCNN, ImpalaCNN])
def test_uint8_is_divided_once_and_unit_float_is_not(cls):
    torch.manual_seed(0)
    m = cls()
    seen = []
    first = next(x for x in m.modules() if isinstance(x, torch.nn.Conv2d))
    first.register_forward_pre_hook(lambda mod, inp: seen.append(inp[0].max().item()))
    frames = torch.full((2, 4, 84, 84), 255, dtype=torch.uint8)
    a = m(frames)
    b = m(frames.float() / 255.0)
    assert seen == [1.0, 1.0]
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("cls", [NatureCNN, ImpalaCNN])
def test_channels_last_and_default_formats_agree(cls):
    torch.manual_seed(0)
    default = cls(channels_last=False)
    fast = cls(channels_last=True)
    fast.load_state_dict(default.state_dict())
    conv = next(x for x in fast.modules() if isinstance(x, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    x = torch.randint(0, 256, (8, 4, 84, 84), dtype=torch.uint8)
    torch.testing.assert_close(fast(x), default(x), rtol=1e-3, atol=2e-4)
    # gradients agree too
    ga = torch.autograd.grad(default(x).sum(), list(default.parameters()))
    gb = torch.autograd.grad(fast(x).sum(), list(fast.parameters()))
    for p, q in zip(ga, gb, strict=True):
        torch.testing.assert_close(p, q.contiguous(), rtol=1e-3, atol=1e-3 * float(p.abs().max()))


def test_deferred_channels_last_keeps_parameters_and_converts_on_first_forward():
    m = NatureCNN()
    m.defer_channels_last()
    params = list(m.parameters())
    conv = m.cnn[0]
    assert conv.weight.is_contiguous()
    torch.nn.init.orthogonal_(conv.weight)  # needs a contiguous weight (SB3 re-initialises like this)
    m(torch.zeros(1, 4, 84, 84, dtype=torch.uint8))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert all(a is b for a, b in zip(params, m.parameters(), strict=True))


def test_orthogonal_init_with_gain_sqrt2_and_zero_bias():
    m = NatureCNN(channels_last=False)
    w = m.fc[0].weight.detach()  # (512, 3136): rows orthogonal with norm sqrt(2)
    torch.testing.assert_close(w @ w.T, 2 * torch.eye(512), atol=1e-4, rtol=0)
    assert all(
        float(mod.bias.detach().abs().max()) == 0.0
        for mod in m.modules()
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear))
    )
    assert math.isclose(2.0, float((w @ w.T).diagonal().mean()), rel_tol=1e-4)


def test_impala_options():
    m = ImpalaCNN(depths=(8, 16), blocks_per_stage=1, features_dim=64, dropout=0.1, batch_norm=True)
    assert any(isinstance(x, torch.nn.Dropout2d) for x in m.modules())
    assert any(isinstance(x, torch.nn.BatchNorm2d) for x in m.modules())
    assert m.n_flatten == 16 * 21 * 21
    assert m(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape == (2, 64)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: NatureCNN(image_size=20), "image_size"),
        (lambda: NatureCNN(in_channels=0), "in_channels"),
        (lambda: ImpalaCNN(depths=()), "depths"),
        (lambda: ImpalaCNN(dropout=1.5), "dropout"),
        (lambda: ImpalaCNN(blocks_per_stage=-1), "blocks_per_stage"),
    ],
)
def test_bad_arguments_raise_one_clear_error(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("model_class", [NatureCNN, ImpalaCNN])
def test_one_image_gives_one_feature_vector(model_class):
    """(C, H, W) in, (features,) out, equal to the batched result (TorchRL's single envs give one image)."""
    torch.manual_seed(0)
    model = model_class()
    frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    batched = model(frames)
    single = model(frames[1])
    assert single.shape == batched.shape[1:]
    # equal up to float32 summation order: oneDNN may pick another convolution algorithm for a batch of
    # one than for three, which moves the Impala features (~1-10) by a few 1e-5 on some CPUs
    torch.testing.assert_close(single, batched[1], rtol=1e-4, atol=1e-4)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="B, C, H, W"):
        NatureCNN()(torch.zeros(84, 84, dtype=torch.uint8))
    with pytest.raises(TypeError, match="uint8"):
        NatureCNN()(torch.zeros(1, 4, 84, 84, dtype=torch.int32))
