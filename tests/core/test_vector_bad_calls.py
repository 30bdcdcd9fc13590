"""Bad calls: a refused or failed call leaves every env as it was, on every vector backend and on
the stable-retro single env (in-process and in its worker process).

The contract (docs/vectorization.md, "Bad calls"): actions and seeds are checked in the calling process by one
function (``retro_atari_kit.envs._validate``) before anything reaches an emulator or a worker, with one
``ValueError`` line that names the problem and the valid range; a call that fails in a worker (a missing
attribute, a value that does not pickle) leaves no answer behind. So after any of them the env plays on
exactly as a fresh env given the same seed and the same good calls.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from retro_atari_kit.envs._validate import check_action, check_actions, check_seed, check_seeds

BACKENDS = ["native", "subprocess", "inprocess"]
N = 2
PONG_ACTIONS = 6
RETRO = "RetroKit/Pong-Atari2600-v0"

# (bad actions for N envs, text the message must hold); Pong has Discrete(6)
BAD_ACTIONS = [
    (1.0, "not a sequence of actions"),
    (3, "not a sequence of actions"),
    ([1.0, 0], "env 0's action is 1.0 (float)"),
    ([0, np.float32(2)], "env 1's action is np.float32(2.0) (float32)"),
    (np.array([1, 0], dtype=np.float32), "dtype float32"),
    ([-1, 0], "env 0's action is -1 (out of range)"),
    ([0, PONG_ACTIONS], f"env 1's action is {PONG_ACTIONS} (out of range)"),
    ([0] * (N - 1), f"got {N - 1} action"),
    ([0] * (N + 1), f"got {N + 1} actions"),
    (np.zeros((N, 1), dtype=np.int64), "shape (2, 1)"),
    (None, "got None"),
    ("01", "'01' (str)"),
    (["0", 1], "env 0's action is '0' (str)"),
    (np.array([True, False]), "dtype bool"),
    ([None, 0], "env 0's action is None"),
]
# accepted, as gymnasium's Discrete.contains takes each element: numpy integers, Python bools
GOOD_ACTIONS = [
    np.array([1, 2], dtype=np.int32),
    np.array([3, 4], dtype=np.uint8),
    [True, np.int64(5)],
    (np.array(2), 0),
]
U32 = 2**32 - 1  # seeds have no upper bound; around 2**32 - 1 numpy's legacy seeding would stop
BAD_SEEDS = [
    (-1, "got -1"),
    (1.5, "got 1.5 (float)"),
    (True, "got True (bool)"),
    ("7", "'7' (str)"),
    ([0] * (N - 1), f"got {N - 1} seed"),
    ([-(2**40), 0], f"env 0's seed is {-(2**40)}"),
    (np.array([1, -1]), "env 1's seed is -1"),
    (np.array([1.0, 2.0]), "env 0's seed is np.float64(1.0) (float64)"),
    ([0, -3], "env 1's seed is -3"),
    ([0, 1.0], "env 1's seed is 1.0 (float)"),
    (np.zeros((1, N), dtype=np.int64), "shape (1, 2)"),
]


def _message(check, *args) -> str:
    with pytest.raises(ValueError) as err:
        check(*args)
    return str(err.value)


def _refuse(call, value, expected: str, needle: str) -> None:
    """``call(value)`` raises one ``ValueError`` line: the shared check's ``expected``, holding ``needle``."""
    with pytest.raises(ValueError) as err:
        call(value)
    message = str(err.value)
    assert message == expected and needle in message and "\n" not in message


def _bad_vector_calls(venv) -> None:
    """Every kind of bad call on a vector env; each raises and must change nothing."""
    space = gym.spaces.Discrete(PONG_ACTIONS)
    for actions, needle in BAD_ACTIONS:
        expected = _message(check_actions, actions, space, N)
        assert "[0, 5]" in expected  # the valid range is named
        _refuse(venv.step, actions, expected, needle)
    for seed, needle in BAD_SEEDS:
        expected = _message(check_seeds, seed, N)
        assert "an int >= 0" in expected
        _refuse(lambda s: venv.reset(seed=s), seed, expected, needle)
        _refuse(
            lambda s: venv.reset(seed=s, options={"reset_mask": np.array([True, False])}),
            seed,
            expected,
            needle,
        )
    with pytest.raises(AttributeError):
        venv.get_attr("no_such_attribute")
    with pytest.raises(AttributeError):
        venv.call("no_such_method", 1)
    # env 0's value pickles, env 1's does not: the subprocess backend must not leave env 0's answer unread
    # (native refuses every set_attr; in-process sets a harmless attribute)
    try:
        venv.set_attr("kit_test_marker", [1, lambda: None])
    except Exception:  # noqa: BLE001 - any refusal will do; what matters is the next call
        pass


