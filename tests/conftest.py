"""Shared test setup: real emulators only, no mocks."""

import retro_atari_kit  # noqa: F401  (registers the RetroKit/ namespace)
