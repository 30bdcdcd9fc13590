"""The env options' one spec (retro_atari_kit/envs/_options.py and each backend's own options): the factories'
typed keyword-only parameters, their docstrings, ``help()``, the docs tables and the errors all agree with it,
and ``gym.make`` with options builds the same stack as the factory (real ALE and stable-retro emulators)."""

from __future__ import annotations

import inspect
import pydoc
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import retro_atari_kit  # noqa: F401  (registers RetroKit/)
from retro_atari_kit.envs import ale, retro
from retro_atari_kit.envs._options import COMMON_OPTIONS, EnvOption, defaults_of, takes_options
from retro_atari_kit.envs.ale import ALE_OPTIONS, make_ale_env
from retro_atari_kit.envs.retro import RETRO_OPTIONS, make_retro_env

DOCS = Path(__file__).resolve().parents[2] / "docs"
FACTORIES = [
    pytest.param(make_ale_env, ALE_OPTIONS, id="ale"),
    pytest.param(make_retro_env, RETRO_OPTIONS, id="retro"),
]


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(("factory", "options"), FACTORIES)
def test_signature_is_the_spec(factory, options):
    params = list(inspect.signature(factory).parameters.values())
    assert [(p.name, p.kind) for p in params[:1]] == [("game", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:]), "no **kwargs, no positionals"
    assert [p.name for p in params[1:]] == [o.name for o in options]
    for param, option in zip(params[1:], options, strict=True):
        assert type(param.default) is type(option.default) and param.default == option.default, option.name
        assert param.annotation is not inspect.Parameter.empty, f"{option.name} has no type"


def test_shared_options_are_one_definition():
    ale_by_name = {o.name: o for o in ALE_OPTIONS}
    retro_by_name = {o.name: o for o in RETRO_OPTIONS}
    for option in COMMON_OPTIONS:  # the very same object on both backends: one default, check, meaning
        assert ale_by_name[option.name] is option and retro_by_name[option.name] is option
    # shared names with a default per backend: the same check
    for name in ("sticky_actions", "max_episode_steps"):
        assert ale_by_name[name].check.__qualname__ == retro_by_name[name].check.__qualname__
    per_backend = [
        (ale_by_name[n].default, retro_by_name[n].default) for n in ("sticky_actions", "max_episode_steps")
    ]
    assert per_backend == [(0.0, 0.25), (None, 4500)]
    # the plain dicts other code may read are derived from the spec, not copies of it
    assert ale.DEFAULTS == defaults_of(ALE_OPTIONS) and retro.DEFAULTS == defaults_of(RETRO_OPTIONS)


@pytest.mark.parametrize(("factory", "options"), FACTORIES)
def test_help_names_each_option_with_its_default_and_meaning(factory, options):
    text = pydoc.render_doc(factory, renderer=pydoc.plaintext)  # what help(factory) shows
    flat = _flat(text)
    for option in options:
        default = re.escape(repr(option.default))
        assert re.search(rf"\b{option.name}: [^=]+ = {default}[,)]", flat), f"signature shows {option.name}"
        assert _flat(f"{option.name}: {option.meaning}") in flat, f"docstring's line for {option.name}"


def test_a_factory_that_differs_from_its_spec_is_refused_at_definition():
    spec = (EnvOption("frame_skip", 4, "frames per step", lambda name, value, _t: value),)
    with pytest.raises(TypeError, match="differ from its options"):

        @takes_options(spec, lambda game: game)
        def drifted(game: str, *, frame_skip: int = 3) -> None: ...

    with pytest.raises(TypeError, match="differ from its options"):

        @takes_options(spec, lambda game: game)
        def missing(game: str, *, frame_skip: int = 4, noop_max: int = 30) -> None: ...


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: make_ale_env("Pong", frame_skp=4),
            "RetroKit/Pong-v0 got an unexpected keyword argument 'frame_skp' (did you mean 'frame_skip'?); "
            "allowed: clip_reward, crop_score, fire_reset, frame_skip,",
        ),
        (
            lambda: gym.make("RetroKit/Pong-v0", noop_maxx=3),
            "RetroKit/Pong-v0 got an unexpected keyword argument 'noop_maxx' (did you mean 'noop_max'?)",
        ),
        (
            lambda: make_retro_env(game="Airstriker-Genesis", statee="Level1", x=1),
            "RetroKit/Airstriker-Genesis-v0 got an unexpected keyword argument 'statee' (did you mean "
            "'state'?); also unexpected: 'x'; allowed: action_set,",
        ),
    ],
)
def test_unknown_option_is_one_line_with_a_did_you_mean(call, message):
    with pytest.raises(TypeError) as excinfo:
        call()
    assert message in str(excinfo.value)


