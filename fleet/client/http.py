"""``FleetClient``: a small synchronous client of the master's REST API (httpx).

Every failure becomes a :class:`ClientError` whose message a person can act on:
the master is not reachable, the token was refused (401) or lacks the scope
(403), the input was invalid (422, one line per field), and so on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, overload
from urllib.parse import quote

import httpx

from fleet.client.answers import (
    BatchItemError,
    CatalogEntryOut,
    ConfigOut,
    ConfigWritten,
    CostsOut,
    DeadLetter,
    DomainForgotten,
    DomainOut,
    DomainPage,
    ErrorGroupOut,
    ErrorGroupPage,
    GroupOut,
    GroupPage,
    HistoryOut,
    IdentitiesCreated,
    IdentityDeleted,
    IdentityOut,
    IdentityPage,
    IdentityPools,
    OutputEntry,
    QueueDepths,
    RunOut,
    RunPage,
    ScheduleDeleted,
    ScheduleOut,
    SchedulePage,
    SubmitResult,
    TaskCancelled,
    TaskPageBody,
    TaskRecord,
    TypeRow,
    WorkerAction,
    WorkerForgotten,
    WorkerOut,
)
from fleet.client.tokenfile import token_path
from fleet.core import tracing
from fleet.core.results import FINAL_STATES, MAX_WAIT_SECONDS

#: States after which a task's record no longer changes (or never will: unknown).
ENDED_STATES = FINAL_STATES | {"unknown"}


class ClientError(Exception):
    """A request to the master failed; ``str()`` says why and what to do.

    Attributes:
        status: The HTTP status, or None when the master was not reached.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def format_validation(detail: Any) -> str:
    """FastAPI-shaped 422 detail as ``field.path: message`` lines."""
    if not isinstance(detail, list):
        return str(detail)
    lines = []
    for err in detail:
        if not isinstance(err, dict):
            lines.append(str(err))
            continue
        loc = [str(p) for p in err.get("loc", []) if p != "body"]
        where = ".".join(loc) or "body"
        lines.append(f"{where}: {err.get('msg', 'invalid')}")
    return "\n".join(lines)


def _sent_a_token(response: httpx.Response) -> bool:
    try:
        return "authorization" in response.request.headers
    except RuntimeError:  # a response built without its request (tests)
        return True


def unauthorized_message(sent: bool, token_from: str | None) -> str:
    """What a 401 means: no token was sent at all, or the one sent was refused.

    Args:
        sent: Whether the request carried a bearer token.
        token_from: Where that token came from (``--token``, ``FLEET_ADMIN_TOKEN``,
            the token file's path), if known.
    """
    if not sent:
        return (
            "no admin token (401): pass --token, set FLEET_ADMIN_TOKEN, or run on the "
            f"master's host (a loopback master writes {token_path()})"
        )
    where = f", from {token_from}" if token_from else ""
    return (
        f"the master refused the token (401){where}: it is not one of the master's "
        "tokens; check FLEET_ADMIN_TOKEN on the master, or pass another with --token"
    )


def error_for(response: httpx.Response, *, token_from: str | None = None) -> ClientError:
    """The :class:`ClientError` describing a failed response.

    Args:
        response: The non-2xx answer.
        token_from: Where the client's token came from, named in a 401's message.
    """
    try:
        detail: Any = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = response.text[:500]
    code = response.status_code
    if code == 401:
        msg = unauthorized_message(_sent_a_token(response), token_from)
    elif code == 403:
        msg = f"this token is not allowed to do that (403): {detail}"
    elif code == 422:
        msg = "invalid input (422):\n" + format_validation(detail)
    elif code == 413:
        msg = f"request too large (413): {detail}"
    else:
        msg = f"{detail} ({code})"
    return ClientError(msg, code)


def _seg(value: str) -> str:
    # "." and ".." are path steps to every URL parser (httpx, browsers): quoted, they
    # reach the master as the names they are, not as a way up the path.
    if value in (".", ".."):
        return value.replace(".", "%2E")
    return quote(value, safe="")


