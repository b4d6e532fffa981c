"""`dimster cluster redeploy`: whatever fails half-way is one error line with the cluster error's
exit code, and a run on the environment is told. No broker needed: the backend is a stand-in."""

import sys
from types import SimpleNamespace

import pytest

from dimster.cli import app, cluster
from dimster.errors import ClusterError

pytestmark = pytest.mark.unit


class FailingRedeploy:
    def __init__(self, error: Exception):
        self.error = error

    def redeploy(self, progress):
        progress("node 1: stopping (pid 12345)")
        raise self.error


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (TimeoutError("timeout after 10 seconds"), "redeploy of 'local' failed: TimeoutError: timeout"),
        (ClusterError("the Admin API refused the broker config change: x"), "the Admin API refused the broker config"),
    ],
)
def test_a_failed_redeploy_is_one_line_with_exit_code_3(monkeypatch, capsys, error, line):
    told = []
    monkeypatch.setattr(cluster, "load_environment", lambda env: SimpleNamespace(name=env))
    monkeypatch.setattr(cluster, "backend_for", lambda profile: FailingRedeploy(error))
    monkeypatch.setattr(cluster, "notify_run", lambda env, event, message: told.append(event))
    monkeypatch.setattr(sys, "argv", ["dimster", "cluster", "redeploy", "local"])
    with pytest.raises(SystemExit) as exit_:
        app.main()
    assert exit_.value.code == 3
    errors = [x for x in capsys.readouterr().err.splitlines() if x.startswith("dimster:")]
    assert len(errors) == 1 and errors[0].startswith("dimster: error: ") and line in errors[0]
    assert told == ["cluster_redeploy_started", "cluster_redeploy_failed"]


class Stopping:
    def down(self, progress):
        for node_id, pid in ((1, 101), (2, 102), (3, 103)):
            progress(f"node {node_id} (pid {pid}) stopped")
        return [101, 102, 103]


def test_down_says_each_node_and_then_the_summary_on_lines_of_their_own(monkeypatch, capsys):
    """Its progress and its summary on one stream: a capture that shows stdout before stderr keeps
    them in order, each on its own line."""
    monkeypatch.setattr(cluster, "load_environment", lambda env: SimpleNamespace(name=env, kafka_version="4.4.0"))
    monkeypatch.setattr(cluster, "backend_for", lambda profile: Stopping())
    monkeypatch.setattr(sys, "argv", ["dimster", "cluster", "down", "localBeefy"])
    with pytest.raises(SystemExit) as exit_:
        app.main()
    assert exit_.value.code == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "node 1 (pid 101) stopped",
        "node 2 (pid 102) stopped",
        "node 3 (pid 103) stopped",
        "'localBeefy': stopped 3 node(s)",
    ]
    assert out.err == ""
