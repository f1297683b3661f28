"""`/metrics`: what the front and the backends are doing, in the Prometheus text format.

The prometheus_client library writes the format. The front's own counters (requests by
era, refusals by reason, requests in flight) are its metrics; everything else is read
when scraped from what the instance already keeps (backend states, restarts, calls,
the call latency histograms the listener records per server and tool), through a
collector, so the call path gains nothing for being observed.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from prometheus_client.metrics_core import Metric

    from assern.actors.backend.status import BackendStatus
    from assern.actors.listener.stats import CallStats


class _InstanceCollector(Collector):
    def __init__(
        self,
        backends: Callable[[], Mapping[str, BackendStatus]],
        stats: CallStats,
        sessions: Callable[[], Mapping[str, int]],
    ) -> None:
        self._backends = backends
        self._stats = stats
        self._sessions = sessions

    def collect(self) -> Iterator[Metric]:
        statuses = self._backends()
        up = GaugeMetricFamily("assern_backend_up", "1 when the backend is ready", labels=["server"])
        state = GaugeMetricFamily(
            "assern_backend_state", "The backend's state (1 for its current one)", labels=["server", "state"]
        )
        restarts = CounterMetricFamily(
            "assern_backend_restarts", "Restarts of the backend", labels=["server"]
        )
        in_flight = GaugeMetricFamily(
            "assern_backend_in_flight", "Calls in flight at the backend", labels=["server"]
        )
        for name, status in statuses.items():
            up.add_metric([name], 1.0 if status.state.value == "ready" else 0.0)
            state.add_metric([name, status.state.value], 1.0)
            restarts.add_metric([name], float(status.restarts))
            in_flight.add_metric([name], float(status.in_flight))
        yield from (up, state, restarts, in_flight)
        calls = CounterMetricFamily(
            "assern_calls", "Finished tool calls", labels=["server", "tool", "outcome"]
        )
        latency = HistogramMetricFamily(
            "assern_call_duration_seconds", "Tool call latency through assern", labels=["server", "tool"]
        )
        for (server, tool), series in self._stats.series().items():
            for outcome, count in series.outcomes.items():
                calls.add_metric([server, tool, outcome], float(count))
            buckets = [(_bound(b), float(c)) for b, c in series.cumulative()]
            latency.add_metric([server, tool], buckets, series.total_seconds)
        yield from (calls, latency)
        sessions = GaugeMetricFamily("assern_clients", "Connected clients by kind", labels=["kind"])
        for kind, count in self._sessions().items():
            sessions.add_metric([kind], float(count))
        yield sessions


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class Metrics:
    """The front's registry: its own counters plus the instance's state when scraped."""

    def __init__(
        self,
        backends: Callable[[], Mapping[str, BackendStatus]],
        stats: CallStats,
        sessions: Callable[[], Mapping[str, int]],
    ) -> None:
        stats.keep_totals()
        self.registry = CollectorRegistry(auto_describe=False)
        self._requests = Counter(
            "assern_http_requests", "Requests to /mcp by protocol era", ["era"], registry=self.registry
        )
        self._refusals = Counter(
            "assern_http_refusals", "Requests refused, by reason", ["reason"], registry=self.registry
        )
        self._in_flight = Gauge(
            "assern_http_in_flight", "Requests to /mcp being served", registry=self.registry
        )
        self.registry.register(_InstanceCollector(backends, stats, sessions))

    @contextmanager
    def request(self, modern: bool) -> Iterator[None]:
        self._requests.labels("2026-07-28" if modern else "handshake").inc()
        self._in_flight.inc()
        try:
            yield
        finally:
            self._in_flight.dec()

    def refused(self, reason: str) -> None:
        self._refusals.labels(reason).inc()

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
