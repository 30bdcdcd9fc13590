"""Score-crop boxes, checked on real frames.

For each game we play a seeded random prefix, snapshot the emulator, and compare the next frame with
the frame produced after changing one RAM byte that feeds the score display (found by scanning RAM:
changing it alters only the score digits). The full frames must differ (so the byte really drives
the score) while the cropped, warped observations must be identical.
"""

import ale_py
import numpy as np
import pytest

from retro_atari_kit.catalog import SCORE_CROP_BOXES, ale_game
from retro_atari_kit.wrappers.warp_frame import crop_and_resize

# RAM bytes that drive the score display, per game, at the snapshot below.
SCORE_DISPLAY_RAM = {
    "Asteroids": [60, 61, 62, 72, 96],
    "BeamRider": [9, 10, 11],
    "Boxing": [16, 17, 18, 19],
    "Breakout": [80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 110],
    "Enduro": [39, 40, 41, 42],
    "Freeway": [93, 94, 95, 96, 97, 98, 99, 100],
    "MontezumaRevenge": [19, 20, 21],
    "MsPacman": [24, 120, 121, 122],
    "Pong": [69, 70, 71, 72, 73, 74, 75, 76],
    "Qbert": [12, 14, 16, 18, 20, 89, 90, 91],
    "Seaquest": [56, 57, 58],
    "SpaceInvaders": [102, 103, 104, 105],
}


def test_every_required_game_has_a_box():
    assert set(SCORE_DISPLAY_RAM) <= set(SCORE_CROP_BOXES)


@pytest.mark.parametrize("game", sorted(SCORE_DISPLAY_RAM))
def test_crop_removes_score_and_nothing_that_changes_with_it(game):
    env = ale_py.AtariEnv(game=ale_game(game).rom, frameskip=1, repeat_action_probability=0.0)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(300):
        if env.step(int(rng.integers(env.action_space.n)))[2]:
            env.reset()
    ale = env.unwrapped.ale
    snapshot = ale.cloneState()
    ram = ale.getRAM().copy()
    env.step(0)
    reference = ale.getScreenRGB().copy()
    box = SCORE_CROP_BOXES[game]
    for address in SCORE_DISPLAY_RAM[game]:
        ale.restoreState(snapshot)
        ale.setRAM(address, (int(ram[address]) + 0x11) & 0xFF)
        env.step(0)
        changed = ale.getScreenRGB()
        assert not np.array_equal(changed, reference), f"RAM {address} does not drive the display"
        np.testing.assert_array_equal(
            crop_and_resize(changed, 84, True, box), crop_and_resize(reference, 84, True, box)
        )
        # Without the crop the score change is still visible after warping.
        assert not np.array_equal(
            crop_and_resize(changed, 84, True, None), crop_and_resize(reference, 84, True, None)
        )
    env.close()
