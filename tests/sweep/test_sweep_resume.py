"""``retrokit train --resume`` of missing, edited and damaged runs."""

from __future__ import annotations

import pickle
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.sweep._checks import trained_to
from tests.sweep._setups import (
    DAMAGED_LOGS,
    DL,
    Setup,
    append_bytes,
    damage,
    drop_field,
    edit_config,
    folder,
    named,
    run_copy,
    set_field,
    text,
)
from tests.sweep._sweep import Case, check, ci_first, params, without

pytestmark = [pytest.mark.sweep, pytest.mark.slow]
ENV = "RetroKit/Pong-v0"


# the same command in tests/cli/ (test_cli_errors.py, test_train_faults.py, test_run_checks.py), there with
# the message's words or in-process: those tests are kept, not these cases
RESUME = "retrokit train --resume run --timesteps"
EDITED = "test_resume_of_a_hand_edited_config_writes_nothing"
WIDER = "test_edited_network_is_refused_and_nothing_changes"
CUT = "run/checkpoints/model_64_steps.zip: truncate"
IN_TESTS_CLI = {
    "retrokit train --resume run --set gamma=0.9": "test_resume_refuses_options_it_would_ignore",
    f"{RESUME} 640 [config env_id: RetroKit/Bogus-v0]": EDITED,
    f"{RESUME} 640 [config n_envs: abc]": EDITED,
    f"{RESUME} 640 [config algo: dqn]": EDITED,
    f"{RESUME} 640 [config network: bogus]": EDITED,
    f"{RESUME} 640 [config without hyperparams]": EDITED,
    f"{RESUME} 640 [{CUT}]": "test_cut_short_checkpoint_removed_only_when_the_resume_goes_on",
    f"{RESUME} 640 [config net_arch: [64]]": WIDER,
    f"{RESUME} 640 [{CUT}; config net_arch: [64]]": WIDER,
    f"{RESUME} 640 [config network: impala]": "test_edited_network_field_is_refused_naming_it",
    f"{RESUME} 128 [config ent_coef: 0.02]": "test_edited_hyperparameters_are_honoured_on_resume",
}


