"""Kafka's per-API authorization table (tests/authorization_table.py) covers every API
Ottla serves, on the listener it serves it: the enforcement to come works from it, and an
API added without an entry fails here first."""

from __future__ import annotations

from ottla.broker.handlers import broker_apis
from ottla.server.controller_apis import controller_apis
from tests import authorization_table as table


def test_every_api_ottla_serves_has_kafkas_authorization_entry() -> None:
    served = {"broker": {int(spec.api_key) for spec in broker_apis()},
              "controller": {int(spec.api_key) for spec in controller_apis()}}
    missing = {listener: sorted(key for key in keys if key not in table.BY_KEY)
               for listener, keys in served.items()}
    assert missing == {"broker": [], "controller": []}
    for listener, keys in served.items():
        kafka_listener = table.Listener[listener.upper()]
        unlisted = sorted(table.BY_KEY[key].name for key in keys
                          if table.BY_KEY[key].on(kafka_listener) is None)
        assert unlisted == [], f"served on the {listener} listener, not on Kafka's"


def test_the_table_states_kafkas_implied_operations() -> None:
    implied = {op.name: sorted(o.name for o in ops - {op})
               for op, ops in table.IMPLIED_BY.items()}
    assert implied == {"DESCRIBE": ["ALTER", "DELETE", "READ", "WRITE"],
                       "DESCRIBE_CONFIGS": ["ALTER_CONFIGS"]}
