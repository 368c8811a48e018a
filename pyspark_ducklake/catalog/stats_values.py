"""The min/max strings DuckLake stores, and DuckDB's text form of single values.

DuckDB 1.5.5 writes ``min_value``/``max_value`` of ``ducklake_file_column_stats`` and
``ducklake_table_column_stats`` in one of two forms, depending on where the values went, not on the stats level:

* **Parquet form** (rows written to a data file). The strings come from DuckDB's Parquet writer: booleans
  ``'0'``/``'1'``, blobs upper-case hex (``'00FF6162'``), no min/max for INTERVAL, HUGEINT, UHUGEINT and nested
  parents, NaN left out of min/max (``contains_nan`` says it is there), strings longer than 256 bytes truncated.
* **Inlined form** (rows inlined into the catalog). Each value is DuckDB's ``CAST(value AS VARCHAR)``: booleans
  ``'true'``, blobs escaped (``'\\x00\\xFFab'``), intervals and hugeints present, NaN is the maximum.

Everything else renders identically in both forms and equals DuckDB's VARCHAR cast: shortest round-trip floats
(``'33.333332'`` for a FLOAT, ``'1.0'``, ``'-0.0'``, ``'1e+16'``, ``'inf'``, ``'nan'``), decimals at full scale,
dates ``'2024-02-29'`` / ``'0001-12-31 (BC)'`` / ``'infinity'``, timestamps with trimmed fractions, TIMESTAMPTZ
in UTC with ``'+00'``. The doc's "blob stats are hex in files but escaped in the table" observation is the
Parquet-versus-inlined difference: DuckDB merges table stats from whichever path the rows took.

Values travel through this module as *storage values*, the integers Arrow stores, so DuckDB's whole range
(``infinity``, BC dates, nanoseconds) is exact: date = days since 1970-01-01 (``±(2**31-1)`` = ±infinity),
time = microseconds of the day, timestamp / timestamptz = microseconds since the epoch (UTC), timestamp_s/_ms/_ns
in their unit (``±(2**63-1)`` = ±infinity), interval = ``(months, days, micros)``, uuid = :class:`uuid.UUID`,
blob = ``bytes``, decimal = :class:`~decimal.Decimal`, int128 / uint128 = ``int``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
import uuid
from decimal import Decimal, InvalidOperation, localcontext
from fractions import Fraction
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog.time_types import (
    format_time_ns,
    format_timetz,
    parse_time_text,
    parse_timetz_utc,
    timetz_order_key,
)
from pyspark_ducklake.catalog.types import Column, arrow_type, decimal_params, unreadable_type
from pyspark_ducklake.exceptions import UnsupportedTypeError

DATE_INFINITY = 2**31 - 1
"""DuckDB's ``DATE 'infinity'`` as days (``-DATE_INFINITY`` is ``-infinity``); DuckDB exports it to Arrow as is."""
TIMESTAMP_INFINITY = 2**63 - 1
"""DuckDB's timestamp ``'infinity'`` in any unit (``-TIMESTAMP_INFINITY`` is ``-infinity``)."""

TIMESTAMP_MIN_MICROS = -9_223_372_022_400_000_000
"""DuckDB's smallest timestamp, ``290309-12-22 (BC) 00:00:00``, in microseconds."""


def check_temporal_range(column: Column, lo: int | None, hi: int | None) -> None:
    """Refuse date/timestamp storage values (the smallest and largest of a batch) that DuckDB cannot hold.

    DuckDB's dates run from 5877642-06-25 (BC) to 5881580-07-10 plus ``±infinity`` (every int32 but its minimum);
    its timestamps from 290309-12-22 (BC) to 294247-01-10 plus ``±infinity``. Arrow holds more.

    Raises:
        SchemaMismatchError: a value outside that range; nothing has been written.
    """
    from pyspark_ducklake.exceptions import SchemaMismatchError

    t = column.type
    bad: int | None = None
    for value in (lo, hi):
        if value is None:
            continue
        if t == "date":
            ok = abs(value) <= DATE_INFINITY
        elif t == "timestamp_ns":
            ok = abs(value) <= TIMESTAMP_INFINITY
        elif t in _TIMESTAMP_UNITS:
            micros = value * (10**6 // _TIMESTAMP_UNITS[t])
            ok = abs(value) == TIMESTAMP_INFINITY or TIMESTAMP_MIN_MICROS <= micros < TIMESTAMP_INFINITY
        else:
            ok = True
        if not ok:
            bad = value
    if bad is not None:
        unit = "days" if t == "date" else f"{t} units"
        raise SchemaMismatchError(
            f"column {column.name!r} ({t}) holds {bad} {unit} since 1970-01-01, beyond the range DuckDB can hold "
            "(dates from 5877642-06-25 (BC) to 5881580-07-10, timestamps from 290309-12-22 (BC) to 294247-01-10): "
            "DuckDB cannot hold it; correct or drop those rows (nothing was written)"
        )


_INT_TYPES = frozenset({"int8", "int16", "int32", "int64", "int128", "uint8", "uint16", "uint32", "uint64", "uint128"})
_TIMESTAMP_UNITS: dict[str, int] = {
    "timestamp_s": 1,
    "timestamp_ms": 1000,
    "timestamp": 10**6,
    "timestamptz": 10**6,
    "timestamp_ns": 10**9,
}
_TEMPORAL = frozenset({"date", "time", "timetz", "time_ns", *_TIMESTAMP_UNITS})
# Types whose Parquet statistics DuckDB does not return (HUGEINT is written as a lossy DOUBLE; TIMETZ gets none).
_NO_PARQUET_STATS = frozenset({"interval", "int128", "uint128", "timetz", "time_ns"})
_UNIX_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_EPOCH = dt.datetime(1970, 1, 1)
_MAX_STRING_STATS = 256  # DuckDB's Parquet writer: MAX_STRING_STATISTICS_SIZE


class TemporalBound:
    """A date/timestamp Python cannot hold (``infinity``, BC, year > 9999), as returned by :func:`parse_stat`.

    It compares greater (``positive``) or smaller than every ``date``/``datetime``, which keeps comparisons with
    Python values in a filter correct; bounds compare with each other by their exact storage value, which
    :func:`from_python` turns them back into.
    """

    __slots__ = ("positive", "storage")

    def __init__(self, storage: int) -> None:
        self.storage = storage
        self.positive = storage > 0

    def __repr__(self) -> str:
        return f"TemporalBound({self.storage})"

    def _key(self, other: object) -> tuple[int, int] | None:
        if isinstance(other, TemporalBound):
            return self.storage, other.storage
        if isinstance(other, (dt.date, dt.time)):
            return (1, 0) if self.positive else (0, 1)
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TemporalBound) and other.storage == self.storage

    def __hash__(self) -> int:
        return hash(("TemporalBound", self.storage))

    def __lt__(self, other: object) -> bool:
        key = self._key(other)
        return NotImplemented if key is None else key[0] < key[1]

    def __le__(self, other: object) -> bool:
        key = self._key(other)
        return NotImplemented if key is None else key[0] <= key[1]

    def __gt__(self, other: object) -> bool:
        key = self._key(other)
        return NotImplemented if key is None else key[0] > key[1]

    def __ge__(self, other: object) -> bool:
        key = self._key(other)
        return NotImplemented if key is None else key[0] >= key[1]


