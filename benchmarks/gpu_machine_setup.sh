#!/usr/bin/env bash
# Sets up a GPU machine (docs/performance.md, "GPU suite"): nothing can be fetched there, so the kit's
# dependencies that its image lacks travel as cp312 wheels in .whl (carried; .git/info/exclude ignores it):
#
#   P="--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform any"
#   for w in gymnasium==1.2.2 farama-notifications ale-py==0.12.1 stable-baselines3==2.9.2 atarihns cloudpickle; do
#       pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $P -d .whl $w
#   done
#
# EnvPool (64 MB) and imageio-ffmpeg (68 MB) do not fit the 64 MiB a call carries, and results/ must stay
# behind (moved out of the checkout for the call): the box has torch, numba, OpenCV, matplotlib, tensorboard.
# Then, in the device call: `bash benchmarks/gpu_machine_setup.sh && python benchmarks/gpu_suite.py ...`.
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl
# editable, as in the repository's own venv: `retro_atari_kit.integrations` maps to integrations/
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e .
python3 -c "import retro_atari_kit, torch, numba, cv2, ale_py; print('GPU machine ready:', torch.__version__, \
torch.cuda.get_device_name(0), 'numba', numba.__version__, 'cv2', cv2.__version__, 'ale_py', ale_py.__version__)"
