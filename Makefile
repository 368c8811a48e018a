# Single entry point for the project; `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON := .venv/bin/python
PYTEST_ARGS ?=
# Two pytest-xdist workers on two cores (three were slower: the machine is saturated by the JVMs, brokers and
# subprocesses the tests start); tests of one xdist group (faults, debezium, connect, cluster) share a worker.
# `PYTEST_ARGS="-n 0"` runs in one process.
PYTEST_WORKERS := -n 2 --dist loadgroup

# Run pytest and pass its exit code on, except that 5 ("no tests collected") is a failure too. The slowest tests are
# listed at the end (the suite's time is a budget: 25 minutes here).
define run_pytest
	rc=0; $(PYTHON) -m pytest -q --durations=30 --durations-min=10 $(1) $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc
endef

.PHONY: help install fuzz test-property soak bench-concurrency bench-batch bench-duckdb-tables bench-sink bench-upsert bench-stream-upsert bench-cdc bench-kafka bench-feed bench-format bench-history demo demo-python kafka-start kafka-stop kafka-demo test-kafka test test-unit test-conformance duckdb-dev test-duckdb-dev test-integration lint format pg-start pg-stop clean

help: ## List the targets
	@echo "usage: make <target>"
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

install: ## Create .venv and install the package, extras and test/dev tools (no-op when up to date)
	@bash scripts/setup.sh

demo: install ## Run the main demo (a Spark stream into DuckLake) on a SQLite catalog with local files
	$(PYTHON) examples/streaming_demo.py

demo-python: install ## Run examples/quickstart.py: the Python API without Spark
	$(PYTHON) examples/quickstart.py

test: install ## Run the whole test suite (starts the test PostgreSQL as needed); PYTEST_ARGS="..." adds options
	@$(call run_pytest,$(PYTEST_WORKERS))

test-unit: install ## Run tests/unit
	@$(call run_pytest,tests/unit)

test-integration: install ## Run tests/integration (Spark, PostgreSQL)
	@$(call run_pytest,$(PYTEST_WORKERS) tests/integration)

test-conformance: install ## Run tests/conformance (against DuckDB's ducklake extension)
	@$(call run_pytest,$(PYTEST_WORKERS) tests/conformance)

# DuckLake's 1.1 development build (a DuckDB shell; docs/compatibility.md, "The DuckLake 1.1 oracle"): never committed.
DUCKDB_DEV_DIR := .cache/duckdb-dev
DUCKDB_DEV ?= $(abspath $(wildcard $(DUCKDB_DEV_DIR)/bin/duckdb))
DUCKDB_DEV_BUILD_SCRIPT ?= ../shared/tools/build-duckdb-ducklake-dev.sh

duckdb-dev: ## Build DuckLake's 1.1 development build into .cache/duckdb-dev (hours on 2 cores; no-op when built) from bare git snapshots: DUCKLAKE_GIT=... DUCKDB_GIT=... CROARING_GIT=...
	@if [ -x "$(DUCKDB_DEV_DIR)/bin/duckdb" ]; then echo "$(DUCKDB_DEV_DIR)/bin/duckdb"; exit 0; fi; \
	if [ -z "$(DUCKLAKE_GIT)" ] || [ -z "$(DUCKDB_GIT)" ] || [ -z "$(CROARING_GIT)" ]; then \
	  echo "make: set DUCKLAKE_GIT, DUCKDB_GIT and CROARING_GIT to bare git directories of duckdb/ducklake, duckdb/duckdb and RoaringBitmap/CRoaring (docs/compatibility.md)" >&2; exit 2; fi; \
	if [ ! -f "$(DUCKDB_DEV_BUILD_SCRIPT)" ]; then echo "make: no build script at $(DUCKDB_DEV_BUILD_SCRIPT) (set DUCKDB_DEV_BUILD_SCRIPT)" >&2; exit 2; fi; \
	nice -n 19 bash "$(DUCKDB_DEV_BUILD_SCRIPT)" "$(DUCKLAKE_GIT)" "$(DUCKDB_GIT)" "$(CROARING_GIT)" "$(DUCKDB_DEV_DIR)"; \
	"$(DUCKDB_DEV_DIR)/bin/duckdb" -c "PRAGMA version"

