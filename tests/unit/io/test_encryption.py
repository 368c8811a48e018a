"""io.encryption on its own: files encrypted as DuckDB encrypts them, for every layout pyarrow writes (pages, row
groups, dictionaries, nested types, no rows), read back by us and by DuckDB's ``read_parquet`` with the key; keys
that are not keys; files that are not what they claim."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyspark_ducklake.duckdb_attach import connect_duckdb, extension_path, sql_string
from pyspark_ducklake.exceptions import EncryptedLakeError, FileDecryptionError
from pyspark_ducklake.io import encryption as enc


@pytest.fixture(scope="module")
def duck() -> Any:
    con = connect_duckdb()
    con.execute(f"LOAD {sql_string(extension_path('duckdb_extension_httpfs', 'httpfs'))}")
    yield con
    con.close()


def plain_bytes(table: pa.Table, **options: Any) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, use_compliant_nested_type=True, store_schema=False, **options)
    return bytes(sink.getvalue().to_pybytes())


N = 60_000
LAYOUTS = {
    "no rows": (pa.table({"a": pa.array([], pa.int64())}), {}),
    "all null": (
        pa.table(
            {"a": pa.array([None] * 10, pa.int64()), "m": pa.array([None] * 10, pa.map_(pa.string(), pa.int32()))}
        ),
        {},
    ),
    "map, binary": (
        pa.table(
            {
                "m": pa.array([[("k", 1)], [], None], pa.map_(pa.string(), pa.int32())),
                "b": [b"\x00" * 5, None, b""],
            }
        ),
        {},
    ),
    "pages, row groups, dictionaries, nesting": (
        pa.table(
            {
                "id": pa.array(range(N), pa.int64()),
                "k": [None if i % 11 == 0 else f"k{i % 5}" for i in range(N)],
                "l": [[i, None] for i in range(N)],
                "st": [{"x": str(i % 9), "y": None if i % 4 == 0 else i} for i in range(N)],
            }
        ),
        {"data_page_size": 2048, "row_group_size": 25_000},
    ),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_file_encrypted_as_duckdb_encrypts_reads_back_here_and_in_duckdb(
    duck: Any, tmp_path: Path, layout: str
) -> None:
    table, options = LAYOUTS[layout]
    plain = plain_bytes(table, **options)
    key = enc.new_key()
    data = enc.encrypt_file(plain, key)
    assert data[:4] == data[-4:] == b"PARE"
    path = tmp_path / "f.parquet"
    path.write_bytes(data)
    with pytest.raises(OSError):
        pq.read_table(path)  # not readable without the key
    assert enc.open_encrypted(data, key, str(path)).read().equals(pq.read_table(pa.BufferReader(plain)))
    got = duck.execute(
        f"SELECT * FROM read_parquet('{path}', encryption_config={{footer_key_value: from_base64('{enc.encode_key(key)}')}})"
    ).to_arrow_table()
    assert got.to_pylist() == table.to_pylist()


def test_v2_data_pages_are_refused_before_anything_is_written() -> None:
    """DuckDB 1.5.5 fails on encrypted DATA_PAGE_V2 pages ('bytes remaining in read buffer'): never write one."""
    plain = plain_bytes(pa.table({"a": list(range(10))}), data_page_version="2.0")
    with pytest.raises(ValueError, match="DATA_PAGE_V2"):
        enc.encrypt_file(plain, enc.new_key())


@pytest.mark.parametrize(
    "text",
    ["", "not base64!", base64.b64encode(b"x" * 15).decode(), base64.b64encode(b"x" * 16).decode() + "\n", "AAAA"],
)
def test_a_catalog_key_that_is_not_an_aes_key_is_a_typed_error_without_the_key(text: str) -> None:
    with pytest.raises(FileDecryptionError, match="restore the file or the catalog's encryption_key") as err:
        enc.decode_key(text, "data/f.parquet")
    assert "data/f.parquet" in str(err.value)
    assert not text or text.strip() not in str(err.value)


@pytest.mark.parametrize("size", [16, 24, 32])
def test_keys_of_16_24_and_32_bytes_work(size: int) -> None:
    key = os.urandom(size)
    assert enc.decode_key(enc.encode_key(key), "f") == key
    table = pa.table({"a": [1, 2, None]})
    data = enc.encrypt_file(plain_bytes(table), key)
    assert enc.open_encrypted(data, key, "f").read().equals(table)


def test_a_plaintext_file_given_a_key_is_refused() -> None:
    with pytest.raises(EncryptedLakeError, match="is not encrypted") as err:
        enc.open_encrypted(plain_bytes(pa.table({"a": [1]})), enc.new_key(), "data/f.parquet")
    assert not isinstance(err.value, FileDecryptionError)


@pytest.mark.parametrize("cut", [1, 8, 12, 100, 200])
def test_every_truncation_is_a_typed_error(cut: int) -> None:
    key = enc.new_key()
    data = enc.encrypt_file(plain_bytes(pa.table({"a": list(range(100)), "s": ["x"] * 100})), key)
    for damaged in (data[:-cut], data[:cut], data[:cut] + data[cut + 1 :]):
        with pytest.raises(FileDecryptionError, match=r"data/f\.parquet"):
            enc.open_encrypted(damaged, key, "data/f.parquet").read()


def test_every_flipped_byte_is_a_typed_error() -> None:
    """AES-GCM authenticates every module: any change anywhere is caught, never decoded as other values."""
    key = enc.new_key()
    data = enc.encrypt_file(plain_bytes(pa.table({"a": list(range(20))})), key)
    for i in range(4, len(data) - 4):
        damaged = bytearray(data)
        damaged[i] ^= 0x40
        with pytest.raises(FileDecryptionError):
            enc.open_encrypted(bytes(damaged), key, "f").read()
