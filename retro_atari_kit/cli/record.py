"""``retrokit record RUN_DIR --out agent.mp4``: a full-colour video of the agent playing."""

from __future__ import annotations

import argparse
import sys

from retro_atari_kit.cli._common import CliError, add_play_options, user_errors
from retro_atari_kit.cli.arguments import positive_int, seed
from retro_atari_kit.files import os_error_message


def add_parser(sub) -> None:
    from retro_atari_kit.recording import DEFAULT_MAX_STEPS  # cheap: no emulator, no torch

    p = sub.add_parser(
        "record",
        help="video of the agent playing (mp4, or GIF without ffmpeg)",
        description="Play whole games and write the full-colour screen, upscaled, with the running true "
        "score in a bar below it.",
    )
    p.add_argument(
        "target",
        metavar="RUN_DIR|MODEL.zip",
        help="a run dir (its final model, else its newest checkpoint) or an SB3 model file",
    )
    p.add_argument(
        "--out",
        default="agent.mp4",
        help="video file, .mp4 (.webm, .mkv, .avi) or .gif; a .gif is written when ffmpeg is missing "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--episodes", type=positive_int, default=1, help="whole games to record (default: %(default)s)"
    )
    add_play_options(p)
    p.add_argument(
        "--max-steps",
        type=positive_int,
        default=None,
        help=f"agent steps per game at most (default: {DEFAULT_MAX_STEPS}, ALE's 108,000-frame cap at "
        "frame skip 4)",
    )
    p.add_argument("--seed", type=seed, default=0, help="seed of the game's env (default: %(default)s)")
    p.add_argument(
        "--device", default="auto", help="torch device: auto, cpu, cuda, cuda:N (default: %(default)s)"
    )
    p.set_defaults(func=run)


def cut_line(cut: list[int], max_steps: int | None) -> str:
    """The one line for games that ``--max-steps`` ended before the game did."""
    from retro_atari_kit.recording import DEFAULT_MAX_STEPS

    limit = DEFAULT_MAX_STEPS if max_steps is None else max_steps
    games = f"game {cut[0]} was" if len(cut) == 1 else f"games {', '.join(map(str, cut))} were"
    return (
        f"{games} cut at --max-steps {limit} before the game ended: the video and its score stop there "
        "(raise --max-steps for whole games)"
    )


def run(args: argparse.Namespace) -> int:
    from retro_atari_kit.cli.evaluate import load_target
    from retro_atari_kit.recording import check_video_path, record_video

    with user_errors():
        check_video_path(args.out)  # before the model is loaded and a whole game is played
    model, _, env_id, env_kwargs = load_target(args.target, args.env, {}, args.device, args.allow_pickle)
    cut: list[int] = []
    try:
        out, scores = record_video(
            model,
            env_id,
            env_kwargs,
            args.out,
            episodes=args.episodes,
            seed=args.seed,
            deterministic=args.deterministic,
            max_steps=args.max_steps,
            cut=cut,
        )
    except OSError as exc:  # a full disk while writing: no half video, an older one left as it was
        raise CliError(os_error_message(exc, "cannot write video", flag="--out")) from None
    print(
        f"wrote {out} ({len(scores)} game(s), true scores {', '.join(f'{s:g}' for s in scores)})",
        file=sys.stderr,
    )
    if cut:  # a game cut short is not a whole game: its score is the score so far
        print(f"retrokit: warning: {cut_line(cut, args.max_steps)}", file=sys.stderr)
    print(out)
    return 0
