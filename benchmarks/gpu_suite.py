"""The GPU suite: on a CUDA machine, one command runs the CUDA-only tests and the GPU benchmarks (< 10 min).

Sections, each with its own time budget (rounds alternate the contenders until the budget is spent, at
least one; medians of the rounds and of the per-round ratios are reported, ``benchmarks/harness.py``), all
in one run so the ratios are side by side:

1. **tests**: ``pytest tests/gpu/test_cuda.py`` (every model, SB3 policy and preset on ``cuda``, bf16
   autocast, the compact replay's pinned / non-blocking copies against the CPU path).
2. **env**: env steps/s on Pong with random actions at 8 / 16 / 32 / 64 envs: the kit (``gym.make_vec``,
   backend auto; its native backend in one process, ``shards=1``; and that with ``cv2.resize`` instead of
   the exact resize kernel), SB3
   ``SubprocVecEnv(make_atari_env)`` + ``VecFrameStack``, EnvPool (if installed; also its async API,
   batches of N/2) and raw ale-py ``AtariVectorEnv`` (no kit semantics: the ceiling), with the functions of
   ``vec_throughput.py``.
3. **ppo**: PPO training steps/s at the ``gpu`` preset (32 envs x 128 steps, batch 1024), Nature and Impala:
   plain SB3 (``SubprocVecEnv``, SB3's ``CnnPolicy`` and buffer), the kit, and the kit with the CNN under
   bf16 autocast where the GPU has native bf16 (functions of ``ppo_throughput.py``).
4. **ppo-fast**: the ``gpu`` preset's learner, ``FastPPO`` (rollout, GAE and minibatches on the device; the
   acting step and each update compiled and replayed as CUDA graphs), eager, with CUDA graphs, and as
   shipped (compile + graphs), against plain SB3 and SB3's ``PPO`` with the kit's env, Nature and Impala, at
   the shape of the LeanRL anchor (32 envs x 128 steps, 4 epochs x 4 minibatches of 1024,
   ``../shared/gpu/``); the graph rows on CUDA only.
5. **dqn**: DQN training steps/s on Pong, 1 env, after a random prefill: plain SB3, the kit's synchronous
   ``pong-dqn``, ``pong-dqn-fast`` without and with its play process (``dqn_fast_throughput.py``).
6. **profile**: where one rollout and one update of the ``gpu`` preset's FastPPO (as shipped, at its own
   shape) spend their time: the env's share of the rollout (``step_async`` + ``step_wait``: what the
   learner waits for), the update, the bound on what stepping the envs while the GPU acts and learns could
   gain, and torch profiler's top operators of one rollout and update.

The report (device, torch / CUDA versions, cores, then one markdown table per section) goes to stdout and
to ``--out``. Exit status 1 when a test failed or a measurement raised (the report is still written).

Without a CUDA device it prints one line and exits 0, measuring nothing. ``--cpu-smoke`` runs every
section on the CPU with tiny sizes and budgets: it checks the suite's own code (CI does), its figures
mean nothing. Run by hand::

    python benchmarks/gpu_suite.py --out gpu_suite.md
    python benchmarks/gpu_suite.py --cpu-smoke --out /tmp/smoke.md
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import platform
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

if not __package__:  # run as a file: the repository root on sys.path makes `benchmarks` a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# the hand-run benchmarks this suite reuses, imported here so that forkserver workers (SB3's SubprocVecEnv)
# find them preloaded
from benchmarks import dqn_fast_throughput as dqn_bench  # noqa: E402
from benchmarks import harness  # noqa: E402
from benchmarks import ppo_throughput as ppo_bench  # noqa: E402
from benchmarks import vec_throughput as vec_bench  # noqa: E402
from benchmarks.harness import ROOT, Clock, Report, Samples  # noqa: E402

CUDA_TESTS = "tests/gpu/test_cuda.py"
NO_CUDA = "no CUDA device: the GPU suite needs one; nothing measured"


@dataclass(frozen=True)
class Plan:
    """Sizes and time budgets (seconds) of one suite run."""

    device: str
    total_budget: float
    test_budget: float
    env_sizes: tuple[int, ...]
    env_vector_steps: int
    env_warmup: int
    env_budget: float
    ppo_overrides: dict = field(default_factory=dict)
    ppo_sb3_vec_env: str = "subproc"
    ppo_bf16: bool = True  # the bf16 contender, where the device has native bf16
    ppo_rollouts: int = 2
    ppo_warmup: int = 1
    ppo_budget: float = 120.0
    ppo_fast_budget: float = 100.0
    # the ppo-fast section's shape: the LeanRL anchor's work (32 envs from the preset x 128 steps, batch 1024)
    ppo_fast_overrides: dict = field(default_factory=lambda: {"n_steps": 128, "batch_size": 1024})
    ppo_fast_compile: bool = True  # the torch.compile contender of the ppo-fast section
    ppo_fast_graphs: bool = True  # the CUDA graph contenders of the ppo-fast section
    profile_overrides: dict = field(default_factory=dict)  # the profile section: the preset's own shape
    dqn_learning_starts: int = 1000
    dqn_steps: int = 800
    dqn_overrides: dict = field(default_factory=dict)
    dqn_budget: float = 75.0
    max_repeats: int = 3


# 150 + 90 + 120 + 100 + 75 s of sections, the rest for start-up, model building and the last measurement
# of a section that overruns its budget; the suite stops starting work at total_budget
GPU_PLAN = Plan(
    device="cuda",
    total_budget=540.0,
    test_budget=150.0,
    env_sizes=(8, 16, 32, 64),
    env_vector_steps=400,
    env_warmup=50,
    env_budget=90.0,
)
SMOKE_PLAN = Plan(
    device="cpu",
    total_budget=120.0,
    test_budget=60.0,
    env_sizes=(2,),
    env_vector_steps=20,
    env_warmup=5,
    env_budget=1.0,
    ppo_overrides={"n_envs": 2, "n_steps": 4, "batch_size": 8, "n_epochs": 1},
    ppo_sb3_vec_env="dummy",  # SB3's SubprocVecEnv is still run by the env section
    ppo_bf16=False,  # the same code as the kit's row, with one more override
    ppo_rollouts=1,
    ppo_warmup=0,
    ppo_budget=1.0,
    ppo_fast_budget=1.0,
    ppo_fast_overrides={"n_envs": 2, "n_steps": 4, "batch_size": 8, "n_epochs": 1},
    ppo_fast_compile=False,  # compiling on a CPU takes minutes; "auto" is off there anyway
    ppo_fast_graphs=False,  # CUDA graphs are CUDA's: on a CPU the same eager steps again
    profile_overrides={"n_envs": 2, "n_steps": 4, "batch_size": 8, "n_epochs": 1},
    dqn_learning_starts=16,
    dqn_steps=8,
    dqn_overrides={"buffer_size": 1000},
    dqn_budget=1.0,
    max_repeats=1,
)


# -- header ---------------------------------------------------------------------------------------------
def _versions() -> dict[str, str]:
    out = {}
    for name in ("stable_baselines3", "gymnasium", "ale_py", "envpool"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            out[name] = "not installed"
    return out


def header(report: Report, plan: Plan, argv: list[str]) -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if plan.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        device = f"{props.name} ({props.total_memory / 2**30:.0f} GiB), {torch.cuda.device_count()} visible"
        title = "# GPU suite"
    else:
        device = f"CPU {platform.processor() or platform.machine()} (--cpu-smoke: the figures mean nothing)"
        title = "# GPU suite (CPU smoke run)"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    rows = [
        ["device", device],
        ["torch", f"{torch.__version__}, CUDA {torch.version.cuda or '-'}, cuDNN {cudnn or '-'}"],
        [
            "CPU cores",
            f"{cores} usable ({os.cpu_count()} in the machine), torch threads {torch.get_num_threads()}",
        ],
        ["python", f"{platform.python_version()} on {platform.platform()}"],
        ["packages", ", ".join(f"{k} {v}" for k, v in _versions().items())],
        ["date (UTC)", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")],
        ["command", "python benchmarks/gpu_suite.py " + " ".join(argv)],
    ]
    report.add(title, "")
    report.table(["", ""], rows)


# -- 1. the CUDA-only tests -----------------------------------------------------------------------------
def run_tests(report: Report, plan: Plan, clock: Clock) -> None:
    report.add(f"## CUDA tests (`pytest {CUDA_TESTS}`)", "")
    budget = max(1.0, min(plan.test_budget, clock.left()))
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", CUDA_TESTS]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # pytest and whatever it started (env workers)
        out, _ = proc.communicate()
        report.failed = True
        report.add(f"timed out after {budget:.0f} s (the section's budget); last lines:", "", "```")
        report.add(*out.strip().splitlines()[-15:], "```", "")
        return
    seconds = time.monotonic() - t0
    counts = {k: 0 for k in ("passed", "failed", "skipped", "error")}
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    for number, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary):
        counts["error" if kind.startswith("error") else kind] += int(number)
    report.table(
        ["passed", "failed", "skipped", "errors", "seconds"],
        [[*(str(counts[k]) for k in ("passed", "failed", "skipped", "error")), f"{seconds:.0f}"]],
    )
    problems = [line for line in out.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    skips = sorted({m for m in re.findall(r"SKIPPED \[\d+\] [^:]+:\d+: (.*)", out)})
    if skips:
        report.add("Skip reasons: " + "; ".join(skips), "")
    if proc.returncode != 0:
        report.failed = True
        lines = [f"- {line}" for line in problems[:30]] or [f"- pytest exit {proc.returncode}: {summary}"]
        report.add(*lines, "")


# -- 2. env throughput ----------------------------------------------------------------------------------
def env_contenders() -> dict[str, Callable]:
    out = {
        "kit gym.make_vec (auto)": vec_bench.kit("auto"),
        "kit native, one process": vec_bench.kit("native", shards=1),
        "kit native, cv2.resize": vec_bench.kit_cv2_resize,
        "SB3 SubprocVecEnv+VecFrameStack": vec_bench.sb3_atari("subproc"),
        "ale-py AtariVectorEnv (raw, ceiling)": vec_bench.raw_ale,
    }
    try:
        import envpool  # noqa: F401

        out["EnvPool"] = vec_bench.envpool_pong
        out["EnvPool, async (B = N/2)"] = vec_bench.envpool_async
    except ImportError:
        pass
    return out


def run_env(report: Report, plan: Plan, clock: Clock) -> None:
    contenders = env_contenders()
    steps, warmup = plan.env_vector_steps, plan.env_warmup
    cells = {
        (name, n): (lambda make=make, n=n: vec_bench.measure(make, n, steps, warmup))
        for n in plan.env_sizes
        for name, make in contenders.items()
    }
    samples = _alternate(cells, plan, plan.env_budget, clock)
    rounds = samples.rounds
    report.add(
        f"## Env throughput: Pong, random actions, env steps/s (median of {rounds}; "
        f"{plan.env_vector_steps} vector steps per measurement)",
        "",
    )
    sizes = plan.env_sizes
    rows = [[name, *(harness.num(samples.median((name, n))) for n in sizes)] for name in contenders]
    kit = "kit gym.make_vec (auto)"
    others = (
        "kit native, one process",
        "kit native, cv2.resize",
        "SB3 SubprocVecEnv+VecFrameStack",
        "EnvPool",
    )
    for other in (*others, "ale-py AtariVectorEnv (raw, ceiling)"):
        if other in contenders:
            ratios = (harness.ratio(samples.median_ratio((kit, n), (other, n))) for n in sizes)
            rows.append([f"kit / {other}", *ratios])
    report.table(["contender", *(f"N={n}" for n in sizes)], rows)
    if "EnvPool" not in contenders:
        report.add("EnvPool is not installed here (`pip install envpool`): its row is missing.", "")
    report.errors(samples, "env")


# -- 3. PPO ---------------------------------------------------------------------------------------------
def ppo_contenders(plan: Plan) -> dict[str, Callable[[str], object]]:
    from retro_atari_kit.integrations.sb3 import native_bf16

    over = plan.ppo_overrides
    out: dict[str, Callable[[str], object]] = {
        "sb3": lambda net: ppo_bench.make_sb3(net, "gpu", plan.device, plan.ppo_sb3_vec_env, over),
        "kit": lambda net: ppo_bench.make_kit(net, "gpu", plan.device, over),
    }
    if plan.ppo_bf16 and native_bf16(plan.device):
        bf16 = {**over, "policy_kwargs.features_extractor_kwargs": {"autocast": "bf16"}}
        out["kit bf16"] = lambda net: ppo_bench.make_kit(net, "gpu", plan.device, bf16)
    return out


def _ppo_steps_per_second(make: Callable[[str], object], network: str, plan: Plan) -> float:
    model = make(network)
    try:
        return ppo_bench.measure(model, plan.ppo_rollouts, plan.ppo_warmup)
    finally:
        model.get_env().close()


def _ppo_section(
    report: Report,
    plan: Plan,
    clock: Clock,
    contenders: dict[str, Callable[[str], object]],
    budget: float,
    title: Callable[[dict], str],
    note: str,
    what: str,
) -> None:
    """One PPO throughput table: ``contenders`` alternated over both networks until ``budget`` is spent, the
    medians and each kit contender's ratio to ``sb3``, headed by ``title(plan)`` and followed by ``note``."""
    contenders_list, networks = list(contenders), ("nature", "impala")
    cells = {
        (name, net): (lambda make=make, net=net: _ppo_steps_per_second(make, net, plan))
        for net in networks
        for name, make in contenders.items()
    }
    samples = _alternate(cells, plan, budget, clock)
    rounds = samples.rounds
    report.add(
        f"{title(plan)} on {plan.device}: training steps/s (median of {rounds}; {plan.ppo_rollouts} "
        f"rollout(s) after {plan.ppo_warmup} warm-up)",
        "",
    )
    kits = [c for c in contenders_list if c != "sb3"]
    rows = []
    for net in networks:
        rows.append(
            [
                net,
                *(harness.num(samples.median((c, net))) for c in contenders_list),
                *(harness.ratio(samples.median_ratio((c, net), ("sb3", net))) for c in kits),
            ]
        )
    report.table(["network", *contenders_list, *(f"{c} / sb3" for c in kits)], rows)
    report.add(note, "")
    report.errors(samples, what)


