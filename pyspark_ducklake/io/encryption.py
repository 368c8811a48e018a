"""Parquet modular encryption for DuckDB's encrypted lakes (``ATTACH ... (ENCRYPTED)``).

Every data and delete file of such a lake is encrypted with its own AES key, kept base64 in the catalog's
``encryption_key`` (ducklake-format-2.md §3). DuckDB 1.5.5 encrypts every page header, page and the footer as an
AES-GCM module with **no** additional authenticated data and writes no ``aad_file_unique``.

Reading: pyarrow cannot decrypt such files (it checks the spec's AADs). They are decrypted here, module by module,
into a plaintext Parquet file in memory (offsets adjusted to the shorter modules), which pyarrow then decodes: one
AES pass, and pyarrow stays the decoder for every type. Files that do carry an ``aad_file_unique`` (written by a
library following the spec) go to pyarrow's own decryption instead.

Writing: pyarrow writes the plaintext file into memory, and :func:`encrypt_file` encrypts it the way DuckDB encrypts
its own files. Not pyarrow's encryption: DuckDB 1.5.5 checks the spec's AADs only for top-level primitive columns
and the first page of a column chunk (it starts each page's ordinal at 0 and sets no AAD state on nested leaves), so
a pyarrow-encrypted file with a list, a struct or several pages per chunk fails in DuckDB with "Computed AES tag
differs from read AES tag" (measured; parquet_reader.cpp and column_reader.cpp of v1.5.5).

Both need the whole file in memory. Nothing here logs or formats key bytes: errors name the file only.
"""

from __future__ import annotations

import base64
import binascii
import os
import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pyspark_ducklake.exceptions import EncryptedLakeError, FileDecryptionError, NotInstalledError
from pyspark_ducklake.io import thrift_compact as tc

KEY_BYTES = 16  # DuckDB's keys are AES-128
_NONCE = 12
_TAG = 16
_PAGE_DICTIONARY = 2  # PageType.DICTIONARY_PAGE
_PAGE_INDEX = 1  # PageType.INDEX_PAGE
_PAGE_DATA_V2 = 3  # PageType.DATA_PAGE_V2


def undecryptable(path: str, why: str) -> FileDecryptionError:
    """The error for an encrypted file its catalog key does not open (``why`` never holds key bytes)."""
    return FileDecryptionError(
        f"encrypted file {path} cannot be decrypted with its key from the catalog ({why}): the key is wrong or the "
        "file is corrupt or truncated; restore the file or the catalog's encryption_key"
    )


def new_key() -> bytes:
    """A fresh random AES-128 key for one file."""
    return os.urandom(KEY_BYTES)


def encode_key(key: bytes) -> str:
    """The catalog's spelling of a key: standard base64, padded."""
    return base64.b64encode(key).decode("ascii")


def decode_key(text: str, path: str) -> bytes:
    """The raw key of ``encryption_key``.

    Raises:
        FileDecryptionError: not base64 of 16, 24 or 32 bytes (the message never shows the key).
    """
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError, TypeError):
        key = b""
    if len(key) not in (16, 24, 32):
        raise undecryptable(path, "its encryption_key is not base64 of a 16, 24 or 32 byte AES key")
    return key


def is_encrypted(data_tail: bytes) -> bool:
    """Whether a file ending in ``data_tail`` is Parquet with an encrypted footer (magic ``PARE``)."""
    return data_tail[-4:] == b"PARE"


def encrypt_file(plain: bytes, key: bytes) -> bytes:
    """A plaintext Parquet file (as pyarrow writes it) encrypted as DuckDB 1.5.5 encrypts its own files.

    Every page header, page and the footer become AES-GCM modules without AAD, behind crypto metadata naming
    AES_GCM_V1 and nothing else. Offsets and sizes in the footer follow the longer modules; page indexes and bloom
    filters are left out (DuckDB writes none into encrypted files).
    """
    if len(plain) < 12 or plain[:4] != b"PAR1" or plain[-4:] != b"PAR1":
        raise ValueError("not a plaintext Parquet file")
    footer_len = struct.unpack("<I", plain[-8:-4])[0]
    meta, _ = tc.decode_struct(plain, len(plain) - 8 - footer_len)
    sealed = _rebuild(meta, _PlainPages(plain), lambda b: _module(key, os.urandom(_NONCE), b, None), b"PARE")
    crypto = tc.Struct([tc.Field(1, tc.STRUCT, tc.Struct([tc.Field(1, tc.STRUCT, tc.Struct())]))])
    footer = tc.encode_struct(crypto) + _module(key, os.urandom(_NONCE), tc.encode_struct(meta), None)
    return sealed + footer + struct.pack("<I", len(footer)) + b"PARE"