def test_unknown_game_is_refused_before_unknown_options():
    with pytest.raises(KeyError, match="Pnog"):
        make_ale_env("Pnog", frame_skp=4)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: make_ale_env("Pong", frame_skip=2.5), "frame_skip must be an int >= 1, got 2.5"),
        (lambda: gym.make("RetroKit/Pong-v0", fire_reset="yes"), "fire_reset must be one of 'auto', True"),
        (lambda: make_retro_env("Airstriker-Genesis", grayscale="no"), "grayscale must be True or False"),
        (lambda: gym.make("RetroKit/Airstriker-Genesis-v0", players=1.0), "players must be an int >= 1"),
    ],
)
def test_wrong_type_is_one_line(call, message):
    with pytest.raises((TypeError, ValueError)) as excinfo:
        call()
    assert message in str(excinfo.value)


def _play(env: gym.Env, steps: int) -> list[tuple]:
    """Seeded reset then ``steps`` seeded random actions; every observation, reward and flag."""
    try:
        obs, _ = env.reset(seed=7)
        actions = np.random.default_rng(3).integers(0, env.action_space.n, size=steps)
        out = [(obs, 0.0, False, False)]
        for action in actions:
            obs, reward, terminated, truncated, _ = env.step(int(action))
            out.append((obs, reward, terminated, truncated))
            if terminated or truncated:
                obs, _ = env.reset()
                out.append((obs, 0.0, False, False))
        return out
    finally:
        env.close()


def _assert_same(a: list[tuple], b: list[tuple]) -> None:
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        np.testing.assert_array_equal(x[0], y[0], err_msg=f"step {i}")
        assert x[1:] == y[1:], f"step {i}"


def test_gym_make_with_options_equals_make_ale_env():
    options = dict(
        frame_skip=3,
        noop_max=5,
        frame_stack=2,
        screen_size=64,
        grayscale=False,
        crop_score=True,
        sticky_actions=0.25,
        clip_reward=False,
    )
    made = _play(gym.make("RetroKit/Pong-v0", **options), 60)
    assert made[0][0].shape == (6, 64, 64)
    _assert_same(made, _play(make_ale_env("Pong", **options), 60))


def test_gym_make_with_options_equals_make_retro_env():
    options = dict(frame_skip=2, sticky_actions=0.5, frame_stack=3, screen_size=48, clip_reward=False)
    # one after the other: each env is this process's only emulator (no worker process)
    made = _play(gym.make("RetroKit/Airstriker-Genesis-v0", render_mode=None, **options), 40)
    assert made[0][0].shape == (3, 48, 48)
    _assert_same(made, _play(make_retro_env("Airstriker-Genesis", render_mode=None, **options), 40))


def _docs_table(page: str) -> dict[str, str]:
    """``{kwarg: default}`` of the ``| kwarg | default | meaning |`` table under ``## kwargs``."""
    section = (DOCS / page).read_text().split("\n## kwargs\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", section, re.M))


def _as_docs(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


@pytest.mark.parametrize(("page", "options"), [("envs.md", ALE_OPTIONS), ("retro.md", RETRO_OPTIONS)])
def test_docs_table_lists_every_option_with_its_default(page, options):
    table = _docs_table(page)
    assert list(table) == [o.name for o in options], f"docs/{page}: the kwargs table's rows and their order"
    assert table == {o.name: _as_docs(o.default) for o in options}, f"docs/{page}: defaults"