def resume_cases() -> list[Case]:
    cases: list[Case] = []

    def resume(*argv: str, setup: list[Setup] | None = None, needles: tuple[str, ...] = (), **kw) -> None:
        argv_ = ["train", "--resume", *argv]
        cases.append(Case("train --resume", argv_, setup=setup or [], needles=needles, **kw))

    good = [run_copy()]
    resume("missing")
    resume("afile", setup=[text("afile")])
    resume("empty", setup=[folder("empty")])
    resume("notes", setup=[text("notes/a.txt")])
    resume("run", "--set", "gamma=0.9", setup=good, needles=("--set",))
    resume("run", "--engine", "rllib", setup=good, needles=("--engine",))
    resume("run", "--timesteps", "10", setup=good, needles=("10",))
    resume("run", "--timesteps", "abc", setup=good, needles=("--timesteps",))
    cases.append(Case("train --resume", ["train", "ppo", ENV, "--resume", "run"], setup=good))
    resume(
        "run",
        "--timesteps",
        "640",
        setup=[run_copy(), named("config.yaml not YAML", edit_config(lambda t: "a: [b\n: :\n"))],
    )
    resume(
        "run", "--timesteps", "640", setup=[run_copy(), named("config.yaml empty", edit_config(lambda t: ""))]
    )
    resume(
        "run",
        "--timesteps",
        "640",
        setup=[run_copy(), named("config.yaml a list", edit_config(lambda t: "- 1\n- 2\n"))],
    )
    resume("run", "--timesteps", "640", setup=[run_copy(), drop_field("env_id")], needles=("env_id",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("env_id", "RetroKit/Bogus-v0")])
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("n_envs", "abc")], needles=("n_envs",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("algo", "dqn")], needles=("algo",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("algo", "bogus")], needles=("algo",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("engine", "bogus")], needles=("engine",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("network", "bogus")])
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("seed", "abc")], needles=("seed",))
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("device", "tpu")])
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("backend", "bogus")])
    resume("run", "--timesteps", "640", setup=[run_copy(), set_field("env_kwargs", "{bogus: 1}")])
    resume("run", "--timesteps", "640", setup=[run_copy(), drop_field("hyperparams")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("config.yaml", "remove")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints", "remove")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints/*.zip", "text")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints/*.zip", "truncate")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints/*.zip", "foreign")])
    resume("run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints/model_64_steps.zip", "text")])
    # a newest checkpoint cut short (a zip's first half) is removed, saying so, and the run resumes from 32
    resume(
        "run", "--timesteps", "640", setup=[run_copy(), damage("checkpoints/model_64_steps.zip", "truncate")],
        expect="clean", exit_code=0, writes_nothing=False,
        check=trained_to(640, "model_64_steps.zip: not a complete zip", "model_32_steps.zip (32 steps)"),
    )  # fmt: skip
    # an edited config.yaml is honoured (a hyperparameter) or refused before anything is written or removed
    # (what the checkpoint's weights fix), even with a checkpoint cut short that a resume would remove
    wider = named("config net_arch: [64]", edit_config(lambda t: t.replace("net_arch: []", "net_arch: [64]")))
    resume("run", "--timesteps", "640", setup=[run_copy(), wider], needles=("net_arch is [64]",))
    resume(
        "run", "--timesteps", "640", needles=("policy_kwargs.net_arch",),
        setup=[run_copy(), damage("checkpoints/model_64_steps.zip", "truncate"), wider],
    )  # fmt: skip
    impala = set_field("network", "impala")
    resume("run", "--timesteps", "640", setup=[run_copy(), impala], needles=("network 'impala'",))
    richer = edit_config(lambda t: t.replace("ent_coef: 0.01", "ent_coef: 0.02"))
    resume(
        "run", "--timesteps", "128", expect="clean", exit_code=0, writes_nothing=False,
        setup=[run_copy(), named("config ent_coef: 0.02", richer)],
        check=trained_to(128, "ent_coef: 0.02"),
    )  # fmt: skip
    # damaged logs (not UTF-8, NUL bytes, cut-off lines, an emptied monitor CSV, a part of a killed resume)
    # never stop a resume; a damaged config.yaml is one line and leaves every byte as it was
    resume(
        DL, "--timesteps", "128", expect="clean", exit_code=0, writes_nothing=False,
        setup=[
            *DAMAGED_LOGS, append_bytes(f"{DL}/progress.part1.csv", b"time/total_timesteps,x\n\xff\n\0", "wb")
        ],
        check=trained_to(128, "progress logs: left out", run=DL),
    )  # fmt: skip
    resume(DL, "--timesteps", "640", setup=[*DAMAGED_LOGS, append_bytes(f"{DL}/config.yaml", b"\xff\xfe\0")])
    resume(DL, "--timesteps", "640", setup=[*DAMAGED_LOGS, append_bytes(f"{DL}/config.yaml", b"\0\0\n")])
    resume(DL, "--timesteps", "640", setup=[*DAMAGED_LOGS, append_bytes(f"{DL}/config.yaml", b"", "wb")])
    # what a run dir may hold that no training writes, or a kill leaves: one line naming the file, every byte
    # as it was; a run killed before its first checkpoint resumes from its start
    deep = named(
        "config.yaml nested 30000 deep", edit_config(lambda t: t + f"deep: {'[' * 30000}{']' * 30000}\n")
    )
    resume("run", "--timesteps", "640", setup=[run_copy(), deep], needles=("nested too deeply",))
    resume("run", "--timesteps", "640", setup=[run_copy(), pickle_policy()], needles=("Unsupported operand",))
    resume(
        "run", "--timesteps", "64", expect="clean", exit_code=0, writes_nothing=False,
        setup=[run_copy(), killed_before_its_first_checkpoint()],
        check=trained_to(64, "no checkpoint yet: starting run again from step 0", "removed run/checkpoints/"),
    )  # fmt: skip
    return cases


def pickle_policy() -> Setup:
    """The newest checkpoint's ``policy.pth`` a plain pickle (protocol 4): torch warns before it refuses."""

    def setup(d: Path) -> None:
        path = d / "run/checkpoints/model_64_steps.zip"
        with zipfile.ZipFile(path) as zf:
            items = {name: zf.read(name) for name in zf.namelist()}
        items["policy.pth"] = pickle.dumps({"weights": 1}, protocol=4)
        with zipfile.ZipFile(path, "w") as zf:
            for name, body in items.items():
                zf.writestr(name, body)

    return named("policy.pth a plain pickle", setup)


def killed_before_its_first_checkpoint() -> Setup:
    """No checkpoint and no model.zip, and the empty temporary of the first checkpoint's write (SIGKILL)."""

    def setup(d: Path) -> None:
        run = d / "run"
        shutil.rmtree(run / "checkpoints")
        (run / "model.zip").unlink()
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / ".model_32_steps.tmp-999999.zip").write_bytes(b"")

    return named("killed before its first checkpoint", setup)


@pytest.mark.parametrize("case", params(ci_first(without(resume_cases(), IN_TESTS_CLI))))
def test_case(case: Case, sweep, tmp_path) -> None:
    check(case, tmp_path)