def open_encrypted(data: bytes, key: bytes, path: str) -> pq.ParquetFile:
    """A pyarrow ParquetFile over the encrypted file ``data`` (read whole), decrypting with ``key``.

    DuckDB's files (modules without AAD) are decrypted here into a plaintext Parquet file in memory; files carrying
    an ``aad_file_unique`` (written by Parquet libraries that follow the spec's AADs) go to pyarrow's decryption.

    Raises:
        FileDecryptionError: the key does not open the file, or the file is truncated or corrupt.
        EncryptedLakeError: the file is not encrypted (its catalog row says it is).
    """
    if len(data) < 12 or data[:4] not in (b"PARE", b"PAR1") or data[-4:] not in (b"PARE", b"PAR1"):
        raise undecryptable(path, "it does not begin and end as Parquet")
    if data[-4:] != b"PARE":
        raise EncryptedLakeError(
            f"file {path} is not encrypted, but the encrypted lake's catalog gives it a key (DuckDB refuses it too: "
            "'File is not encrypted, but encryption_config was set'); the file was replaced by another writer: restore "
            "the encrypted file from a backup"
        )
    try:
        crypto, start, end = _crypto_metadata(data)
        if _aad_file_unique(crypto) is not None:
            props = _direct_key_api("create_decryption_properties")(footer_key=key)
            return pq.ParquetFile(pa.BufferReader(data), decryption_properties=props)
        return pq.ParquetFile(pa.BufferReader(decrypt_file(data, key, start, end)))
    except (EncryptedLakeError, NotInstalledError):
        raise
    except (OSError, ValueError, IndexError, KeyError, struct.error, pa.ArrowException) as e:
        raise undecryptable(path, type(e).__name__) from None


def decrypt_file(data: bytes, key: bytes, start: int, end: int) -> bytes:
    """DuckDB's encrypted file (modules without AAD; ``[start, end)`` its footer module) as plaintext Parquet."""
    meta_bytes = _decrypt_at(data, start, key)[1]
    if start + 4 + _NONCE + len(meta_bytes) + _TAG != end:
        raise ValueError("footer module does not end where the footer length says")
    meta, _ = tc.decode_struct(meta_bytes)
    plain = _rebuild(meta, _SealedPages(data, key), lambda b: b, b"PAR1")
    footer = tc.encode_struct(meta)
    return plain + footer + struct.pack("<I", len(footer)) + b"PAR1"


# --- internals ------------------------------------------------------------------------------------------------------


def _direct_key_api(name: str) -> Any:
    """pyarrow's direct-key encryption API (``pyarrow.parquet.encryption.create_*_properties``; not in old pyarrow).

    Raises:
        NotInstalledError: this pyarrow lacks it (needed only for files that carry spec AADs, not DuckDB's).
    """
    try:
        import pyarrow.parquet.encryption as pe

        return getattr(pe, name)
    except (ImportError, AttributeError) as e:
        raise NotInstalledError(
            f"this file uses the Parquet spec's AADs, which need pyarrow's direct-key decryption "
            f"(pyarrow.parquet.encryption.{name}), missing in pyarrow {pa.__version__}: pip install -U pyarrow"
        ) from e