# ---------------------------------------------------------------------------------------------------------------
# Calendar arithmetic on the proleptic Gregorian calendar with astronomical years (year 0 = 1 BC), as DuckDB.


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (astronomical year numbering)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


@overload
def civil_from_days(days: int) -> tuple[int, int, int]: ...
@overload
def civil_from_days(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...
def civil_from_days(days: Any) -> Any:
    """(year, month, day) of a day number, or of each of an int64 array of them; the inverse of
    :func:`days_from_civil`."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 - 12 * (mp >= 10)
    return yoe + era * 400 + (month <= 2), month, day


# ---------------------------------------------------------------------------------------------------------------
# DuckDB's VARCHAR text of single (non-nested) values.


def _format_fraction(value: int, digits: int) -> str:
    """``.ddd`` with trailing zeros removed, or '' (DuckDB trims fractions: .5 not .500000)."""
    if value == 0:
        return ""
    return "." + str(value).rjust(digits, "0").rstrip("0")


def format_date(days: int) -> str:
    """DuckDB's text of a DATE given as days since the epoch."""
    if days == DATE_INFINITY:
        return "infinity"
    if days == -DATE_INFINITY:
        return "-infinity"
    year, month, day = civil_from_days(days)
    suffix = ""
    if year <= 0:
        year, suffix = 1 - year, " (BC)"
    return f"{year:04d}-{month:02d}-{day:02d}{suffix}"


def format_time(micros: int, *, digits: int = 6, per_second: int = 10**6) -> str:
    """DuckDB's text of a time of day (``HH:MM:SS[.fraction]``); ``24:00:00`` is valid."""
    seconds, fraction = divmod(micros, per_second)
    minutes, sec = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours:02d}:{minute:02d}:{sec:02d}{_format_fraction(fraction, digits)}"


def format_timestamp(value: int, type_name: str) -> str:
    """DuckDB's text of a timestamp in the unit of ``type_name`` (timestamptz gets ``+00``, in UTC)."""
    if value == TIMESTAMP_INFINITY:
        return "infinity"
    if value == -TIMESTAMP_INFINITY:
        return "-infinity"
    per_second = _TIMESTAMP_UNITS[type_name]
    days, rest = divmod(value, 86400 * per_second)
    digits = {1: 0, 1000: 3, 10**6: 6, 10**9: 9}[per_second]
    text = f"{format_date(days)} {format_time(rest, digits=digits, per_second=per_second)}"
    return text + "+00" if type_name == "timestamptz" else text


def format_interval(months: int, days: int, micros: int) -> str:
    """DuckDB's text of an INTERVAL (``1 year 2 months 3 days 04:05:06.789``, ``-1 month``, ``00:00:00``)."""
    parts: list[str] = []

    def unit(value: int, name: str) -> None:
        if value:
            parts.append(f"{value} {name}{'' if value in (1, -1) else 's'}")

    # C division truncates toward zero: -13 months is "-1 year -1 month".
    years = abs(months) // 12 * (1 if months >= 0 else -1)
    unit(years, "year")
    unit(months - years * 12, "month")
    unit(days, "day")
    if micros:
        sign = "-" if micros < 0 else ""
        seconds, fraction = divmod(abs(micros), 10**6)
        minutes, sec = divmod(seconds, 60)
        hours, minute = divmod(minutes, 60)
        parts.append(f"{sign}{hours:02d}:{minute:02d}:{sec:02d}{_format_fraction(fraction, 6)}")
    return " ".join(parts) if parts else "00:00:00"


_MASK64 = (1 << 64) - 1


