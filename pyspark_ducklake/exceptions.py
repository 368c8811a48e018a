"""The pyspark-ducklake error hierarchy: every error this library raises derives from DuckLakeError."""

from __future__ import annotations


class DuckLakeError(Exception):
    """Base class for all pyspark-ducklake errors."""


class CatalogError(DuckLakeError):
    """The catalog database cannot be used as a DuckLake catalog."""


class CatalogUnreachableError(CatalogError):
    """The catalog database could not be opened or queried."""


class CatalogLockedError(CatalogUnreachableError):
    """A DuckDB-file catalog is held by another process (DuckDB locks the file per process)."""


class NotADuckLakeCatalogError(CatalogError):
    """The database is reachable but holds no DuckLake catalog."""


class UnsupportedSpecVersionError(CatalogError):
    """The catalog was written by a DuckLake format version this library does not support."""


class MigrationError(CatalogError):
    """A catalog could not be migrated to another DuckLake format version; nothing was changed."""


class NoSuchSchemaError(CatalogError):
    """The schema does not exist at the requested snapshot."""


class NoSuchTableError(CatalogError):
    """The table does not exist at the requested snapshot."""


class NotATableError(NoSuchTableError):
    """The name is a view (DuckDB's ``CREATE VIEW``), not a table: nothing here reads or writes views."""


class SchemaAlreadyExistsError(CatalogError):
    """A schema of that name already exists."""


class TableAlreadyExistsError(CatalogError):
    """A table of that name already exists."""


class NoSuchSnapshotError(CatalogError):
    """No snapshot matches the requested id or timestamp."""


class CorruptCatalogError(CatalogError):
    """A value read from the catalog does not parse (a hand-edited or corrupt catalog); the message names the catalog
    table, the column and the snapshot."""

    snapshot_id: int | None = None  # the snapshot being read, once the message names it


class InlinedDataError(CorruptCatalogError, ValueError):
    """A value in an inlined-data table is not text DuckDB can read back (written so by another writer)."""


class InvalidIdentifierError(DuckLakeError, ValueError):
    """A schema, table or column name cannot be used."""


class InvalidOptionError(DuckLakeError, ValueError):
    """An option is unknown or its value cannot be parsed."""


class CheckpointMismatchError(InvalidOptionError):
    """A change-feed checkpoint written for one table is used for another (of this lake or another)."""


class FormatVersionError(InvalidOptionError):
    """The request needs a newer DuckLake format version than the catalog's (an ``epoch_*`` transform on 1.0)."""


class LakeNotConfiguredError(InvalidOptionError):
    """No catalog (or data path) was given by option, Spark conf or environment."""


class UnsupportedTypeError(DuckLakeError, TypeError):
    """A type that DuckLake (or this library) cannot store or read."""


class UnsupportedSortOrderError(DuckLakeError, ValueError):
    """A table's sort order (``SET SORTED BY``) has a key this library cannot sort by as DuckDB does: an expression
    that is not a column, or a column of a type it cannot order (VARIANT, GEOMETRY, TIMETZ)."""


class SchemaMismatchError(DuckLakeError):
    """Data does not match the table's schema."""


class NoSuchColumnError(SchemaMismatchError):
    """The column does not exist in the table."""


class UpsertKeyError(DuckLakeError, ValueError):
    """The rows of an upsert do not identify the rows they replace: a NULL key, or (without ``order_by``) two rows
    with the same key."""


class NullKeyError(UpsertKeyError):
    """A key column of an upsert's rows holds NULL."""


class DuplicateKeyError(UpsertKeyError):
    """An upsert's rows hold one key more than once and no ``order_by`` says which of them wins."""


class InvalidStringError(SchemaMismatchError):
    """A string column holds bytes that are not valid UTF-8."""


class InvalidVariantError(SchemaMismatchError, ValueError):
    """A VARIANT value whose bytes are not a valid Parquet variant, or data of another type for a VARIANT column."""


class InvalidGeometryError(SchemaMismatchError, ValueError):
    """A GEOMETRY value that is not WKB DuckDB reads (truncated, an unknown type, inconsistent Z/M...)."""


class CommitError(DuckLakeError):
    """A change could not be committed."""


class CommitConflictError(CommitError):
    """Another writer committed a change that conflicts with this one."""


class StalePlanError(CommitConflictError):
    """Rows a change planned to end or move were moved or ended by another writer after it was planned."""


class CommitFailedError(CommitError):
    """The commit definitely failed (retries exhausted or a real conflict); files it wrote were removed."""


class CommitStateUnknownError(CommitError):
    """The outcome of the commit is unknown; files it wrote are kept."""


class DataFileError(DuckLakeError):
    """A data or delete file is missing, unreadable or inconsistent with the catalog."""


class DeletionVectorError(DataFileError):
    """A deletion vector (``format='puffin'`` delete file) is corrupt: length, magic, CRC, bitmap or positions."""


class RowGroupCountError(DataFileError):
    """A data or Parquet delete file's footer has another number of row groups than its catalog row's
    ``row_group_count`` (DuckLake 1.1): the file was replaced, or the row is wrong."""


class EncryptedLakeError(DuckLakeError):
    """A file's encryption does not match the lake's (DuckDB's ``ATTACH ... (ENCRYPTED)``): an encrypted file in a
    lake not marked encrypted, a plaintext file or a missing key in an encrypted one."""


class FileDecryptionError(EncryptedLakeError, DataFileError):
    """An encrypted file cannot be decrypted with its catalog key (wrong key, corrupt or truncated file)."""


class NotInstalledError(DuckLakeError, ImportError):
    """An optional dependency is missing."""


class SchemaChangedError(DuckLakeError):
    """The table's columns changed incompatibly under a running change-feed stream."""


class DataLossError(DuckLakeError):
    """Snapshots the stream still needs were expired or cleaned up."""


class RowsChangedError(DuckLakeError):
    """A stream of a table's rows met a snapshot that deleted or updated rows (``skipChangeCommits`` skips them)."""


class ThriftDecodeError(ValueError):
    """The bytes are not a well-formed compact-protocol value (a ValueError, as before it moved here)."""


class SkipCommit(Exception):
    """Raised by an apply function to end the attempt without committing (e.g. an idempotent replay)."""
