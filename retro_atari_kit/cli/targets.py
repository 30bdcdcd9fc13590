"""The one line for a model path that does not exist, naming what does exist instead.

The likely case is a run stopped before its end (Ctrl-C, a lost machine): it has checkpoints but no final
``model.zip`` (``model/`` for RLlib), and ``retrokit eval RUN/model.zip`` is what its user types. The line
then names the run's latest checkpoint and says that the run dir (``retrokit eval RUN``) plays it; elsewhere
it names a close name in the same folder (a typo), or says only that nothing is there.
"""

from __future__ import annotations

import difflib
import os

from retro_atari_kit.cli._common import CliError


def _shown(path: str) -> str:
    """``path`` relative to the working folder when it lies under it (as the user most likely typed it)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith(os.pardir) else relative


def _in_run(target: str, run: str) -> str:
    from retro_atari_kit.runs import RunError, final_model_path, list_checkpoints

    shown = _shown(run)
    head = f"{target}: no such file; the run {shown}"
    finals = [p for p in (final_model_path(run), final_model_path(run, suffix="")) if os.path.exists(p)]
    if finals:
        return f"{head} has its final model at {_shown(finals[0])}: pass the run dir {shown} to play it"
    try:
        checkpoints = list_checkpoints(run)
    except RunError:  # a folder that cannot be listed: say what is known
        checkpoints = []
    if not checkpoints:
        return f"{head} has no final model and no checkpoint yet: nothing to play"
    steps, latest = checkpoints[-1]
    return (
        f"{head} has no final model (stopped before its end?) but its latest checkpoint is {_shown(latest)} "
        f"({steps} steps): pass the run dir {shown} to play it"
    )


def check_targets_exist(targets: list[str]) -> None:
    """:func:`missing_target`'s CliError for the first of ``targets`` that does not exist."""
    for target in targets:
        if not os.path.exists(target):
            raise missing_target(target)


def missing_target(target: str) -> CliError:
    """The CliError for ``target`` (a run dir or model file the user named) that does not exist."""
    from retro_atari_kit.runs import find_run_dir

    run = find_run_dir(target)
    if run is not None:
        return CliError(_in_run(target, run))
    guess = _close_path(target)
    hint = f" (did you mean {guess}?)" if guess else ""
    return CliError(f"{target}: no such run dir or model file{hint}")


def _close_path(target: str) -> str | None:
    """``target`` with its first missing part replaced by the closest name in that folder (a typo), or None.
    The rest of the path is kept when the result exists."""
    parts = [p for p in target.split(os.sep) if p]
    base = os.sep if target.startswith(os.sep) else ""
    for i, part in enumerate(parts):
        folder = base + os.sep.join(parts[:i])
        if os.path.exists(os.path.join(folder, part) if folder else part):
            continue
        try:
            names = sorted(os.listdir(folder or os.curdir))
        except OSError:
            return None
        close = difflib.get_close_matches(part, names, n=1)
        if not close:
            return None
        fixed = os.path.join(folder, close[0]) if folder else close[0]
        whole = os.path.join(fixed, *parts[i + 1 :])
        return whole if os.path.exists(whole) else fixed
    return None