def _cached_power(k: int) -> tuple[int, int]:
    """10**k as a 64-bit significand (rounded to nearest) and binary exponent: fmt's cached-powers table."""
    if k >= 0:
        n = 10**k
        e = n.bit_length() - 64
        return ((n + (1 << (e - 1))) >> e, e) if e > 0 else (n << -e, e)
    d = 10**-k
    s = 63 + d.bit_length()
    while True:
        m = ((1 << s) + d // 2) // d
        if m >= 1 << 64:
            s -= 1
        elif m < 1 << 63:
            s += 1
        else:
            return m, -s


_CACHED_POWERS = [_cached_power(-348 + 8 * i) for i in range(87)]


def _multiply(a: int, b: int) -> int:
    product = a * b
    return (product >> 64) + ((product >> 63) & 1)


def _normalize(f: int, e: int, shift: int = 0) -> tuple[int, int]:
    implicit = (1 << 52) << shift
    while f & implicit == 0:
        f <<= 1
        e -= 1
    offset = 11 - shift
    return (f << offset) & _MASK64, e - offset


def _grisu_float32(x: float) -> tuple[str, int] | None:
    """fmt's Grisu shortest digits for a float (binary32 boundaries), as DuckDB formats FLOAT.

    Returns ``(digits, exp)`` with ``x == int(digits) * 10**exp``, or None where Grisu gives up; DuckDB's fmt
    then falls back to an exact algorithm that uses the *double* boundaries (so the text becomes the shortest
    double text, e.g. '334609.625' where float32-shortest would be '334609.62').
    """
    u = struct.unpack("<Q", struct.pack("<d", x))[0]
    f, biased = u & ((1 << 52) - 1), (u >> 52) & 0x7FF
    if biased:
        f += 1 << 52
    else:
        biased = 1
    e = biased - 1075
    min_normal_e = -125 - 53
    half_ulp = 1 << 28
    if min_normal_e > e:
        half_ulp <<= min_normal_e - e
    upper_f, upper_e = _normalize(f + half_ulp, e)
    lower_f = (f - (half_ulp >> (1 if f == 1 << 52 and e > min_normal_e else 0))) << (e - upper_e)
    value_f, value_e = _normalize(f, e)
    min_exponent = -60 - (value_e + 64)
    index = ((min_exponent + 63) * 0x4D104D42 + (1 << 32) - 1) >> 32
    index = (index + 347) // 8 + 1
    cached_exp10 = -348 + index * 8
    c_f, c_e = _CACHED_POWERS[index]
    value_f = _multiply(value_f, c_f)
    value_e = value_e + c_e + 64
    lower = _multiply(lower_f, c_f) - 1
    upper = _multiply(upper_f, c_f) + 1
    diff = upper - value_f
    error = upper - lower
    shift = -value_e
    one = 1 << shift
    integral, fractional = upper >> shift, upper & (one - 1)
    exp = len(str(integral))
    digits: list[int] = []

    def on_digit(digit: int, divisor: int, remainder: int, err: int, exp10: int, is_integral: bool) -> int | None:
        # Grisu3 round_weed: None = more digits, 1 = done, 0 = give up
        digits.append(digit)
        if remainder >= err:
            return None
        unit = 1 if is_integral else 10**-exp10
        up = ((diff - 1) * unit) & _MASK64
        while (
            remainder < up
            and ((err - remainder) & _MASK64) >= divisor
            and (
                ((remainder + divisor) & _MASK64) < up
                or ((up - remainder) & _MASK64) >= ((remainder + divisor - up) & _MASK64)
            )
        ):
            digits[-1] -= 1
            remainder = (remainder + divisor) & _MASK64
        down = ((diff + 1) * unit) & _MASK64
        if (
            remainder < down
            and ((err - remainder) & _MASK64) >= divisor
            and (
                ((remainder + divisor) & _MASK64) < down
                or ((down - remainder) & _MASK64) > ((remainder + divisor - down) & _MASK64)
            )
        ):
            return 0
        return 1 if (2 * unit) & _MASK64 <= remainder <= ((err - 4 * unit) & _MASK64) else 0

    result: int | None = None
    while exp > 0:
        power = 10 ** (exp - 1)
        digit, integral = divmod(integral, power)
        exp -= 1
        result = on_digit(digit, (10**exp << shift) & _MASK64, (integral << shift) + fractional, error, exp, True)
        if result is not None:
            break
    while result is None:
        fractional = (fractional * 10) & _MASK64
        error = (error * 10) & _MASK64
        digit = fractional >> shift
        fractional &= one - 1
        exp -= 1
        result = on_digit(digit, one, fractional, error, exp, False)
    if result == 0:
        return None
    text = "".join(map(str, digits)).lstrip("0")
    exp10 = exp - cached_exp10
    stripped = text.rstrip("0")
    return stripped, exp10 + len(text) - len(stripped)


def _python_style(digits: str, exp: int) -> str:
    """Digits ``d1d2...`` times ``10**exp`` (exp of d1) formatted like Python's repr (DuckDB uses the same rules)."""
    if -4 <= exp < 16:
        if exp >= 0:
            whole = digits[: exp + 1].ljust(exp + 1, "0")
            frac = digits[exp + 1 :] or "0"
            return f"{whole}.{frac}"
        return "0." + "0" * (-exp - 1) + digits
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"


def format_float(x: float, *, single: bool = False) -> str:
    """DuckDB's text of a DOUBLE (``single=False``) or FLOAT (``x`` holding a float32 value).

    DuckDB formats with fmt's ``{}``: shortest round-trip digits, laid out like Python's ``repr``
    (exponent below 1e-4 and from 1e16). Doubles therefore match ``repr``; floats use fmt's Grisu with float
    boundaries ('33.333332'), which sometimes gives up and prints the shortest *double* text instead.
    """
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if not single:
        return repr(x)
    sign = "-" if x < 0 else ""
    grisu = _grisu_float32(abs(x))
    if grisu is None:
        return sign + repr(abs(x))
    digits, exp = grisu
    return sign + _python_style(digits, exp + len(digits) - 1)


def format_decimal(value: Decimal, precision: int, scale: int) -> str:
    """DuckDB's text of a DECIMAL(p,s): all ``s`` fraction digits; no leading ``0`` when ``p == s``."""
    unscaled = _unscaled(value, scale)
    sign = "-" if unscaled < 0 else ""
    digits = str(abs(unscaled))
    if scale == 0:
        return sign + digits
    major, minor = divmod(abs(unscaled), 10**scale)
    head = str(major) if precision > scale else ""
    return f"{sign}{head}.{str(minor).rjust(scale, '0')}"


def _unscaled(value: Decimal, scale: int) -> int:
    with localcontext() as ctx:
        ctx.prec = 100
        scaled = value.scaleb(scale)
        integral = scaled.to_integral_value()
        if integral != scaled:
            raise UnsupportedTypeError(f"decimal {value} has more than {scale} fraction digits")
        return int(integral)


def format_blob(data: bytes) -> str:
    """DuckDB's VARCHAR text of a BLOB: printable ASCII as is, other bytes (and ``\\ ' "``) as ``\\xHH``."""
    out = []
    for byte in data:
        if 32 <= byte <= 126 and byte not in (0x5C, 0x27, 0x22):
            out.append(chr(byte))
        else:
            out.append(f"\\x{byte:02X}")
    return "".join(out)


def duckdb_text(column: Column, value: Any) -> str:
    """DuckDB's ``CAST(value AS VARCHAR)`` of one non-NULL storage value of a non-nested column.

    Raises:
        UnsupportedTypeError: for nested or unknown column types.
    """
    t = column.type
    if t == "boolean":
        return "true" if value else "false"
    if t in _INT_TYPES:
        return str(int(value))
    if t == "float32":
        return format_float(float(value), single=True)
    if t == "float64":
        return format_float(float(value))
    if t == "date":
        return format_date(int(value))
    if t == "time":
        return format_time(int(value))
    if t == "timetz":
        return format_timetz(int(value))
    if t == "time_ns":
        return format_time_ns(int(value))
    if t in _TIMESTAMP_UNITS:
        return format_timestamp(int(value), t)
    if t == "interval":
        months, days, micros = value
        return format_interval(months, days, micros)
    if t in ("varchar", "json"):
        return str(value)
    if t == "blob":
        return format_blob(bytes(value))
    if t == "uuid":
        return str(value if isinstance(value, uuid.UUID) else _to_uuid(value))
    dec = decimal_params(t)
    if dec is not None:
        return format_decimal(Decimal(value), *dec)
    raise unreadable_type(column.name, t)


# ---------------------------------------------------------------------------------------------------------------
# Parsing DuckDB's text (and the variants DuckDB itself accepts for these types).

_DATE_RE = re.compile(r"^\s*(-?\d+)-(\d{1,2})-(\d{1,2})\s*(\(BC\))?\s*$", re.I)
_TIMESTAMP_RE = re.compile(
    r"""^\s*(?P<year>-?\d+)-(?P<month>\d{1,2})-(?P<day>\d{1,2})(?P<bc1>\s*\(BC\))?
    (?:(?:T|\s+)(?P<hour>\d{1,2}):(?P<minute>\d{1,2})(?::(?P<second>\d{1,2})(?:\.(?P<fraction>\d*))?)?)?
    \s*(?P<bc2>\(BC\))?\s*(?P<zone>Z|UTC|[+-]\d{1,2}(?::?\d{2}(?::?\d{2})?)?)?\s*$""",
    re.I | re.X,
)
_TIME_RE = re.compile(r"^\s*(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d*))?)?\s*$")
_INFINITY = {"infinity": 1, "+infinity": 1, "-infinity": -1}


def _fraction_units(fraction: str | None, per_second: int) -> int:
    """The fraction digits as units of ``1/per_second`` (extra digits are truncated)."""
    if not fraction:
        return 0
    digits = len(str(per_second)) - 1
    return int(fraction[:digits].ljust(digits, "0")) if digits else 0


def _astronomical_year(text: str, bc: bool) -> int:
    year = int(text)
    return 1 - year if bc else year


def parse_date(text: str) -> int:
    """Days since the epoch of DuckDB's DATE text (``'2024-02-29'``, ``'0001-12-31 (BC)'``, ``'infinity'``)."""
    inf = _INFINITY.get(text.strip().lower())
    if inf is not None:
        return inf * DATE_INFINITY
    m = _DATE_RE.match(text)
    if m is None:
        m2 = _TIMESTAMP_RE.match(text)
        if m2 is None:
            raise ValueError(f"not a date: {text!r}")
        bc = bool(m2.group("bc1") or m2.group("bc2"))
        return days_from_civil(_astronomical_year(m2.group("year"), bc), int(m2.group("month")), int(m2.group("day")))
    return days_from_civil(_astronomical_year(m.group(1), bool(m.group(4))), int(m.group(2)), int(m.group(3)))


def parse_time(text: str, per_second: int = 10**6) -> int:
    """Units of the day of ``HH:MM[:SS[.fraction]]`` (``24:00:00`` included)."""
    m = _TIME_RE.match(text)
    if m is None:
        raise ValueError(f"not a time: {text!r}")
    seconds = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3) or 0)
    return seconds * per_second + _fraction_units(m.group(4), per_second)


