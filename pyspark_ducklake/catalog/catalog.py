"""Opening and creating DuckLake catalogs."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from sqlalchemy import Engine, insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from pyspark_ducklake.catalog import dialects, reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.format_version import DEFAULT, FormatVersion, catalog_format
from pyspark_ducklake.catalog.indexes import create_indexes_in
from pyspark_ducklake.catalog.kept_engines import kept_catalog_engine
from pyspark_ducklake.catalog.location import CatalogLocation, create_catalog_engine, parse_location
from pyspark_ducklake.catalog.transaction import now_utc
from pyspark_ducklake.exceptions import (
    CatalogUnreachableError,
    InvalidOptionError,
    NotADuckLakeCatalogError,
)
from pyspark_ducklake.io.fileio import known_protocol

CREATED_BY = "pyspark-ducklake"


@dataclass(frozen=True)
class CatalogInfo:
    """What an opened catalog says about itself."""

    format: FormatVersion
    data_path: str
    created_by: str | None
    encrypted: bool = False  # DuckDB's ATTACH ... (ENCRYPTED): data files are encrypted, each with its own key

    @property
    def version(self) -> str:
        """The ``ducklake_metadata`` row ``version`` as stored (``1.0``, ``1.1``, ``1.1-dev1``)."""
        return self.format.tag


def uuid7() -> str:
    """A version-7 UUID (time-ordered), as the reference uses for new entries."""
    ms = int(now_utc().timestamp() * 1000)
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


def normalize_data_path(data_path: str) -> str:
    """Absolute, with a trailing ``/`` (local paths are made absolute; URLs are kept)."""
    path = data_path.strip()
    if not path:
        raise InvalidOptionError("data_path is empty; pass a folder or URL for the Parquet files")
    if path.startswith("file://"):
        path = path[len("file://") :]
    if "://" not in path:
        path = os.path.abspath(os.path.expanduser(path))
    elif not known_protocol(path):  # refused before the catalog records it, not at the first write
        raise InvalidOptionError(
            f"data_path {path!r} has a protocol no filesystem is known for; give a local folder or a URL such as "
            "s3://bucket/prefix/ (fsspec's protocols)"
        )
    return path if path.endswith("/") else path + "/"


def open_catalog(
    location: str | CatalogLocation,
    data_path: str | None,
    *,
    create: bool = True,
    encrypted: bool | None = None,
    keep_engine: bool = False,
    format_version: FormatVersion | None = None,
) -> tuple[Engine, CatalogInfo]:
    """Open (and, when empty, create) a DuckLake catalog; ``encrypted`` creates it encrypted, or (for an existing
    catalog) must match its ``encrypted`` setting, as DuckDB's ``ATTACH ... (ENCRYPTED)``. ``keep_engine``: use the
    process's kept engine for the catalog (:mod:`~pyspark_ducklake.catalog.kept_engines`), not a new one.
    ``format_version``: the format a new catalog gets (1.0 when None); an existing catalog keeps its own, as DuckDB
    2.0 keeps a 1.0 catalog at 1.0 unless asked to migrate it.

    Raises:
        CatalogUnreachableError: the database cannot be reached.
        NotADuckLakeCatalogError: the database has tables but no DuckLake catalog.
        UnsupportedSpecVersionError: the catalog's format version is not supported.
        InvalidOptionError: a new catalog needs a data path and none was given, or ``encrypted`` differs from an
            existing catalog's setting.
    """
    loc = location if isinstance(location, CatalogLocation) else parse_location(location)
    if data_path is not None:
        normalize_data_path(data_path)  # an empty path or unknown protocol is refused before the database is touched
    if loc.backend in ("sqlite", "duckdb"):
        _check_catalog_file(loc, data_path, create=create)
    new_engine = kept_catalog_engine if keep_engine else create_catalog_engine
    engine = new_engine(loc)
    try:
        with engine.connect() as conn:
            names = set(dialects.table_names(conn))
    except (DBAPIError, SQLAlchemyError) as e:
        engine.dispose()
        reason = loc.scrub(str(getattr(e, "orig", e))).strip()
        error = CatalogUnreachableError(
            f"cannot open catalog {loc.redacted()}: {reason}; check the URL, credentials, that the "
            "database server is running (PostgreSQL) or that the folder exists (SQLite)"
        )
        # the driver's own error may quote the connection string: chain it only when it holds no password
        raise error from (None if loc.scrub(str(e)) != str(e) else e)
    if "ducklake_metadata" not in names:
        engine.dispose()
        if any(n.startswith("ducklake_") for n in names):
            raise NotADuckLakeCatalogError(
                f"{loc.redacted()} has ducklake_* tables but no ducklake_metadata: a damaged or partial catalog"
            )
        if names:
            raise NotADuckLakeCatalogError(
                f"{loc.redacted()} holds no DuckLake catalog but has other tables ({', '.join(sorted(names)[:5])}); "
                "point the catalog at an empty database or an existing DuckLake"
            )
        if not create:
            raise NotADuckLakeCatalogError(f"{loc.redacted()} holds no DuckLake catalog (no ducklake_metadata table)")
        if data_path is None:
            raise InvalidOptionError(
                f"catalog {loc.redacted()} is new: pass data_path (a folder or URL for the Parquet files) to create it"
            )
        engine = new_engine(loc)
        try:
            return engine, create_catalog(engine, data_path, encrypted=bool(encrypted), fmt=format_version or DEFAULT)
        except (DBAPIError, SQLAlchemyError):
            # another process may have created the catalog between our look and our create: open theirs
            with engine.connect() as conn:
                if "ducklake_metadata" not in set(dialects.table_names(conn)):
                    engine.dispose()
                    raise
    info = read_info(engine, loc)
    if data_path is not None and normalize_data_path(data_path) != info.data_path:
        engine.dispose()
        raise InvalidOptionError(
            f"data_path {normalize_data_path(data_path)!r} does not match the lake's data path {info.data_path!r} "
            "recorded in the catalog; omit data_path, or move the catalog with its files"
        )
    if format_version is not None and format_version.release != info.format.release:
        engine.dispose()
        what = "cannot be downgraded" if info.format.release > format_version.release else "is not migrated unasked"
        raise InvalidOptionError(
            f"option format_version={format_version.name!r} does not match the lake at {loc.redacted()}, which is "
            f"DuckLake {info.format.tag} (a catalog keeps the version it was created with; it {what}): leave the "
            "option out to follow the catalog"
            + (
                ", or migrate it with Lake.migrate('1.1') / pyspark-ducklake migrate --to 1.1 (DuckDB 1.5 then can "
                "no longer open it)"
                if info.format.release < format_version.release
                else ""
            )
        )
    if encrypted is not None and encrypted != info.encrypted:
        engine.dispose()
        state = "encrypted" if info.encrypted else "not encrypted"
        raise InvalidOptionError(
            f"option encrypted={str(encrypted).lower()} does not match the lake at {loc.redacted()}, which is {state} "
            "(set when it was created; DuckDB refuses the same ATTACH): leave the option out to follow the catalog"
        )
    return engine, info


def _check_catalog_file(loc: CatalogLocation, data_path: str | None, *, create: bool) -> None:
    """Refuse a missing SQLite or DuckDB catalog file that will not be created here, before connecting (which would
    create it). Never delete a file once connected instead: another process may be creating its catalog in it.

    Raises:
        NotADuckLakeCatalogError: the file is missing and ``create`` is off.
        InvalidOptionError: the file is missing and no data path was given to create the lake.
        CatalogUnreachableError: a DuckDB file's folder does not exist.
    """
    path = make_url(loc.url).database or ""
    if (loc.backend == "sqlite" and path in ("", ":memory:")) or os.path.exists(path):
        return
    kind = "DuckDB" if loc.backend == "duckdb" else "SQLite"
    if not create:
        raise NotADuckLakeCatalogError(f"{loc.redacted()}: the {kind} file {path!r} does not exist")
    if data_path is None:
        hint = f"; DuckDB's ATTACH would use {path + '.files/'!r}" if loc.backend == "duckdb" else ""
        raise InvalidOptionError(
            f"catalog {loc.redacted()} is new: pass data_path (a folder or URL for the Parquet files) to create "
            f"it{hint}"
        )
    if loc.backend == "duckdb" and not os.path.isdir(os.path.dirname(path) or "."):
        raise CatalogUnreachableError(
            f"cannot create the DuckDB-file catalog {path!r}: its folder does not exist; create the folder first"
        )


def read_info(engine: Engine, loc: CatalogLocation) -> CatalogInfo:
    with engine.connect() as conn:
        version = reader.metadata_value(conn, "version")
        data_path = reader.metadata_value(conn, "data_path")
        created_by = reader.metadata_value(conn, "created_by")
        encrypted = reader.lake_encrypted(conn)
    if version is None:
        raise NotADuckLakeCatalogError(f"{loc.redacted()}: ducklake_metadata has no 'version' row")
    fmt = catalog_format(version, loc.redacted())
    if data_path is None:
        raise NotADuckLakeCatalogError(f"{loc.redacted()}: ducklake_metadata has no 'data_path' row")
    return CatalogInfo(fmt, data_path, created_by, encrypted)


def create_catalog(
    engine: Engine, data_path: str, *, encrypted: bool = False, fmt: FormatVersion = DEFAULT
) -> CatalogInfo:
    """Write the full schema of format ``fmt`` and the initial rows, exactly as the reference's
    ``InitializeDuckLake`` does for that version."""
    path = normalize_data_path(data_path)
    with engine.connect().execution_options(ducklake_write=True) as conn, conn.begin():
        T.catalog_metadata(fmt).create_all(conn)
        create_indexes_in(conn)
        conn.execute(
            insert(T.ducklake_snapshot).values(
                snapshot_id=0, snapshot_time=now_utc(), schema_version=0, next_catalog_id=1, next_file_id=0
            )
        )
        conn.execute(insert(T.ducklake_snapshot_changes).values(snapshot_id=0, changes_made='created_schema:"main"'))
        conn.execute(
            insert(T.ducklake_metadata),
            [
                {"key": "version", "value": fmt.tag, "scope": None, "scope_id": None},
                {"key": "created_by", "value": CREATED_BY, "scope": None, "scope_id": None},
                {"key": "data_path", "value": path, "scope": None, "scope_id": None},
                {"key": "encrypted", "value": "true" if encrypted else "false", "scope": None, "scope_id": None},
            ],
        )
        conn.execute(
            insert(T.ducklake_schema).values(
                schema_id=0,
                schema_uuid=str(uuid.uuid4()),
                begin_snapshot=0,
                end_snapshot=None,
                schema_name="main",
                path="main/",
                path_is_relative=True,
            )
        )
    return CatalogInfo(fmt, path, CREATED_BY, encrypted)
