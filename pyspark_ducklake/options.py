"""Options: one registry of every option each entry point accepts, and one parser per kind of value.

Every entry point (``connect()``, ``ducklake_sink()``, the Spark data source's read, write, readStream and writeStream,
``read_table``/``write_table``) checks what it is given with :func:`check_options`: an unknown or misspelt name is an
:class:`InvalidOptionError` naming the closest valid one, and a value that does not parse is one naming the option and
the value. Names match case-insensitively (Spark lowercases option keys). The docs' option tables are rendered from
:data:`OPTIONS` (``python -m tests.support.option_tables --write``), and a test fails when the two differ.

This module sits low in the package: it imports only ``exceptions``, ``io.storage`` and the catalog's format versions.
"""

from __future__ import annotations

import datetime as dt
import difflib
import enum
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark_ducklake.catalog.format_version import FormatVersion, requested_format
from pyspark_ducklake.catalog.partition_keys import split_keys
from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.io.object_stores import CONF_KEYS as STORE_CONF_KEYS
from pyspark_ducklake.io.object_stores import STORES, store_of_option, unknown_setting_error
from pyspark_ducklake.io.storage import CONF_KEYS as S3_CONF_KEYS
from pyspark_ducklake.io.storage import CONF_PREFIX as S3_CONF_PREFIX
from pyspark_ducklake.io.storage import OPTION_PREFIX as S3_OPTION_PREFIX
from pyspark_ducklake.io.storage import S3_SETTINGS

CATALOG = "catalog"
DATA_PATH = "dataPath"
DATA_INLINING_ROW_LIMIT = "data_inlining_row_limit"
ENCRYPTED = "encrypted"
FORMAT_VERSION = "format_version"
DUCKDB_STORAGE_VERSION = "duckdb_storage_version"
MAX_RETRY_COUNT = "max_retry_count"
RETRY_WAIT_MS = "retry_wait_ms"
RETRY_BACKOFF = "retry_backoff"
RECONNECT_TIMEOUT = "reconnect_timeout"
TXN_APP_ID, TXN_VERSION = "txnAppId", "txnVersion"

SPARK_CONF_PREFIX = "spark.ducklake."
SPARK_CONF_CATALOG = "spark.ducklake.catalog"
SPARK_CONF_DATA_PATH = "spark.ducklake.dataPath"
ENV_CATALOG = "DUCKLAKE_CATALOG"
ENV_DATA_PATH = "DUCKLAKE_DATA_PATH"
# Spark conf keys a lake reads: where it is and the object-store settings (spark.ducklake.s3.*).
SPARK_CONF_KEYS = (SPARK_CONF_CATALOG, SPARK_CONF_DATA_PATH, *S3_CONF_KEYS, *STORE_CONF_KEYS)


