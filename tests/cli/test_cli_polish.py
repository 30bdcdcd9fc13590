"""What a new user meets first: `eval` says each game's score as it ends, `record` writes frames no encoder
resizes with a legible score, `list` filters by name, a missing ROM or a partial ID is one clear line,
every `eval` / `record` option says its default, `plot` titles itself. Real ALE, real SB3, no timings."""

from __future__ import annotations

import argparse
import logging
import re

import gymnasium as gym
import numpy as np
import pytest

from retro_atari_kit.cli import build_parser, main

ENV = "RetroKit/Pong-v0"
TINY = ["--n-envs", "2", "--set", "n_steps=32", "--set", "batch_size=64", "--checkpoint-every", "64"]
SHORT = ["--env-kwarg", "max_episode_steps=30"]  # games cut at 30 agent steps: the output is what counts


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("runs") / "pong")
    assert main(["train", "ppo", ENV, "--timesteps", "128", "--run-dir", path, *TINY]) == 0
    return path


# --- eval ------------------------------------------------------------------------------------------------
def test_eval_prints_each_game_as_it_ends_and_the_summary_unchanged(run, capsys):
    assert main(["eval", run, "--episodes", "3", *SHORT]) == 0
    out, err = capsys.readouterr()
    games = re.findall(r"^game (\d+)/3: (-?\d+(?:\.\d+)?) \((\d+) steps\)$", err, flags=re.M)
    assert [g[0] for g in games] == ["1", "2", "3"]
    assert all(g[2] == "30" for g in games)
    assert re.fullmatch(r"true score over 3 games: mean \S+  std \S+  min \S+  max \S+\n", out)


def test_eval_json_keeps_stdout_one_line(run, capsys):
    assert main(["eval", run, "--episodes", "2", "--json", *SHORT]) == 0
    out, err = capsys.readouterr()
    assert len(out.strip().splitlines()) == 1 and '"episodes": 2' in out
    assert "game 2/2:" in err


# --- record ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("screen", [(210, 160), (224, 320), (240, 256), (144, 160), (250, 250)])
def test_video_frames_are_padded_to_whole_macro_blocks(screen):
    from retro_atari_kit.recording import MACRO_BLOCK, video_frame

    h, w = screen
    rgb = np.random.default_rng(0).integers(0, 255, (h, w, 3), dtype=np.uint8)
    frame = video_frame(rgb, "game 1   score -21", scale=2)
    assert frame.shape[0] % MACRO_BLOCK == 0 and frame.shape[1] % MACRO_BLOCK == 0
    assert frame.shape[0] >= 2 * h + 24 and frame.shape[1] >= 2 * w
    # the screen is there, pixel for pixel (nearest neighbour), and the bar below it carries the text
    assert np.array_equal(frame[: 2 * h : 2, : 2 * w : 2], rgb)
    assert frame[2 * h :].max() == 255


def test_record_writes_an_unresized_video_with_the_score_in_a_bar(run, tmp_path, capsys, caplog):
    import imageio.v3 as iio

    out = tmp_path / "agent.mp4"
    with caplog.at_level(logging.WARNING):
        assert main(["record", run, "--out", str(out), "--max-steps", "40"]) == 0
    assert "macro_block_size" not in caplog.text  # imageio resized nothing
    written = capsys.readouterr().out.strip().splitlines()[-1]
    frame = iio.imread(written, index=10)
    assert frame.shape == (448, 320, 3)  # 160x210 Atari screen x2 = 320x420, a 28-pixel bar: 448
    bar = frame[420:].max(axis=2)
    rows = np.flatnonzero(bar.max(axis=1) > 200)  # the white text's rows
    assert rows.size >= 12  # ~17 pixels tall: legible


