"""The run directory of a training run, for any engine (SB3, RLlib): layout, config, atomic writes, the pid
lock, checkpoints, the true-score monitor CSV and the progress table. Core: no torch, SB3 or Ray here.

::

    from retro_atari_kit.runs import (MonitorCSV, RunLock, create_run_dir, monitor_dir, new_config,
                                      write_config)

    create_run_dir("runs/x")
    write_config("runs/x", new_config("sb3", "retrokit train ...", algo="ppo", env_id="RetroKit/Pong-v0"))
    with RunLock("runs/x"):
        monitor = MonitorCSV(monitor_dir("runs/x"), "RetroKit/Pong-v0", num_envs=8)
        ...
"""

from retro_atari_kit.errors import RunError
from retro_atari_kit.files import atomic_write, atomic_write_bytes, atomic_write_text
from retro_atari_kit.runs.checkpoints import (
    CHECKPOINT_DIR,
    checkpoint_path,
    final_model_path,
    list_checkpoints,
    publish_final_model,
)
from retro_atari_kit.runs.export import RECORD_FILES, check_export_target, copy_run_record
from retro_atari_kit.runs.layout import (
    CONFIG_FILE,
    CONFIG_MARKER,
    ENGINES,
    ORPHANED_PREFIX,
    check_config_fields,
    check_new_run_dir,
    config_field_error,
    create_run_dir,
    default_run_dir,
    find_run_dir,
    load_config,
    monitor_dir,
    new_config,
    open_for_resume,
    resume_segment,
    set_total_timesteps,
    write_config,
)
from retro_atari_kit.runs.lock import LOCK_FILE, RunLock, lock_owner
from retro_atari_kit.runs.monitor import (
    MonitorCSV,
    agent_steps,
    monitor_files,
    monitor_header,
    read_monitor_csvs,
    recent_games,
)
from retro_atari_kit.runs.progress import merge_progress, progress_path, set_aside_orphaned_logs
from retro_atari_kit.runs.session import begin_segment, training_session
from retro_atari_kit.runs.spec import ENGINE_OPTIONS, TrainSpec
from retro_atari_kit.runs.stop import StopRequest, StopRequested, active_stop_request, stop_signals

__all__ = [
    "ENGINE_OPTIONS",
    "CHECKPOINT_DIR",
    "CONFIG_FILE",
    "CONFIG_MARKER",
    "ENGINES",
    "LOCK_FILE",
    "ORPHANED_PREFIX",
    "MonitorCSV",
    "agent_steps",
    "RECORD_FILES",
    "RunError",
    "RunLock",
    "StopRequest",
    "StopRequested",
    "TrainSpec",
    "active_stop_request",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "begin_segment",
    "check_new_run_dir",
    "check_config_fields",
    "check_export_target",
    "checkpoint_path",
    "config_field_error",
    "copy_run_record",
    "create_run_dir",
    "default_run_dir",
    "final_model_path",
    "find_run_dir",
    "list_checkpoints",
    "load_config",
    "lock_owner",
    "merge_progress",
    "monitor_dir",
    "monitor_files",
    "monitor_header",
    "new_config",
    "open_for_resume",
    "progress_path",
    "publish_final_model",
    "read_monitor_csvs",
    "recent_games",
    "resume_segment",
    "set_total_timesteps",
    "set_aside_orphaned_logs",
    "stop_signals",
    "training_session",
    "write_config",
]
