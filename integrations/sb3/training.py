"""Training runs for ``retrokit train``: resolve a configuration, check memory, train, checkpoint, resume.

A run directory holds everything needed to look at the result (see docs/cli.md)::

    config.yaml            every resolved setting and hyperparameter
    model.zip              the final model (written when training finishes)
    checkpoints/           model_<steps>_steps.zip every --checkpoint-every steps and on Ctrl-C / SIGTERM
    monitor/               <rank>.monitor.csv per env: TRUE game scores (r, l, t); resume-<k>/ per resume
    progress.csv           SB3 logger table (parts of earlier segments merged in on resume)
    log.txt                SB3 logger, human readable
    events.out.tfevents.*  tensorboard
    evaluations.csv        periodic evaluations (--eval-every)
    orphaned-<k>/          logs past the checkpoint of a run that died without saving (see resume)

All model, checkpoint and config writes are atomic (write a temporary file, then ``os.replace``).
"""

from __future__ import annotations

import csv
import datetime as _dt
import glob
import inspect
import json
import math
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import yaml

import retro_atari_kit
from retro_atari_kit.cli.plot import ORPHANED_PREFIX, monitor_header

ALGOS: dict[str, tuple[str, str]] = {
    "ppo": ("stable_baselines3", "PPO"),
    "a2c": ("stable_baselines3", "A2C"),
    "dqn": ("stable_baselines3", "DQN"),
    "qrdqn": ("sb3_contrib", "QRDQN"),
}
NETWORKS = ("nature", "impala")
OFF_POLICY = ("dqn", "qrdqn")
CONFIG_MARKER = "retro-atari-kit run"
# Resident memory of one env worker (python + emulator + wrapper buffers), measured roughly on ALE.
ENV_WORKER_BYTES = 90 * 2**20
# Python, torch and SB3 in the training process.
BASE_PROCESS_BYTES = 600 * 2**20
# Keys of the resolved config handled by the kit itself rather than passed to the SB3 constructor.
NON_ALGO_KEYS = ("n_envs", "policy", "frame_stack", "n_timesteps", "env_kwargs", "normalize", "env_wrapper",
                 "parallel_play")  # issue 18: env play in its own process (integrations/sb3/parallel_play)


class TrainingError(ValueError):
    """A user error (bad argument, existing run dir, unreadable checkpoint, missing ROM): one line, a fix."""


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------


def available_algos() -> list[str]:
    """Algorithms usable here (``qrdqn`` only with sb3-contrib installed)."""
    out = []
    for name, (module, _) in ALGOS.items():
        if module == "stable_baselines3":
            out.append(name)
            continue
        try:
            __import__(module)
        except ImportError:
            continue
        out.append(name)
    return out


def algo_class(algo: str) -> type:
    """The SB3 class of ``algo`` (``ppo``, ``a2c``, ``dqn``, ``qrdqn``)."""
    if algo not in ALGOS:
        raise TrainingError(f"unknown algo {algo!r}; choose one of {', '.join(available_algos())}")
    module, name = ALGOS[algo]
    try:
        mod = __import__(module, fromlist=[name])
    except ImportError as exc:
        raise TrainingError(f"algo {algo!r} needs {module}: pip install sb3-contrib") from exc
    return getattr(mod, name)


def parse_timesteps(text: str | int | float) -> int:
    """``2e6``, ``2000000``, ``2_000_000`` or ``500k`` / ``2M`` -> int; raises TrainingError."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip().replace("_", "").lower()
        mult = 1.0
        if s.endswith("k"):
            s, mult = s[:-1], 1e3
        elif s.endswith("m"):
            s, mult = s[:-1], 1e6
        try:
            value = float(s) * mult
        except ValueError:
            raise TrainingError(f"--timesteps {text!r} is not a number; use e.g. 2e6 or 100000") from None
    if not math.isfinite(value) or value < 1 or value != int(value):
        raise TrainingError(f"--timesteps {text!r} must be a positive whole number, e.g. 2e6")
    return int(value)


def parse_set(items: Iterable[str]) -> dict[str, Any]:
    """``["n_steps=256", "policy_kwargs.net_arch=[64]"]`` -> nested dict; values parsed as YAML."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key):
            raise TrainingError(f"malformed --set {item!r}; use --set key=value, "
                                "e.g. --set learning_rate=2.5e-4")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            raise TrainingError(f"malformed value in --set {item!r}; use YAML, e.g. [64, 64]") from None
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise TrainingError(f"--set {item!r} conflicts with another --set for {part!r}")
        node[parts[-1]] = value
    return out


