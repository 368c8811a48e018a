# The `app` service of docker-compose.yml: pyspark-ducklake with Spark (Java 17) and Spark's Kafka source, running
# examples/kafka_to_lake.py. Build context: this repository (.dockerignore keeps .venv, .cache and lakes out).
FROM python:3.11-slim-bookworm

# Spark needs a Java runtime; Maven fetches Spark's Kafka source below; procps gives Spark's scripts `ps`.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY pyspark_ducklake ./pyspark_ducklake
# The package with extras pyproject.toml declares; DuckDB and its extension wheels (httpfs for s3://), only for the
# example's final report, at the versions pyproject.toml's test group pins (tests/unit/test_compose_file.py checks both).
RUN pip install --no-cache-dir ".[postgres,kafka,s3]" \
        duckdb==1.5.5 duckdb-extension-ducklake==1.5.5 duckdb-extension-postgres-scanner==1.5.5 \
        duckdb-extension-sqlite-scanner==1.5.5 duckdb-extension-httpfs==1.5.5

# Spark's Kafka source for the installed pyspark, into /app/.cache/kafka/jars (the example finds it there).
COPY scripts ./scripts
RUN bash scripts/kafka.sh fetch spark && rm -rf /root/.m2

COPY examples ./examples
ENV PYTHONUNBUFFERED=1 \
    SPARK_LOCAL_IP=127.0.0.1
CMD ["python", "examples/kafka_to_lake.py", "--help"]
