"""--engine ray on a real local Ray cluster (tests/raycluster.py): a head and a second node on
loopback, each with its own msq-node label, in their own network and PID namespaces.

Outside CI these tests skip, saying why, where Ray is not installed (pip install -e '.[ray]') or
the namespaces cannot be made (root needed); under CI=true that is a failure. All of them run in
one pytest worker (xdist_group), which starts one cluster for the module.
"""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

from tests.raycluster import ADDRESS, LABEL, running, why_unavailable

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def cluster():
    why = why_unavailable()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the Ray engine's tests: {why}")
        pytest.skip(why)
    with running() as started:
        yield started


def test_cluster_places_tasks_on_labelled_nodes(cluster, tmp_path):
    """The fixture's cluster is what the engine relies on: two live nodes told apart by label,
    Arrow tables as task results."""
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent(f"""
        import pyarrow as pa, ray
        ray.init(address="{ADDRESS}", log_to_driver=False)
        @ray.remote(num_cpus=1, memory=64 << 20)
        def where():
            return pa.table({{"node": [ray.get_runtime_context().get_node_id()]}})
        for name in ("head", "n1"):
            got = ray.get([where.options(label_selector={{"{LABEL}": name}}).remote()
                           for _ in range(3)])
            nodes = set(pa.concat_tables(got).column("node").to_pylist())
            label = {{n["NodeID"]: n["Labels"]["{LABEL}"] for n in ray.nodes() if n["Alive"]}}
            print(name, sorted(label[n] for n in nodes))
    """))
    done = cluster.run([sys.executable, str(script)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["head ['head']", "n1 ['n1']"]
