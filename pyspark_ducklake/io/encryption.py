"""Parquet modular encryption for DuckDB's encrypted lakes (``ATTACH ... (ENCRYPTED)``).

Every data and delete file of such a lake is encrypted with its own AES key, kept base64 in the catalog's
``encryption_key`` (ducklake-format-2.md §3).

Writing: pyarrow encrypts with its defaults (encrypted footer, AES_GCM_V1, a stored ``aad_file_unique``) and a fresh
16-byte footer key; DuckDB reads such files back.

Reading: a file pyarrow wrote (it carries an ``aad_file_unique``) is read by pyarrow's own decryption. DuckDB 1.5.5
writes AES-GCM modules with **no** additional authenticated data and no ``aad_file_unique``, which pyarrow cannot
decrypt (every tag check fails). Such a file is rewritten in memory into one pyarrow decrypts: each module (the
footer, each page header and page, page indexes) is decrypted and encrypted again with the same key and nonce under
the AADs the Parquet spec derives from an ``aad_file_unique`` we put in the footer's crypto metadata. A module keeps
its size, so no offset moves; only the footer's crypto metadata grows. pyarrow stays the decoder for every type
(the alternative, a plaintext copy, would move every offset and page size, and a decoder of our own would duplicate
pyarrow's). The price is one in-memory copy of the file while it is read.

Nothing here logs or formats key bytes: errors name the file only.
"""

from __future__ import annotations

import base64
import binascii
import os
import struct
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe

from pyspark_ducklake.exceptions import EncryptedLakeError, NotInstalledError
from pyspark_ducklake.io import thrift_compact as tc

KEY_BYTES = 16  # DuckDB's keys are AES-128
_AAD_FILE_UNIQUE = b"pdl-rewr"  # only ever in memory: binds the rewritten modules to one another for pyarrow
_NONCE = 12
_TAG = 16

# Module types of the Parquet encryption spec (the AAD's type byte)
_FOOTER, _DATA_PAGE, _DICT_PAGE, _DATA_HEADER, _DICT_HEADER, _COLUMN_INDEX, _OFFSET_INDEX = 0, 2, 3, 4, 5, 6, 7
_PAGE_DICTIONARY = 2  # PageType.DICTIONARY_PAGE
_PAGE_INDEX = 1  # PageType.INDEX_PAGE


class FileDecryptionError(EncryptedLakeError):
    """An encrypted file cannot be decrypted with its catalog key (wrong key, corrupt or truncated file)."""


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
        raise FileDecryptionError(
            f"the catalog's encryption_key of {path} is not base64 of a 16, 24 or 32 byte AES key; the catalog is "
            "damaged: restore the key DuckDB wrote for this file"
        )
    return key


def encryption_properties(key: bytes) -> Any:
    """pyarrow's encryption settings DuckDB reads back: encrypted footer, AES_GCM_V1, no AAD prefix."""
    return pe.create_encryption_properties(footer_key=key)


def is_encrypted(data_tail: bytes) -> bool:
    """Whether a file ending in ``data_tail`` is Parquet with an encrypted footer (magic ``PARE``)."""
    return data_tail[-4:] == b"PARE"


def open_encrypted(data: bytes, key: bytes, path: str) -> pq.ParquetFile:
    """A pyarrow ParquetFile over the encrypted file ``data`` (read whole), decrypting with ``key``.

    Raises:
        FileDecryptionError: the key does not open the file, or the file is truncated or corrupt.
        EncryptedLakeError: the file is not encrypted (its catalog row says it is).
    """
    if len(data) < 12 or data[:4] not in (b"PARE", b"PAR1") or data[-4:] not in (b"PARE", b"PAR1"):
        raise FileDecryptionError(f"encrypted file {path} is truncated or not Parquet: restore it from a backup")
    if data[-4:] != b"PARE":
        raise EncryptedLakeError(
            f"file {path} is not encrypted, but the encrypted lake's catalog gives it a key (DuckDB refuses it too: "
            "'File is not encrypted, but encryption_config was set'); the file was replaced by another writer"
        )
    try:
        crypto, footer_start, footer_end = _crypto_metadata(data)
        if _aad_file_unique(crypto) is None:
            data = _with_spec_aads(data, key, crypto, footer_start, footer_end)
        props = pe.create_decryption_properties(footer_key=key)
        return pq.ParquetFile(pa.BufferReader(data), decryption_properties=props)
    except EncryptedLakeError:
        raise
    except (OSError, ValueError, IndexError, KeyError, struct.error, pa.ArrowException) as e:
        raise FileDecryptionError(
            f"encrypted file {path} cannot be decrypted with its key from the catalog ({type(e).__name__}): the key "
            "is wrong or the file is corrupt or truncated; restore the file or the catalog's encryption_key"
        ) from None