# --- parsers: one per kind of value ---------------------------------------------------------------------------------

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def parse_bool(value: object, name: str) -> bool:
    """``True``/``False``, or ``true/false``, ``yes/no``, ``on/off``, ``1/0`` (any case): ``"false"`` is False.

    Raises:
        InvalidOptionError: anything else (names the option and the value).
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise InvalidOptionError(f"could not parse option {name} as a boolean (true or false): {value!r}")


def _check_range(value: float, name: str, minimum: float | None, maximum: float | None, unit: str = "") -> None:
    if minimum is not None and value < minimum:
        raise InvalidOptionError(f"option {name} must be >= {minimum}{unit}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidOptionError(f"option {name} must be <= {maximum}{unit}, got {value}")


_INT_TEXT = re.compile(r"[+-]?[0-9]+")


def parse_int(value: object, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer, or its decimal text; ``minimum``/``maximum`` bound it.

    Raises:
        InvalidOptionError: not an integer (``True``, ``1.5``, ``"ten"``), or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidOptionError(f"could not parse option {name} to an integer: {value!r}")
    # Python's int() also takes '3_000' and non-ASCII digits: an option is plain decimal text
    if isinstance(value, str) and not _INT_TEXT.fullmatch(value.strip()):
        raise InvalidOptionError(f"could not parse option {name} to an integer: {value!r}")
    number = value if isinstance(value, int) else int(value.strip())
    _check_range(number, name, minimum, maximum)
    return number


def parse_format_version(value: object, name: str) -> FormatVersion:
    """``"1.0"`` or ``"1.1"``: the DuckLake format version of a new catalog.

    Raises:
        InvalidOptionError: any other value (names the option and the versions).
    """
    if not isinstance(value, (str, FormatVersion)):
        raise InvalidOptionError(f"option {name} must be one of '1.0', '1.1' (a string), got {value!r}")
    return requested_format(value, name)


_STORAGE_VERSION = re.compile(r"v\d+\.\d+\.\d+|latest")


def parse_storage_version(value: object, name: str) -> str:
    """A DuckDB storage version as DuckDB spells it (``v1.5.0``) or ``latest``.

    Raises:
        InvalidOptionError: anything else (names the option and the value).
    """
    text = value.strip() if isinstance(value, str) else None
    if text is None or not _STORAGE_VERSION.fullmatch(text):
        raise InvalidOptionError(
            f"option {name} must be a DuckDB version such as 'v1.5.0' (DuckDB's storage_compatibility_version) or "
            f"'latest', got {value!r}"
        )
    return text


def parse_float(value: object, name: str, *, minimum: float | None = None, maximum: float | None = None) -> float:
    """A finite number, or its text; ``minimum``/``maximum`` bound it.

    Raises:
        InvalidOptionError: not a number, NaN or infinite, or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidOptionError(f"could not parse option {name} to a number: {value!r}")
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except ValueError as e:
        raise InvalidOptionError(f"could not parse option {name} to a number: {value!r}") from e
    if not math.isfinite(number):
        raise InvalidOptionError(f"option {name} must be a finite number, got {value!r}")
    _check_range(number, name, minimum, maximum)
    return number


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4}
_SIZE_UNITS.update({"k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4})
_SIZE_UNITS.update({"kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4})


def parse_size(value: object, name: str, *, minimum: int = 1) -> int:
    """Bytes from ``536870912``, ``"512MB"`` or ``"512MiB"`` (DuckDB's memory-size spelling).

    Raises:
        InvalidOptionError: not a size, or less than ``minimum`` bytes.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        m = _SIZE.match(value) if isinstance(value, str) else None
        if m is None or (m.group(2) or "").lower() not in _SIZE_UNITS:
            raise InvalidOptionError(f"could not parse option {name} as a size in bytes (e.g. 512MB): {value!r}")
        size = int(float(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").lower()])
    if size < minimum:
        raise InvalidOptionError(f"option {name} must be >= {minimum} bytes, got {value!r}")
    return size


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_DURATION_UNITS = {
    "microsecond": dt.timedelta(microseconds=1),
    "us": dt.timedelta(microseconds=1),
    "millisecond": dt.timedelta(milliseconds=1),
    "ms": dt.timedelta(milliseconds=1),
    "second": dt.timedelta(seconds=1),
    "sec": dt.timedelta(seconds=1),
    "s": dt.timedelta(seconds=1),
    "minute": dt.timedelta(minutes=1),
    "min": dt.timedelta(minutes=1),
    "m": dt.timedelta(minutes=1),
    "hour": dt.timedelta(hours=1),
    "h": dt.timedelta(hours=1),
    "day": dt.timedelta(days=1),
    "d": dt.timedelta(days=1),
    "week": dt.timedelta(weeks=1),
    "w": dt.timedelta(weeks=1),
    "month": dt.timedelta(days=30),
    "year": dt.timedelta(days=365),
}


def parse_duration(
    value: object, name: str, *, unit: dt.timedelta | None = dt.timedelta(seconds=1), what: str = "a duration"
) -> dt.timedelta:
    """A duration from a ``timedelta``, a number of ``unit`` (seconds by default; None: a unit is required) or
    DuckDB's interval text (``'2 days'``, ``'1 hour 30 minutes'``, ``'250ms'``). Never negative, NaN or infinite.

    Raises:
        InvalidOptionError: not a duration (names the option and the value), or negative.
    """
    seconds = " or a number of seconds" if unit == dt.timedelta(seconds=1) else ""
    bad = f"could not parse option {name} as {what} (e.g. '2 days', '30s'{seconds})"
    try:
        total = _duration(value, unit, bad, name)
    except OverflowError:  # beyond timedelta's 999999999 days
        raise InvalidOptionError(f"option {name} is too large a duration: {value!r}") from None
    if total < dt.timedelta(0):
        raise InvalidOptionError(f"option {name} must be >= 0, got {value!r}")
    return total


def _duration(value: object, unit: dt.timedelta | None, bad: str, name: str) -> dt.timedelta:
    if isinstance(value, dt.timedelta):
        total = value
    elif isinstance(value, bool):
        raise InvalidOptionError(f"{bad}: {value!r}")
    elif isinstance(value, (int, float)) or (isinstance(value, str) and _is_number(value)):
        if unit is None:
            raise InvalidOptionError(f"{bad}: {value!r}")
        number = float(value)
        if not math.isfinite(number):
            raise InvalidOptionError(f"option {name} must be a finite duration, got {value!r}")
        total = number * unit
    elif isinstance(value, str):
        text = value.strip().lower()
        parts = _DURATION_PART.findall(text)
        total = dt.timedelta(0)
        for number_text, unit_text in parts:
            # "ms" is milliseconds, not a plural of "m": strip a plural "s" only from what is not a unit itself
            key = unit_text if unit_text in _DURATION_UNITS else unit_text[:-1] if unit_text.endswith("s") else ""
            if key not in _DURATION_UNITS:
                raise InvalidOptionError(f"{bad}: {value!r}")
            total += float(number_text) * _DURATION_UNITS[key]
        if not parts or _DURATION_PART.sub("", text).strip():
            raise InvalidOptionError(f"{bad}: {value!r}")
    else:
        raise InvalidOptionError(f"{bad}: {value!r}")
    return total


def _is_number(text: str) -> bool:
    try:
        float(text.strip())
    except ValueError:
        return False
    return True


def parse_seconds(value: object, name: str) -> float:
    """Seconds (a number, a ``timedelta`` or interval text such as ``'5 min'``) as a float >= 0."""
    return parse_duration(value, name).total_seconds()


def parse_interval(value: object, name: str) -> dt.timedelta:
    """An age as DuckDB's interval text (``'7 days'``, ``'12 hours'``) or a ``timedelta``: a unit is required."""
    return parse_duration(value, name, unit=None, what="an interval")


def parse_text(value: object, name: str) -> str:
    """A non-empty string without NUL characters.

    Raises:
        InvalidOptionError: not a string, empty, or holding a NUL character.
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidOptionError(f"option {name} must be a non-empty string, got {type(value).__name__}")
    # PostgreSQL refuses NUL in text at commit time, after the files were written; the value is not shown: a URL
    # may hold a password
    if "\x00" in value:
        raise InvalidOptionError(f"option {name} must not contain a NUL character (\\x00)")
    return value


def parse_delete_when(value: object, name: str) -> str:
    """A ``delete_when`` condition: a non-empty string that is not a bare boolean word (``"true"`` would delete
    every key of every batch: a mistake, not a condition).

    Raises:
        InvalidOptionError: anything else.
    """
    text = parse_text(value, name)
    if text.strip().lower() in ("true", "false"):
        raise InvalidOptionError(
            f"option {name} must be a condition over the batch's columns (e.g. \"op = 'd'\"), got {text!r}, which "
            "reads as a constant boolean; leave it out to delete nothing"
        )
    return text


def parse_timestamp(value: object, name: str) -> dt.datetime:
    """An ISO-8601 time (a ``datetime`` as is).

    Raises:
        InvalidOptionError: not an ISO timestamp.
    """
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.strip())
        except ValueError:
            pass
    raise InvalidOptionError(f"could not parse option {name} as an ISO timestamp: {value!r}")


def parse_snapshot_id(value: object, name: str, *, text: bool = True) -> int:
    """A snapshot id: an integer >= 0 (a NumPy integer too); with ``text`` (Spark options, the command line, where
    every value is a string) also its decimal text. The one parser of snapshot ids, for every entry point.

    Raises:
        InvalidOptionError: a bool, a float (``2.7`` would read snapshot 2; ``2.0`` is refused alike), text that is
            not a whole number (``"2.7"``, ``"true"``), text where only integers are taken, or a negative id.
    """
    number: int | None = None
    if isinstance(value, str) and text:
        if _INT_TEXT.fullmatch(value.strip()):
            number = int(value.strip())
    elif not isinstance(value, (bool, str, bytes)):
        try:  # ints and NumPy's; never a float (NumPy's bool has no __index__ either)
            number = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    if number is None:
        kind = "a whole number such as 3" + (", as an int, not text" if isinstance(value, str) and not text else "")
        raise InvalidOptionError(
            f"could not parse option {name} as a snapshot id: {value!r}; give {kind} (list them with lake.snapshots())"
        )
    return parse_int(number, name, minimum=0)


def parse_snapshot_start(value: object, name: str) -> str | int:
    """``earliest``, ``latest`` or a snapshot id >= 0.

    Raises:
        InvalidOptionError: anything else.
    """
    if isinstance(value, str) and value.strip().lower() in ("earliest", "latest"):
        return value.strip().lower()
    try:
        return parse_snapshot_id(value, name)
    except InvalidOptionError as e:
        raise InvalidOptionError(
            f"could not parse option {name} as a snapshot id: {value!r}; give a whole number such as 3, 'earliest' "
            "or 'latest'"
        ) from e


def parse_keys(value: object, name: str) -> tuple[str, ...]:
    """Partition keys: ``"k, day(ts), bucket(4, id)"`` (commas inside parentheses or quotes stay) or a list of
    strings."""
    if isinstance(value, str):
        return tuple(k for k in split_keys(value) if k)
    if isinstance(value, (list, tuple)) and all(isinstance(k, str) for k in value):
        return tuple(k.strip() for k in value if k.strip())
    raise InvalidOptionError(f"option {name} must be keys such as 'k, day(ts)' or a list of them, got {value!r}")


def parse_column_names(value: object, name: str) -> tuple[str, ...]:
    """Top-level column names: ``"id, name"`` (comma-separated, blanks around names dropped) or a list of strings.

    Raises:
        InvalidOptionError: no name, an empty name, or a name given twice.
    """
    if isinstance(value, str):
        names = [n.strip() for n in value.split(",")]
    elif isinstance(value, (list, tuple)) and all(isinstance(n, str) for n in value):
        names = [n.strip() for n in value]
    else:
        raise InvalidOptionError(f"option {name} must be column names such as 'id, name', got {value!r}")
    if not names or any(not n for n in names):
        raise InvalidOptionError(f"option {name} must be comma-separated column names without empty ones: {value!r}")
    folded = [n.lower() for n in names]
    twice = next((n for i, n in enumerate(names) if folded[i] in folded[:i]), None)
    if twice is not None:
        raise InvalidOptionError(f"option {name} names column {twice!r} twice (names are case-insensitive)")
    return tuple(names)


def parse_app_id(value: object, name: str) -> str:
    """An application id: a non-empty string that is not a boolean word (``"false"`` is a mistake, not an id).

    Raises:
        InvalidOptionError: anything else.
    """
    text = parse_text(value, name)
    if text.strip().lower() in ("true", "false"):
        raise InvalidOptionError(
            f"option {name} must name the writing application (e.g. 'orders-etl'), got {text!r}, which reads as a "
            "boolean"
        )
    return text


def parse_mapping(value: object, name: str) -> dict[str, Any]:
    """A dict of keyword arguments (``storage_options``)."""
    if not isinstance(value, Mapping):
        raise InvalidOptionError(f"option {name} must be a dict, got {type(value).__name__}")
    return dict(value)


# --- the registry ---------------------------------------------------------------------------------------------------


class Entry(enum.Enum):
    """Where options are given; the value is how messages and the docs name it."""

    CONNECT = "connect()"
    SINK = "ducklake_sink()"
    READ = "read"
    WRITE = "write"
    STREAM_READ = "readStream"
    STREAM_WRITE = "writeStream"

    @property
    def spark(self) -> bool:
        return self in SPARK

    @property
    def where(self) -> str:
        return {
            Entry.CONNECT: "connect()",
            Entry.SINK: "ducklake_sink()",
            Entry.READ: "spark.read.format('ducklake') / read_table()",
            Entry.WRITE: "df.write.format('ducklake') / write_table()",
            Entry.STREAM_READ: "spark.readStream.format('ducklake')",
            Entry.STREAM_WRITE: "df.writeStream.format('ducklake')",
        }[self]


SPARK = frozenset({Entry.READ, Entry.WRITE, Entry.STREAM_READ, Entry.STREAM_WRITE})
ALL = frozenset(Entry)
COMMITS = frozenset({Entry.CONNECT, Entry.SINK, Entry.WRITE, Entry.STREAM_WRITE})


@dataclass(frozen=True)
class Option:
    """One option: its names, the entry points that take it, how its value parses, and its documentation.

    ``section`` names the docs table it is documented in (None: set by Spark itself, not documented).
    """

    name: str
    entries: frozenset[Entry]
    parse: Callable[[object, str], object]
    default: str
    doc: str
    section: str | None
    aliases: tuple[str, ...] = ()

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def python_name(self) -> str:
        """The keyword argument of ``connect()``/``ducklake_sink()``: the snake_case spelling."""
        return next((s for s in self.spellings if s == s.lower()), self.name)

    def display(self, entry: Entry) -> str:
        return self.name if entry.spark else self.python_name


def _int(minimum: int | None = None) -> Callable[[object, str], object]:
    return lambda value, name: parse_int(value, name, minimum=minimum)


def _float(minimum: float | None = None) -> Callable[[object, str], object]:
    return lambda value, name: parse_float(value, name, minimum=minimum)


def _any(value: object, name: str) -> object:
    return value


LAKE, SPARK_TABLE, SINK_TABLE, FEED = "lake", "spark", "sink", "feed"
_LOCATION = ALL - {Entry.CONNECT}  # connect() takes them as positional arguments

OPTIONS: tuple[Option, ...] = (
    # --- where the lake is, how commits retry (docs/configuration.md)
    Option(
        CATALOG,
        _LOCATION,
        parse_text,
        "Spark conf `spark.ducklake.catalog`, else `DUCKLAKE_CATALOG`",
        "the catalog database: a SQLAlchemy URL or DuckDB's spelling (see the catalog spellings above); "
        "`connect()`'s first argument",
        LAKE,
    ),
    Option(
        DATA_PATH,
        _LOCATION,
        parse_text,
        "Spark conf `spark.ducklake.dataPath`, else `DUCKLAKE_DATA_PATH`",
        "folder or URL of the Parquet files; needed only to create a catalog; `connect()`'s second argument",
        LAKE,
        aliases=("data_path",),
    ),
    Option(
        ENCRYPTED,
        ALL,
        parse_bool,
        "the catalog's `encrypted` setting; `false` for a new catalog",
        "create the lake encrypted, as DuckDB's `ATTACH ... (ENCRYPTED)` does: every data and delete file is "
        "encrypted with its own key, kept in the catalog (see Encrypted lakes). On an existing lake it must match "
        "the lake's setting, as in DuckDB; leave it out to follow the catalog",
        LAKE,
    ),
    Option(
        FORMAT_VERSION,
        ALL,
        parse_format_version,
        "`1.0` for a new catalog; an existing one keeps its own",
        "the DuckLake format version of a new catalog: `1.0` (DuckDB 1.5 and 2.0 open it) or `1.1` (DuckDB 2.0's "
        "default; DuckDB 1.5 cannot open it), as DuckDB's `ATTACH ... (DUCKLAKE_VERSION '1.1')`. On an existing "
        "catalog it must match the catalog's version (DuckDB refuses a mismatch too); a 1.0 catalog moves to 1.1 "
        "only by `Lake.migrate('1.1')` or `pyspark-ducklake migrate --to 1.1`. See Compatibility",
        LAKE,
        aliases=("ducklake_version",),
    ),
    Option(
        DUCKDB_STORAGE_VERSION,
        ALL,
        parse_storage_version,
        "`v1.5.0`",
        "DuckDB-file catalogs only: the DuckDB storage version a **new** `.ducklake` file is written in (DuckDB's "
        "`storage_compatibility_version`). The default keeps the file readable by DuckDB 1.5 whichever DuckDB this "
        "library runs with (DuckDB 2.0's own default, `latest`, makes files DuckDB 1.5 refuses); an existing file "
        "keeps its version",
        LAKE,
    ),
    Option(
        DATA_INLINING_ROW_LIMIT,
        frozenset({Entry.CONNECT, Entry.WRITE}),
        _int(0),
        "the catalog's `data_inlining_row_limit` setting (table, then global), else 10",
        "`append`/`overwrite` of at most this many rows store them in the catalog instead of a Parquet file; 0 never "
        "inlines; must be ≥ 0. Accepted but not used by Spark writes, which always write files (the sink and "
        "`writeStream` have their own, below)",
        LAKE,
    ),
    Option(
        MAX_RETRY_COUNT,
        COMMITS,
        _int(0),
        "10",
        "retries of a commit after the first attempt (new plans of a delete whose rows moved count too); ≥ 0",
        LAKE,
    ),
    Option(RETRY_WAIT_MS, COMMITS, _int(0), "100", "base wait before a retry, in milliseconds; ≥ 0", LAKE),
    Option(
        RETRY_BACKOFF, COMMITS, _float(1.0), "1.5", "factor applied to the wait for each further retry; ≥ 1.0", LAKE
    ),
    Option(
        RECONNECT_TIMEOUT,
        COMMITS,
        parse_seconds,
        "60",
        "seconds (or a duration such as `'5 min'`) a commit (and the sink's catalog reads) waits for an unreachable "
        "catalog, probing it with the backoff above (at most 5 s apart), before `CatalogUnreachableError`; "
        "0 fails at once; for the sink and `writeStream` a micro-batch then runs again and the replay check skips "
        "it if it had landed",
        LAKE,
    ),
    Option(
        "storage_options",
        frozenset({Entry.CONNECT, Entry.SINK}),
        parse_mapping,
        "Spark conf `spark.ducklake.s3.*` / `gcs.*` / `azure.*`, `AWS_*`, `AZURE_STORAGE_*`",
        "fsspec (s3fs, gcsfs, adlfs) options for the data path (credentials, endpoint…); Spark takes "
        "`ducklake.s3.<name>`, `ducklake.gcs.<name>`, `ducklake.azure.<name>` options instead; see "
        "[Object storage](#object-storage)",
        LAKE,
    ),
    Option("author", frozenset({Entry.CONNECT}), parse_text, "none", "the `author` of every snapshot committed", LAKE),
    # --- Spark batch reads and writes (docs/spark.md)
    Option(
        "snapshot",
        frozenset({Entry.READ}),
        parse_snapshot_id,
        "latest",
        "read at this snapshot id; giving it together with `timestamp` is an `InvalidOptionError`",
        SPARK_TABLE,
        aliases=("versionAsOf",),
    ),
    Option(
        "timestamp",
        frozenset({Entry.READ}),
        parse_timestamp,
        "latest",
        "read the newest snapshot committed at or before this ISO-8601 time (naive means UTC)",
        SPARK_TABLE,
        aliases=("timestampAsOf",),
    ),
    Option(
        "columns",
        frozenset({Entry.READ, Entry.STREAM_READ}),
        parse_column_names,
        "all",
        'read only these top-level columns, comma-separated (`"id, name"`; case-insensitive, as DuckDB\'s names), in '
        "the table's order: the DataFrame has only them and only they are decoded (PySpark 4.3 gives a data source no "
        "column list). A column this library cannot read is readable around this way; a name the table lacks is a "
        "`NoSuchColumnError` naming the closest. Also for `readChangeFeed` and the change-feed `readStream` (the "
        "change columns always come)",
        SPARK_TABLE,
    ),
    Option(
        "partitionBy",
        frozenset({Entry.WRITE}),
        parse_keys,
        "none",
        'partition keys of a table the write creates, e.g. `"k, month(ts), bucket(16, id)"` (transforms as in '
        "`set_partitioning`). "
        "For an existing table it must equal the table's current keys (leave it out to use them); change them with "
        "`lake.set_partitioning()`",
        SPARK_TABLE,
        aliases=("partition_by",),
    ),
    Option(
        "targetFileRows",
        frozenset({Entry.WRITE}),
        _int(1),
        "1000000",
        "a task starts a new file once it has buffered at least this many rows (checked after each incoming Arrow "
        "batch, so a file can exceed it by up to one batch); ≥ 1",
        SPARK_TABLE,
        aliases=("target_file_rows",),
    ),
    Option(
        TXN_APP_ID,
        frozenset({Entry.WRITE}),
        lambda value, name: parse_app_id(value, name),
        "none",
        "with `txnVersion`: Delta's idempotent writes (e.g. inside `foreachBatch`): when this app id already "
        "committed `txnVersion` or a later version into the table, the write is a no-op; else the version is recorded "
        "in the same snapshot. Give both or neither",
        SPARK_TABLE,
        aliases=("txn_app_id",),
    ),
    Option(
        TXN_VERSION,
        frozenset({Entry.WRITE}),
        _int(0),
        "none",
        "the write's version for `txnAppId`: an integer ≥ 0 (the `batch_id` of `foreachBatch`)",
        SPARK_TABLE,
        aliases=("txn_version",),
    ),
    # --- the foreachBatch sink and writeStream (docs/streaming-sink.md)
    Option(
        "app_id",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_text,
        "the streaming query id",
        "the idempotency key; give one when several queries must count as one writer, and to `ducklake_sink()` on "
        "Spark Connect (which does not tell it the query id)",
        SINK_TABLE,
        aliases=("appId",),
    ),
    Option(
        DATA_INLINING_ROW_LIMIT,
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        _int(0),
        "1000",
        "batches (and task partitions) of at most this many rows go to the catalog; `0` never inlines",
        SINK_TABLE,
    ),
    Option(
        "flush_rows",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        _int(1),
        "100000",
        "flush inlined rows to Parquet once the table holds this many; ≥ 1",
        SINK_TABLE,
    ),
    Option(
        "flush_bytes",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_size,
        "`67108864` (64 MiB)",
        "... or about this many bytes (estimated from the batch's Arrow size); bytes or a size such as `'64MB'`",
        SINK_TABLE,
    ),
    Option(
        "flush_interval",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_seconds,
        "300",
        "... or once the oldest inlined row is this many seconds old (or a duration such as `'5 min'`)",
        SINK_TABLE,
    ),
    Option(
        "expire_older_than",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_interval,
        "the lake's `expire_older_than`",
        "retention: every `retention_interval` the sink expires the snapshots older than this (an interval such "
        "as `'7 days'`, as Delta's `logRetentionDuration`) and deletes the files they leave; giving it turns the "
        "sink's retention on (see [Retention](maintenance.md#retention-for-streams))",
        SINK_TABLE,
    ),
    Option(
        "delete_older_than",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_interval,
        "the lake's `delete_older_than`, else `'2 days'`",
        "retention: files the expired snapshots left are deleted once scheduled this long (as Delta's "
        "`deletedFileRetentionDuration`: readers of an old snapshot keep their files until then)",
        SINK_TABLE,
    ),
    Option(
        "retention_interval",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_seconds,
        "3600 (once `expire_older_than` is given)",
        "retention: seconds (or `'1 hour'`) between the sink's expiry and cleanup runs; giving it alone applies the "
        "lake's `expire_older_than`/`delete_older_than` settings",
        SINK_TABLE,
    ),
    Option(
        "create_table",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_bool,
        "true",
        "create a missing table from the stream's schema (`true`/`false`, also as strings)",
        SINK_TABLE,
        aliases=("createTable",),
    ),
    Option(
        "merge_schema",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_bool,
        "false",
        "add the stream's new columns to the table",
        SINK_TABLE,
        aliases=("mergeSchema",),
    ),
    Option(
        "partition_by",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_keys,
        "none",
        'partition keys for a table the sink creates, e.g. `["k", "day(ts)", "bucket(16, id)"]` or '
        '`"k, day(ts), bucket(16, id)"` (transforms as in `set_partitioning`)',
        SINK_TABLE,
        aliases=("partitionBy",),
    ),
    Option(
        "target_file_rows",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        _int(1),
        "1000000",
        "a task starts a new Parquet file after about this many rows; ≥ 1",
        SINK_TABLE,
        aliases=("targetFileRows",),
    ),
    Option(
        "upsert_on",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_column_names,
        "none (append)",
        "apply each micro-batch by key instead of appending: a row whose key exists replaces it (keeping its row id, "
        "so the change feed shows an update pair), a new key is inserted; key columns of the table, comma-separated "
        "or a list; NULL keys are a `NullKeyError`. See [Upserts in the sink](#upserts-in-the-sink)",
        SINK_TABLE,
        aliases=("upsertOn",),
    ),
    Option(
        "delete_when",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_delete_when,
        "none",
        "with `upsert_on`: a Spark SQL boolean expression over the batch's columns (`\"op = 'd'\"`); rows where it "
        "is true delete their key (NULL counts as false). Columns only it uses and the table lacks are not stored. "
        "`writeStream` takes a subset of Spark SQL, checked when the query starts: see "
        "[deleteWhen in writeStream](#deletewhen-in-writestream)",
        SINK_TABLE,
        aliases=("deleteWhen",),
    ),
    Option(
        "order_by",
        frozenset({Entry.SINK, Entry.STREAM_WRITE}),
        parse_column_names,
        "none",
        "with `upsert_on`: of several rows for one key in a batch the last in this order wins (ties: the later row; "
        "NULL first); without it a key twice in a batch is a `DuplicateKeyError`. Columns the table lacks are not "
        "stored",
        SINK_TABLE,
        aliases=("orderBy",),
    ),
    # --- the change feed (docs/change-feed.md)
    Option(
        "readChangeFeed",
        frozenset({Entry.READ, Entry.STREAM_READ}),
        parse_bool,
        "false",
        "read the change feed instead of the table (implied by a `starting…` option); a `readStream` without it nor "
        "a start option streams the table's rows, then the rows later snapshots append, in the table's columns",
        FEED,
    ),
    Option(
        "startingSnapshot",
        frozenset({Entry.READ, Entry.STREAM_READ}),
        parse_snapshot_start,
        "`read`: none (required); `readStream`: the table's rows first",
        "first snapshot of the change feed to emit: an id (at most the newest + 1), `earliest` (the oldest snapshot "
        "from which on none was expired) or `latest` (only what comes after the query starts). A `readStream` with "
        "`readChangeFeed` and without it (nor `startingTimestamp`) first emits the table's rows at the newest "
        "snapshot as inserts, then the changes after it (as Delta's change-data-feed stream does)",
        FEED,
        aliases=("startingVersion",),
    ),
    Option(
        "startingTimestamp",
        frozenset({Entry.READ, Entry.STREAM_READ}),
        parse_timestamp,
        "none",
        "start at the oldest snapshot committed at or after this ISO time (naive means UTC), as DuckDB's "
        "`table_changes` takes a start time; before the first snapshot: from the oldest",
        FEED,
    ),
    Option(
        "endingSnapshot",
        frozenset({Entry.READ}),
        parse_snapshot_id,
        "latest",
        "last snapshot to emit (batch only)",
        FEED,
        aliases=("endingVersion",),
    ),
    Option(
        "endingTimestamp",
        frozenset({Entry.READ}),
        parse_timestamp,
        "latest",
        "last snapshot to emit: the newest committed at or before this ISO time (batch only)",
        FEED,
    ),
    Option(
        "maxSnapshotsPerTrigger",
        frozenset({Entry.STREAM_READ}),
        _int(1),
        "none",
        "at most this many row-changing snapshots per micro-batch",
        FEED,
    ),
    Option(
        "maxRowsPerTrigger",
        frozenset({Entry.STREAM_READ}),
        _int(1),
        "none",
        "about this many change rows per micro-batch (soft: whole snapshots, at least one); in a stream's initial "
        "load of the table's rows, about this many rows (default 1000000)",
        FEED,
    ),
    Option(
        "maxFilesPerTrigger",
        frozenset({Entry.STREAM_READ}),
        _int(1),
        "1000",
        "in a stream's initial load of the table's rows (no start option), at most this many data files per "
        "micro-batch (as Delta's initial snapshot)",
        FEED,
    ),
    Option(
        "skipChangeCommits",
        frozenset({Entry.STREAM_READ}),
        parse_bool,
        "false",
        "a stream of the table's rows (no `readChangeFeed`) skips each snapshot that deletes or updates rows, its "
        "appended rows too (as Delta's); without it such a snapshot stops the query with `RowsChangedError`",
        FEED,
    ),
    Option(
        "ignoreDeletes",
        frozenset({Entry.STREAM_READ}),
        parse_bool,
        "false",
        "a stream of the table's rows (no `readChangeFeed`) skips each snapshot that only deletes rows (as Delta's); "
        "a snapshot that updates rows, or deletes and appends, still stops it",
        FEED,
    ),
    Option(
        "failOnDataLoss",
        frozenset({Entry.STREAM_READ}),
        parse_bool,
        "true",
        "when snapshots the stream still needs were expired: fail with `DataLossError` naming the range; `false` "
        "logs a warning and skips ahead",
        FEED,
    ),
    Option(
        "table",
        SPARK,
        parse_text,
        "`load()` / `save()` / `start()`'s argument",
        "the table (`schema.table`) when `load()`/`save()` are given none; how a SQL table names its DuckLake "
        "table: `CREATE TABLE events USING ducklake OPTIONS (table 'main.events')` (see [SQL tables](#sql-tables))",
        SPARK_TABLE,
    ),
    Option(
        "metadata",
        frozenset({Entry.READ}),
        parse_text,
        "none (the table's rows)",
        "read the lake's metadata instead, with DuckDB's columns: `snapshots` (`ducklake_snapshots()`, no table), "
        "`table_info` (`ducklake_table_info()`, no table) or `files` (`ducklake_list_files()` of the `load()` table, "
        "at `snapshot` if given); see [Metadata](#metadata-as-dataframes)",
        SPARK_TABLE,
    ),
    Option(
        "limit",
        frozenset({Entry.READ}),
        _int(1),
        "every snapshot",
        "with `metadata` `snapshots`: at most this many snapshots, the newest (or with `since` the first from it), "
        "as Delta's `DESCRIBE HISTORY ... LIMIT`; applied by the catalog database",
        SPARK_TABLE,
    ),
    Option(
        "since",
        frozenset({Entry.READ}),
        parse_snapshot_id,
        "the oldest",
        "with `metadata` `snapshots`: only snapshots from this id on (inclusive; beyond the newest: none)",
        SPARK_TABLE,
    ),
    # --- set by Spark itself: load()/save()/start() put the table in `path`; a stream writer gets its checkpoint
    Option("path", SPARK, _any, "", "", None),
    Option("checkpointLocation", frozenset({Entry.STREAM_WRITE}), _any, "", "", None),
)


def _index() -> dict[Entry, dict[str, Option]]:
    out: dict[Entry, dict[str, Option]] = {e: {} for e in Entry}
    for option in OPTIONS:
        for entry in option.entries:
            for spelling in option.spellings:
                key = spelling.lower()
                assert key not in out[entry], f"option {spelling} is registered twice for {entry.value}"
                out[entry][key] = option
    return out


_BY_ENTRY = _index()
_SPELLINGS = {s.lower(): s for o in OPTIONS for s in o.spellings}


def options_for(entry: Entry) -> list[Option]:
    """The options ``entry`` accepts, in registry order."""
    return [o for o in OPTIONS if entry in o.entries]


def _suggest(key: str, candidates: Iterable[str]) -> str:
    by_lower = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {by_lower[close[0]]!r}?" if close else ""


def lookup(key: str, *entries: Entry) -> Option | None:
    """The option ``key`` names at any of ``entries`` (None for an object-store setting ``ducklake.s3.<name>``).

    Raises:
        InvalidOptionError: unknown there: the message gives the closest valid name, or the entry points that take it.
    """
    lower = key.lower()
    where = " / ".join(e.where for e in entries)
    spark = any(e.spark for e in entries)
    if spark and lower.startswith(S3_OPTION_PREFIX):
        name = lower[len(S3_OPTION_PREFIX) :]
        if name not in S3_SETTINGS:
            hint = _suggest(key, [S3_OPTION_PREFIX + n for n in S3_SETTINGS])
            raise InvalidOptionError(
                f"unknown option {key!r} for {where}{hint} The object-store options are "
                f"{', '.join(S3_OPTION_PREFIX + n for n in S3_SETTINGS)}"
            )
        return None
    store = store_of_option(key) if spark else None
    if store is not None:
        if lower[len(store.option_prefix) :] not in store.settings:
            hint = _suggest(key, [store.option_prefix + n for n in store.settings])
            raise unknown_setting_error(key, store, f" for {where}", hint)
        return None
    for entry in entries:
        option = _BY_ENTRY[entry].get(lower)
        if option is not None:
            return option
    elsewhere = sorted({e.where for o in OPTIONS if lower in _lower(o) for e in o.entries})
    if elsewhere:
        raise InvalidOptionError(
            f"option {_SPELLINGS[lower]!r} does not apply to {where}; it is an option of {', '.join(elsewhere)}"
        )
    accepted = [(e, o) for e in entries for o in options_for(e)]
    names = [s for _, o in accepted for s in o.spellings]
    names += [S3_OPTION_PREFIX + n for n in S3_SETTINGS] if spark else []
    names += [st.option_prefix + n for st in STORES for n in st.settings] if spark else []
    documented = list(dict.fromkeys(o.display(e) for e, o in accepted if o.section is not None))
    raise InvalidOptionError(
        f"unknown option {key!r} for {where}{_suggest(key, names)} Its options are: {', '.join(documented)}"
        + (f", {S3_OPTION_PREFIX}<name>" if spark else "")
        + ("".join(f", {st.option_prefix}<name>" for st in STORES) if spark else "")
        + " (names are case-insensitive; the docs have option tables per entry point)"
    )


def check_options(options: Mapping[str, object], *entries: Entry) -> dict[str, object]:
    """Check every option given to an entry point: known there (at any of ``entries``), given once, a value that
    parses.

    Returns:
        The parsed values by the option's documented name (object-store settings left out); None values are skipped.

    Raises:
        InvalidOptionError: an unknown or misspelt option (the closest valid name is suggested), one given twice in
            two spellings, or a value that does not parse or is out of range.
    """
    parsed: dict[str, object] = {}
    given: dict[str, str] = {}
    for key, value in options.items():
        option = lookup(str(key), *entries)
        if option is None or value is None:
            continue
        if option.name in given:
            raise InvalidOptionError(
                f"options {given[option.name]!r} and {key!r} are the same option; give only one of them"
            )
        given[option.name] = str(key)
        # messages name the option as documented: Spark lowercases the keys it passes on
        spelled = next((sp for sp in option.spellings if sp.lower() == str(key).lower()), str(key))
        parsed[option.name] = option.parse(value, spelled)
    return parsed


def check_keywords(given: Iterable[str], allowed: Iterable[str], where: str) -> None:
    """Reject keyword arguments a function taking ``**options`` does not know, naming the closest valid one.

    Raises:
        InvalidOptionError: the first unknown keyword.
    """
    names = list(allowed)
    for key in given:
        if key not in names:
            raise InvalidOptionError(
                f"unknown argument {key!r} for {where}{_suggest(key, names)} Its arguments are: {', '.join(names)}"
            )


def check_spark_conf(keys: Iterable[str]) -> None:
    """Reject ``spark.ducklake.*`` conf keys this library does not know (a misspelt key is otherwise ignored).

    Raises:
        InvalidOptionError: naming the key and the closest valid one.
    """
    known = {k.lower(): k for k in SPARK_CONF_KEYS}
    for key in keys:
        if not key.lower().startswith(SPARK_CONF_PREFIX) or key.lower() in known:
            continue
        hint = _suggest(key, known.values())
        raise InvalidOptionError(
            f"unknown Spark conf {key!r}{hint} The DuckLake conf keys are {SPARK_CONF_CATALOG}, "
            f"{SPARK_CONF_DATA_PATH}, {S3_CONF_PREFIX}<name> ({', '.join(S3_SETTINGS)})"
            + "".join(f", {st.conf_prefix}<name> ({', '.join(st.settings)})" for st in STORES)
        )


def canonical_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """``spark.ducklake.*`` entries of ``conf`` under their documented keys (Spark conf keys are case-sensitive; ours
    match in any case), after :func:`check_spark_conf`."""
    known = {k.lower(): k for k in SPARK_CONF_KEYS}
    check_spark_conf(conf)
    return {known[k.lower()]: v for k, v in conf.items() if k.lower() in known}


# --- reading values in consumer code ----------------------------------------------------------------------------------


def option_value(options: Mapping[str, Any], key: str) -> Any:
    """The value given for option ``key`` under any of its spellings (case-insensitive; Spark lowercases keys)."""
    if key in options:
        return options[key]
    spellings = _SAME_OPTION.get(key.lower(), frozenset({key.lower()}))
    for k, v in options.items():
        if str(k).lower() in spellings:
            return v
    return None


def _lower(option: Option) -> set[str]:
    return {s.lower() for s in option.spellings}


def _same_option() -> dict[str, frozenset[str]]:
    # a spelling (lowercased) -> itself and every spelling of each option it names: option_value's lookups, once
    out: dict[str, set[str]] = {}
    for o in OPTIONS:
        lowered = _lower(o)
        for s in lowered:
            out.setdefault(s, {s}).update(lowered)
    return {k: frozenset(v) for k, v in out.items()}


_SAME_OPTION = _same_option()


def option_as_int(
    options: Mapping[str, Any], key: str, default: int | None, *, minimum: int | None = None
) -> int | None:
    raw = option_value(options, key)
    return default if raw is None else parse_int(raw, key, minimum=minimum)


def option_as_snapshot(options: Mapping[str, Any], key: str) -> int | None:
    """The snapshot id an option (any spelling) gives, or None."""
    raw = option_value(options, key)
    return None if raw is None else parse_snapshot_id(raw, key)


def option_as_float(options: Mapping[str, Any], key: str, default: float, *, minimum: float | None = None) -> float:
    raw = option_value(options, key)
    return default if raw is None else parse_float(raw, key, minimum=minimum)


def option_as_seconds(options: Mapping[str, Any], key: str, default: float) -> float:
    raw = option_value(options, key)
    return default if raw is None else parse_seconds(raw, key)


def option_as_size(options: Mapping[str, Any], key: str, default: int) -> int:
    raw = option_value(options, key)
    return default if raw is None else parse_size(raw, key)


def option_txn(options: Mapping[str, Any]) -> tuple[str, int] | None:
    """``(txnAppId, txnVersion)`` from write options (any spelling), both or neither, or None.

    Raises:
        InvalidOptionError: one without the other, an empty or boolean app id, a version that is not an integer >= 0.
    """
    app_id, version = option_value(options, TXN_APP_ID), option_value(options, TXN_VERSION)
    if app_id is None and version is None:
        return None
    if app_id is None or version is None:
        given, missing = (TXN_APP_ID, TXN_VERSION) if version is None else (TXN_VERSION, TXN_APP_ID)
        raise InvalidOptionError(
            f"option {given} without {missing}: options txnAppId and txnVersion go together, give both or neither"
        )
    return parse_app_id(app_id, TXN_APP_ID), parse_int(version, TXN_VERSION, minimum=0)


def option_as_bool(options: Mapping[str, Any], key: str, default: bool) -> bool:
    raw = option_value(options, key)
    return default if raw is None else parse_bool(raw, key)


# --- the docs' option tables ----------------------------------------------------------------------------------------

_ENTRY_ORDER = (Entry.CONNECT, Entry.SINK, Entry.READ, Entry.WRITE, Entry.STREAM_READ, Entry.STREAM_WRITE)


def render_table(section: str) -> str:
    """The docs table of ``section``'s options: names (aliases), where they are accepted, default, meaning."""
    lines = ["| option | accepted by | default | meaning |", "|---|---|---|---|"]
    for o in OPTIONS:
        if o.section != section:
            continue
        names = f"`{o.name}`" + (f" (alias {', '.join(f'`{a}`' for a in o.aliases)})" if o.aliases else "")
        where = ", ".join(f"`{e.value}`" for e in _ENTRY_ORDER if e in o.entries)
        lines.append(f"| {names} | {where} | {o.default} | {o.doc} |")
    return "\n".join(lines)


SECTIONS = (LAKE, SPARK_TABLE, SINK_TABLE, FEED)
