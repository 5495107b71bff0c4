"""Optional OpenTelemetry tracing (the ``[otel]`` extra; docs/operations.md "Tracing").

A submit stores the W3C ``traceparent`` of its span with the task (the REST
``traceparent`` header, the current span in ``ctx.submit`` and the Python client);
the worker restores it around ``run_one``, so the run is a child of the submit,
and ``ctx.emit`` adds a span under the run. Spans: ``fleet.submit <type>``,
``fleet.run <type>`` (type, task id, attempt, worker id, outcome) and
``fleet.emit <type>``.

Tracing is on when the OpenTelemetry SDK is installed and :func:`enable` found a
tracer provider to use: one the application set, or one built from the standard
``OTEL_*`` variables (``OTEL_TRACES_EXPORTER``: ``otlp``, ``console`` or ``none``,
``otlp`` when only ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; ``OTEL_SERVICE_NAME``;
the exporter's own ``OTEL_EXPORTER_OTLP_*``).
Otherwise :data:`ACTIVE` stays False and every hook is one test of it: nothing is
imported and nothing runs per task. A ``traceparent`` a client sent is kept with its
task either way (a later worker with tracing on continues the trace).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger("fleet.tracing")

#: True once :func:`enable` found a tracer provider; read by every hook.
ACTIVE = False

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_tracer: Any = None
_sdk_missing = False


def valid_traceparent(value: object) -> str | None:
    """``value`` if it is a W3C ``traceparent`` Fleet can continue, else None (an
    invalid header is ignored, as the W3C recommendation says, not refused)."""
    if not isinstance(value, str):
        return None
    found = _TRACEPARENT.match(value.strip().lower())
    if found is None:
        return None
    version, trace_id, span_id, _flags = found.groups()
    if version == "ff" or set(trace_id) == {"0"} or set(span_id) == {"0"}:
        return None
    return found.group(0)


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id (32 hex digits) a stored ``traceparent`` belongs to."""
    valid = valid_traceparent(traceparent)
    return None if valid is None else valid.split("-")[1]


def _disabled_by_env() -> bool:
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


#: Any of these set (and no ``OTEL_TRACES_EXPORTER``) means "export over OTLP".
_OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def _exporters() -> list[Any]:
    """The span exporters ``OTEL_TRACES_EXPORTER`` names (comma-separated). Unset, it
    is ``otlp`` when an OTLP endpoint is set, else nothing: installing the extra
    alone (a test or bench venv) exports nothing and costs nothing."""
    default = "otlp" if any(os.environ.get(v) for v in _OTLP_ENDPOINTS) else "none"
    names = os.environ.get("OTEL_TRACES_EXPORTER", default).split(",")
    out: list[Any] = []
    for name in (n.strip().lower() for n in names):
        if name in ("", "none"):
            continue
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            out.append(ConsoleSpanExporter())
        elif name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
            except ImportError:
                log.warning(
                    "OTEL_TRACES_EXPORTER=otlp, but no OTLP exporter is installed "
                    "(pip install 'fleet-automation[otel]'): no spans are exported"
                )
                continue
            out.append(OTLPSpanExporter())
        else:
            log.warning("OTEL_TRACES_EXPORTER: unknown exporter %r ignored", name)
    return out


def _provider() -> Any:
    """The tracer provider to use: the application's, else one built from the
    environment; None when there is nothing to export to."""
    from opentelemetry import trace

    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return current  # the application (or a test) set its own
    exporters = _exporters()
    if not exporters:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by Resource.create;
    # an attribute given here would win over them.
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": "fleet"}))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def enable() -> bool:
    """Turn tracing on if the SDK is installed and there is somewhere to send spans
    (called at the start of a worker, a master and ``fleet dev``); idempotent.
    Returns :data:`ACTIVE`."""
    global ACTIVE, _tracer, _sdk_missing
    if ACTIVE or _sdk_missing or _disabled_by_env():
        return ACTIVE
    try:
        import opentelemetry.sdk  # noqa: F401  (the extra: the API alone exports nothing)
        from opentelemetry import trace
    except ImportError:
        _sdk_missing = True  # asked once: a failed import is not cached by Python
        return False
    provider = _provider()
    if provider is None:
        return False
    _tracer = trace.get_tracer("fleet", tracer_provider=provider)
    ACTIVE = True
    return True


