"""Names of the worker/master protocol over the backend (see ``docs/protocol.md``).

Both sides build the control keys and event topics from here, so a rename is
made once and a worker and a master can never disagree on a spelling.
"""

from __future__ import annotations

#: KV namespace of control flags.
CONTROL_NS = "fleet-control"


def drain_key(automation_type: str, worker_id: str) -> str:
    """The ``fleet-control`` KV key whose value ``"true"`` drains a worker's type."""
    return f"drain:{automation_type}:{worker_id}"


def worker_id_key(worker_id: str) -> str:
    """The ``fleet-control`` KV key a live worker process holds its id under (with a TTL)."""
    return f"worker-id:{worker_id}"


def emit_topic(automation_type: str) -> str:
    """Event topic of a new output entry of a type (published by ``streams.push``)."""
    return f"{automation_type}.emit"


def config_topic(automation_type: str) -> str:
    """Event topic announcing a new config generation: ``{worker_id, gen}``."""
    return f"config.{automation_type}"


def control_topic(automation_type: str) -> str:
    """Event topic of drain/resume requests: ``{worker_id, action}``."""
    return f"control.{automation_type}"


def cancel_topic(automation_type: str) -> str:
    """Event topic asking the slot running a task to stop it: ``{task_id}``."""
    return f"cancel.{automation_type}"


def worker_topic(automation_type: str) -> str:
    """Event topic of worker state changes: ``{worker_id, state}``."""
    return f"worker.{automation_type}"