test-duckdb-dev: install ## Live conformance against DuckLake's 1.1 development build (not in `make test`): DUCKDB_DEV=/path/to/duckdb (default: the one `make duckdb-dev` built)
	@if [ -z "$(DUCKDB_DEV)" ]; then echo "make: set DUCKDB_DEV to the DuckDB shell with DuckLake 1.1 linked in, or build one with make duckdb-dev (docs/compatibility.md, 'The DuckLake 1.1 oracle')" >&2; exit 2; fi; \
	export DUCKDB_DEV="$(DUCKDB_DEV)"; $(call run_pytest,tests/duckdb_dev)

test-property: install ## Run tests/property: hypothesis against DuckDB, fixed examples (profile ci), about a minute
	@$(call run_pytest,tests/property)

fuzz: install ## the property tests (tests/property, pruning) with random, 50x more examples (profile fuzz, over an hour); failures replay first next time
	@export HYPOTHESIS_PROFILE=fuzz; $(call run_pytest,--timeout=0 tests/property tests/unit/table/test_pruning.py tests/conformance/test_pruning_duckdb.py)

lint: install ## ruff check, ruff format --check, mypy and lint-imports (runs all four, fails if any fails)
	@rc=0; \
	$(PYTHON) -m ruff check . || rc=1; \
	$(PYTHON) -m ruff format --check . || rc=1; \
	$(PYTHON) -m mypy pyspark_ducklake || rc=1; \
	.venv/bin/lint-imports --no-cache || rc=1; \
	exit $$rc

format: install ## Apply ruff's fixes and formatting
	$(PYTHON) -m ruff check --fix . || true
	$(PYTHON) -m ruff format .

kafka-start: ## Start the local Kafka broker (jars from Maven Central into .cache/kafka/); prints its bootstrap
	@bash scripts/kafka.sh start

kafka-stop: ## Stop the local Kafka broker
	@bash scripts/kafka.sh stop

kafka-demo: install ## Kafka -> Spark -> DuckLake exactly once (examples/kafka_to_lake.py, docs/kafka.md)
	@bash scripts/kafka.sh start >/dev/null
	$(PYTHON) examples/kafka_to_lake.py

soak: install ## Long load test: 12 writer processes + 1 DuckDB writer, our and DuckDB's maintenance, 10 min per backend (DUCKLAKE_SOAK_SECONDS); then the crash soak with 40 kills
	$(PYTHON) -m tests.support.load soak --writers 12 --duckdb-writers 1 --out .cache/reliability/soak.jsonl
	@export DUCKLAKE_SOAK_KILLS=40; $(call run_pytest,tests/integration/test_faults_crash_soak.py)

test-kafka: install ## Run the Kafka end-to-end tests (a real broker, Spark's Kafka source)
	@$(call run_pytest,-m kafka tests)

bench-concurrency: install ## Concurrent writers on one table: ops/s, p50/p99, conflicts, retries for 1, 4, 12 writers, both backends, ~10 min (bench/README.md)
	$(PYTHON) bench/concurrency_bench.py --backends sqlite,postgres --writers 1,4,12 --seconds 60 --out bench/results/concurrency.json

bench-batch: install ## Spark batch write/read vs plain Parquet, 5M rows, SQLite and PostgreSQL (bench/README.md)
	$(PYTHON) bench/batch_bench.py --rows 5000000 --repeat 3 --backends sqlite,postgres --out bench/results/batch.json