def parse_env_kwargs(items: Iterable[str]) -> dict[str, Any]:
    """``["crop_score=true", "frame_skip=4"]`` -> dict with YAML-parsed values."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise TrainingError(f"malformed --env-kwarg {item!r}; use --env-kwarg name=value, "
                                "e.g. crop_score=true")
        try:
            out[key] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            raise TrainingError(f"malformed value in --env-kwarg {item!r}; use YAML syntax") from None
    return out


def _deep_update(base: dict, new: dict) -> dict:
    out = dict(base)
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_update(out[k], v)
        else:
            out[k] = v
    return out


def _algo_params(algo: str) -> set[str]:
    cls = algo_class(algo)
    return {p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "env", "kwargs")}


def load_preset(algo: str, preset: str) -> dict[str, Any]:
    """The kit's tuned hyperparameters for ``algo`` (``presets.get_preset``), as a plain dict."""
    from retro_atari_kit.integrations.sb3.presets import get_preset

    try:
        return get_preset(algo, preset)
    except KeyError as exc:
        raise TrainingError(exc.args[0]) from None


@dataclass
class TrainSpec:
    """What the user asked for (CLI arguments), before resolution."""

    algo: str
    env_id: str
    network: str = "nature"
    timesteps: int = 1_000_000
    n_envs: int | None = None
    seed: int = 0
    device: str = "auto"
    preset: str = "default"
    overrides: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    run_dir: str | None = None
    eval_every: int = 0
    eval_episodes: int = 5
    checkpoint_every: int = 100_000
    save_replay_buffer: bool = False
    backend: str = "auto"
    command: str = ""


def check_env_id(env_id: str) -> None:
    """Raise TrainingError naming close matches when ``env_id`` is not registered."""
    if env_id in gym.registry:
        return
    import difflib

    ids = [k for k in gym.registry if k.startswith("RetroKit/")]
    close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see `retrokit list`"
    raise TrainingError(f"unknown env {env_id!r}{hint}")


