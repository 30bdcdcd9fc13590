"""Every Ray the kit's code and tests start with their own CPU count is a Ray of their own: ``ray.init`` with
``num_cpus`` / ``num_gpus`` also passes ``address="local"`` (or an explicit address).

A plain ``ray.init(num_cpus=2)`` joins a cluster already running on the host (another job's, found through
``RAY_ADDRESS`` or the last ``ray start``) and Ray then refuses: "When connecting to an existing cluster,
num_cpus and num_gpus must not be provided". ``retrokit train`` starts its own Ray beside such a cluster
(``integrations/rllib/training.py``; ``test_rllib_beside_a_cluster.py`` runs it beside a real one), and so
must the suite's fixtures, or ``python -m pytest`` fails while another job runs Ray.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SEARCHED = ("tests", "integrations")


def joining_inits(source: str) -> list[int]:
    """Lines of ``ray.init(...)`` calls that give ``num_cpus`` or ``num_gpus`` and no address."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "init"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "ray"
        ):
            continue
        names = {kw.arg for kw in node.keywords}
        if names & {"num_cpus", "num_gpus"} and "address" not in names and not node.args:
            lines.append(node.lineno)
    return lines


def test_no_ray_init_with_a_cpu_count_joins_another_cluster():
    found = []
    for folder in SEARCHED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line in joining_inits(path.read_text(encoding="utf-8")):
                found.append(f"{path.relative_to(ROOT)}:{line}")
    assert not found, f"ray.init with num_cpus / num_gpus and no address='local': {found}"


def test_the_check_finds_a_joining_init():
    assert joining_inits("import ray\nray.init(num_cpus=2, logging_level='warning')\n") == [2]
    assert joining_inits("import ray\nray.init(address='local', num_cpus=2)\n") == []
    assert joining_inits("import ray\nray.init(address=cluster.address)\nray.init()\n") == []
