"""A differential oracle: one scripted scenario run against Apache Kafka 4.4 and against
Ottla, and what the clients saw compared field by field.

Kafka's behaviour is the expectation. A scenario (``tests.oracle.scenarios``) is a small
function of a ``Target`` that returns a JSON-able result; the harness runs it on both,
normalises what legitimately differs (``tests.oracle.normalise``), diffs the two and
prints the smallest differing paths. Every difference a scenario accepts is declared in it
(``Expect``) with its reason, a reason starting ``BUG:`` for one that is Ottla's bug: a
new difference fails, and so does an accepted one that disappeared.

``python -m tests.oracle run [--scenario NAME] [--all]`` starts one Kafka node and one Ottla
node and runs them (``--list`` lists them); tests/integration/test_oracle.py runs the CI
subset, and every scenario with ``OTTLA_ORACLE_ALL=1``.
"""