def _shape(preset: str, overrides: dict) -> str:
    from retro_atari_kit.integrations.sb3.presets import apply_overrides, get_preset

    hp = apply_overrides(get_preset("ppo", preset), overrides)
    return f"{hp['n_envs']} envs x {hp['n_steps']} steps, batch {hp['batch_size']}, {hp['n_epochs']} epoch(s)"


def run_ppo(report: Report, plan: Plan, clock: Clock) -> None:
    _ppo_section(
        report,
        plan,
        clock,
        ppo_contenders(plan),
        plan.ppo_budget,
        lambda plan: f"## PPO, `gpu` preset ({_shape('gpu', plan.ppo_overrides)})",
        f"`sb3`: `make_atari_env` ({plan.ppo_sb3_vec_env}) + `VecFrameStack`, SB3's `CnnPolicy` and "
        "`RolloutBuffer`; `kit`: `make_vec_env` + `get_preset('ppo', 'gpu')` as shipped; `kit bf16`: the "
        "same with `--set policy_kwargs.features_extractor_kwargs={autocast: bf16}` (only where bf16 is "
        "native).",
        "PPO",
    )


# -- 4. FastPPO ---------------------------------------------------------------------------------------
def ppo_fast_contenders(plan: Plan) -> dict[str, Callable[[str], object]]:
    over, dev = plan.ppo_fast_overrides, plan.device
    out: dict[str, Callable[[str], object]] = {
        "sb3": lambda net: ppo_bench.make_sb3(net, "gpu", dev, plan.ppo_sb3_vec_env, over),
        "kit, SB3's PPO": lambda net: ppo_bench.make_kit(net, "gpu", dev, over),
        "fast eager": lambda net: ppo_bench.make_fast(
            net, "gpu", dev, over, compile=False, cuda_graphs=False
        ),
    }
    if plan.ppo_fast_graphs:
        out["fast graphs"] = lambda net: ppo_bench.make_fast(
            net, "gpu", dev, over, compile=False, cuda_graphs=True
        )
    if plan.ppo_fast_compile and plan.ppo_fast_graphs:
        out["gpu preset"] = lambda net: ppo_bench.make_fast(
            net, "gpu", dev, over, compile=True, cuda_graphs=True
        )
    return out