def _zone_seconds(zone: str | None) -> int:
    if not zone or zone.upper() in ("Z", "UTC"):
        return 0
    sign = -1 if zone[0] == "-" else 1
    body = zone[1:]
    parts = body.split(":") if ":" in body else [body[i : i + 2] for i in range(0, len(body), 2)]
    hours, minutes, seconds = (int(p) for p in [*parts, "0", "0"][:3])
    return sign * (hours * 3600 + minutes * 60 + seconds)


def parse_timestamp(text: str, type_name: str) -> int:
    """A timestamp of DuckDB's text in the unit of ``type_name``.

    An offset (``+02``, ``+05:30``) is applied for ``timestamptz`` and ignored otherwise, as DuckDB does.
    """
    inf = _INFINITY.get(text.strip().lower())
    if inf is not None:
        return inf * TIMESTAMP_INFINITY
    m = _TIMESTAMP_RE.match(text)
    if m is None:
        raise ValueError(f"not a timestamp: {text!r}")
    per_second = _TIMESTAMP_UNITS[type_name]
    bc = bool(m.group("bc1") or m.group("bc2"))
    days = days_from_civil(_astronomical_year(m.group("year"), bc), int(m.group("month")), int(m.group("day")))
    seconds = days * 86400 + int(m.group("hour") or 0) * 3600 + int(m.group("minute") or 0) * 60
    seconds += int(m.group("second") or 0)
    if type_name == "timestamptz":
        seconds -= _zone_seconds(m.group("zone"))
    return seconds * per_second + _fraction_units(m.group("fraction"), per_second)


