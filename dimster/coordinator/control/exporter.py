"""The run's Prometheus endpoint: `/metrics` on loopback, served by prometheus-client from the latest
status snapshot the coordinator hands over (so the HTTP thread never reads the run while the main loop
changes it) and from the series per kind of client the workers' reports feed (client_series.py).
Run-wide names and units come from the one status schema (status_schema.py)."""

from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import ThreadingWSGIServer

from dimster.coordinator.control.api import serving_thread
from dimster.coordinator.control.client_series import ClientSeries
from dimster.coordinator.control.status_schema import FIELDS
from dimster.errors import DimsterError
from dimster.worker.protocol import IntervalReport

LABELS = ("environment", "run", "workload", "mode")


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args) -> None:
        pass  # a scrape is not news


class StatusExporter:
    def __init__(self, labels: dict[str, str], host: str = "127.0.0.1", port: int = 0):
        self.labels = [str(labels.get(name, "")) for name in LABELS]
        self.snapshot: dict = {}
        self.clients = ClientSeries(dict(zip(LABELS, self.labels, strict=True)))
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        try:
            # prometheus-client's own server, but one whose shutdown is prompt (control.SHUTDOWN_POLL_SECONDS)
            app = make_wsgi_app(self.registry)
            self.server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
        except OSError as e:
            raise DimsterError(f"the run's metrics endpoint cannot listen on {host}:{port}: {e.strerror}") from None
        self.thread = serving_thread(self.server, "metrics-endpoint")
        self.thread.start()
        self.address = f"{host}:{self.server.server_port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}/metrics"

    def update(self, status: dict) -> None:
        """The status to export from now on (a reference swap: the HTTP thread reads whole snapshots)."""
        self.snapshot = status

    def add(self, report: IntervalReport) -> None:
        self.clients.add(report)

    def collect(self):
        snapshot = self.snapshot
        for field in FIELDS:
            value = snapshot.get(field.name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue  # not known yet (no latency measured, lost before the end)
            family: CounterMetricFamily | GaugeMetricFamily
            if field.kind == "counter":
                family = CounterMetricFamily(field.metric.removesuffix("_total"), field.help, labels=LABELS)
            else:
                family = GaugeMetricFamily(field.metric, field.help, labels=LABELS)
            family.add_metric(self.labels, value * field.scale)
            yield family
        yield from self.clients.collect()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
