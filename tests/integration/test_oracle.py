"""The differential oracle (tests/oracle): scenarios run against Apache Kafka 4.4 and
against Ottla, one node each for the module, and what the clients saw compared after
normalisation. A scenario passes when its differences are exactly the ones it declares
(each with its reason, ``BUG: ...`` for Ottla's bugs): a new difference fails, and so does
a declared one that is gone. By default the CI subset runs; ``OTTLA_ORACLE_ALL=1`` runs
every scenario. ``python -m tests.oracle run`` does the same outside pytest.

The first tests hold the harness itself to its contract without any node."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kafka_ref.install import InstallError
from tests.oracle.model import MISSING, Expect, Normalise, Scenario, bug
from tests.oracle.nodes import KafkaUnavailable, Pair, running_pair
from tests.oracle.runner import compare, run_scenario, select

EVERY = os.environ.get("OTTLA_ORACLE_ALL", "") not in ("", "0")
SCENARIOS = select(every=EVERY)


# --- the harness, without nodes --------------------------------------------------------

def fake(*expect: Expect, normalise: tuple[Normalise, ...] = (),
         compare_messages: bool = False) -> Scenario:
    return Scenario("fake", "Fake", lambda t: None, "", expect=expect, normalise=normalise,
                    compare_messages=compare_messages)


def test_a_difference_not_declared_fails_and_names_its_smallest_path() -> None:
    outcome = compare(fake(), {"a": {"b": [1, 2], "c": "x"}}, {"a": {"b": [1, 3], "c": "x"}})
    assert not outcome.ok
    assert [(d.path, d.kafka, d.ottla) for d in outcome.unexpected] == [("a/b/1", 2, 3)]


def test_a_declared_difference_passes_and_one_that_is_gone_fails() -> None:
    declared = bug("a/b/*", "a known bug", kafka=2, ottla=3)
    assert compare(fake(declared), {"a": {"b": [1, 2]}}, {"a": {"b": [1, 3]}}).ok
    gone = compare(fake(declared), {"a": {"b": [1, 2]}}, {"a": {"b": [1, 2]}})
    assert not gone.ok and gone.stale == [declared]
    other_value = compare(fake(declared), {"a": {"b": [1, 2]}}, {"a": {"b": [1, 4]}})
    assert not other_value.ok, "a pinned difference whose value changed is a new one"


def test_keys_one_side_lacks_are_differences_of_their_own() -> None:
    outcome = compare(fake(Expect("k/only.kafka", "why", ottla=MISSING)),
                      {"k": {"shared": 1, "only.kafka": 2}}, {"k": {"shared": 1, "new": 3}})
    assert [d.path for d in outcome.unexpected] == ["k/new"]
    assert [d.path for d, _ in outcome.accepted] == ["k/only.kafka"]


def test_normalisation_takes_out_only_what_legitimately_differs() -> None:
    uuid_a, uuid_b = ("7071d0aa-cad3-4bee-a0aa-49fcf7adb2f3",
                      "76abb668-afce-48ea-857d-6fd79f6fc463")
    kafka = {"cluster_id": "abc", "throttle_time": 5, "producer_id": 1000,
             "again": {"producer_id": 1000}, "topic_id": uuid_a, "other": uuid_b,
             "error_message": "Kafka's text", "error_code": "NONE", "true": True}
    ottla = {"cluster_id": "xyz", "throttle_time": 0, "producer_id": 7,
             "again": {"producer_id": 7}, "topic_id": uuid_b, "other": uuid_a,
             "error_message": None, "error_code": "NONE", "true": 1}
    outcome = compare(fake(), kafka, ottla, {"kafka": {uuid_a: "t"}, "ottla": {uuid_b: "t"}})
    assert outcome.normalised["kafka"]["topic_id"] == "<id of t>"  # type: ignore[index]
    assert [d.path for d in outcome.unexpected] == ["true"], "True is not 1"
    messages = compare(fake(compare_messages=True), {"error_message": "a"},
                       {"error_message": "b"})
    assert [d.path for d in messages.unexpected] == ["error_message"]
    recurring = compare(fake(), {"x": {"producer_id": 5}, "y": {"producer_id": 5}},
                        {"x": {"producer_id": 5}, "y": {"producer_id": 6}})
    assert [d.path for d in recurring.unexpected] == ["y/producer_id"], \
        "an alias keeps which values recur"


def test_every_scenario_is_documented_and_declares_reasons() -> None:
    for s in select(every=True):
        assert s.doc, f"{s.name} has no docstring"
        assert all(e.reason.strip() for e in s.expect), s.name
    assert {s.name for s in select()} <= {s.name for s in select(every=True)}


# --- Kafka and Ottla -------------------------------------------------------------------

@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """One Kafka 4.4 node and one Ottla node for the module; both stopped and checked at
    the end. Without Java 17+ or Kafka's jars the tests fail with the reason."""
    base: Path = tmp_path_factory.mktemp("oracle")
    try:
        nodes = running_pair(base)
        started = nodes.__enter__()
    except (KafkaUnavailable, InstallError) as e:
        failure = str(e)
    else:
        try:
            yield started
        finally:
            nodes.__exit__(None, None, None)
        return
    pytest.fail(f"the oracle needs Apache Kafka 4.4: {failure}", pytrace=False)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_ottla_differs_from_kafka_only_as_declared(pair: Pair, scenario: Scenario) -> None:
    outcome = run_scenario(scenario, pair.kafka, pair.ottla)
    print(outcome.report(accepted=True))
    assert outcome.ok, outcome.report()
