"""``python -m retro_atari_kit.cli``."""

import sys

from retro_atari_kit.cli import main

sys.exit(main())