def edit_footer(data: bytes, key: bytes, edit: Any) -> bytes:
    """A file pyarrow encrypted with ``key``, its footer ``FileMetaData`` passed through ``edit(Struct) -> None``.

    The footer is the last module, so no offset moves.
    """
    crypto, start, end = _crypto_metadata(data)
    file_aad = _file_aad(crypto)
    meta_bytes = _decrypt_at(data, start, key, file_aad + bytes([_FOOTER]))[1]
    meta, _ = tc.decode_struct(meta_bytes)
    edit(meta)
    nonce = os.urandom(_NONCE)
    module = _module(key, nonce, tc.encode_struct(meta), file_aad + bytes([_FOOTER]))
    crypto_len = struct.unpack("<I", data[-8:-4])[0] - (end - start)
    crypto_bytes = data[start - crypto_len : start]
    footer = crypto_bytes + module
    return data[: start - crypto_len] + footer + struct.pack("<I", len(footer)) + b"PARE"


# --- internals ------------------------------------------------------------------------------------------------------


def _aesgcm(key: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise NotInstalledError(f"reading DuckDB's encrypted files needs the cryptography package ({e})") from e
    return AESGCM(key)


def _crypto_metadata(data: bytes) -> tuple[tc.Struct, int, int]:
    """The footer's ``FileCryptoMetaData`` and the span ``[start, end)`` of the encrypted ``FileMetaData`` module."""
    footer_len = struct.unpack("<I", data[-8:-4])[0]
    begin = len(data) - 8 - footer_len
    if begin < 4:
        raise ValueError("footer length beyond the file")
    crypto, start = tc.decode_struct(data, begin)
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


def _file_aad(crypto: tc.Struct) -> bytes:
    gcm = _algorithm(crypto)
    prefix, unique = gcm.get(1), gcm.get(2)
    return (bytes(prefix.value) if prefix is not None else b"") + (bytes(unique.value) if unique is not None else b"")


def _module(key: bytes, nonce: bytes, plain: bytes, aad: bytes | None) -> bytes:
    sealed = _aesgcm(key).encrypt(nonce, plain, aad)
    return struct.pack("<I", _NONCE + len(sealed)) + nonce + sealed


def _decrypt_at(data: bytes | memoryview, pos: int, key: bytes, aad: bytes | None) -> tuple[int, bytes, bytes]:
    """Decrypt the module at ``pos``: ``(its total length, nonce, plaintext)``."""
    (n,) = struct.unpack_from("<I", data, pos)
    if n < _NONCE + _TAG or pos + 4 + n > len(data):
        raise ValueError("module beyond the end of the file")
    nonce = bytes(data[pos + 4 : pos + 4 + _NONCE])
    try:
        plain = _aesgcm(key).decrypt(nonce, bytes(data[pos + 4 + _NONCE : pos + 4 + n]), aad)
    except Exception as e:  # cryptography's InvalidTag: wrong key or altered bytes
        raise ValueError("authentication tag mismatch") from e
    return 4 + n, nonce, plain


def _i(s: tc.Struct, fid: int, default: int | None = None) -> int | None:
    f = s.get(fid)
    return default if f is None else int(f.value)


def _with_spec_aads(data: bytes, key: bytes, crypto: tc.Struct, start: int, end: int) -> bytes:
    """DuckDB's file (modules without AAD) rebuilt as pyarrow writes one: the same modules sealed again under the
    spec's AADs, page headers giving the sealed page's size (DuckDB's give the plaintext's), column chunks marked
    encrypted with the footer key (DuckDB's say nothing), page indexes left out (pyarrow does not need them)."""
    meta_bytes = _decrypt_at(data, start, key, None)[2]
    if start + 4 + len(meta_bytes) + _NONCE + _TAG != end:
        raise ValueError("footer module does not end where the footer length says")
    meta, _ = tc.decode_struct(meta_bytes)
    file_aad = _AAD_FILE_UNIQUE
    out = bytearray(b"PARE")

    # A changed plaintext (page header, footer) gets a fresh nonce: one key never seals two texts under one nonce.
    def reseal(plain: bytes, nonce: bytes, aad: bytes) -> None:
        out.extend(_module(key, nonce, plain, aad))

    groups = meta.get(4)
    for rg, group in enumerate(groups.value.items if groups is not None else []):
        chunks = group.get(1)
        group_start = len(out)
        for col, chunk in enumerate(chunks.value.items if chunks is not None else []):
            ordinals = struct.pack("<hh", rg, col)
            md_field = chunk.get(3)
            if md_field is None:
                raise ValueError("column metadata encrypted separately (column keys) is not supported")
            md: tc.Struct = md_field.value
            dict_off = _i(md, 11)
            data_off = _i(md, 9, 0) or 0
            pos = dict_off if dict_off is not None and 0 < dict_off < data_off else data_off
            stop = pos + (_i(md, 7, 0) or 0)
            if stop > len(data) - 8:
                raise ValueError("column chunk beyond the end of the file")
            chunk_start = len(out)
            new_data_off = None
            page = 0
            while pos < stop:
                n, _, head_plain = _decrypt_at(data, pos, key, None)
                pos += n
                m, page_nonce, page_plain = _decrypt_at(data, pos, key, None)
                pos += m
                head, _ = tc.decode_struct(head_plain)
                head.set(3, tc.I32, m)  # pyarrow reads this many bytes: the whole sealed module
                kind = _i(head, 1)
                if kind == _PAGE_INDEX:
                    raise ValueError("index pages are not supported")
                if kind == _PAGE_DICTIONARY:
                    md.set(11, tc.I64, len(out))
                    reseal(tc.encode_struct(head), os.urandom(_NONCE), file_aad + bytes([_DICT_HEADER]) + ordinals)
                    reseal(page_plain, page_nonce, file_aad + bytes([_DICT_PAGE]) + ordinals)
                    continue
                if new_data_off is None:
                    new_data_off = len(out)
                page_no = struct.pack("<h", page)
                reseal(tc.encode_struct(head), os.urandom(_NONCE), file_aad + bytes([_DATA_HEADER]) + ordinals + page_no)
                reseal(page_plain, page_nonce, file_aad + bytes([_DATA_PAGE]) + ordinals + page_no)
                page += 1
            if pos != stop:
                raise ValueError("pages run past their column chunk")
            md.set(9, tc.I64, new_data_off if new_data_off is not None else chunk_start)
            md.set(7, tc.I64, len(out) - chunk_start)
            md.fields = [f for f in md.fields if f.id not in (10, 14, 15)]  # index page, bloom filter
            chunk.fields = [f for f in chunk.fields if f.id not in (4, 5, 6, 7)]  # page indexes
            if chunk.get(8) is None:  # DuckDB leaves it out; pyarrow then takes the chunk for plaintext
                chunk.set(8, tc.STRUCT, tc.Struct([tc.Field(1, tc.STRUCT, tc.Struct())]))
        if group.get(5) is not None:
            group.set(5, tc.I64, group_start)
        if group.get(6) is not None:
            group.set(6, tc.I64, len(out) - group_start)
    # The footer: the edited FileMetaData sealed under the footer AAD, behind crypto metadata naming our
    # aad_file_unique.
    _algorithm(crypto).set(2, tc.BINARY, file_aad)
    footer = tc.encode_struct(crypto) + _module(key, os.urandom(_NONCE), tc.encode_struct(meta), file_aad + bytes([_FOOTER]))
    out += footer + struct.pack("<I", len(footer)) + b"PARE"
    return bytes(out)


__all__ = [
    "KEY_BYTES",
    "FileDecryptionError",
    "decode_key",
    "edit_footer",
    "encode_key",
    "encryption_properties",
    "is_encrypted",
    "new_key",
    "open_encrypted",
]