def _play(venv, seed: int, actions: np.ndarray, bad: bool) -> list[tuple]:
    """Reset with ``seed``, step ``actions``, reset with ``seed + 100`` half-way; with ``bad``, every bad call
    before each good one. The observations, rewards and flags of the good calls."""
    if bad:
        _bad_vector_calls(venv)
    obs, _ = venv.reset(seed=seed)
    out = [(obs,)]
    for t, action in enumerate(actions):
        if bad and t % 5 == 0:
            _bad_vector_calls(venv)
        if t == len(actions) // 2:
            obs, _ = venv.reset(seed=seed + 100)
            out.append((obs,))
        obs, rewards, terms, truncs, _ = venv.step(action)
        out.append((obs, rewards, terms, truncs))
    return out


def _assert_same_runs(got: list[tuple], want: list[tuple]) -> None:
    assert len(got) == len(want)
    for t, (a, b) in enumerate(zip(got, want, strict=True)):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y, err_msg=f"call {t}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_calls_refused_alike_and_change_nothing(backend):
    """Every bad action and seed gives the shared check's one line; after all the bad calls (and failed
    get_attr / call / set_attr) the env plays exactly as a fresh one driven with the good calls alone."""
    actions = np.random.default_rng(0).integers(0, PONG_ACTIONS, size=(16, N))
    runs = []
    for bad in (True, False):
        venv = gym.make_vec("RetroKit/Pong-v0", num_envs=N, backend=backend)
        try:
            assert venv.backend == backend
            runs.append(_play(venv, 3, actions, bad))
        finally:
            venv.close()
    _assert_same_runs(runs[0], runs[1])


@pytest.mark.parametrize("backend", ["native", "inprocess"])
def test_accepted_action_types(backend):
    """numpy integer arrays of any width, Python bools and numpy integer scalars are actions (gymnasium's
    ``Discrete.contains`` takes each); they step exactly as the same int64 actions."""
    runs = []
    for as_given in (True, False):
        venv = gym.make_vec("RetroKit/Pong-v0", num_envs=N, backend=backend, noop_max=0)
        try:
            out = [venv.reset(seed=1)[0]]
            for actions in GOOD_ACTIONS:
                given = actions if as_given else np.array([int(a) for a in actions], dtype=np.int64)
                out.append(venv.step(given)[0])
            runs.append(out)
        finally:
            venv.close()
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_check_action_agrees_with_discrete_contains():
    """One rule for every backend and the single envs: an action is accepted exactly when gymnasium's
    ``Discrete.contains`` accepts it."""
    space = gym.spaces.Discrete(PONG_ACTIONS)
    values = [0, 5, 6, -1, True, False, np.int8(3), np.uint64(2), np.int64(6), np.array(4), np.array([4])]
    values += [1.0, np.float32(1), np.float64(2), np.True_, None, "1", b"1", [1], (1,), np.array(1.0)]
    for value in values:
        accepted = True
        try:
            assert check_action(value, space) == int(value)
        except ValueError as err:
            accepted = False
            assert "[0, 5]" in str(err) and "\n" not in str(err)
        assert accepted == space.contains(value), repr(value)


def test_seed_rule():
    """Seeds: None or an int >= 0 per env (numpy integers too, no upper bound, as gymnasium's envs); an int
    seed s gives env i the seed s + i; a list gives one seed (or None) per env."""
    assert check_seeds(None, N) == [None, None]
    assert check_seeds(0, N) == [0, 1]
    assert check_seeds(U32, N) == [U32, U32 + 1]
    assert check_seeds(2**64, N) == [2**64, 2**64 + 1]
    assert check_seeds(np.int64(9), N) == [9, 10]
    assert check_seeds([U32 + 1, None], N) == [U32 + 1, None]
    assert check_seeds(np.array([4, 2], dtype=np.uint32), N) == [4, 2]
    assert check_seed(2**70) == 2**70 and check_seed(np.uint8(3)) == 3 and check_seed(None) is None
    for seed in (-1, np.int64(-5), 1.0, True, np.True_, "3", [3], np.array(3.0)):
        message = _message(check_seed, seed)
        assert message.startswith("seed must be None or an int >= 0; got "), message


def _reference_run(envs: list, seeds: list[int], actions: np.ndarray) -> list[np.ndarray]:
    """``gym.make`` envs, env i reset with ``seeds[i]``: observations after the reset and each step."""
    out = [np.stack([env.reset(seed=s)[0] for env, s in zip(envs, seeds, strict=True)])]
    for action in actions:
        out.append(np.stack([env.step(int(a))[0] for env, a in zip(envs, action, strict=True)]))
    return out


