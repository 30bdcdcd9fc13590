"""The child of the sweep's API cases (test_sweep_api.py), run as a script in the case's folder:

    python tests/sweep/_api_child.py KIND CALL VALUE good|bad

On every target it resets the env and a fresh twin with one seed, makes the call on the env (on both if it is
a good one), then drives both with the same good calls, and prints
``game<TAB>target<TAB>error line<TAB>same|DIFFERENT`` (the sweep checks the lines).
"""

from __future__ import annotations

import sys

API_N = 2
API_VECTOR = [
    ("RetroKit/Pong-v0", "native"),
    ("RetroKit/Pong-v0", "subprocess"),
    ("RetroKit/Pong-v0", "inprocess"),
    ("RetroKit/Pong-Atari2600-v0", "subprocess"),
]
API_RETRO = "RetroKit/Pong-Atari2600-v0"  # single env: in this process, then its twin in a worker process


def _api_do(env, kind: str, call: str, value) -> None:
    vector = kind == "vector"
    if call == "step":
        env.step(value)
    elif call == "reset":
        env.reset(seed=value)
    elif call == "get_attr":
        env.get_attr(value) if vector else env.get_wrapper_attr(value)
    elif call == "call":
        env.call(value, 1)
    elif call == "set_attr":
        env.set_attr("sweep_marker", value)
    elif call == "call_step":
        env.call("step", value)


def _api_follow(env, kind: str) -> list:
    """The good calls after the case's call: three steps, a seeded reset, two steps; their observations."""
    steps = [[i % 3, (i + 1) % 3] if kind == "vector" else i % 3 for i in range(5)]
    out = [env.step(a)[0] for a in steps[:3]]
    out.append(env.reset(seed=4)[0])
    return out + [env.step(a)[0] for a in steps[3:]]


def _api_target(game: str, target: str, kind: str, call: str, expr: str, good: bool, envs: tuple) -> str:
    import numpy as np

    env, twin = envs
    for e in envs:
        e.reset(seed=3)
    space = env.single_action_space if kind == "vector" else env.action_space
    value = eval(expr, {"np": np, "N": API_N, "n": int(space.n), "U32": 2**32 - 1})  # the test's own text
    try:
        _api_do(env, kind, call, value)
        error = "no error"
    except Exception as exc:  # noqa: BLE001 - reported, then checked by the test
        error = f"{type(exc).__name__}: {exc}".replace("\n", "\\n")  # a second line shows as \n
    if good:
        _api_do(twin, kind, call, value)
    pairs = zip(_api_follow(env, kind), _api_follow(twin, kind), strict=True)
    same = all(np.array_equal(a, b) for a, b in pairs)
    return f"{game}\t{target}\t{error}\t{'same' if same else 'DIFFERENT'}"


def api_child(kind: str, call: str, expr: str, good: str) -> int:
    import gymnasium as gym

    import retro_atari_kit  # noqa: F401

    if kind == "vector":
        for game, backend in API_VECTOR:
            envs = tuple(gym.make_vec(game, num_envs=API_N, backend=backend) for _ in range(2))
            try:
                print(_api_target(game, backend, kind, call, expr, good == "good", envs), flush=True)
            finally:
                for env in envs:
                    env.close()
        return 0
    local = gym.make(API_RETRO)
    remote = gym.make(API_RETRO)  # this process has an emulator: the second env runs in a worker
    try:
        print(_api_target(API_RETRO, "in-process", kind, call, expr, good == "good", (local, remote)))
        print(_api_target(API_RETRO, "worker", kind, call, expr, good == "good", (remote, local)))
    finally:
        remote.close()
        local.close()
    return 0


if __name__ == "__main__":
    sys.exit(api_child(*sys.argv[1:]))
