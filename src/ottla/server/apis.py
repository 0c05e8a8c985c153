"""What each kind of listener of a node serves, put together in one place."""

from __future__ import annotations

from collections.abc import Callable

from ottla.broker.broker import Broker
from ottla.broker.handlers import broker_apis
from ottla.broker.handlers.telemetry import TELEMETRY_APIS
from ottla.protocol.requests import ApiTable
from ottla.server.api_versions import api_versions
from ottla.server.controller_apis import ControllerServices, controller_apis
from ottla.server.request_dispatcher import RequestDispatcher
from ottla.server.sasl_apis import sasl_apis


def broker_dispatcher(broker: Broker, clock: Callable[[], float]) -> RequestDispatcher[Broker]:
    table = ApiTable("broker", broker, broker_apis())
    table.unadvertised = lambda: () if broker.client_metrics.enabled else TELEMETRY_APIS
    table.add(api_versions(table))  # type: ignore[arg-type]
    for spec in sasl_apis():
        table.add(spec)  # type: ignore[arg-type]
    return RequestDispatcher(table, clock)


def controller_dispatcher(services: ControllerServices, clock: Callable[[], float]
                          ) -> RequestDispatcher[ControllerServices]:
    table = ApiTable("controller", services, controller_apis())
    table.add(api_versions(table))  # type: ignore[arg-type]
    for spec in sasl_apis():
        table.add(spec)  # type: ignore[arg-type]
    dispatcher = RequestDispatcher(table, clock)
    services.dispatcher = dispatcher  # the Envelope handler dispatches through it
    return dispatcher