# 2**31 - 1 | 2**31: either side of ale-py's int32 C++ seeds (the native backend hashes seeds into them);
# U32 - (N - 1): the last seed whose envs all stay in numpy's 32-bit range, then beyond it
ACCEPTED_SEEDS = [0, U32 - (N - 1), 2**64, np.array([2**31, 2**31 - 1], dtype=np.uint32)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_accepted_seeds_same_runs_on_every_backend(backend):
    """Every accepted seed, up to the top of the range, gives each env the run of ``gym.make`` reset with its
    per-env seed (native: no-op starts come from ale-py's generator, so there ``noop_max=0``, and a seeded
    native run repeats itself with no-ops on)."""
    kwargs = {"noop_max": 0} if backend == "native" else {}
    actions = np.random.default_rng(2).integers(0, PONG_ACTIONS, size=(3, N))
    venv = gym.make_vec("RetroKit/Pong-v0", num_envs=N, backend=backend, **kwargs)
    references = [gym.make("RetroKit/Pong-v0", **kwargs) for _ in range(N)]
    try:
        for seed in ACCEPTED_SEEDS:
            want = _reference_run(references, check_seeds(seed, N), actions)
            got = [venv.reset(seed=seed)[0]] + [venv.step(a)[0] for a in actions]
            for t, (a, b) in enumerate(zip(got, want, strict=True)):
                np.testing.assert_array_equal(a, b, err_msg=f"seed {seed!r}, call {t}")
    finally:
        venv.close()
        for env in references:
            env.close()
    if backend == "native":
        venv = gym.make_vec("RetroKit/Pong-v0", num_envs=N, backend=backend)
        try:
            for seed in (U32, [2**40, 2**31]):
                first = venv.reset(seed=seed)[1]["episode_frame_number"]
                assert (venv.reset(seed=seed)[1]["episode_frame_number"] == first).all()
        finally:
            venv.close()


def _retro_play(env, seed: int, actions: list[int], bad: bool) -> list[np.ndarray]:
    """One retro env: reset, steps, a reset half-way; with ``bad``, every bad call before each good one."""

    def bad_calls() -> None:
        if not bad:
            return
        space = env.action_space
        high = space.n - 1
        for action in (1.0, np.float32(0), -1, space.n, None, "0", [0], np.array([1]), np.True_):
            expected = _message(check_action, action, space)
            assert f"[0, {high}]" in expected
            _refuse(env.step, action, expected, "action must be an int")
        for bad_seed in (-1, 1.5, True, np.True_, "7", [1]):
            _refuse(lambda s: env.reset(seed=s), bad_seed, _message(check_seed, bad_seed), "seed must be")
        with pytest.raises(AttributeError):
            env.get_wrapper_attr("no_such_attribute")

    out = [env.reset(seed=seed)[0]]  # first: gym.make's order check refuses a step before any reset
    for t, action in enumerate(actions):
        if t % 4 == 0:
            bad_calls()
        if t == len(actions) // 2:
            out.append(env.reset(seed=seed + 1)[0])
        out.append(env.step(action)[0])
    return out


def test_retro_single_env_bad_calls_change_nothing():
    """The stable-retro env in this process and the one in its worker process (the second env): the same
    refusals, and after them the same run as the other env given only the good calls. Sticky actions are
    on, so a bad call that drew from the env's generator or kept a sticky action would show."""
    from retro_atari_kit.envs.retro_worker import RetroWorkerEnv

    actions = np.random.default_rng(3).integers(0, 3, size=24).tolist()
    local = gym.make(RETRO)
    try:
        remote = gym.make(RETRO)
        try:
            assert isinstance(remote.unwrapped, RetroWorkerEnv)
            assert not isinstance(local.unwrapped, RetroWorkerEnv)
            for bad_env, clean_env in ((remote, local), (local, remote)):
                got = _retro_play(bad_env, 11, actions, bad=True)
                want = _retro_play(clean_env, 11, actions, bad=False)
                for t, (a, b) in enumerate(zip(got, want, strict=True)):
                    np.testing.assert_array_equal(a, b, err_msg=f"call {t}")
            for seed in (0, U32, 2**64, np.int64(5), np.uint32(7)):
                runs = [
                    [env.reset(seed=seed)[0]] + [env.step(a)[0] for a in actions[:6]]
                    for env in (local, remote)
                ]
                for a, b in zip(*runs, strict=True):
                    np.testing.assert_array_equal(a, b, err_msg=f"seed {seed!r}")
        finally:
            remote.close()
    finally:
        local.close()


def test_retro_vector_env_error_in_workers_then_good_step():
    """stable-retro vector env (subprocess): a bad action refused here, the same action reaching the workers'
    own stacks through ``call("step", ...)`` (each raises there) and a missing attribute: the next good steps
    equal a fresh vector env's."""
    actions = np.random.default_rng(4).integers(0, 3, size=(8, N))
    runs = []
    for bad in (True, False):
        venv = gym.make_vec(RETRO, num_envs=N)
        try:
            assert venv.backend == "subprocess"
            n = venv.single_action_space.n
            out = [venv.reset(seed=21)[0]]
            for t, action in enumerate(actions):
                if bad and t % 3 == 0:
                    with pytest.raises(ValueError, match=r"step\(\) needs 2 actions"):
                        venv.step([0, n])
                    with pytest.raises(ValueError, match=rf"action must be an int in \[0, {n - 1}\]"):
                        venv.call("step", n)
                    with pytest.raises(ValueError, match="seed must be None"):
                        venv.reset(seed=-2)
                    with pytest.raises(AttributeError):
                        venv.get_attr("no_such_attribute")
                out.append(venv.step(action)[0])
            runs.append(out)
        finally:
            venv.close()
    for t, (a, b) in enumerate(zip(*runs, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"call {t}")
