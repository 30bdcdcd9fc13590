"""Bad calls on the Python API (docs/vectorization.md, "Bad calls"): on every vector backend and on the
stable-retro single env, a bad call gives every target the same one-line error, and the env then plays on
exactly as a fresh twin given the same good calls (``_api_child.py`` runs each case in a child process)."""

from __future__ import annotations

import pytest

from tests.sweep._sweep import Case, check, ci_first, params

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"


def api_cases() -> list[Case]:
    """Values: Python expressions of ``np``, ``N`` (envs), ``n`` (the game's actions), ``U32`` (2**32 - 1)."""
    cases: list[Case] = []

    def api(
        group: str,
        kind: str,
        call: str,
        value: str,
        *needles: str,
        good: bool = False,
        agree: str = "message",
    ):
        argv = [kind, call, value, "good" if good else "bad"]
        cases.append(Case(group, argv, expect="api", needles=needles, agree=agree))

    g = "api: vector step"
    for value, needle in [
        ("1.0", "not a sequence"), ("np.float32(1)", "not a sequence"), ("3", "not a sequence"),
        ("[1.0] * N", "(float)"), ("np.ones(N, dtype=np.float32)", "dtype float32"),
        ("[-1] * N", "out of range"),
        ("[0] * (N - 1)", "got 1 action"), ("[0] * (N + 1)", "got 3 actions"),
        ("np.zeros((N, 1), dtype=int)", "shape (2, 1)"), ("[0] * (N - 1) + [n]", "out of range"),
        ("None", "got None"), ("'0' * N", "(str)"), ("['0'] * N", "(str)"),
        ("np.array([True] * N)", "dtype bool"), ("np.zeros(N, dtype=np.uint64)", "dtype uint64"),
    ]:  # fmt: skip
        api(g, "vector", "step", value, "ValueError: step() needs 2 actions, one int in [0, ", needle)
    for value in ("np.ones(N, dtype=np.int32)", "[True] * N", "[np.int64(1)] * N", "(np.uint8(2),) * N"):
        api(g, "vector", "step", value, "no error", good=True)
    g = "api: vector reset seed"
    for value, needle in [
        ("-1", "got -1"), ("-(2**70)", "got -"), ("1.5", "(float)"), ("True", "(bool)"), ("'7'", "(str)"),
        ("[0] * (N - 1)", "got 1 seed"), ("[0] * (N + 1)", "got 3 seeds"),
        ("[-1] + [0] * (N - 1)", "env 0's seed"),
        ("[1.0] * N", "(float)"), ("np.zeros((1, N), dtype=int)", "shape (1, 2)"),
    ]:  # fmt: skip
        api(
            g, "vector", "reset", value, "ValueError: seed must be None, an int >= 0 (env i is seeded", needle
        )
    for value in (
        "0", "U32 - (N - 1)", "U32", "2**64", "list(range(N))", "np.int64(5)",
        "np.array([U32, 2**31], dtype=np.uint32)",
    ):  # fmt: skip
        api(g, "vector", "reset", value, "no error", good=True)
    g = "api: vector attributes"
    api(g, "vector", "get_attr", "'no_such_attribute'", "AttributeError: ", agree="type")
    api(g, "vector", "call", "'no_such_method'", "AttributeError: ", agree="type")
    api(g, "vector", "set_attr", "[1, lambda: None]", agree="none")  # does not pickle (subprocess)
    api(g, "vector", "call_step", "n", agree="none")  # the action reaches the workers' own stacks
    g = "api: retro single env"
    for value, needle in [
        ("1.0", "(float)"), ("np.float32(1)", "(float32)"), ("-1", "out of range"), ("n", "out of range"),
        ("None", "got None"), ("'0'", "(str)"), ("[0]", "(list)"), ("np.array([1])", "shape (1,)"),
        ("np.True_", "(bool)"), ("np.uint64(1)", "(uint64)"),
    ]:  # fmt: skip
        api(g, "single", "step", value, "ValueError: action must be an int in [0, 17] (Discrete(18))", needle)
    for value in ("True", "np.int8(1)", "np.array(1)"):
        api(g, "single", "step", value, "no error", good=True)
    for value, needle in [
        ("-1", "got -1"), ("1.5", "(float)"), ("True", "(bool)"), ("np.True_", "(bool)"), ("'7'", "(str)"),
        ("[1]", "(list)"),
    ]:  # fmt: skip
        api(g, "single", "reset", value, "ValueError: seed must be None or an int >= 0; got", needle)
    for value in ("0", "U32", "2**64", "np.int64(5)"):
        api(g, "single", "reset", value, "no error", good=True)
    api(g, "single", "get_attr", "'no_such_attribute'", "AttributeError: ", agree="type")
    return cases


@pytest.mark.parametrize("case", params(ci_first(api_cases())))
def test_case(case: Case, tmp_path) -> None:
    check(case, tmp_path)