# --- list ------------------------------------------------------------------------------------------------
def test_list_filters_by_name_case_insensitively(capsys):
    assert main(["list", "PONG"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    ids = [line.split()[0] for line in lines[:-1]]
    assert "RetroKit/Pong-v0" in ids and all("pong" in i.lower() for i in ids)
    assert lines[-1].startswith(f"{len(ids)} IDs, ")
    assert main(["list", "--filter", "pong", "--system", "atari2600"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[:-1] == lines[:-1]


def test_list_counts_one_id_in_the_singular(capsys):
    assert main(["list", "RetroKit/Pong-v0"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[-1].startswith("1 ID, ")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["list", "pong", "--filter", "breakout"], "give the name once"),
        (["list", "breakuot"], "no RetroKit ID contains 'breakuot'; did you mean RetroKit/Breakout"),
        (["list", "zzzzqqq"], "no RetroKit ID contains 'zzzzqqq'; see `retrokit list`"),
        (["list", "pong", "--system", "nosuch"], "unknown system 'nosuch'; choose one of"),
    ],
)
def test_list_mistakes_are_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err


# --- missing ROM, "did you mean" -------------------------------------------------------------------------
def _a_game_without_rom() -> str:
    from retro_atari_kit.catalog import retro_games
    from retro_atari_kit.roms import rom_status

    for game in retro_games():
        if game.name.startswith("Sonic") and rom_status(game) == "missing":
            return game.env_id
    pytest.skip("every Sonic ROM is installed here")


def test_a_missing_rom_names_the_id_once(capsys):
    from retro_atari_kit.registration import probe_env
    from retro_atari_kit.runs import RunError

    env_id = _a_game_without_rom()
    with pytest.raises(RunError) as caught:
        probe_env(env_id, {})
    assert str(caught.value).count(env_id) == 1 and "retrokit import-roms" in str(caught.value)
    with pytest.raises(FileNotFoundError) as direct:  # gym.make's own error, too
        gym.make(env_id)
    assert str(direct.value).count(env_id) == 1
    assert main(["train", "ppo", env_id, "--timesteps", "100"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.count(env_id) == 1


def test_did_you_mean_puts_ids_containing_the_text_first(capsys):
    from retro_atari_kit.registration import check_env_id
    from retro_atari_kit.runs import RunError

    # stable-retro ships Sonic's integration (not its ROM): the ID is registered on every install
    assert "RetroKit/SonicTheHedgehog-Genesis-v0" in gym.registry
    with pytest.raises(
        RunError, match=r"unknown env 'Sonic'; did you mean .*RetroKit/SonicTheHedgehog-Genesis-v0"
    ):
        check_env_id("Sonic")
    assert main(["train", "ppo", "sonic the hedgehog", "--timesteps", "100"]) == 2
    err = capsys.readouterr().err
    assert "RetroKit/SonicTheHedgehog-Genesis-v0" in err and len(err.strip().splitlines()) == 1


def test_names_containing_the_text_come_before_fuzzy_matches():
    from retro_atari_kit.catalog.suggest import close_names, did_you_mean

    names = ["RetroKit/Pong-v0", "RetroKit/Pooyan-v0", "RetroKit/VideoPong-v0", "RetroKit/Boxing-v0"]
    close, inside = close_names("pong", names)
    assert close[:2] == ["RetroKit/Pong-v0", "RetroKit/VideoPong-v0"] and inside == 2  # starts-with first
    assert close_names("Sonik", ["RetroKit/SonicTheHedgehog-Genesis-v0", "RetroKit/Pong-v0"])[0] == [
        "RetroKit/SonicTheHedgehog-Genesis-v0"  # one typo away
    ]
    assert did_you_mean("qqqq", names) == ""
    many = [f"RetroKit/Game{i}-v0" for i in range(12)]
    assert did_you_mean("game", many, more_hint="retrokit list game").endswith(
        "and 4 more (`retrokit list game`)?"
    )


# --- help ------------------------------------------------------------------------------------------------
def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


@pytest.mark.parametrize("command", ["eval", "record"])
def test_every_option_has_help_with_its_default(command):
    for action in _subparser(command)._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{command} {action.dest}: no help"
        if action.option_strings:
            assert "default" in (action.help % vars(action)), f"{command} {action.dest}: no default shown"


# --- plot ------------------------------------------------------------------------------------------------
def _run_with_games(path: str, games: int, algo: str = "dqn", engine: str = "sb3") -> str:
    """A run dir written through the run layer, as an engine writes it: config.yaml and true scores."""
    from retro_atari_kit.runs import MonitorCSV, create_run_dir, monitor_dir, new_config, write_config

    create_run_dir(path)
    write_config(path, new_config(engine, "test", algo=algo, env_id=ENV))
    monitor = MonitorCSV(monitor_dir(path), ENV, num_envs=1)
    for k in range(games):
        monitor.write(rank=0, score=float(k % 42 - 21), length=800)
    monitor.close()
    return path


def test_plot_titles_itself_with_the_game_and_algorithm(tmp_path):
    from retro_atari_kit.cli.plot import default_title

    dqn = _run_with_games(str(tmp_path / "dqn"), 3)
    ppo = _run_with_games(str(tmp_path / "ppo"), 3, algo="ppo", engine="rllib")
    assert default_title([dqn]) == f"{ENV}: DQN"
    assert default_title([dqn, ppo, dqn]) == f"{ENV}: DQN, PPO (RLlib)"
    (tmp_path / "bare").mkdir()
    assert default_title([str(tmp_path / "bare")]) is None  # no config.yaml: no title from it


def test_plot_shows_the_100_games_column_once_there_are_100_games(tmp_path, capsys):
    import matplotlib.image as mpimg

    from retro_atari_kit.cli.plot import windows_shown

    assert windows_shown([10, 100], 99) == [10] and windows_shown([10, 100], 100) == [10, 100]
    assert windows_shown([100, 200], 3) == [100]  # always one column
    widths = {}
    for games in (40, 100):
        run = _run_with_games(str(tmp_path / f"r{games}"), games)
        out = str(tmp_path / f"c{games}.png")
        assert main(["plot", run, "--out", out]) == 0
        widths[games] = mpimg.imread(out).shape[1]
    assert widths[100] > 1.8 * widths[40]  # a second column, "mean of last 100 games"