_INTERVAL_UNITS: dict[str, tuple[int, int, int]] = {}
for _names, _factor in (
    (("year", "years", "y", "yr", "yrs"), (12, 0, 0)),
    (("month", "months", "mon", "mons"), (1, 0, 0)),
    (("week", "weeks", "w"), (0, 7, 0)),
    (("day", "days", "d"), (0, 1, 0)),
    (("hour", "hours", "h", "hr", "hrs"), (0, 0, 3600 * 10**6)),
    (("minute", "minutes", "min", "mins", "m"), (0, 0, 60 * 10**6)),
    (("second", "seconds", "sec", "secs", "s"), (0, 0, 10**6)),
    (("millisecond", "milliseconds", "ms", "msec", "msecs"), (0, 0, 1000)),
    (("microsecond", "microseconds", "us", "usec", "usecs"), (0, 0, 1)),
):
    for _name in _names:
        _INTERVAL_UNITS[_name] = _factor
_CLOCK_RE = re.compile(r"^([+-]?)(\d+):(\d{1,2})(?::(\d{1,2})(?:\.(\d*))?)?$")
_ISO_RE = re.compile(
    r"^P(?:(?P<y>-?\d+)Y)?(?:(?P<mo>-?\d+)M)?(?:(?P<w>-?\d+)W)?(?:(?P<d>-?\d+)D)?"
    r"(?:T(?:(?P<h>-?\d+)H)?(?:(?P<mi>-?\d+)M)?(?:(?P<s>-?\d+(?:\.\d+)?)S)?)?$",
    re.I,
)


def parse_interval(text: str) -> tuple[int, int, int]:
    """``(months, days, micros)`` of an interval in DuckDB's text or PostgreSQL's ``postgres``/``iso_8601`` style."""
    s = text.strip()
    iso = _ISO_RE.match(s)
    if iso is not None and len(s) > 1:
        second_micros = Decimal(iso.group("s") or 0) * 10**6
        return (
            int(iso.group("y") or 0) * 12 + int(iso.group("mo") or 0),
            int(iso.group("w") or 0) * 7 + int(iso.group("d") or 0),
            (int(iso.group("h") or 0) * 3600 + int(iso.group("mi") or 0) * 60) * 10**6 + int(second_micros),
        )
    tokens = s.replace(",", " ").split()
    negate = False
    if tokens and tokens[0] == "@":
        tokens = tokens[1:]
    if tokens and tokens[-1].lower() == "ago":
        negate, tokens = True, tokens[:-1]
    months = days = micros = 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        clock = _CLOCK_RE.match(token)
        if clock is not None:
            value = (int(clock.group(2)) * 3600 + int(clock.group(3)) * 60 + int(clock.group(4) or 0)) * 10**6
            value += _fraction_units(clock.group(5), 10**6)
            micros += -value if clock.group(1) == "-" else value
            i += 1
            continue
        if i + 1 >= len(tokens):
            raise ValueError(f"not an interval: {text!r}")
        factor = _INTERVAL_UNITS.get(tokens[i + 1].lower())
        if factor is None:
            raise ValueError(f"not an interval: {text!r}")
        try:
            amount = Decimal(token)
        except InvalidOperation as exc:
            raise ValueError(f"not an interval: {text!r}") from exc
        if factor[0] or factor[1]:
            if amount != amount.to_integral_value():
                raise ValueError(f"fractional months/days are not supported: {text!r}")
            months += int(amount) * factor[0]
            days += int(amount) * factor[1]
        else:
            micros += int(amount * factor[2])
        i += 2
    if negate:
        return -months, -days, -micros
    return months, days, micros


def parse_float(text: str) -> float:
    """A float of DuckDB's text (``nan``, ``inf``, ``-inf``, ``Infinity``... accepted)."""
    return float(text.strip())


_FLOAT32_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]


def _float32_neighbours(x: float) -> list[float]:
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    out = [x]
    for b in (bits - 1, bits + 1):
        if 0 <= b <= 0xFFFFFFFF and (b & 0x7F800000) != 0x7F800000:
            out.append(struct.unpack("<f", struct.pack("<I", b))[0])
    return out


def round_float32(value: float | str | Decimal) -> float:
    """The float32 nearest to ``value`` (ties to even), computed from the exact decimal when given text.

    Rounding a decimal string straight to float32, as DuckDB does, can differ from rounding it to a double and
    then to float32; the exact comparison below avoids that double rounding.
    """
    if isinstance(value, str):
        value = value.strip()
        approx = float(value)
        if math.isnan(approx) or math.isinf(approx):
            return approx
        exact = Fraction(Decimal(value))
    else:
        approx = float(value)
        if math.isnan(approx) or math.isinf(approx):
            return approx
        exact = Fraction(value)
    if abs(approx) > _FLOAT32_MAX:
        # beyond FLT_MAX + half an ulp IEEE rounds to infinity; DuckDB rejects such text anyway
        return (
            math.copysign(math.inf, approx)
            if abs(approx) >= 3.4028235677973366e38
            else math.copysign(_FLOAT32_MAX, approx)
        )
    candidate = struct.unpack("<f", struct.pack("<f", approx))[0]
    best = min(
        _float32_neighbours(candidate),
        key=lambda f: (abs(Fraction(f) - exact), struct.unpack("<I", struct.pack("<f", f))[0] & 1),
    )
    if best == 0.0 and exact < 0:
        return -0.0
    return best


