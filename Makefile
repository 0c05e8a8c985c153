# Two commands set everything up on a fresh machine (Python 3.11 and the package registries):
#   make run   - install Ottla in .venv and start a single node on 127.0.0.1:9092
#   make test  - install the test dependencies in .venv and run the whole test suite
#                (pytest -rs: the reason of every skip is printed; TEST_WORKERS pytest-xdist
#                workers, whole modules each: TEST_WORKERS=0 runs it in one process)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TEST_WORKERS ?= 2

.PHONY: run test lint bench install install-test install-bench clean simulate

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

install-test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'

run: install
	$(BIN)/ottla server

install-bench: install-test
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'

bench: install-bench
	$(BIN)/python -m benchmarks

lint: install-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports

test: install-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -rs --durations=25 -n $(TEST_WORKERS)

# The deterministic simulations over seeds 1..SEEDS of each workload (WORKLOAD: all, a
# workload or a family), on JOBS processes (default: the cores); exit 1 on a violation,
# each failing seed printed with its replay command (docs/testing.md).
SEEDS ?= 1000
WORKLOAD ?= all
JOBS ?=
simulate: install-test
	$(BIN)/python -m tests.simulation --workload $(WORKLOAD) --seeds 1-$(SEEDS) $(if $(JOBS),--jobs $(JOBS))

clean:
	rm -rf $(VENV) ottla-data .pytest_cache .ruff_cache

# Apache Kafka 4.4.0's jars, resolved with Maven into ~/.cache/ottla/kafka-4.4.0/libs (or
# $OTTLA_KAFKA_HOME/libs) for tests/kafka_ref and the benchmarks' Kafka anchor, then Spark's Kafka
# connector and the Prometheus JMX exporter's agent (docs/kafka-ref.md).
.PHONY: kafka-ref
kafka-ref: $(BIN)/python
	$(BIN)/python -m tests.kafka_ref.install