def run_ppo_fast(report: Report, plan: Plan, clock: Clock) -> None:
    _ppo_section(
        report,
        plan,
        clock,
        ppo_fast_contenders(plan),
        plan.ppo_fast_budget,
        lambda plan: (
            f"## PPO, the `gpu` preset's FastPPO against plain SB3 ({_shape('gpu', plan.ppo_fast_overrides)})"
        ),
        "`sb3`: as in the PPO section; `kit, SB3's PPO`: SB3's `PPO` on the kit's env and policy with the "
        "`gpu` preset's numbers; `fast eager`: the preset's `FastPPO` with `fast_learner: {compile: false, "
        "cuda_graphs: false}`; `fast graphs`: CUDA graphs, not compiled; `gpu preset`: as shipped, compiled "
        "(in the warm-up rollout) and replayed as CUDA graphs (docs/sb3.md).",
        "FastPPO",
    )


# -- 5. DQN ---------------------------------------------------------------------------------------------
def dqn_contenders(plan: Plan) -> dict[str, Callable]:
    dev, over = plan.device, plan.dqn_overrides
    return {
        "sb3": lambda ls: dqn_bench.make_sb3(ls, dev, over),
        "kit sync (pong-dqn)": lambda ls: dqn_bench.make_kit(1, ls, device=dev, overrides=over),
        "pong-dqn-fast, no play process": lambda ls: dqn_bench.make_kit(
            4, ls, policy=dqn_bench.KIT_DQN_POLICY, device=dev, overrides=over
        ),
        "pong-dqn-fast (play process)": lambda ls: dqn_bench.make_kit(
            4, ls, parallel=True, device=dev, overrides=over
        ),
    }