class FleetClient:
    """Talk to one master.

    Args:
        base_url: The master's URL (``FLEET_MASTER_URL``).
        token: A bearer token (admin, read or scoped).
        timeout: Seconds per request.
        token_from: Where ``token`` came from (for the message of a refused token).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout: float = 30.0,
        token_from: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token_from = token_from
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)
        tracing.enable()  # the application's tracer provider, if it set one

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> FleetClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """One request; the decoded JSON answer. ``timeout`` replaces the client's
        for this request (a long poll needs longer); ``headers`` are added to it.

        Raises:
            ClientError: Connection failure or a non-2xx answer.
        """
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        if headers:
            extra["headers"] = headers
        try:
            response = self._http.request(method, path, json=json_body, params=params, **extra)
        except httpx.ConnectError as exc:
            raise ClientError(
                f"cannot reach the master at {self.base_url} ({exc}); is `fleet master` "
                "running, and is FLEET_MASTER_URL right?"
            ) from exc
        except httpx.TimeoutException as exc:
            raise ClientError(f"the master at {self.base_url} did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise ClientError(f"request to {self.base_url} failed: {exc}") from exc
        if response.status_code >= 400:
            raise error_for(response, token_from=self.token_from)
        if not response.content:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    # ------------------------------------------------------------ routes
    def _type(self, automation_type: str) -> str:
        return f"/api/v1/automations/{_seg(automation_type)}"

    @overload
    def submit(
        self, automation_type: str, payload: Any, *, wait: None = None, **options: Any
    ) -> SubmitResult: ...

    @overload
    def submit(
        self, automation_type: str, payload: Any, *, wait: float, **options: Any
    ) -> TaskRecord: ...

    def submit(
        self, automation_type: str, payload: Any, *, wait: float | None = None, **options: Any
    ) -> SubmitResult | TaskRecord:
        """Submit one task; options as the REST body (priority, task_id, ...).

        Without ``wait``, the submit's answer (``task_id``, ...). With ``wait``
        seconds, the task's record once it ended or the time is up (its
        ``state`` says which; ``outputs`` holds what it emitted).
        """
        body = {"payload": payload, **{k: v for k, v in options.items() if v is not None}}
        result: SubmitResult = self._submit(automation_type, "/tasks", body)
        if wait is None:
            return result
        return self.wait_task(automation_type, result["task_id"], wait)

    def wait_task(self, automation_type: str, task_id: str, seconds: float) -> TaskRecord:
        """The task's record once it ended (done, dead, cancelled or unknown) or
        ``seconds`` passed, by long polls of at most 60 s each."""
        deadline = time.monotonic() + max(seconds, 0.0)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return self.task_state(automation_type, task_id)
            record = self.task_state(automation_type, task_id, wait=min(left, MAX_WAIT_SECONDS))
            if record.get("state") in ENDED_STATES:
                return record

    def submit_batch(
        self, automation_type: str, tasks: list[dict[str, Any]]
    ) -> list[SubmitResult | BatchItemError]:
        """Submit up to 10,000 task bodies; one result (or ``{error}``) per task."""
        result = self._submit(automation_type, "/tasks/batch", {"tasks": tasks})
        results: list[SubmitResult | BatchItemError] = result["results"]
        return results

    def _submit(self, automation_type: str, tail: str, body: dict[str, Any]) -> Any:
        """POST a submit; with tracing on (``fleet.core.tracing``), inside a submit
        span whose ``traceparent`` header the tasks keep."""
        path = self._type(automation_type) + tail
        if not tracing.ACTIVE:
            return self.request("POST", path, json_body=body)
        with tracing.submit_span(automation_type) as traceparent:
            headers = {"traceparent": traceparent} if traceparent else None
            return self.request("POST", path, json_body=body, headers=headers)

    def task_state(
        self, automation_type: str, task_id: str, *, wait: float | None = None
    ) -> TaskRecord:
        """The task's record; with ``wait`` (0 < wait <= 60), held by the master
        until the task ends or the time is up."""
        params = None if wait is None else {"wait": wait}
        timeout = None if wait is None else wait + (self._http.timeout.read or 30.0)
        result: TaskRecord = self.request(
            "GET",
            f"{self._type(automation_type)}/tasks/{_seg(task_id)}",
            params=params,
            timeout=timeout,
        )
        return result

    def cancel(self, automation_type: str, task_id: str) -> TaskCancelled:
        result: TaskCancelled = self.request(
            "DELETE", f"{self._type(automation_type)}/tasks/{_seg(task_id)}"
        )
        return result

    # ------------------------------------------------------------ runs
    def create_run(
        self,
        *,
        name: str | None = None,
        on_complete: dict[str, Any] | None = None,
        types: list[str] | None = None,
        max_delay_seconds: float | None = None,
        budget: dict[str, float] | None = None,
        monitors: dict[str, Any] | None = None,
    ) -> str:
        """Create a run (``POST /api/v1/runs``); its id. Submit into it with
        ``submit(..., run=run_id)``; ``on_complete`` ``{"type", "payload"}`` is
        submitted once when it ends done. ``types``: the automation types a scoped
        token may submit into it; ``max_delay_seconds``: the longest delay of a task
        of it (default a day); ``budget``: caps by meter (``{"spend": 50}``,
        ``{"bytes": 5e9}``) at which it pauses (docs/costs.md); ``monitors``: thresholds
        on its data (``{"min_items": 100}``, docs/monitors.md)."""
        options = (
            ("name", name),
            ("on_complete", on_complete),
            ("types", types),
            ("max_delay_seconds", max_delay_seconds),
            ("budget", budget),
            ("monitors", monitors),
        )
        body = {k: v for k, v in options if v is not None}
        result: dict[str, Any] = self.request("POST", "/api/v1/runs", json_body=body)
        return str(result["run_id"])

    def run(self, run_id: str, *, wait: float | None = None) -> RunOut:
        """A run's state and counters; with ``wait`` seconds, once it ended or the
        time is up (long polls of at most 60 s each)."""
        deadline = time.monotonic() + max(wait or 0.0, 0.0)
        while True:
            left = deadline - time.monotonic()
            params = None if wait is None or left <= 0 else {"wait": min(left, MAX_WAIT_SECONDS)}
            timeout = None if params is None else params["wait"] + (self._http.timeout.read or 30.0)
            path = f"/api/v1/runs/{_seg(run_id)}"
            record: RunOut = self.request("GET", path, params=params, timeout=timeout)
            if params is None or record.get("state") not in ("running", "paused"):
                return record

    def tasks(
        self,
        automation_type: str,
        state: str = "pending",
        *,
        run: str | None = None,
        after: str | None = None,
        limit: int = 50,
    ) -> TaskPageBody:
        """One page of the type's tasks in ``state`` (pending, scheduled, processing,
        dead or done), newest first, only ``run``'s if given: ``{"items", "next"}``."""
        params: dict[str, Any] = {"state": state, "limit": limit}
        if run is not None:
            params["run"] = run
        if after is not None:
            params["after"] = after
        result: TaskPageBody = self.request(
            "GET", self._type(automation_type) + "/tasks", params=params
        )
        return result

    def runs(self, *, after: str | None = None, limit: int = 50) -> RunPage:
        """One page of runs, newest first: ``{"runs": [...], "next": cursor}``."""
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            params["after"] = after
        result: RunPage = self.request("GET", "/api/v1/runs", params=params)
        return result

    def pause_run(self, run_id: str, reason: str | None = None) -> RunOut:
        """Pause a run: its queued tasks wait (not dispatched), running ones finish."""
        body = {} if reason is None else {"reason": reason}
        result: RunOut = self.request("POST", f"/api/v1/runs/{_seg(run_id)}/pause", json_body=body)
        return result

    def resume_run(self, run_id: str, budget: dict[str, float] | None = None) -> RunOut:
        """Resume a paused run, with a new ``budget`` if given (a run paused at its
        budget needs a higher one)."""
        body = {} if budget is None else {"budget": budget}
        result: RunOut = self.request("POST", f"/api/v1/runs/{_seg(run_id)}/resume", json_body=body)
        return result

    def cancel_run(self, run_id: str) -> RunOut:
        """Cancel a run: its pending tasks are cancelled, running ones stopped."""
        result: RunOut = self.request("DELETE", f"/api/v1/runs/{_seg(run_id)}")
        return result

    def queue(self, automation_type: str) -> QueueDepths:
        result: QueueDepths = self.request("GET", f"{self._type(automation_type)}/queue")
        return result

    def history(self, automation_type: str, window: str = "1h") -> HistoryOut:
        """A type's history over ``window`` (``1h``, ``24h`` or ``30d``): ``{type, window,
        step_seconds, points: [{t, submitted, completed, ..., p50, p95}]}``."""
        result: HistoryOut = self.request(
            "GET", f"{self._type(automation_type)}/history", params={"window": window}
        )
        return result

    def dead_peek(self, automation_type: str, n: int = 50) -> list[DeadLetter]:
        result: list[DeadLetter] = self.request(
            "GET", f"{self._type(automation_type)}/dead", params={"n": n}
        )
        return result

    def dead_replay(
        self, automation_type: str, *, n: int | None = None, task_ids: list[str] | None = None
    ) -> int:
        body = {k: v for k, v in (("n", n), ("task_ids", task_ids)) if v is not None}
        result = self.request("POST", f"{self._type(automation_type)}/dead/replay", json_body=body)
        return int(result["replayed"])

    def dead_drain(self, automation_type: str) -> int:
        return int(self.request("DELETE", f"{self._type(automation_type)}/dead")["drained"])

    def output_peek(
        self, automation_type: str, n: int = 20, *, newest: bool = False
    ) -> list[OutputEntry]:
        """The ``n`` oldest output entries (``newest``: the ``n`` newest), oldest first."""
        params: dict[str, Any] = {"n": n}
        if newest:
            params["newest"] = "true"
        result: list[OutputEntry] = self.request(
            "GET", f"{self._type(automation_type)}/output", params=params
        )
        return result

    def groups(
        self, automation_type: str, *, after: str | None = None, limit: int = 1000
    ) -> GroupPage:
        """One page of a type's groups: ``{groups, next, defaults}``."""
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            params["after"] = after
        result: GroupPage = self.request(
            "GET", f"{self._type(automation_type)}/groups", params=params
        )
        return result

    def group(self, automation_type: str, group: str) -> GroupOut:
        """One group: counts, effective limits, its own settings, throttle."""
        result: GroupOut = self.request(
            "GET", f"{self._type(automation_type)}/groups/{_seg(group)}"
        )
        return result

    def group_set(
        self,
        automation_type: str,
        group: str,
        *,
        concurrency: int | None = None,
        rate: str | None = None,
        paused: bool = False,
    ) -> GroupOut:
        """Replace a group's own settings (None: the type's value)."""
        body = {"concurrency": concurrency, "rate": rate, "paused": paused}
        result: GroupOut = self.request(
            "PUT", f"{self._type(automation_type)}/groups/{_seg(group)}", json_body=body
        )
        return result

    def group_reset(self, automation_type: str, group: str) -> GroupOut:
        """Back to the type's limits; any throttle in force is lifted."""
        result: GroupOut = self.request(
            "DELETE", f"{self._type(automation_type)}/groups/{_seg(group)}"
        )
        return result

    def schedules(self, automation_type: str) -> list[ScheduleOut]:
        """Every schedule of a type by id (one that cannot be read as
        ``{"id", "unreadable": true, "raw", "error"}``)."""
        return self.schedule_listing(automation_type)["schedules"]

    def schedule_listing(self, automation_type: str) -> SchedulePage:
        """The whole schedule list, every page followed: ``schedules`` and, for a type
        that takes no tasks, a ``note`` saying why it has none."""
        params: dict[str, Any] = {"limit": 1000}
        result: SchedulePage = self.request(
            "GET", f"{self._type(automation_type)}/schedules", params=params
        )
        while result.get("next"):
            params["after"] = result["next"]
            page: SchedulePage = self.request(
                "GET", f"{self._type(automation_type)}/schedules", params=params
            )
            result["schedules"] += page["schedules"]
            result["next"] = page.get("next")
        return result

    def schedule(self, automation_type: str, schedule_id: str) -> ScheduleOut:
        """One schedule: its definition, ``next_run``, ``last_run``, ``last_task_id``."""
        result: ScheduleOut = self.request(
            "GET", f"{self._type(automation_type)}/schedules/{_seg(schedule_id)}"
        )
        return result

    def schedule_create(
        self, automation_type: str, schedule_id: str, payload: Any, **fields: Any
    ) -> ScheduleOut:
        """Create a schedule: ``cron=`` or ``every_seconds=``, and any other field
        (timezone, priority, group, max_attempts, enabled, misfire, jitter_seconds)."""
        body = {"id": schedule_id, "payload": payload, **fields}
        result: ScheduleOut = self.request(
            "POST", f"{self._type(automation_type)}/schedules", json_body=body
        )
        return result

    def schedule_patch(
        self, automation_type: str, schedule_id: str, changes: dict[str, Any]
    ) -> ScheduleOut:
        """Change some fields of a schedule (``{"enabled": False}`` pauses it)."""
        result: ScheduleOut = self.request(
            "PATCH",
            f"{self._type(automation_type)}/schedules/{_seg(schedule_id)}",
            json_body=changes,
        )
        return result

    def schedule_delete(self, automation_type: str, schedule_id: str) -> ScheduleDeleted:
        result: ScheduleDeleted = self.request(
            "DELETE", f"{self._type(automation_type)}/schedules/{_seg(schedule_id)}"
        )
        return result

    def schedule_run(self, automation_type: str, schedule_id: str) -> str:
        """Enqueue one run of a schedule now; returns its task id."""
        result = self.request(
            "POST", f"{self._type(automation_type)}/schedules/{_seg(schedule_id)}/run"
        )
        return str(result["task_id"])

    # ------------------------------------------------------------ identities
    def _identity(self, pool: str, identity_id: str) -> str:
        return f"/api/v1/identities/{_seg(pool)}/{_seg(identity_id)}"

    def identity_pools(self) -> IdentityPools:
        """Every identity pool with its counts by state."""
        result: IdentityPools = self.request("GET", "/api/v1/identities")
        return result

    def identities(
        self, pool: str, *, after: str | None = None, limit: int = 50, reveal: bool = False
    ) -> IdentityPage:
        """One page of a pool by id: ``{pool, items, next, counts}`` (secrets masked
        unless ``reveal``, which needs the admin token)."""
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            params["after"] = after
        if reveal:
            params["reveal"] = "true"
        result: IdentityPage = self.request(
            "GET", f"/api/v1/identities/{_seg(pool)}", params=params
        )
        return result

    def identity(self, pool: str, identity_id: str, *, reveal: bool = False) -> IdentityOut:
        """One identity, its state and stats."""
        params = {"reveal": "true"} if reveal else None
        result: IdentityOut = self.request("GET", self._identity(pool, identity_id), params=params)
        return result

    def identities_add(self, pool: str, identities: list[Any]) -> IdentitiesCreated:
        """Add identities (or replace those whose id exists), all or none."""
        result: IdentitiesCreated = self.request(
            "POST", f"/api/v1/identities/{_seg(pool)}", json_body={"identities": identities}
        )
        return result

    def identities_generate(self, pool: str, count: int, **plan: Any) -> IdentitiesCreated:
        """Generate ``count`` identities: ``proxies``, ``countries``, ``browsers``,
        ``id_prefix`` as ``POST /api/v1/identities/{pool}`` takes them."""
        body = {"generate": {"count": count, **plan}}
        result: IdentitiesCreated = self.request(
            "POST", f"/api/v1/identities/{_seg(pool)}", json_body=body
        )
        return result

    def identity_retire(
        self, pool: str, identity_id: str, reason: str | None = None
    ) -> IdentityOut:
        result: IdentityOut = self.request(
            "POST", f"{self._identity(pool, identity_id)}/retire", json_body={"reason": reason}
        )
        return result

    def identity_revive(self, pool: str, identity_id: str) -> IdentityOut:
        result: IdentityOut = self.request("POST", f"{self._identity(pool, identity_id)}/revive")
        return result

    def identity_delete(self, pool: str, identity_id: str) -> IdentityDeleted:
        result: IdentityDeleted = self.request("DELETE", self._identity(pool, identity_id))
        return result

    def costs(
        self,
        automation_type: str,
        *,
        window: str = "24h",
        after: str | None = None,
        limit: int = 50,
    ) -> CostsOut:
        """What a type spent: ``{type, window, meters, hours, domains, next}``."""
        params: dict[str, Any] = {"window": window, "limit": limit}
        if after is not None:
            params["after"] = after
        result: CostsOut = self.request(
            "GET", f"{self._type(automation_type)}/costs", params=params
        )
        return result

    def domains(
        self, automation_type: str, *, after: str | None = None, limit: int = 50
    ) -> DomainPage:
        """One page of a type's domains by name: ``{type, tiers, items, next}``."""
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            params["after"] = after
        result: DomainPage = self.request(
            "GET", f"{self._type(automation_type)}/domains", params=params
        )
        return result

    def domain(self, automation_type: str, domain: str) -> DomainOut:
        """One domain: its tier and verdicts."""
        result: DomainOut = self.request(
            "GET", f"{self._type(automation_type)}/domains/{_seg(domain)}"
        )
        return result

    def domain_set_tier(self, automation_type: str, domain: str, tier: str | int) -> DomainOut:
        """Put a domain at a tier (its name or index), fleet-wide from the next request."""
        result: DomainOut = self.request(
            "PUT", f"{self._type(automation_type)}/domains/{_seg(domain)}", json_body={"tier": tier}
        )
        return result

    def domain_forget(self, automation_type: str, domain: str) -> DomainForgotten:
        """Forget a domain: it starts again at the first tier."""
        result: DomainForgotten = self.request(
            "DELETE", f"{self._type(automation_type)}/domains/{_seg(domain)}"
        )
        return result

    def errors(
        self, automation_type: str, *, cursor: str | None = None, limit: int = 50
    ) -> ErrorGroupPage:
        """One page of a type's error groups, newest last seen first:
        ``{type, items, cursor}`` (docs/errors.md)."""
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        result: ErrorGroupPage = self.request(
            "GET", f"{self._type(automation_type)}/errors", params=params
        )
        return result

    def error_group(self, automation_type: str, group: str) -> ErrorGroupOut:
        """One error group with its traceback and its snapshots' descriptions."""
        result: ErrorGroupOut = self.request(
            "GET", f"{self._type(automation_type)}/errors/{_seg(group)}"
        )
        return result

    def error_html(self, automation_type: str, group: str, snapshot: str) -> str:
        """A snapshot's HTML, as text (the screenshot is at ``.../screenshot``)."""
        path = f"{self._type(automation_type)}/errors/{_seg(group)}/snapshots/{_seg(snapshot)}"
        return str(self.request("GET", f"{path}/html") or "")

    def config_get(self, automation_type: str) -> ConfigOut:
        result: ConfigOut = self.request("GET", f"{self._type(automation_type)}/config")
        return result

    def config_patch(
        self,
        automation_type: str,
        patch: dict[str, Any],
        *,
        worker_id: str | None = None,
        replace: bool = False,
    ) -> ConfigWritten:
        path = f"{self._type(automation_type)}/config"
        if worker_id is not None:
            path = f"{self._type(automation_type)}/workers/{_seg(worker_id)}/config"
        params = {"replace": "true"} if replace else None
        result: ConfigWritten = self.request("PATCH", path, json_body=patch, params=params)
        return result

    def worker(self, automation_type: str, worker_id: str) -> WorkerOut:
        result: WorkerOut = self.request(
            "GET", f"{self._type(automation_type)}/workers/{_seg(worker_id)}"
        )
        return result

    def workers(self, automation_type: str | None = None) -> list[WorkerOut]:
        path = (
            "/api/v1/workers"
            if automation_type is None
            else f"{self._type(automation_type)}/workers"
        )
        result: list[WorkerOut] = self.request("GET", path)
        return result

    def worker_action(
        self, automation_type: str, worker_id: str, action: str
    ) -> WorkerAction | WorkerForgotten:
        """``drain``, ``resume`` or ``forget`` one worker."""
        path = f"{self._type(automation_type)}/workers/{_seg(worker_id)}"
        if action == "forget":
            forgotten: WorkerForgotten = self.request("DELETE", path)
            return forgotten
        done: WorkerAction = self.request("POST", f"{path}/{action}")
        return done

    @overload
    def catalog(self, automation_type: None = None) -> dict[str, CatalogEntryOut]: ...

    @overload
    def catalog(self, automation_type: str) -> CatalogEntryOut: ...

    def catalog(
        self, automation_type: str | None = None
    ) -> dict[str, CatalogEntryOut] | CatalogEntryOut:
        """Every type's catalog entry by type, or one type's entry."""
        if automation_type is None:
            entries: dict[str, CatalogEntryOut] = self.request("GET", "/api/v1/catalog")
            return entries
        entry: CatalogEntryOut = self.request("GET", f"/api/v1/catalog/{_seg(automation_type)}")
        return entry

    def automations(self) -> list[TypeRow]:
        result: list[TypeRow] = self.request("GET", "/api/v1/automations")
        return result

    def events(self, types: list[str] | None = None) -> Iterator[tuple[str, Any]]:
        """Follow ``/api/v1/events``: yields ``(event name, data)`` until interrupted.

        Raises:
            ClientError: As :meth:`request`.
        """
        params = {"types": ",".join(types)} if types else None
        try:
            with self._http.stream(
                "GET", "/api/v1/events", params=params, timeout=httpx.Timeout(30, read=None)
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise error_for(response, token_from=self.token_from)
                name = "message"
                for line in response.iter_lines():
                    if line.startswith("event: "):
                        name = line[len("event: ") :]
                    elif line.startswith("data: "):
                        yield name, json.loads(line[len("data: ") :])
        except httpx.ConnectError as exc:
            raise ClientError(f"cannot reach the master at {self.base_url} ({exc})") from exc