def _aesgcm(key: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise NotInstalledError(f"encrypted lakes need the cryptography package ({e})") from e
    return AESGCM(key)


def _crypto_metadata(data: bytes) -> tuple[tc.Struct, int, int]:
    """The footer's ``FileCryptoMetaData`` and the span ``[start, end)`` of the encrypted ``FileMetaData`` module."""
    footer_len = struct.unpack("<I", data[-8:-4])[0]
    begin = len(data) - 8 - footer_len
    if begin < 4:
        raise ValueError("footer length beyond the file")
    crypto, start = tc.decode_struct(data, begin)
    _algorithm(crypto)
    return crypto, start, len(data) - 8


def _algorithm(crypto: tc.Struct) -> tc.Struct:
    alg = crypto.get(1)
    if alg is None or not isinstance(alg.value, tc.Struct):
        raise ValueError("no encryption algorithm")
    gcm = alg.value.get(1)
    if gcm is None or not isinstance(gcm.value, tc.Struct):
        raise ValueError("only AES_GCM_V1 is supported (as in DuckDB)")
    return gcm.value


def _aad_file_unique(crypto: tc.Struct) -> bytes | None:
    f = _algorithm(crypto).get(2)
    return None if f is None else bytes(f.value)


def _module(key: bytes, nonce: bytes, plain: bytes, aad: bytes | None) -> bytes:
    sealed = _aesgcm(key).encrypt(nonce, plain, aad)
    return struct.pack("<I", _NONCE + len(sealed)) + nonce + sealed


def _decrypt_at(data: bytes, pos: int, key: bytes) -> tuple[int, bytes]:
    """Decrypt the module (no AAD) at ``pos``: ``(its total length, plaintext)``."""
    if pos < 0 or pos + 4 > len(data):
        raise ValueError("module beyond the end of the file")
    (n,) = struct.unpack_from("<I", data, pos)
    if n < _NONCE + _TAG or pos + 4 + n > len(data):
        raise ValueError("module beyond the end of the file")
    nonce = data[pos + 4 : pos + 4 + _NONCE]
    try:
        plain = _aesgcm(key).decrypt(nonce, data[pos + 4 + _NONCE : pos + 4 + n], None)
    except Exception as e:  # cryptography's InvalidTag: wrong key or altered bytes
        raise ValueError("authentication tag mismatch") from e
    return 4 + n, plain


class _PlainPages:
    """Page headers and pages of a plaintext file."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def header(self, pos: int) -> tuple[bytes, int]:
        head, end = tc.decode_struct(self.data, pos)
        if _i(head, 1) == _PAGE_DATA_V2:  # DuckDB 1.5.5 fails on them encrypted ("bytes remaining in read buffer")
            raise ValueError("DATA_PAGE_V2 pages cannot be encrypted for DuckDB; write data page version 1.0")
        return self.data[pos:end], end

    def page(self, pos: int, size: int) -> tuple[bytes, int]:
        if pos + size > len(self.data):
            raise ValueError("page beyond the end of the file")
        return self.data[pos : pos + size], pos + size


class _SealedPages:
    """Page headers and pages of DuckDB's encrypted file: one module each."""

    def __init__(self, data: bytes, key: bytes) -> None:
        self.data = data
        self.key = key

    def header(self, pos: int) -> tuple[bytes, int]:
        n, plain = _decrypt_at(self.data, pos, self.key)
        return plain, pos + n

    def page(self, pos: int, size: int) -> tuple[bytes, int]:
        n, plain = _decrypt_at(self.data, pos, self.key)
        if len(plain) != size:
            raise ValueError("page size differs from its header")
        return plain, pos + n


def _i(s: tc.Struct, fid: int, default: int | None = None) -> int | None:
    f = s.get(fid)
    return default if f is None else int(f.value)


def _rebuild(meta: tc.Struct, pages: _PlainPages | _SealedPages, wrap: Callable[[bytes], bytes], magic: bytes) -> bytes:
    """The file's column chunks, every page header and page passed through ``wrap``, after ``magic``; the offsets
    and sizes in ``meta`` (decoded ``FileMetaData``) are set to the new layout. The footer is the caller's."""
    out = bytearray(magic)
    groups = meta.get(4)
    for group in groups.value.items if groups is not None else []:
        chunks = group.get(1)
        group_start = len(out)
        for chunk in chunks.value.items if chunks is not None else []:
            md_field = chunk.get(3)
            if md_field is None:
                raise ValueError("column metadata encrypted separately (column keys) is not supported")
            md: tc.Struct = md_field.value
            # the chunk starts at its first page; a chunk of no rows has a dictionary page only (data offset 0)
            starts = [o for o in (_i(md, 11), _i(md, 9)) if o is not None and o >= 4]
            if not starts:
                raise ValueError("column chunk without a page offset")
            pos = min(starts)
            stop = pos + (_i(md, 7, 0) or 0)
            chunk_start = len(out)
            new_data_off = None
            while pos < stop:
                head_bytes, pos = pages.header(pos)
                head, _ = tc.decode_struct(head_bytes)
                kind = _i(head, 1)
                if kind == _PAGE_INDEX:
                    raise ValueError("index pages are not supported")
                if kind == _PAGE_DICTIONARY:
                    md.set(11, tc.I64, len(out))
                elif new_data_off is None:
                    new_data_off = len(out)
                body, pos = pages.page(pos, _i(head, 3, 0) or 0)
                out += wrap(head_bytes)
                out += wrap(body)
            if pos != stop:
                raise ValueError("pages run past their column chunk")
            if new_data_off is not None:
                md.set(9, tc.I64, new_data_off)
            md.set(7, tc.I64, len(out) - chunk_start)
            md.fields = [f for f in md.fields if f.id not in (10, 14, 15)]  # index page, bloom filter
            chunk.fields = [f for f in chunk.fields if f.id not in (4, 5, 6, 7, 8)]  # page indexes, crypto metadata
            if _i(chunk, 2, 0):
                chunk.set(2, tc.I64, chunk_start)
        if group.get(5) is not None:
            group.set(5, tc.I64, group_start)
        if group.get(6) is not None:
            group.set(6, tc.I64, len(out) - group_start)
    return bytes(out)


__all__ = [
    "KEY_BYTES",
    "decode_key",
    "decrypt_file",
    "encode_key",
    "encrypt_file",
    "is_encrypted",
    "new_key",
    "open_encrypted",
    "undecryptable",
]