def run_dqn(report: Report, plan: Plan, clock: Clock, threads: int) -> None:
    contenders = dqn_contenders(plan)
    steps, prefill = plan.dqn_steps, plan.dqn_learning_starts
    cells = {  # (steps/s, CPU ms per step)
        name: (lambda make=make: dqn_bench.measure(make, steps, prefill, threads))
        for name, make in contenders.items()
    }
    samples = _alternate(cells, plan, plan.dqn_budget, clock)
    rounds = samples.rounds
    torch.set_num_threads(threads)  # the play process's trainer lowers it
    report.add(
        f"## DQN, Pong, 1 env, on {plan.device}: training steps/s over {steps} steps after {prefill} "
        f"random ones (median of {rounds})",
        "",
    )
    sync = "kit sync (pong-dqn)"
    rows = [
        [
            c,
            harness.num(samples.median(c, 0)),
            harness.ratio(samples.median_ratio(c, "sb3", 0)),
            harness.ratio(samples.median_ratio(c, sync, 0)),
            harness.num(samples.median(c, 1)),
        ]
        for c in contenders
    ]
    report.table(["contender", "steps/s", "/ sb3", "/ kit sync", "CPU ms per step"], rows)
    report.add(
        "`sb3`: SB3's `DQN('CnnPolicy')` and `ReplayBuffer` at `pong-dqn`'s numbers; `pong-dqn-fast`: 4 env "
        "steps per update of batch 128 (`KitDQNPolicy`), without and with env play in its own process.",
        "",
    )
    report.errors(samples, "DQN")


