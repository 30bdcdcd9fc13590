"""Evaluation: play whole games for true scores (:mod:`.play`), under a stated protocol (:mod:`.protocols`),
normalise them against human and random reference scores (:mod:`.scores`), and aggregate them over runs and
games with confidence intervals (:mod:`.aggregate`, rliable). docs/evaluation.md documents all of it.

Engine-neutral: a model is anything with SB3's ``predict`` signature; nothing here imports SB3 or Ray.
"""

from retro_atari_kit.evaluation.play import EvaluationStopped, check_model_fits, evaluate_model, summarize
from retro_atari_kit.evaluation.scores import (
    ATARI5,
    atari5_median_estimate,
    game_of,
    human_normalized,
    reference_scores,
)
from retro_atari_kit.protocols import PROTOCOLS, Protocol, get_protocol, protocol_env_kwargs

__all__ = [
    "ATARI5",
    "PROTOCOLS",
    "EvaluationStopped",
    "Protocol",
    "atari5_median_estimate",
    "check_model_fits",
    "evaluate_model",
    "game_of",
    "get_protocol",
    "human_normalized",
    "protocol_env_kwargs",
    "reference_scores",
    "summarize",
]
