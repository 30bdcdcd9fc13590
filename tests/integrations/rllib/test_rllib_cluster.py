"""A two-node Ray cluster on this machine: a head without CPUs for env runners and a worker node with 2 CPUs.
The env runners must run on the worker node, whose fresh Ray worker processes never imported the kit: the
env ID resolves there through the config alone. A node that cannot make the env is named in one line."""

from __future__ import annotations

import pytest
import ray
from ray.cluster_utils import Cluster
from retro_atari_kit.integrations.rllib import algo_config, check_nodes

from retro_atari_kit.runs import RunError

pytestmark = pytest.mark.slow

ENV = "RetroKit/Pong-v0"


@pytest.fixture(scope="module")
def two_nodes():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    worker = cluster.add_node(num_cpus=2)
    ray.init(address=cluster.address, logging_level="warning")
    try:
        yield cluster, worker.node_id
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.timeout(300)
def test_env_runners_run_on_the_second_node_without_a_user_import(two_nodes):
    _, worker_id = two_nodes

    @ray.remote(num_cpus=1)
    def fresh_worker():
        import gymnasium as gym

        known_before = "RetroKit/Pong-v0" in gym.registry
        gym.make("retro_atari_kit:RetroKit/Pong-v0").close()  # the ID the runners get
        return ray.get_runtime_context().get_node_id(), known_before

    # a fresh worker on the second node does not know the ID by itself (gymnasium has no plugin autoload)
    node, known_before = ray.get(fresh_worker.remote())
    assert node == worker_id and not known_before

    cfg = algo_config(
        "ppo",
        ENV,
        num_env_runners=2,
        num_envs_per_env_runner=1,
        rollout_fragment_length=16,
        minibatch_size=32,
        num_epochs=1,
        env_kwargs={"max_episode_steps": 40},
    )
    assert cfg.env == "retro_atari_kit:RetroKit/Pong-v0"  # nothing else tells the workers about the kit
    algo = cfg.build_algo()
    try:
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled"] >= 32
        where = algo.env_runner_group.foreach_env_runner(
            lambda r: (ray.get_runtime_context().get_node_id(), r.env.num_envs), local_env_runner=False
        )
        assert [w[0] for w in where] == [worker_id, worker_id]
        assert all(n == 1 for _, n in where)
    finally:
        algo.stop()


@pytest.mark.timeout(120)
def test_node_check_names_the_node_that_cannot_make_the_env(two_nodes):
    cluster, _ = two_nodes
    assert len(check_nodes(ENV)) == 2  # both nodes can make Pong
    # an ALE kwarg every node rejects: the error names a node and the fix, in one line
    with pytest.raises(RunError) as err:
        check_nodes(ENV, {"frame_skip": 0})
    message = str(err.value)
    assert message.startswith("node ") and "cannot make RetroKit/Pong-v0" in message and "\n" not in message


# A node whose Python cannot import the kit, as on a machine where it was never installed: its raylet (and so
# every worker it starts) gets a sitecustomize that refuses the import before anything else runs.
BLOCK_THE_KIT = """
import importlib.abc
import sys


class _NoKit(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "retro_atari_kit" or name.startswith("retro_atari_kit."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoKit())
"""


@pytest.mark.timeout(180)
def test_node_check_names_a_node_without_the_kit(two_nodes, tmp_path):
    cluster, _ = two_nodes
    (tmp_path / "sitecustomize.py").write_text(BLOCK_THE_KIT, encoding="utf-8")
    # no CPUs: nothing but the zero-CPU probe is ever scheduled there
    broken = cluster.add_node(num_cpus=0, env_vars={"PYTHONPATH": str(tmp_path)})
    try:
        with pytest.raises(RunError) as err:
            check_nodes(ENV)
        message = str(err.value)
        assert f"(id {broken.node_id[:8]})" in message, message
        assert "retro_atari_kit is not importable there" in message and "pip install" in message
        assert "\n" not in message
    finally:
        cluster.remove_node(broken)
    assert len(check_nodes(ENV)) == 2  # the healthy cluster passes again
