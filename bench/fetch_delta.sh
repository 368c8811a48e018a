#!/usr/bin/env bash
# Copy Delta Lake's jars (io.delta:delta-spark_2.13 and io.delta:delta-storage) from Maven Central into
# .cache/jars/delta/ for bench/sink_bench.py, with `mvn dependency:copy-dependencies` on bench/delta/pom.xml.
# Idempotent: does nothing when both jars of the version are already there. Prints the jar paths, comma-separated
# (the form spark.jars takes).
#
#   bash bench/fetch_delta.sh              # DELTA_VERSION=4.4.0 by default
#   DELTA_VERSION=4.3.1 bash bench/fetch_delta.sh
#   bash bench/fetch_delta.sh --venv       # also the Spark 4.2 virtualenv the Delta side runs in (see below)
#
# No delta-spark release supports Spark 4.3: 4.4.0 (the newest on Maven Central) is built for Spark 4.2.0 and fails
# on pyspark 4.3.0 at its first write (NoSuchMethodError: LogicalRDD.<init>, a constructor that gained a parameter
# in 4.3). So bench/sink_bench.py runs Delta in its own worker process on pyspark $DELTA_PYSPARK (default 4.2.0) from
# .cache/venv-delta/, which `--venv` creates (idempotent; pyspark + pyarrow + the DuckLake package's dependencies,
# so the DuckLake sink can run on that Spark too as a control). The delta-spark PyPI package is not needed: the
# benchmark only uses df.write.format("delta") with the jars on spark.jars.
#
# Only these two jars are copied: everything else delta-spark depends on at run time for plain path-based writes is
# already among pyspark's own jars (Scala, Jackson, Parquet, Hadoop client). delta-spark 4.4 also declares
# delta-kernel-* and unitycatalog-* dependencies; they are not needed for df.write.format("delta") and are left out
# (set DELTA_ALL_DEPS=1 to copy every non-Spark dependency too).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERSION="${DELTA_VERSION:-4.4.0}"
OUT="${DELTA_JARS_DIR:-$ROOT/.cache/jars/delta}"
POM="$ROOT/bench/delta/pom.xml"
PYSPARK_FOR_DELTA="${DELTA_PYSPARK:-4.2.0}"
VENV="$ROOT/.cache/venv-delta"

make_venv() {
    if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import pyspark, sys; sys.exit(pyspark.__version__ != '$PYSPARK_FOR_DELTA')" 2>/dev/null \
        && "$VENV/bin/python" -c "import pyarrow, sqlalchemy, fsspec, psycopg2, numpy" 2>/dev/null; then
        echo "fetch_delta.sh: $VENV has pyspark $PYSPARK_FOR_DELTA" >&2
        return 0
    fi
    local py="${PYTHON:-python3}"
    echo "fetch_delta.sh: creating $VENV with pyspark==$PYSPARK_FOR_DELTA (about a minute)" >&2
    "$py" -m venv "$VENV"
    "$VENV/bin/pip" install -q "pyspark==$PYSPARK_FOR_DELTA" pyarrow "sqlalchemy>=2,<3" fsspec psycopg2-binary "pandas<3" >&2
}

if [[ "${1:-}" == "--venv" ]]; then
    make_venv
fi

jars() { echo "$OUT/delta-spark_2.13-$VERSION.jar,$OUT/delta-storage-$VERSION.jar"; }

if [[ -f "$OUT/delta-spark_2.13-$VERSION.jar" && -f "$OUT/delta-storage-$VERSION.jar" ]]; then
    echo "fetch_delta.sh: Delta $VERSION jars already in $OUT" >&2
    jars
    exit 0
fi

command -v mvn >/dev/null || { echo "fetch_delta.sh: mvn not found (apt-get install maven)" >&2; exit 1; }
mkdir -p "$OUT"
filter=(-DincludeArtifactIds=delta-spark_2.13,delta-storage)
[[ "${DELTA_ALL_DEPS:-0}" == 1 ]] && filter=(-DexcludeGroupIds=org.apache.spark)
echo "fetch_delta.sh: fetching io.delta:delta-spark_2.13:$VERSION into $OUT" >&2
mvn -B -q -f "$POM" -Ddelta.version="$VERSION" \
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
    -DoutputDirectory="$OUT" -DincludeScope=runtime "${filter[@]}" >&2
for j in "$OUT/delta-spark_2.13-$VERSION.jar" "$OUT/delta-storage-$VERSION.jar"; do
    [[ -f "$j" ]] || { echo "fetch_delta.sh: $j missing after mvn" >&2; exit 1; }
done
jars