def parse_bool(text: str) -> bool:
    """DuckDB's BOOLEAN casts: true/t/1/yes/y and false/f/0/no/n, any case."""
    s = text.strip().lower()
    if s in ("true", "t", "1", "yes", "y"):
        return True
    if s in ("false", "f", "0", "no", "n"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def parse_blob(text: str) -> bytes:
    """The bytes of DuckDB's escaped BLOB text (``\\xHH`` escapes; other characters as their UTF-8 bytes)."""
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if text[i + 1 : i + 2] not in ("x", "X") or len(text) < i + 4:
                raise ValueError(f"invalid escape in blob text {text!r}")
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
            continue
        out += ch.encode()
        i += 1
    return bytes(out)


def _to_uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return uuid.UUID(bytes=bytes(value))
    return uuid.UUID(str(value).strip())


def parse_duckdb_text(column: Column, text: str, *, timetz_utc: bool = False) -> Any:
    """The storage value of DuckDB's text of a non-nested value (the inverse of :func:`duckdb_text`).

    A ``timetz`` text reads as its time with the offset dropped (DuckDB's Arrow read), or with ``timetz_utc`` as
    its UTC time (what DuckDB's flush writes to Parquet).

    Raises:
        ValueError: the text is not a value of the type.
        UnsupportedTypeError: for nested or unknown column types.
    """
    t = column.type
    if t == "boolean":
        return parse_bool(text)
    if t in _INT_TYPES:
        return int(text.strip())
    if t == "float32":
        return round_float32(text)
    if t == "float64":
        return parse_float(text)
    if t == "date":
        return parse_date(text)
    if t == "time":
        return parse_time(text)
    if t == "timetz" and timetz_utc:
        return parse_timetz_utc(text)
    if t in ("timetz", "time_ns"):
        return parse_time_text(text, t)
    if t in _TIMESTAMP_UNITS:
        return parse_timestamp(text, t)
    if t == "interval":
        return parse_interval(text)
    if t in ("varchar", "json"):
        return text
    if t == "blob":
        return parse_blob(text)
    if t == "uuid":
        return _to_uuid(text)
    if decimal_params(t) is not None:
        try:
            return Decimal(text.strip())
        except InvalidOperation as exc:
            raise ValueError(f"not a decimal: {text!r}") from exc
    raise unreadable_type(column.name, t)


# ---------------------------------------------------------------------------------------------------------------
# Python values (as pyarrow's ``as_py()`` gives them) and Arrow arrays <-> storage values.


def _datetime_micros(value: dt.datetime) -> int:
    if value.tzinfo is not None:
        offset = value.utcoffset() or dt.timedelta(0)
        value = value.replace(tzinfo=None) - offset
    delta = value - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 10**6 + delta.microseconds


def from_python(column: Column, value: Any) -> Any:
    """The storage value of a Python value of a non-nested column (ints pass through for temporal types).

    Accepts what ``pyarrow.Scalar.as_py()`` returns (``date``, ``time``, naive/aware ``datetime``, pandas
    ``Timestamp`` with nanoseconds, ``MonthDayNano``, ``UUID``...) as well as the storage value itself.
    """
    t = column.type
    if isinstance(value, TemporalBound):
        return value.storage
    if t == "date":
        if isinstance(value, dt.datetime):
            value = value.date()
        return value.toordinal() - _UNIX_EPOCH_ORDINAL if isinstance(value, dt.date) else int(value)
    if t in ("time", "timetz", "time_ns"):
        scale = 1000 if t == "time_ns" else 1
        if isinstance(value, dt.time):
            return (((value.hour * 60 + value.minute) * 60 + value.second) * 10**6 + value.microsecond) * scale
        if isinstance(value, dt.timedelta):
            return ((value.days * 86400 + value.seconds) * 10**6 + value.microseconds) * scale
        return int(value)
    if t in _TIMESTAMP_UNITS:
        if isinstance(value, dt.datetime):
            per_second = _TIMESTAMP_UNITS[t]
            if per_second == 10**9:
                epoch_nanos = getattr(value, "value", None)  # pandas.Timestamp: nanoseconds since the epoch (UTC)
                if isinstance(epoch_nanos, int):
                    return epoch_nanos
                return _datetime_micros(value) * 1000
            return _datetime_micros(value) // (10**6 // per_second)
        if isinstance(value, dt.date):
            return days_from_civil(value.year, value.month, value.day) * 86400 * _TIMESTAMP_UNITS[t]
        return int(value)
    if t == "interval":
        if isinstance(value, dt.timedelta):
            return 0, value.days, value.seconds * 10**6 + value.microseconds
        months, days, nanos = value  # MonthDayNano or a 3-tuple with nanoseconds
        micros = abs(int(nanos)) // 1000  # DuckDB truncates toward zero
        return int(months), int(days), -micros if nanos < 0 else micros
    if t == "uuid":
        return _to_uuid(value)
    if t == "blob":
        return bytes(value) if not isinstance(value, str) else value.encode()
    if t in ("int128", "uint128"):
        return int(value)
    if decimal_params(t) is not None:
        return value if isinstance(value, Decimal) else Decimal(str(value))
    if t == "boolean":
        return bool(value)
    return value


def to_python(column: Column, value: Any) -> Any:
    """A storage value as the Python value pyarrow would give (``date``, ``datetime``, ``Decimal``...).

    Dates and timestamps Python cannot hold (``infinity``, BC, year > 9999) become a :class:`TemporalBound`;
    ``24:00:00`` becomes ``time.max``; nanosecond timestamps become ``pandas.Timestamp`` when pandas is installed.
    """
    t = column.type
    if t == "date":
        ordinal = value + _UNIX_EPOCH_ORDINAL
        if not 1 <= ordinal <= dt.date.max.toordinal():
            return TemporalBound(value)
        return dt.date.fromordinal(ordinal)
    if t in ("time", "timetz", "time_ns"):
        if t == "time_ns":
            value //= 1000  # as pyarrow's as_py() of time64[ns]: to the microsecond
        if value >= 86400 * 10**6:
            return dt.time.max
        seconds, micros = divmod(value, 10**6)
        return dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, micros)
    if t in _TIMESTAMP_UNITS:
        return _timestamp_to_python(value, t)
    if t == "interval":
        months, days, micros = value
        return pa.MonthDayNano([months, days, micros * 1000])
    if t in ("int128", "uint128"):
        return Decimal(value)
    return value


def _timestamp_to_python(value: int, type_name: str) -> Any:
    if abs(value) == TIMESTAMP_INFINITY:
        return TemporalBound(value)
    per_second = _TIMESTAMP_UNITS[type_name]
    seconds, fraction = divmod(value, per_second)
    micros = fraction * 10**6 // per_second
    try:
        result = _EPOCH + dt.timedelta(seconds=seconds, microseconds=micros)
    except OverflowError:
        return TemporalBound(value)
    if type_name == "timestamptz":
        return result.replace(tzinfo=dt.timezone.utc)
    if type_name == "timestamp_ns":
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - pandas ships with pyspark
            return result
        try:
            return pd.Timestamp(value, unit="ns")
        except (OverflowError, ValueError):
            return result
    return result


