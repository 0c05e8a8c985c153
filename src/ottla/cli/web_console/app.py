"""The console's web application: server-rendered pages (Starlette and Jinja2), plain
HTML forms and no JavaScript beyond the theme toggle. Every Kafka call blocks, so each
runs in Starlette's thread pool; a failure becomes a message on the page."""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ottla.cli.consumer_groups import _parse_datetime
from ottla.cli.web_console import cluster, groups, messages, share_groups, topics
from ottla.cli.web_console.charts import Sampler
from ottla.cli.web_console.connection import Connection, ConsoleError

HERE = Path(__file__).parent
log = logging.getLogger("ottla.console")
T = TypeVar("T")


def _stamp(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["stamp"] = _stamp


def build_app(connection: Connection, sampler: Sampler | None = None) -> Starlette:
    """The pages of one cluster, reached through ``connection``; ``sampler`` scrapes the
    nodes' metrics for the charts (none: the charts page says how to turn them on)."""
    sampler = sampler or Sampler([])

    def checked(fn: Callable[..., T], *args: object) -> T:
        connection.check_listening()
        try:
            return fn(connection, *args)
        except ConsoleError as e:
            hint = connection.recent_error() if e.status == 503 else None
            if hint is None or hint in str(e):
                raise
            raise ConsoleError(f"{e} The client's last error: {hint}", e.status) from e

    async def call(fn: Callable[..., T], *args: object) -> T:
        return await run_in_threadpool(checked, fn, *args)

    def page(request: Request, template: str, status: int = 200, **context: object) -> Response:
        context.setdefault("notice", request.query_params.get("done"))
        context["bootstrap"] = connection.bootstrap
        return templates.TemplateResponse(request, template, context, status_code=status)

    def back(url: str, done: str, **query: str) -> Response:
        return RedirectResponse(f"{url}?{urlencode({**query, 'done': done})}",
                                status_code=303)

    async def overview(request: Request) -> Response:
        try:
            return page(request, "overview.html", overview=await call(cluster.overview))
        except ConsoleError as e:
            return page(request, "overview.html", e.status, error=str(e))

    async def topic_list(request: Request, error: str | None = None,
                         form: FormData | None = None) -> Response:
        try:
            rows = await call(topics.list_topics)
        except ConsoleError as e:
            return page(request, "topics.html", e.status, error=str(e), topics=None, form={})
        return page(request, "topics.html", 400 if error else 200, topics=rows,
                    error=error, form=form or {})

    async def topic_create(request: Request) -> Response:
        form = await request.form()
        name = str(form.get("name", ""))
        try:
            configs = _properties(str(form.get("configs", "")))
            await call(topics.create, name, _int(form.get("partitions")),
                       _int(form.get("replication_factor")), configs)
        except ConsoleError as e:
            return await topic_list(request, str(e), form)
        return back(f"/topics/{name}", f"Created topic {name}.")

    async def topic_detail(request: Request, error: str | None = None) -> Response:
        name = request.path_params["name"]
        try:
            detail = await call(topics.describe, name)
        except ConsoleError as e:
            return page(request, "topic.html", e.status if error is None else 400, name=name,
                        topic=None, error=str(e) if error is None else error)
        return page(request, "topic.html", 400 if error else 200, name=name, topic=detail,
                    error=error)

    async def topic_delete(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            await call(topics.delete, name)
        except ConsoleError as e:
            return await topic_detail(request, str(e))
        return back("/topics", f"Deleted topic {name}.")

    async def topic_config(request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        key = str(form.get("key", "")).strip()
        value = None if form.get("reset") else str(form.get("value", ""))
        try:
            await call(topics.alter_config, name, key, value)
        except ConsoleError as e:
            return await topic_detail(request, str(e))
        done = f"Reset {key} to its default." if value is None else f"Set {key}={value}."
        return back(f"/topics/{name}", done)

    async def topic_partitions(request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        try:
            total = _int(form.get("total"))
            if total is None:
                raise ConsoleError("The new partition count is required.")
            await call(topics.add_partitions, name, total)
        except ConsoleError as e:
            return await topic_detail(request, str(e))
        return back(f"/topics/{name}", f"{name} now has {total} partitions.")

    def browse_request(request: Request) -> messages.Browse:
        q = request.query_params
        start = q.get("start", "latest")
        position: int | None = None
        if start == "offset":
            position = _int(q.get("position")) or 0
        elif start == "timestamp":
            position = _timestamp(q.get("position", ""))
        partition = q.get("partition", "")
        return messages.Browse(_int(partition) if partition not in ("", "all") else None,
                               start, position, _int(q.get("limit")) or 50,
                               q.get("contains", ""), q.get("jsonpath", ""))

    async def topic_messages(request: Request, error: str | None = None) -> Response:
        name = request.path_params["name"]
        records: list[messages.Record] | None = None
        browse = messages.Browse()
        status = 400 if error else 200
        try:
            browse = browse_request(request)
            records = await call(messages.browse, name, browse)
        except ConsoleError as e:
            error, status = error or str(e), e.status
        return page(request, "messages.html", status, name=name,
                    records=records, browse=browse, error=error,
                    raw_position=request.query_params.get("position", ""),
                    download="/topics/" + name + "/messages.jsonl?" +
                    urlencode(request.query_params))

    async def topic_download(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            records = await call(messages.browse, name, browse_request(request))
        except ConsoleError as e:
            return PlainTextResponse(str(e), status_code=e.status)
        body = "".join(r.json_line(name) + "\n" for r in records)
        return Response(body, media_type="application/jsonl", headers={
            "Content-Disposition": f'attachment; filename="{name}.jsonl"'})

    async def topic_produce(request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        try:
            headers = list(_properties(str(form.get("headers", ""))).items())
            key = str(form.get("key", ""))
            partition, offset = await call(
                messages.produce, name, _int(form.get("partition")), key or None,
                str(form.get("value", "")), headers)
        except ConsoleError as e:
            return await topic_messages(request, str(e))
        return RedirectResponse(f"/topics/{name}/messages?" + urlencode({
            "partition": partition, "start": "offset", "position": offset,
            "done": f"Produced to partition {partition} at offset {offset}."}),
            status_code=303)

    async def group_list(request: Request) -> Response:
        try:
            return page(request, "groups.html", groups=await call(groups.list_groups))
        except ConsoleError as e:
            return page(request, "groups.html", e.status, error=str(e), groups=None)

    async def group_detail(request: Request, error: str | None = None) -> Response:
        group_id = request.query_params.get("id", "")
        try:
            detail = await call(groups.describe, group_id)
        except ConsoleError as e:
            return page(request, "group.html", e.status, group_id=group_id, group=None,
                        error=error or str(e), choices=groups.RESET_CHOICES)
        return page(request, "group.html", 400 if error else 200, group_id=group_id,
                    group=detail, error=error, choices=groups.RESET_CHOICES)

    async def group_reset(request: Request) -> Response:
        group_id = request.query_params.get("id", "")
        form = await request.form()
        scenario = str(form.get("scenario", ""))
        raw = str(form.get("value", "")).strip()
        try:
            value = _timestamp(raw) if scenario == "to_datetime" else _int(raw)
            if scenario in ("to_offset", "shift_by", "to_datetime") and value is None:
                raise ConsoleError(f"{scenario.replace('_', '-')} needs a value.")
            new = await call(groups.reset, group_id, scenario, value)
        except ConsoleError as e:
            return await group_detail(request, str(e))
        return back("/group", f"Reset {len(new)} partition(s) "
                    f"{scenario.replace('_', ' ')}.", id=group_id)

    async def share_group_list(request: Request) -> Response:
        try:
            return page(request, "share_groups.html",
                        groups=await call(share_groups.list_groups))
        except ConsoleError as e:
            return page(request, "share_groups.html", e.status, error=str(e), groups=None)

    async def share_group_detail(request: Request, error: str | None = None) -> Response:
        group_id = request.query_params.get("id", "")
        choices = share_groups.RESET_CHOICES
        try:
            detail = await call(share_groups.describe, group_id)
        except ConsoleError as e:
            return page(request, "share_group.html", e.status, group_id=group_id,
                        group=None, error=error or str(e), choices=choices)
        return page(request, "share_group.html", 400 if error else 200, group_id=group_id,
                    group=detail, error=error, choices=choices)

    async def share_group_reset(request: Request) -> Response:
        group_id = request.query_params.get("id", "")
        form = await request.form()
        scenario = str(form.get("scenario", ""))
        raw = str(form.get("value", "")).strip()
        try:
            when = _timestamp(raw) if scenario == "to_datetime" and raw else None
            if scenario == "to_datetime" and when is None:
                raise ConsoleError("to-datetime needs a value.")
            new = await call(share_groups.reset, group_id, scenario, when)
        except ConsoleError as e:
            return await share_group_detail(request, str(e))
        return back("/share-group", f"Reset {len(new)} share-partition(s) "
                    f"{scenario.replace('_', ' ')}.", id=group_id)

    async def charts(request: Request) -> Response:
        return page(request, "charts.html", sampler=sampler, charts=sampler.charts())

    async def failure(request: Request, exc: Exception) -> Response:
        """Anything unforeseen: the page says what, the log keeps the trace."""
        log.exception("%s %s failed", request.method, request.url.path)
        return page(request, "error.html", 500, error=f"{type(exc).__name__}: {exc}")

    routes = [
        Route("/", overview),
        Route("/topics", topic_list, methods=["GET"]),
        Route("/topics", topic_create, methods=["POST"]),
        Route("/topics/{name}", topic_detail),
        Route("/topics/{name}/delete", topic_delete, methods=["POST"]),
        Route("/topics/{name}/config", topic_config, methods=["POST"]),
        Route("/topics/{name}/partitions", topic_partitions, methods=["POST"]),
        Route("/topics/{name}/messages", topic_messages),
        Route("/topics/{name}/messages.jsonl", topic_download),
        Route("/topics/{name}/produce", topic_produce, methods=["POST"]),
        Route("/groups", group_list),
        # A group id is any string, slashes and question marks included: a query parameter.
        Route("/group", group_detail),
        Route("/group/reset", group_reset, methods=["POST"]),
        Route("/share-groups", share_group_list),
        Route("/share-group", share_group_detail),
        Route("/share-group/reset", share_group_reset, methods=["POST"]),
        Route("/charts", charts),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sampler.start()
        yield
        sampler.stop()
        await run_in_threadpool(connection.close)

    return Starlette(routes=routes, exception_handlers={Exception: failure},
                     lifespan=lifespan)


def _int(value: object) -> int | None:
    text = str(value or "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError as e:
        raise ConsoleError(f"'{text}' is not a number.") from e


def _timestamp(text: str) -> int:
    """Epoch milliseconds, or Kafka's YYYY-MM-DDTHH:mm:SS.sss as the CLI reads it."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return _parse_datetime(text)
    except ValueError as e:
        raise ConsoleError(f"'{text}' is neither epoch milliseconds nor a date-time such "
                           f"as 2026-01-31T12:00:00.000.") from e


def _properties(text: str) -> dict[str, str]:
    """``key=value`` lines (a topic's configs, a record's headers)."""
    props = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConsoleError(f"Expected key=value, got '{line.strip()}'.")
        props[key.strip()] = value.strip()
    return props
