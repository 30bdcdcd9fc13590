"""Adapters for RL frameworks: ``sb3`` (Stable-Baselines3), ``rllib`` (Ray RLlib), ``zoo`` (rl-zoo3).

The source sits at the top level of the repository (``integrations/``, the project's layout) but installs as
``retro_atari_kit.integrations`` (``package-dir`` in pyproject.toml), the only name code imports it by.

Imports go one way: an integration imports the core (``retro_atari_kit``) and its own modules, never the CLI
and never another integration (except the one it is built on: the zoo's on SB3's). The core imports no
integration: it finds the training engines (``integrations/<name>/training``) in one table of module names,
``retro_atari_kit.runs.engine.ENGINE_REGISTRY``, and calls down into their ``RULES``; the recorder adapters
are entry points in pyproject.toml. ``tests/test_architecture.py`` enforces this; see docs/architecture.md.
"""