bench-duckdb-tables: install ## Spark reads of DuckDB-written tables (deletion vectors, added files, variant): path taken and speed vs Parquet (bench/README.md)
	$(PYTHON) bench/duckdb_tables_bench.py --rows 3000000 --repeat 5 --out bench/results/duckdb_tables.json

bench-sink: install ## foreachBatch sink vs Delta Lake: 2,000 small + 3 large batches, 100k-snapshot latency, ~45 min (bench/README.md)
	bash bench/fetch_delta.sh --venv >/dev/null
	$(PYTHON) bench/sink_bench.py --small-batches 2000 --small-rows 100 --large-rows 1000000 --large-batches 3 \
		--backends sqlite,postgres --latency-snapshots 100000 --latency-batches 200 --control-batches 300 \
		--delta-defaults-batches 50 --out bench/results/sink.json --plot bench/results/sink.png

bench-upsert: install ## Upsert micro-batches (1k and 100k keys) into a 10M-row table: the upsert sink vs Delta's MERGE in foreachBatch on the same Spark (bench/README.md)
	bash bench/fetch_delta.sh --venv >/dev/null
	$(PYTHON) bench/upsert_bench.py --rows 10000000 --small-table-rows 1000000 --keys 1000,100000 --batches 10 \
		--out bench/results/upsert.json

bench-stream-upsert: install ## 1M- and 10M-row upsert batches through writeStream.format("ducklake") vs Delta's MERGE: the driver side's peak memory (bench/README.md)
	bash bench/fetch_delta.sh --venv >/dev/null
	$(PYTHON) bench/stream_upsert_bench.py --rows 1000000,10000000 --out bench/results/stream_upsert.json

bench-cdc: install ## CDC pipeline latency, PostgreSQL commit -> visible in the lake (Debezium, Kafka, upsert sink), ~10 min (bench/README.md)
	$(PYTHON) bench/cdc_bench.py --triggers 0,1 --probes 300 --out bench/results/cdc.json

bench-feed: install ## Change feed vs DuckDB's table_changes and Delta Lake's CDF (2.35M changes) + stream latency, ~25 min (bench/README.md)
	bash bench/fetch_delta.sh --venv >/dev/null
	$(PYTHON) bench/feed_bench.py --backends sqlite,postgres --out bench/results/feed.json --plot bench/results/feed.png

bench-format: install ## DuckLake 1.1 vs 1.0 catalogs in one run: sink, batch write/read, flush, feed, upsert (1M rows), both catalogs (bench/README.md)
	$(PYTHON) bench/format_bench.py --rows 1000000 --repeat 7 --backends sqlite,postgres --out bench/results/format.json

bench-history: install ## A stream's history: lakes of 1k, 100k and 1M snapshots, every per-commit/read/micro-batch cost vs the 1k lake, expiry of 90%, both catalogs; hours, on a quiet machine (bench/README.md)
	$(PYTHON) bench/history_bench.py --sizes 1000,100000,1000000 --backends sqlite,postgres --repeat 100 --spark \
		--out bench/results/history.json

bench-kafka: install ## Kafka -> Spark -> DuckLake vs Delta Lake: end-to-end throughput and latency (bench/README.md)
	bash bench/fetch_delta.sh --venv >/dev/null
	$(PYTHON) -m pip install --quiet duckdb-extension-delta==1.5.5
	$(PYTHON) bench/kafka_bench.py --out bench/results/kafka.json

pg-start: ## Start the test PostgreSQL (127.0.0.1, port from DUCKLAKE_PG_PORT, default 54329)
	@bash scripts/postgres.sh start

pg-stop: ## Stop the test PostgreSQL
	@bash scripts/postgres.sh stop

clean: ## Stop the test PostgreSQL and Kafka and remove caches and build output (keeps .venv)
	@bash scripts/postgres.sh stop
	@bash scripts/kafka.sh stop
	rm -rf .cache .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info
	find . -path ./.venv -prune -o -type d -name __pycache__ -exec rm -rf {} +