def resolve_config(spec: TrainSpec) -> dict[str, Any]:
    """Resolve preset + overrides + CLI into the full configuration written to config.yaml."""
    algo = spec.algo.lower()
    algo_class(algo)
    if spec.network not in NETWORKS:
        raise TrainingError(f"unknown network {spec.network!r}; choose one of {', '.join(NETWORKS)}")
    if spec.device not in ("auto", "cpu", "cuda") and not spec.device.startswith("cuda:"):
        raise TrainingError(f"unknown device {spec.device!r}; choose auto, cpu or cuda")
    check_env_id(spec.env_id)
    hp = _deep_update(load_preset(algo, spec.preset), spec.overrides)
    allowed = _algo_params(algo) | set(NON_ALGO_KEYS)
    bad = sorted(k for k in hp if k not in allowed)
    if bad:
        import difflib

        close = difflib.get_close_matches(bad[0], sorted(allowed), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise TrainingError(f"unknown hyperparameter {bad[0]!r} for {algo}{hint} (see docs/cli.md)")
    for key in ("env", "policy_class"):
        hp.pop(key, None)
    if hp.get("parallel_play"):  # issue 18: validate the parallel-play options before anything is written
        from retro_atari_kit.integrations.sb3.parallel_play import check_parallel_play

        try:
            check_parallel_play(algo, hp["parallel_play"])
        except ValueError as exc:
            raise TrainingError(str(exc)) from None
    if hp.get("frame_stack") not in (None, 4):
        # frame stacking is an env kwarg of the kit's stack, not a second wrapper
        spec.env_kwargs.setdefault("frame_stack", hp["frame_stack"])
    hp.pop("frame_stack", None)
    env_kwargs = {**hp.pop("env_kwargs", {}), **spec.env_kwargs}
    preset_n_envs = hp.pop("n_envs", None)
    for k in ("n_timesteps", "normalize", "env_wrapper"):
        hp.pop(k, None)
    n_envs = spec.n_envs or os.cpu_count() or 1  # the default: one env per CPU
    if not spec.n_envs and hp.get("parallel_play") and preset_n_envs:  # issue 18: the preset's envs (one
        n_envs = preset_n_envs  # play process steps them all, and n_envs sets the updates per env step)
    if int(n_envs) < 1:
        raise TrainingError(f"--n-envs must be >= 1, got {n_envs}")
    if spec.checkpoint_every < 0 or spec.eval_every < 0:
        raise TrainingError("--checkpoint-every and --eval-every must be >= 0 (0 disables)")
    return {
        "kind": CONFIG_MARKER,
        "kit_version": retro_atari_kit.__version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": spec.command,
        "algo": algo,
        "env_id": spec.env_id,
        "network": spec.network,
        "preset": spec.preset,
        "timesteps": int(spec.timesteps),
        "n_envs": int(n_envs),
        "seed": int(spec.seed),
        "device": spec.device,
        "backend": spec.backend,
        "env_kwargs": env_kwargs,
        "preset_n_envs": preset_n_envs,
        "hyperparams": hp,
        "eval_every": int(spec.eval_every),
        "eval_episodes": int(spec.eval_episodes),
        "checkpoint_every": int(spec.checkpoint_every),
        "save_replay_buffer": bool(spec.save_replay_buffer),
    }


def default_run_dir(config: dict[str, Any], root: str = "runs") -> str:
    """``runs/<env>-<algo>-<network>-<seed>-<time>``."""
    env = config["env_id"].split("/")[-1]
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join(root, f"{env}-{config['algo']}-{config['network']}-{config['seed']}-{stamp}")


# --------------------------------------------------------------------------------------------------
# Hyperparameters -> SB3 objects
# --------------------------------------------------------------------------------------------------


def algo_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for the SB3 constructor: schedules and classes resolved, the kit's extractor set."""
    from retro_atari_kit.integrations.sb3.presets import to_sb3_kwargs

    try:
        return to_sb3_kwargs(config["hyperparams"], network=config["network"])
    except ValueError as exc:
        raise TrainingError(str(exc)) from None


# --------------------------------------------------------------------------------------------------
# Memory estimate
# --------------------------------------------------------------------------------------------------


def estimate_memory(config: dict[str, Any], obs_space: gym.Space) -> dict[str, int]:
    """Bytes of RAM the run needs: buffers, env workers, the training process (and VRAM if on CUDA)."""
    obs_bytes = int(np.prod(obs_space.shape)) * np.dtype(obs_space.dtype).itemsize
    hp = config["hyperparams"]
    n_envs = config["n_envs"]
    est: dict[str, int] = {}
    if config["algo"] in OFF_POLICY:
        size = int(hp.get("buffer_size", 1_000_000))
        rb_cls = str(hp.get("replay_buffer_class", ""))
        if "Compact" in rb_cls:
            # one frame per transition (stack rebuilt on sampling)
            frame = obs_bytes // max(1, obs_space.shape[0])
            est["replay buffer"] = size * (frame + 16)
        else:
            copies = 1 if hp.get("optimize_memory_usage") else 2
            est["replay buffer"] = size * (copies * obs_bytes + 16)
    else:
        n_steps = int(hp.get("n_steps", 5 if config["algo"] == "a2c" else 2048))
        est["rollout buffer"] = n_steps * n_envs * (obs_bytes + 7 * 4)
        # minibatch as float32 on the device
        batch = int(hp.get("batch_size", n_steps * n_envs))
        est["minibatch tensors"] = batch * obs_bytes * 4 * 3
    est["env workers"] = n_envs * ENV_WORKER_BYTES
    est["training process"] = BASE_PROCESS_BYTES
    est["total"] = sum(est.values())
    return est


def device_is_cuda(device: str) -> bool:
    if device.startswith("cuda"):
        return True
    if device == "auto":
        import torch

        return torch.cuda.is_available()
    return False


def format_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit in ("B", "KB") else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def check_memory(est: dict[str, int], force: bool) -> str:
    """Raise TrainingError if the estimate exceeds available RAM (unless ``force``); returns a summary."""
    import psutil

    avail = psutil.virtual_memory().available
    parts = ", ".join(f"{k} {format_bytes(v)}" for k, v in est.items() if k != "total")
    summary = f"estimated RAM {format_bytes(est['total'])} ({parts}); available {format_bytes(avail)}"
    if est["total"] > avail and not force:
        raise TrainingError(
            f"run needs ~{format_bytes(est['total'])} RAM but only {format_bytes(avail)} is available; "
            "use --set buffer_size=... / --n-envs ... to shrink it, or --force to try anyway"
        )
    return summary


# --------------------------------------------------------------------------------------------------
# Envs
# --------------------------------------------------------------------------------------------------


def probe_env(env_id: str, env_kwargs: dict[str, Any]) -> tuple[gym.Space, gym.Space]:
    """Build one env to validate kwargs and ROM presence; returns (observation_space, action_space)."""
    try:
        env = gym.make(env_id, **env_kwargs)
    except (ValueError, TypeError, FileNotFoundError, KeyError, RuntimeError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TrainingError(f"cannot make {env_id}: {msg}") from exc
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def check_model_builds(config: dict[str, Any]) -> None:
    """Build the SB3 model once on a single env, so a bad ``--set`` value (a wrong type or shape, an
    option the algorithm rejects) is one clear TrainingError before any file of the run is written."""
    import warnings

    from stable_baselines3.common.vec_env import DummyVecEnv

    kwargs = algo_kwargs(config)
    policy = kwargs.pop("policy")
    if "buffer_size" in kwargs:
        kwargs["buffer_size"] = min(int(kwargs["buffer_size"]), 1_000)  # the probe needs no real replay
    venv = DummyVecEnv([lambda: gym.make(config["env_id"], **config["env_kwargs"])])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. PPO's batch-size note for one env
            algo_class(config["algo"])(policy, venv, device="cpu", verbose=0, **kwargs)
    except (TypeError, ValueError, KeyError, AssertionError, RuntimeError) as exc:
        msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise TrainingError(f"cannot build {config['algo']} with these hyperparameters: {msg}; "
                            "check the --set values (see docs/cli.md)") from exc
    finally:
        venv.close()


def make_train_env(config: dict[str, Any], monitor_dir: str | None, seed: int | None = None,
                   n_envs: int | None = None) -> Any:
    """The SB3 VecEnv for training (the kit's launcher: fastest backend, true-score monitor CSVs)."""
    from retro_atari_kit.integrations.sb3.launcher import make_vec_env

    return make_vec_env(
        config["env_id"],
        n_envs=n_envs or config["n_envs"],
        seed=config["seed"] if seed is None else seed,
        backend=config.get("backend", "auto"),
        monitor_dir=monitor_dir,
        **config["env_kwargs"],
    )


# --------------------------------------------------------------------------------------------------
# Atomic writes, checkpoints
# --------------------------------------------------------------------------------------------------


def atomic_write_text(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_save_model(model: Any, path: str) -> None:
    """``model.save`` to a temporary ``.zip`` in the same directory, then rename over ``path``."""
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.tmp-{os.getpid()}.zip")
    model.save(tmp)
    os.replace(tmp, path)


def atomic_save_replay(model: Any, path: str) -> None:
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.tmp-{os.getpid()}.pkl")
    model.save_replay_buffer(tmp)
    os.replace(tmp, path)


_CKPT = re.compile(r"model_(\d+)_steps\.zip$")


def checkpoint_path(run_dir: str, steps: int) -> str:
    return os.path.join(run_dir, "checkpoints", f"model_{steps}_steps.zip")


def list_checkpoints(run_dir: str) -> list[tuple[int, str]]:
    """``[(steps, path), ...]`` sorted by steps."""
    out = []
    for p in glob.glob(os.path.join(run_dir, "checkpoints", "model_*_steps.zip")):
        m = _CKPT.search(os.path.basename(p))
        if m:
            out.append((int(m.group(1)), p))
    return sorted(out)


def latest_model(run_dir: str) -> tuple[str, int | None]:
    """The newest model of a run: the latest checkpoint or model.zip, whichever has more steps."""
    ckpts = list_checkpoints(run_dir)
    final = os.path.join(run_dir, "model.zip")
    if os.path.exists(final):
        steps = ckpts[-1][0] if ckpts else None
        info = read_steps_of(final)
        if steps is None or (info is not None and info >= steps):
            return final, info
    if ckpts:
        return ckpts[-1][1], ckpts[-1][0]
    raise TrainingError(f"no model.zip or checkpoint in {run_dir}; train first (retrokit train ...)")


def read_steps_of(model_zip: str) -> int | None:
    """num_timesteps stored in an SB3 zip (None if unreadable)."""
    import zipfile

    try:
        with zipfile.ZipFile(model_zip) as zf:
            data = json.loads(zf.read("data"))
        return int(data.get("num_timesteps"))
    except Exception:
        return None


def load_config(run_dir: str) -> dict[str, Any]:
    """config.yaml of a run made by the kit; TrainingError if absent or not the kit's."""
    path = os.path.join(run_dir, "config.yaml")
    if not os.path.isfile(path):
        raise TrainingError(f"{run_dir} is not a retrokit run dir (no config.yaml); "
                            "pass a run dir made by retrokit train")
    try:
        with open(path) as fh:
            cfg = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as exc:
        raise TrainingError(f"cannot read {path}: {exc}; restore it or start a new run") from exc
    if not isinstance(cfg, dict) or cfg.get("kind") != CONFIG_MARKER:
        raise TrainingError(f"{path} was not written by retrokit train; pass a run dir made by the kit")
    return cfg


def find_run_dir(model_path: str) -> str | None:
    """The kit run dir a model file belongs to (model.zip or checkpoints/*.zip), or None."""
    d = os.path.dirname(os.path.abspath(model_path))
    for cand in (d, os.path.dirname(d)):
        try:
            load_config(cand)
            return cand
        except TrainingError:
            continue
    return None


def load_model(path: str, env: Any = None, device: str = "auto", algo: str | None = None,
               cls: type | None = None) -> Any:
    """Load an SB3 zip with the class recorded in the run config, or ``cls`` (TrainingError if unreadable)."""
    import zipfile

    if algo is None:
        run = find_run_dir(path)
        algo = load_config(run)["algo"] if run else None
    classes = [algo] if algo else list(available_algos())
    if not zipfile.is_zipfile(path):
        raise TrainingError(f"cannot read checkpoint {path}: not an SB3 zip file; use an older checkpoint")
    last: Exception | None = None
    for a in classes:
        try:
            return (cls or algo_class(a)).load(path, env=env, device=device)
        except Exception as exc:  # noqa: BLE001 - report the cause in one line
            last = exc
    raise TrainingError(f"cannot read checkpoint {path}: {str(last).splitlines()[0] if last else '?'}; "
                        "use an older checkpoint in checkpoints/")


# --------------------------------------------------------------------------------------------------
# Callbacks
# --------------------------------------------------------------------------------------------------


def _callbacks():
    from stable_baselines3.common.callbacks import BaseCallback

    class StopOnSignal(BaseCallback):
        """Stops training (``_on_step`` returns False) once SIGINT/SIGTERM was received."""

        def __init__(self, flag: dict):
            super().__init__()
            self.flag = flag

        def _on_step(self) -> bool:
            return not self.flag["stop"]

    class Checkpoint(BaseCallback):
        """Saves ``checkpoints/model_<steps>_steps.zip`` atomically every ``every`` agent steps."""

        def __init__(self, run_dir: str, every: int, save_replay: bool):
            super().__init__()
            self.run_dir, self.every, self.save_replay = run_dir, every, save_replay
            self.next_at = 0

        def _on_training_start(self) -> None:
            self.next_at = (self.num_timesteps // self.every + 1) * self.every if self.every else 0

        def _on_step(self) -> bool:
            if self.every and self.num_timesteps >= self.next_at:
                save_checkpoint(self.model, self.run_dir, self.save_replay)
                self.next_at = (self.num_timesteps // self.every + 1) * self.every
            return True

    class Progress(BaseCallback):
        """tqdm bar: agent steps, steps/s, mean true score of the last 100 finished games."""

        def __init__(self, total: int):
            super().__init__()
            self.total = total
            self.bar = None
            self.t0 = 0.0
            self.s0 = 0
            self.last = 0

        def _on_training_start(self) -> None:
            from tqdm import tqdm

            tty = sys.stderr.isatty()
            self.bar = tqdm(total=self.total, initial=self.num_timesteps, unit="step", dynamic_ncols=True,
                            mininterval=0.5 if tty else 30.0, file=sys.stderr, smoothing=0.05)
            self.t0, self.s0, self.last = time.perf_counter(), self.num_timesteps, self.num_timesteps

        def _on_step(self) -> bool:
            assert self.bar is not None
            self.bar.update(self.num_timesteps - self.last)
            self.last = self.num_timesteps
            if self.n_calls % 50 == 0:
                buf = self.model.ep_info_buffer
                score = f"{np.mean([e['r'] for e in buf]):.1f}" if buf else "n/a"
                sps = (self.num_timesteps - self.s0) / max(1e-9, time.perf_counter() - self.t0)
                self.bar.set_postfix_str(f"{sps:.0f} steps/s, score(100) {score}, games {len(buf)}",
                                         refresh=False)
            return True

        def _on_training_end(self) -> None:
            if self.bar is not None:
                self.bar.close()

    class PeriodicEval(BaseCallback):
        """Every ``every`` steps: ``episodes`` games true scores to evaluations.csv."""

        def __init__(self, config: dict, run_dir: str, every: int, episodes: int):
            super().__init__()
            self.config, self.run_dir, self.every, self.episodes = config, run_dir, every, episodes
            self.next_at = 0

        def _on_training_start(self) -> None:
            self.next_at = (self.num_timesteps // self.every + 1) * self.every

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_at:
                from retro_atari_kit.integrations.sb3.evaluation import evaluate_model

                scores = evaluate_model(self.model, self.config["env_id"], self.config["env_kwargs"],
                                        episodes=self.episodes, seed=self.config["seed"] + 10_000,
                                        deterministic=False)
                self.logger.record("eval/mean_score", float(np.mean(scores)))
                self.logger.record("eval/std_score", float(np.std(scores)))
                path = os.path.join(self.run_dir, "evaluations.csv")
                new = not os.path.exists(path)
                with open(path, "a", newline="") as fh:
                    w = csv.writer(fh)
                    if new:
                        w.writerow(["steps", "mean", "std", "min", "max", "episodes"])
                    w.writerow([self.num_timesteps, np.mean(scores), np.std(scores), np.min(scores),
                                np.max(scores), len(scores)])
                self.next_at = (self.num_timesteps // self.every + 1) * self.every
            return True

    return StopOnSignal, Checkpoint, Progress, PeriodicEval


def save_checkpoint(model: Any, run_dir: str, save_replay: bool = False) -> str:
    """Atomically save ``checkpoints/model_<steps>_steps.zip`` (+ replay buffer for DQN if asked)."""
    os.makedirs(os.path.join(run_dir, "checkpoints"), exist_ok=True)
    path = checkpoint_path(run_dir, int(model.num_timesteps))
    atomic_save_model(model, path)
    if save_replay and getattr(model, "replay_buffer", None) is not None:
        atomic_save_replay(model, os.path.join(run_dir, "checkpoints", "replay_buffer.pkl"))
    return path


# --------------------------------------------------------------------------------------------------
# Logger (appending on resume)
# --------------------------------------------------------------------------------------------------


def _make_logger(run_dir: str, segment: int):
    from stable_baselines3.common.logger import (
        CSVOutputFormat,
        HumanOutputFormat,
        Logger,
        TensorBoardOutputFormat,
    )

    human = HumanOutputFormat(open(os.path.join(run_dir, "log.txt"), "a"))  # append: resumes add to it
    human.own_file = True  # so Logger.close() closes the handle we opened
    csv_name = "progress.csv" if segment == 0 else f"progress.part{segment}.csv"
    formats = [human, CSVOutputFormat(os.path.join(run_dir, csv_name))]
    try:
        formats.append(TensorBoardOutputFormat(run_dir))
    except ImportError:
        pass
    return Logger(folder=run_dir, output_formats=formats)


def merge_progress(run_dir: str) -> None:
    """Fold ``progress.part<k>.csv`` of resumed segments into progress.csv (union of columns)."""
    parts = sorted(glob.glob(os.path.join(run_dir, "progress.part*.csv")),
                   key=lambda p: int(re.search(r"part(\d+)", p).group(1)))
    if not parts:
        return
    main = os.path.join(run_dir, "progress.csv")
    rows: list[dict] = []
    cols: list[str] = []
    for p in [main, *parts]:
        if not os.path.exists(p):
            continue
        with open(p, newline="") as fh:
            r = csv.DictReader(fh)
            for c in r.fieldnames or []:
                if c not in cols:
                    cols.append(c)
            rows.extend(r)
    tmp = f"{main}.tmp-{os.getpid()}"
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, main)
    for p in parts:
        os.remove(p)


def _partition(lines: list[str], n_header: int, keep: Callable[[str], bool]) -> tuple[list[str], list[str]]:
    """(header + kept lines, dropped lines) of a text table's lines."""
    kept, dropped = lines[:n_header], []
    for line in lines[n_header:]:
        (kept if keep(line) else dropped).append(line)
    return kept, dropped


def split_monitor_csv(path: str, saved_at: float) -> tuple[list[str], list[str]]:
    """Lines of a monitor CSV: (header + games that ended by ``saved_at``, games that ended later)."""
    with open(path, newline="") as fh:
        lines = fh.readlines()
    t_start, cols, n_header = monitor_header(lines)
    if t_start is None or "t" not in cols:
        return lines, []  # not ours to judge: keep everything
    t_col = cols.index("t")

    def ended_in_time(line: str) -> bool:
        try:
            return t_start + float(line.split(",")[t_col]) <= saved_at
        except (ValueError, IndexError):
            return True  # malformed lines are kept

    return _partition(lines, n_header, ended_in_time)


def set_aside_orphaned_logs(run_dir: str, steps: int, saved_at: float) -> str | None:
    """Move log rows written after the checkpoint a resume starts from into ``orphaned-<k>/``.

    A run that died without saving (SIGKILL, power loss, OOM) logged games and updates past its last
    checkpoint. The resumed model does not descend from them, so left in place they would double-count
    that stretch in ``retrokit plot`` and progress.csv. Rows of ``progress.csv`` past ``steps`` and
    monitor games that ended after ``saved_at`` (the checkpoint's write time) are removed from the live
    files; the untouched originals are kept under ``orphaned-<k>/``. Returns a one-line summary, or None
    if nothing was logged after the checkpoint (the usual case: Ctrl-C / SIGTERM save one at the stop).
    """
    rewrites: dict[str, list[str]] = {}
    dropped_games = dropped_rows = 0
    for path in sorted(glob.glob(os.path.join(run_dir, "monitor", "**", "*.monitor.csv"), recursive=True)):
        kept, dropped = split_monitor_csv(path, saved_at)
        if dropped:
            rewrites[path], dropped_games = kept, dropped_games + len(dropped)
    progress = os.path.join(run_dir, "progress.csv")
    if os.path.exists(progress):
        with open(progress, newline="") as fh:
            lines = fh.readlines()
        cols = next(csv.reader(lines[:1]), [])
        if "time/total_timesteps" in cols:
            col = cols.index("time/total_timesteps")

            def up_to_checkpoint(line: str) -> bool:
                try:
                    return float(next(csv.reader([line]))[col]) <= steps
                except (ValueError, IndexError, StopIteration):
                    return True  # malformed lines are kept

            kept, dropped = _partition(lines, 1, up_to_checkpoint)
            if dropped:
                rewrites[progress], dropped_rows = kept, len(dropped)
    if not rewrites:
        return None
    k = 1 + len(glob.glob(os.path.join(run_dir, ORPHANED_PREFIX + "*")))
    aside = os.path.join(run_dir, f"{ORPHANED_PREFIX}{k}")
    for path, lines in rewrites.items():
        backup = os.path.join(aside, os.path.relpath(path, run_dir))
        os.makedirs(os.path.dirname(backup), exist_ok=True)
        shutil.copy2(path, backup)
        atomic_write_text(path, "".join(lines))
    return (f"the run had logged past its last checkpoint ({steps} steps): set aside {dropped_games} games "
            f"and {dropped_rows} progress rows; originals in {aside}")


# --------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------


LOCK = ".train.pid"


def lock_owner(run_dir: str) -> int | None:
    """pid of a live ``retrokit train`` process working on ``run_dir``, else None."""
    try:
        with open(os.path.join(run_dir, LOCK)) as fh:
            pid = int(fh.read().strip())
    except (OSError, ValueError):
        return None
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def _prepare_new_run_dir(run_dir: str, force: bool) -> None:
    if os.path.exists(run_dir):
        if not force:
            raise TrainingError(f"run dir {run_dir} exists; use --resume {run_dir} to continue it, "
                                "--force to overwrite it, or another --run-dir")
        is_run = os.path.isfile(os.path.join(run_dir, "config.yaml"))
        if not os.path.isdir(run_dir) or (os.listdir(run_dir) and not is_run):
            raise TrainingError(f"--force refuses to clear {run_dir}: it is not a retrokit run dir; "
                                "pick another --run-dir")
        shutil.rmtree(run_dir)
    os.makedirs(run_dir)


def precision_of(model: Any) -> str:
    """One line saying in which precision the model's CNN runs (bf16 autocast only where it is native)."""
    from retro_atari_kit.integrations.sb3.extractors import _KitExtractor

    extractor = next((m for m in model.policy.modules() if isinstance(m, _KitExtractor)), None)
    if extractor is None or not extractor.autocast:
        return f"precision: float32 on {model.device}"
    if extractor.runs_in_bf16(model.device):
        return f"precision: CNN under bf16 autocast ({model.device} has native bf16); heads, losses float32"
    return (f"precision: float32 on {model.device} (autocast='bf16' ignored: no native bf16 here, and "
            "emulated bf16 is slower than float32)")


def describe(config: dict[str, Any], run_dir: str, est: dict[str, int] | None = None) -> str:
    """The resolved configuration as printed before training."""
    lines = [f"run dir: {run_dir}", yaml.safe_dump(config, sort_keys=False).rstrip()]
    return "\n".join(lines)


def prepare(spec: TrainSpec, force: bool = False, out: Callable[[str], None] = print) -> tuple[dict, str]:
    """Resolve, validate (env, ROM, memory) and create the run dir of a new run. Nothing is written before
    every check passed."""
    config = resolve_config(spec)
    obs_space, _ = probe_env(config["env_id"], config["env_kwargs"])
    check_model_builds(config)
    est = estimate_memory(config, obs_space)
    run_dir = spec.run_dir or default_run_dir(config)
    summary = check_memory(est, force)
    if os.path.exists(run_dir) and not force:
        _prepare_new_run_dir(run_dir, force)  # raises
    out(describe(config, run_dir))
    if config.get("preset_n_envs") and config["preset_n_envs"] != config["n_envs"]:
        out(f"note: preset {config['preset']!r} was tuned with n_envs={config['preset_n_envs']}; "
            f"using {config['n_envs']} (--n-envs {config['preset_n_envs']} to match)")
    out(summary)
    if device_is_cuda(config["device"]):
        out(f"estimated VRAM ~{format_bytes(est.get('minibatch tensors', 0) + 200 * 2**20)}")
    _prepare_new_run_dir(run_dir, force)
    atomic_write_text(os.path.join(run_dir, "config.yaml"), yaml.safe_dump(config, sort_keys=False))
    return config, run_dir


def prepare_resume(run_dir: str, timesteps: int | None = None,
                   out: Callable[[str], None] = print) -> tuple[dict, str, str]:
    """Read config + latest checkpoint of ``run_dir``; returns (config, run_dir, checkpoint path).

    ``timesteps`` sets a new total (recorded in config.yaml); otherwise the run continues to its own total.
    """
    if not os.path.isdir(run_dir):
        raise TrainingError(f"--resume {run_dir}: no such run dir")
    config = load_config(run_dir)
    owner = lock_owner(run_dir)
    if owner is not None:
        raise TrainingError(f"--resume {run_dir}: the run is still training (pid {owner}); stop it first "
                            f"(kill -TERM {owner} saves a checkpoint)")
    ckpts = list_checkpoints(run_dir)
    if not ckpts:
        raise TrainingError(f"--resume {run_dir}: no checkpoint in {run_dir}/checkpoints; start a new run")
    path = ckpts[-1][1]
    import zipfile

    if not zipfile.is_zipfile(path):
        raise TrainingError(f"cannot read checkpoint {path}; delete it to resume from the previous one")
    if read_steps_of(path) is None:
        raise TrainingError(f"cannot read checkpoint {path}; delete it to resume from the previous one")
    if timesteps is not None and timesteps != config["timesteps"]:
        config["timesteps"] = int(timesteps)
        atomic_write_text(os.path.join(run_dir, "config.yaml"), yaml.safe_dump(config, sort_keys=False))
    out(describe(config, run_dir))
    out(f"resuming from {path} ({ckpts[-1][0]} steps)")
    return config, run_dir, path


def train(config: dict[str, Any], run_dir: str, resume_from: str | None = None,
          out: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or continue) the run. Returns ``{"steps", "interrupted", "model"}``; never raises on Ctrl-C."""
    import torch

    algo = config["algo"]
    segment = 0
    monitor_dir = os.path.join(run_dir, "monitor")
    if resume_from is not None:
        segment = 1 + len(glob.glob(os.path.join(monitor_dir, "resume-*")))
        monitor_dir = os.path.join(monitor_dir, f"resume-{segment}")
        if os.path.exists(os.path.join(run_dir, "progress.csv")):
            merge_progress(run_dir)
        start = read_steps_of(resume_from) or 0
        aside = set_aside_orphaned_logs(run_dir, start, os.path.getmtime(resume_from))
        if aside:
            out(aside)
    os.makedirs(monitor_dir, exist_ok=True)
    atomic_write_text(os.path.join(run_dir, LOCK), str(os.getpid()))
    n_threads = max(1, min(torch.get_num_threads(), os.cpu_count() or 1))
    torch.set_num_threads(n_threads)

    seed = config["seed"] + 1000 * segment  # fresh env randomness after a resume, same config
    # issue 18: `parallel_play` in the preset -> envs in a play process (integrations/sb3/parallel_play)
    from retro_atari_kit.integrations.sb3.parallel_play import PlayerDiedError, play_class_and_env

    play = config["hyperparams"].get("parallel_play")
    cls, venv = (play_class_and_env(algo_class(algo), play, config, monitor_dir, seed) if play else
                 (algo_class(algo), make_train_env(config, monitor_dir, seed=seed)))
    try:
        if resume_from is None:
            kwargs = algo_kwargs(config)
            policy = kwargs.pop("policy")
            model = cls(policy, venv, seed=config["seed"], device=config["device"], verbose=0,
                                     **kwargs)
        else:
            model = load_model(resume_from, env=venv, device=config["device"], algo=algo, cls=cls)
            replay = os.path.join(run_dir, "checkpoints", "replay_buffer.pkl")
            if algo in OFF_POLICY and os.path.exists(replay):
                model.load_replay_buffer(replay)
                out(f"replay buffer restored from {replay}")
        model.set_logger(_make_logger(run_dir, segment))
        out(precision_of(model))

        flag = {"stop": False}

        def handler(signum, frame):  # noqa: ARG001
            flag["stop"] = True

        old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        StopOnSignal, Checkpoint, Progress, PeriodicEval = _callbacks()
        cbs = [StopOnSignal(flag), Progress(config["timesteps"])]
        if config["checkpoint_every"]:
            cbs.append(Checkpoint(run_dir, config["checkpoint_every"], config["save_replay_buffer"]))
        if config["eval_every"]:
            cbs.append(PeriodicEval(config, run_dir, config["eval_every"], config["eval_episodes"]))
        remaining = config["timesteps"] - int(model.num_timesteps)
        try:
            if remaining > 0:
                model.learn(total_timesteps=remaining, callback=cbs, reset_num_timesteps=False,
                            log_interval=1 if algo in ("ppo",) else (100 if algo == "a2c" else 4))
        except PlayerDiedError as exc:  # issue 18: dead play process -> checkpoint, then one line naming it
            for cb in cbs:
                cb.on_training_end()  # closes the progress bar, so the error is a line of its own
            path = save_checkpoint(model, run_dir, True)
            raise TrainingError(f"{exc}; checkpoint {path}; resume with: retrokit train --resume {run_dir}") \
                from None
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            model.logger.close()  # flush and close log.txt / progress csv / tensorboard before merging
        steps = int(model.num_timesteps)
        if flag["stop"]:
            path = save_checkpoint(model, run_dir, config["save_replay_buffer"] or algo in OFF_POLICY)
            merge_progress(run_dir)
            out(f"interrupted at {steps} steps; checkpoint {path}")
            out(f"resume with: retrokit train --resume {run_dir}")
            return {"steps": steps, "interrupted": True, "model": path}
        save_checkpoint(model, run_dir, config["save_replay_buffer"])
        final = os.path.join(run_dir, "model.zip")
        atomic_save_model(model, final)
        merge_progress(run_dir)
        buf = model.ep_info_buffer
        score = f"{np.mean([e['r'] for e in buf]):.2f} over the last {len(buf)} games" if buf else "n/a"
        out(f"done: {steps} steps, recent true score {score}")
        out(f"results in {run_dir}: model.zip, config.yaml, checkpoints/, monitor/, progress.csv, log.txt, "
            "tensorboard events")
        out(f"next: retrokit eval {run_dir} | retrokit plot {run_dir} | retrokit record {run_dir} "
            "--out agent.mp4")
        return {"steps": steps, "interrupted": False, "model": final}
    finally:
        venv.close()
        try:
            os.remove(os.path.join(run_dir, LOCK))
        except OSError:
            pass
