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