def shutdown() -> None:
    """Flush the spans still buffered (a process about to exit)."""
    if not ACTIVE:
        return
    from opentelemetry import trace

    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if flush is not None:
        flush()


def current_traceparent() -> str | None:
    """The ``traceparent`` of the current span (None: none, or tracing is off)."""
    if not ACTIVE:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return valid_traceparent(carrier.get("traceparent"))


def _parent(traceparent: str | None) -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if traceparent is None:
        return None
    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


@contextmanager
def submit_span(automation_type: str, parent: str | None = None) -> Iterator[str | None]:
    """A ``fleet.submit <type>`` span (child of ``parent``, else of the current
    span); yields the ``traceparent`` to store with the task. Tracing off: yields
    ``parent`` as it came."""
    if not ACTIVE:
        yield valid_traceparent(parent)
        return
    from opentelemetry.trace import SpanKind

    with _tracer.start_as_current_span(
        f"fleet.submit {automation_type}",
        context=_parent(resampled(valid_traceparent(parent))),
        kind=SpanKind.PRODUCER,
        attributes={"fleet.type": automation_type},
    ):
        yield current_traceparent()


def trusts_client_sampling() -> bool:
    """``FLEET_TRACE_TRUST_CLIENT``: true when a client's ``sampled`` flag decides
    whether its submit's trace is recorded (default: the configured sampler does)."""
    return os.environ.get("FLEET_TRACE_TRUST_CLIENT", "").strip().lower() in ("1", "true", "yes")


def resampled(traceparent: str | None) -> str | None:
    """A client's ``traceparent`` with its ``sampled`` flag set by this process's
    sampler, as if the trace started here (its trace id kept, so the spans still join
    the client's trace when both record it): a client cannot force export past
    the configured ratio, nor turn it off, unless :func:`trusts_client_sampling`."""
    if traceparent is None or trusts_client_sampling():
        return traceparent
    sampler = getattr(_tracer, "sampler", None)
    if sampler is None:  # an application's own tracer: its provider decides
        return traceparent
    version, trace_id, span_id, flags = traceparent.split("-")
    decision = sampler.should_sample(None, int(trace_id, 16), "fleet.submit")
    sampled = decision.decision.is_sampled()
    bits = (int(flags, 16) & ~1) | (1 if sampled else 0)
    return f"{version}-{trace_id}-{span_id}-{bits:02x}"


@contextmanager
def run_span(
    automation_type: str, task_id: str, attempt: int, worker_id: str, traceparent: str | None
) -> Iterator[Any]:
    """The ``fleet.run <type>`` span around one attempt, a child of the task's
    stored ``traceparent``; set its outcome with :func:`end_run`."""
    from opentelemetry.trace import SpanKind

    with _tracer.start_as_current_span(
        f"fleet.run {automation_type}",
        context=_parent(valid_traceparent(traceparent)),
        kind=SpanKind.CONSUMER,
        attributes={
            "fleet.type": automation_type,
            "fleet.task_id": task_id,
            "fleet.attempt": attempt,
            "fleet.worker_id": worker_id,
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


def end_run(span: Any, outcome: str, error: str | None = None) -> None:
    """Record how the attempt ended on its span (an error marks it failed)."""
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("fleet.outcome", outcome)
    if error is not None:
        span.set_attribute("fleet.error", error[:500])
        span.set_status(Status(StatusCode.ERROR, error[:500]))


@contextmanager
def emit_span(automation_type: str) -> Iterator[None]:
    """A ``fleet.emit <type>`` span under the current one (call only when ACTIVE)."""
    from opentelemetry.trace import SpanKind

    with _tracer.start_as_current_span(
        f"fleet.emit {automation_type}",
        kind=SpanKind.PRODUCER,
        attributes={"fleet.type": automation_type},
    ):
        yield