SECTIONS = ("tests", "env", "ppo", "ppo-fast", "dqn", "profile")


# -- 6. where FastPPO's time goes ------------------------------------------------------------------------
def _add_wall_time(owner: object, name: str, sink: dict[str, float]) -> None:
    """Replace ``owner.name`` (a bound method) by one that adds its wall time to ``sink[name]``."""
    method = getattr(owner, name)

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            sink[name] = sink.get(name, 0.0) + time.perf_counter() - t0

    setattr(owner, name, timed)


def profile_fast_ppo(network: str, plan: Plan) -> tuple[dict[str, float], str]:
    """One warm-up ``learn`` of one rollout (compile, graph capture), one timed, one under torch's profiler:
    ``(seconds by part, the profiler's top operators)`` of the ``gpu`` preset's FastPPO as shipped."""
    model = ppo_bench.make_fast(network, "gpu", plan.device, plan.profile_overrides)
    cuda = plan.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    try:
        per_rollout = model.n_steps * model.n_envs
        model.learn(per_rollout)
        sink: dict[str, float] = {}
        for name in ("step_async", "step_wait"):
            _add_wall_time(model.env, name, sink)
        for name in ("collect_rollouts", "train"):
            _add_wall_time(model, name, sink)
        sync()
        t0 = time.perf_counter()
        model.learn(per_rollout, reset_num_timesteps=False)
        sync()
        sink["wall"] = time.perf_counter() - t0
        sink["steps"] = float(per_rollout)
        activities = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as prof:
            model.learn(per_rollout, reset_num_timesteps=False)
            sync()
        sort = "cuda_time_total" if cuda else "cpu_time_total"
        return sink, prof.key_averages().table(sort_by=sort, row_limit=12)
    finally:
        model.get_env().close()