def conform_array(column: Column, array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``array`` as one chunk of exactly ``arrow_type(column)`` (casting when the type differs).

    Raises:
        SchemaMismatchError: the array cannot be cast to the column's type.
    """
    from pyspark_ducklake.exceptions import SchemaMismatchError

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    target = arrow_type(column)
    if array.type == target:
        return array
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), target)
    try:
        if isinstance(target, pa.BaseExtensionType):
            storage = array.storage if isinstance(array, pa.ExtensionArray) else array
            return pa.ExtensionArray.from_storage(target, storage.cast(target.storage_type))
        return array.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaMismatchError(f"column {column.name!r}: cannot store {array.type} as {target}: {exc}") from exc


def storage_values(column: Column, array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """The storage values (``None`` for NULL) of an Arrow array of a non-nested column."""
    array = conform_array(column, array)
    t = column.type
    if isinstance(array, pa.ExtensionArray):
        raw = array.storage.to_pylist()
        return [None if v is None else uuid.UUID(bytes=v) for v in raw] if t == "uuid" else raw
    if t == "date":
        return array.cast(pa.int32()).to_pylist()
    if t in ("time", "timetz", "time_ns") or t in _TIMESTAMP_UNITS:
        return array.cast(pa.int64()).to_pylist()
    if t == "interval":
        return [None if v is None else from_python(column, v) for v in array.to_pylist()]
    if t in ("int128", "uint128"):
        return [None if v is None else int(v) for v in array.to_pylist()]
    return array.to_pylist()


# ---------------------------------------------------------------------------------------------------------------
# Stats strings.


def _requires_value_comparison(column: Column) -> bool:
    """DuckDB compares numeric, temporal and boolean stats by value, everything else as strings."""
    t = column.type
    return t in _INT_TYPES or t in _TEMPORAL or t in ("boolean", "float32", "float64") or bool(decimal_params(t))


def render_stat(column: Column, value: Any, *, table_level: bool = False, inlined: bool = False) -> str | None:
    """The string DuckDB stores as a min or max for ``value`` (a Python or storage value, not NULL).

    Args:
        column: the (leaf) column the statistic belongs to.
        value: the value, as ``pyarrow.Scalar.as_py()`` gives it or as a storage value.
        table_level: accepted for symmetry; DuckDB writes the same strings in ``ducklake_table_column_stats`` as
            in ``ducklake_file_column_stats``.
        inlined: render as DuckDB does for rows it inlines (its VARCHAR cast) instead of for Parquet files.

    Returns:
        The string, or None where DuckDB stores no min/max (nested parents; in Parquet form also INTERVAL,
        HUGEINT/UHUGEINT and NaN). Strings are not truncated here; :func:`array_min_max` does that.
    """
    del table_level  # same strings at both levels (see the module docstring)
    if column.is_nested or value is None:
        return None
    raw = from_python(column, value)
    t = column.type
    if not inlined:
        if t in _NO_PARQUET_STATS:
            return None
        if t == "boolean":
            return "1" if raw else "0"
        if t == "blob":
            return raw.hex().upper()
        if t in ("float32", "float64") and math.isnan(raw):
            return None
    return duckdb_text(column, raw)


def parse_stat(column: Column, text: str, *, inlined: bool | None = None) -> Any:
    """The Python value of a stored min/max (or ``initial_default``) string.

    Values compare with Python values of the column (``int``, ``float``, ``Decimal``, ``str``, ``bytes``,
    ``UUID``, ``date``, ``datetime`` (UTC-aware for timestamptz), ``time``, ``bool``...). See :func:`to_python`
    for dates outside Python's range.

    Args:
        column: the column.
        text: the stored string.
        inlined: whether a BLOB string is DuckDB's escaped text (True) or Parquet hex (False); None guesses
            (hex when the text is an even number of hex digits). Other types parse either form.

    Raises:
        ValueError: the text is not a value of the column's type.
    """
    t = column.type
    if t == "blob":
        hexlike = re.fullmatch(r"(?:[0-9A-Fa-f]{2})*", text) is not None
        if inlined is False or (inlined is None and hexlike):
            return bytes.fromhex(text)
        return parse_blob(text)
    return to_python(column, parse_duckdb_text(column, text))


def _stat_key(column: Column, text: str) -> Any:
    """A sort key of a stats string following DuckDB's ``Value`` comparison (NaN above +inf, -0.0 == 0.0)."""
    if column.type == "timetz":
        return timetz_order_key(text)  # DuckDB's stats keep the offsets of the values they came from
    raw = parse_duckdb_text(column, text)
    if column.type in ("float32", "float64"):
        return (1, 0.0) if math.isnan(raw) else (0, raw)
    return raw


def widen(
    column: Column, old_min: str | None, old_max: str | None, new_min: str | None, new_max: str | None
) -> tuple[str | None, str | None]:
    """Merge two min/max pairs as DuckDB merges table stats: the smaller min and the larger max.

    Numeric, temporal and boolean strings compare by value (floats: NaN is the largest, as in DuckDB's value
    ordering; ``-0.0`` equals ``0.0`` and the old string is kept on ties); other types compare as strings
    (byte order). None means "no values seen" on that side, so the other side wins.
    """
    return _pick(column, old_min, new_min, smaller=True), _pick(column, old_max, new_max, smaller=False)


def _pick(column: Column, old: str | None, new: str | None, *, smaller: bool) -> str | None:
    if old is None:
        return new
    if new is None:
        return old
    if _requires_value_comparison(column):
        a, b = _stat_key(column, old), _stat_key(column, new)
    else:
        a, b = old.encode(), new.encode()
    return new if (b < a if smaller else b > a) else old


def storable_stat(text: str | None) -> str | None:
    """A stats string as DuckDB stores it: NULL when it holds a NUL character (``DuckLakeUtil::StatsToString``)."""
    return None if text is None or "\x00" in text else text


def _truncate_min(value: bytes, is_blob: bool) -> bytes:
    if is_blob:
        return value[:_MAX_STRING_STATS]
    size = _MAX_STRING_STATS
    # cut before a UTF-8 continuation byte never splits a character
    while size > 0 and (value[size] & 0xC0) == 0x80:
        size -= 1
    return value[:size]


def _truncate_max(value: bytes, is_blob: bool) -> bytes | None:
    limit = 0xFF if is_blob else 0x7F  # DuckDB only increments ASCII characters of a VARCHAR
    for pos in range(_MAX_STRING_STATS, 0, -1):
        if value[pos - 1] < limit:
            return value[: pos - 1] + bytes([value[pos - 1] + 1])
    return None


def _string_min_max(values: list[bytes], is_blob: bool) -> tuple[bytes, bytes] | None:
    """DuckDB's Parquet writer string statistics, replayed value by value (truncation makes it stateful)."""
    lo: bytes | None = None
    hi: bytes | None = None
    for value in values:
        if lo is None or value < lo:
            lo = value if len(value) <= _MAX_STRING_STATS else _truncate_min(value, is_blob)
        if hi is None or value > hi:
            if len(value) <= _MAX_STRING_STATS:
                hi = value
            else:
                hi = _truncate_max(value, is_blob)
                if hi is None:
                    return None  # DuckDB drops the column's min and max when a max cannot be truncated
    if lo is None or hi is None:
        return None
    return lo, hi


def array_min_max(
    column: Column, array: pa.Array | pa.ChunkedArray, *, inlined: bool = False
) -> tuple[str | None, str | None, bool | None]:
    """``(min, max, contains_nan)`` strings DuckDB would store for the values of one leaf column.

    Parquet form (default) reproduces DuckDB's Parquet writer: NaN excluded from min/max, strings and blobs
    over 256 bytes truncated (min cut, max cut and incremented; no stats at all when that fails), no min/max for
    INTERVAL and HUGEINT. ``inlined=True`` reproduces DuckDB's inlined-insert stats (VARCHAR cast strings;
    numbers and dates compared by value with NaN largest, other types compared as strings; ``contains_nan``
    None as DuckDB leaves it).

    Returns:
        min, max (None when there are no non-NULL values or no stats) and contains_nan (floats in Parquet form
        only, else None).
    """
    if column.is_nested:
        return None, None, None
    arr = conform_array(column, array)
    t = column.type
    is_float = t in ("float32", "float64")
    contains_nan: bool | None = None
    if is_float and not inlined:
        contains_nan = bool(pc.any(pc.is_nan(arr)).as_py() or False)
    valid = arr.filter(pc.is_valid(arr)) if arr.null_count else arr
    if len(valid) == 0:
        return None, None, contains_nan
    if not inlined and t in _NO_PARQUET_STATS:
        return None, None, contains_nan
    if inlined:
        return _inlined_min_max(column, valid)
    if t in ("varchar", "json", "blob"):
        return (*_parquet_string_min_max(column, valid), contains_nan)
    lo_v, hi_v = _parquet_min_max(column, valid)
    if lo_v is None:
        return None, None, contains_nan
    return render_stat(column, lo_v), render_stat(column, hi_v), contains_nan


def _inlined_min_max(column: Column, valid: pa.Array) -> tuple[str | None, str | None, bool | None]:
    # DuckDB computes inlined stats from the VARCHAR cast of every value (ducklake_inline_data.cpp)
    values = storage_values(column, valid)
    if _requires_value_comparison(column):
        # The text round-trips to the storage value, so ordering the values orders the texts as _stat_key does
        # (first of equal values kept); only the two picked values are rendered.
        keys: list[Any] = values
        if column.type in ("float32", "float64"):
            keys = [(1, 0.0) if math.isnan(v) else (0, v) for v in values]
        lo_i = min(range(len(values)), key=keys.__getitem__)
        hi_i = max(range(len(values)), key=keys.__getitem__)
        return duckdb_text(column, values[lo_i]), duckdb_text(column, values[hi_i]), None
    texts = [duckdb_text(column, v) for v in values]
    encoded = [s.encode() for s in texts]
    return texts[encoded.index(min(encoded))], texts[encoded.index(max(encoded))], None


def _utf8(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _parquet_string_min_max(column: Column, valid: pa.Array) -> tuple[str | None, str | None]:
    is_blob = column.type == "blob"
    storage = valid.storage if isinstance(valid, pa.ExtensionArray) else valid
    if (pc.max(pc.binary_length(storage)).as_py() or 0) <= _MAX_STRING_STATS:
        # no truncation: Arrow's byte-wise min/max is what DuckDB computes
        mm = pc.min_max(storage)
        result: tuple[bytes, bytes] | None = (_utf8(mm["min"].as_py()), _utf8(mm["max"].as_py()))
    else:
        result = _string_min_max([_utf8(v) for v in storage.to_pylist()], is_blob)
    if result is None:
        return None, None
    lo, hi = result
    if is_blob:
        return lo.hex().upper(), hi.hex().upper()
    return lo.decode(errors="replace"), hi.decode(errors="replace")


def _parquet_min_max(column: Column, valid: pa.Array) -> tuple[Any, Any]:
    """Storage min and max as DuckDB's Parquet writer picks them (NaN skipped; first of equal values kept)."""
    t = column.type
    if t == "date":
        arr = valid.cast(pa.int32())
    elif t == "time" or t in _TIMESTAMP_UNITS:
        arr = valid.cast(pa.int64())
    elif isinstance(valid, pa.ExtensionArray):
        arr = valid.storage
    else:
        arr = valid
    if t in ("float32", "float64"):
        arr = arr.filter(pc.invert(pc.is_nan(arr)))
        if len(arr) == 0:
            return None, None
    mm = pc.min_max(arr)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if t in ("float32", "float64"):
        # 0.0 == -0.0: DuckDB keeps the zero it saw first (strict comparisons)
        first_zero = None
        if lo == 0 or hi == 0:
            first_zero = arr[pc.index(arr, 0.0).as_py()].as_py()
        lo = first_zero if lo == 0 else lo
        hi = first_zero if hi == 0 else hi
    if t == "uuid":
        return uuid.UUID(bytes=lo), uuid.UUID(bytes=hi)
    return lo, hi
