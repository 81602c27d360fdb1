"""The dashboard's figures in the Prometheus text format, for ``GET /metrics``.

What the overview plots, for a scraper: the counts of the knowledge base, and of the
last sync its documents changed and failed (new and still failing), chunks embedded,
reused and kept, tokens embedded and saved, and seconds per stage. Written with
``prometheus_client`` into a registry of its own per request, so nothing of the
process (its own metrics, other registries) leaks into the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kbsync.report import SyncResult

__all__ = ["CONTENT_TYPE", "metrics_text"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The media type of the Prometheus text format (version 0.0.4)."""


def metrics_text(overview: Mapping[str, Any], last: SyncResult | None) -> bytes:
    """The exposition of ``overview`` (:func:`kbsync.serve.views.overview`) and of the last
    recorded sync ``last`` (None before the first)."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    registry = CollectorRegistry(auto_describe=False)

    def gauge(name: str, help_text: str, value: float,
              labels: Mapping[str, str] | None = None) -> None:
        metric = Gauge(name, help_text, list(labels or {}), registry=registry)
        (metric.labels(**labels) if labels else metric).set(value)

    for name in ("documents", "chunks", "embeddings", "runs"):
        gauge(f"kbsync_{name}", f"{name.capitalize()} the knowledge base holds"
              if name != "runs" else "Syncs recorded", overview[name])
    if last is not None:
        series = overview["embeddings_per_run"]
        figures = series[-1] if series else {}
        action = Gauge("kbsync_last_sync_documents", "Documents of the last sync, by action",
                       ["action"], registry=registry)
        for name, n in sorted(last.documents.items()):
            action.labels(action=name).set(n)
        gauge("kbsync_last_sync_still_failing", "Documents the last sync found failing as "
              "before, not read again", last.still_failing)
        gauge("kbsync_last_sync_problems", "Whether the last sync met a new problem (1) or "
              "not (0)", int(last.failed))
        for name in ("computed", "reused", "kept"):
            gauge(f"kbsync_last_sync_chunks_{name}", f"Chunks of the last sync {name} "
                  "(embeddings)", figures.get(name, 0))
        gauge("kbsync_last_sync_tokens_embedded", "Tokens the last sync embedded",
              figures.get("tokens_embedded", 0))
        gauge("kbsync_last_sync_tokens_saved", "Tokens a full re-embed would also have spent "
              "on the chunks the last sync reused or kept", figures.get("tokens_saved", 0))
        stage = Gauge("kbsync_last_sync_seconds", "Seconds the last sync spent, by stage",
                      ["stage"], registry=registry)
        for name, seconds in last.seconds.items():
            stage.labels(stage=name).set(seconds)
        gauge("kbsync_last_sync_interrupted", "Whether the last sync stopped before its end",
              int(last.interrupted))
    return bytes(generate_latest(registry))