def run_profile(report: Report, plan: Plan) -> None:
    shape = _shape("gpu", plan.profile_overrides)
    report.add(f"## Where FastPPO's time goes (`gpu` preset as shipped, {shape}) on {plan.device}", "")
    rows, tables = [], []
    for network in ("nature", "impala"):
        try:
            t, table = profile_fast_ppo(network, plan)
        except Exception as exc:  # one broken network costs only its row
            report.failed = True
            report.add(f"- error in profile {network}: {type(exc).__name__}: {exc}", "")
            continue
        env = t["step_async"] + t["step_wait"]
        rollout, update = t["collect_rollouts"], t["train"]
        # stepping the envs while the device acts and learns hides at most the shorter of the two
        bound = (rollout + update) / max(env, rollout + update - env)
        rows.append(
            [
                network,
                harness.num(t["steps"] / t["wall"]),
                f"{rollout:.3f}",
                f"{env:.3f} ({100 * env / rollout:.0f}%)",
                f"{update:.3f}",
                f"{bound:.2f}x",
            ]
        )
        tables.append(f"{network}, one rollout and update, top operators:\n\n```\n{table.strip()}\n```")
    report.table(["network", "steps/s", "rollout s", "of which env s", "update s", "overlap bound"], rows)
    report.add(
        "`of which env`: the learner's wall time in the vector env's `step_async` + `step_wait` during the "
        "rollout; `overlap bound`: (rollout + update) / max(env, the rest), the most that stepping the envs "
        "while the device acts and learns could gain.",
        "",
        *tables,
        "",
    )


def _alternate(cells: dict, plan: Plan, budget: float, clock: Clock) -> Samples:
    """A section's rounds: up to ``plan.max_repeats``, within its budget and the suite's; a cell that raises
    costs only itself (one line in the report, its traceback on stderr)."""
    return harness.alternate(cells, plan.max_repeats, budget=budget, clock=clock, catch=True)


def main(argv: list[str] | None = None) -> int:
    p = harness.parser(__doc__)
    p.add_argument("--out", default="gpu_suite.md", help="markdown report (default: gpu_suite.md in the cwd)")
    p.add_argument(
        "--cpu-smoke",
        action="store_true",
        help="every section on the CPU with tiny sizes (checks the suite's code; no meaningful figures)",
    )
    p.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="run these sections")
    p.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="the suite's total budget: it starts no work after that (default 540 on a GPU)",
    )
    p.add_argument(
        "--env-sizes", type=int, nargs="+", metavar="N", help="the env section's sizes (default 8 16 32 64)"
    )
    argv = sys.argv[1:] if argv is None else argv
    args = p.parse_args(argv)
    if not args.cpu_smoke and not torch.cuda.is_available():
        print(NO_CUDA)
        return 0
    plan = SMOKE_PLAN if args.cpu_smoke else GPU_PLAN
    if args.budget is not None:
        plan = dataclasses.replace(plan, total_budget=args.budget)
    if args.env_sizes:
        plan = dataclasses.replace(plan, env_sizes=tuple(args.env_sizes))
    threads = torch.get_num_threads()
    clock, report = Clock(plan.total_budget), Report()
    header(report, plan, argv)
    runners = {
        "tests": lambda: run_tests(report, plan, clock),
        "env": lambda: run_env(report, plan, clock),
        "ppo": lambda: run_ppo(report, plan, clock),
        "ppo-fast": lambda: run_ppo_fast(report, plan, clock),
        "dqn": lambda: run_dqn(report, plan, clock, threads),
        "profile": lambda: run_profile(report, plan),
    }
    for name in args.only:
        if clock.left() <= 0:
            report.failed = True
            report.add(f"## {name}: not run, the suite's {plan.total_budget:.0f} s budget was spent", "")
            continue
        t0 = time.monotonic()
        runners[name]()
        report.add(f"Section {name}: {time.monotonic() - t0:.0f} s.", "")
    report.add(f"Total {clock.elapsed():.0f} s.")
    report.write(args.out)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
