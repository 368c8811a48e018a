"""The Puffin container: the reference writer's bytes (``storage/ducklake_puffin.cpp``), and every check its reader
makes on a footer, each a ``DeletionVectorError`` naming the file and what is wrong."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from pyspark_ducklake.exceptions import DeletionVectorError
from pyspark_ducklake.io.puffin import FOOTER_OVERHEAD, MIN_FILE_SIZE, Blob, is_container, read_blobs, write_container

PATH = "/lake/main/t/ducklake-x-delete.puffin"


def framed(blob_section: bytes, payload: bytes, *, flags: int = 0, size: int | None = None) -> bytes:
    """A container of ``blob_section`` (after the leading magic) and footer ``payload``, framed by hand."""
    tail = struct.pack("<II", len(payload) if size is None else size, flags)
    return b"PFA1" + blob_section + b"PFA1" + payload + tail + b"PFA1"


def test_the_writer_lays_out_the_reference_bytes() -> None:
    """Magic, blobs back to back, magic, yyjson's compact payload (keys in the writer's order), u32 LE payload
    size, zero flags, magic; ``footer_size`` is the payload plus 16."""
    data, footer_size = write_container(
        [
            ("deletion-vector-v1", b"AAAA", {"referenced-data-file": "/d/f.parquet", "cardinality": "1"}),
            ("deletion-vector-v1", b"BBBBBB", {"ducklake-snapshot-id": "7"}),
        ]
    )
    payload = (
        b'{"blobs":[{"type":"deletion-vector-v1","fields":[],"snapshot-id":-1,"sequence-number":-1,"offset":4,'
        b'"length":4,"properties":{"referenced-data-file":"/d/f.parquet","cardinality":"1"}},'
        b'{"type":"deletion-vector-v1","fields":[],"snapshot-id":-1,"sequence-number":-1,"offset":8,"length":6,'
        b'"properties":{"ducklake-snapshot-id":"7"}}],"properties":{"created-by":"ducklake"}}'
    )
    assert data == b"PFA1AAAABBBBBBPFA1" + payload + len(payload).to_bytes(4, "little") + b"\0\0\0\0PFA1"
    assert footer_size == len(payload) + 16 == len(payload) + FOOTER_OVERHEAD
    assert read_blobs(data, PATH) == [
        Blob("deletion-vector-v1", 4, 4, {"referenced-data-file": "/d/f.parquet", "cardinality": "1"}),
        Blob("deletion-vector-v1", 8, 6, {"ducklake-snapshot-id": "7"}),
    ]


def test_strings_are_escaped_as_yyjson_escapes_them() -> None:
    """UTF-8 and '/' as they are; quote, backslash and the short control escapes; other controls as upper-case
    ``\\u00XX`` (Python's json writes lower case); and the reader gets the text back."""
    path = 'a/"b"\\c\nd\te\x01f\x1fé☃\x7f'
    data, _ = write_container([("deletion-vector-v1", b"", {"referenced-data-file": path})])
    assert '"referenced-data-file":"a/\\"b\\"\\\\c\\nd\\te\\u0001f\\u001Fé☃\x7f"'.encode() in data
    assert read_blobs(data, PATH)[0].properties["referenced-data-file"] == path


def test_a_repeated_key_reads_its_first_value_as_yyjson_does() -> None:
    payload = b'{"blobs":[{"type":"t","offset":4,"length":1,"offset":99}],"blobs":[]}'
    assert read_blobs(framed(b"x", payload), PATH) == [Blob("t", 4, 1, {})]


def test_only_a_file_starting_with_the_magic_and_long_enough_is_a_container() -> None:
    smallest = framed(b"", b"")
    assert len(smallest) == MIN_FILE_SIZE == 20 and is_container(smallest)
    assert not is_container(smallest[:-1]) and not is_container(b"PFA0" + smallest[4:])
    assert not is_container(b"\x00\x00\x00\x0c\xd1\xd3\x39\x64" + b"\x00" * 12)  # a bare deletion vector


GOOD = b'{"blobs":[{"type":"deletion-vector-v1","offset":4,"length":3}]}'


def _payload(text: str) -> Callable[[], bytes]:
    return lambda: framed(b"abc", text.encode())


CORRUPTIONS: dict[str, tuple[Callable[[], bytes], str]] = {
    "trailing-magic": (lambda: framed(b"abc", GOOD)[:-1] + b"X", "trailing magic mismatch"),
    "compressed-footer": (lambda: framed(b"abc", GOOD, flags=1), "footer is compressed"),
    "other-flags": (lambda: framed(b"abc", GOOD, flags=2), "unsupported footer flags 0x2"),
    "payload-size-too-big": (lambda: framed(b"abc", GOOD, size=10_000), "footer payload size 10000 out of range"),
    "payload-size-wrong": (lambda: framed(b"abc", GOOD, size=len(GOOD) - 3), "footer magic mismatch"),
    "footer-magic": (lambda: framed(b"abc", GOOD).replace(b"cPFA1{", b"cPFA2{"), "footer magic mismatch"),
    "not-json": (_payload('{"blobs":['), "failed to parse its footer payload"),
    "not-utf8": (lambda: framed(b"abc", b'{"blobs":[],"x":"\xff"}'), "failed to parse its footer payload"),
    "nan": (_payload('{"blobs":[],"x":NaN}'), "failed to parse its footer payload"),
    "no-blobs": (_payload('{"blob":[]}'), 'no "blobs" list'),
    "blobs-not-a-list": (_payload('{"blobs":{}}'), 'no "blobs" list'),
    "root-not-an-object": (_payload("[1]"), 'no "blobs" list'),
    "blob-not-an-object": (_payload('{"blobs":[3]}'), "a blob without a type"),
    "no-type": (_payload('{"blobs":[{"offset":4,"length":3}]}'), "a blob without a type"),
    "type-not-a-string": (_payload('{"blobs":[{"type":1,"offset":4,"length":3}]}'), "a blob without a type"),
    "no-offset": (_payload('{"blobs":[{"type":"t","length":3}]}'), "without an integer offset/length"),
    "offset-a-float": (_payload('{"blobs":[{"type":"t","offset":4.0,"length":3}]}'), "without an integer"),
    "length-a-bool": (_payload('{"blobs":[{"type":"t","offset":4,"length":true}]}'), "without an integer"),
    "length-a-string": (_payload('{"blobs":[{"type":"t","offset":4,"length":"3"}]}'), "without an integer"),
    "negative-length": (_payload('{"blobs":[{"type":"t","offset":4,"length":-1}]}'), "out of range"),
    "offset-in-magic": (_payload('{"blobs":[{"type":"t","offset":3,"length":1}]}'), "out of range"),
    "past-the-section": (_payload('{"blobs":[{"type":"t","offset":5,"length":3}]}'), "out of range (5+3"),
    "into-the-footer": (_payload('{"blobs":[{"type":"t","offset":4,"length":4}]}'), "out of range"),
    "huge": (_payload('{"blobs":[{"type":"t","offset":4,"length":18446744073709551616}]}'), "out of range"),
}


@pytest.mark.parametrize("case", CORRUPTIONS, ids=list(CORRUPTIONS))
def test_a_footer_that_lies_is_a_typed_error_naming_the_file(case: str) -> None:
    make, what = CORRUPTIONS[case]
    with pytest.raises(DeletionVectorError) as info:
        read_blobs(make(), PATH)
    assert f'Puffin file "{PATH}" is corrupt - ' in str(info.value)
    assert what in str(info.value)


def test_a_blob_ending_exactly_at_the_footer_and_an_empty_list_are_fine() -> None:
    assert read_blobs(framed(b"abc", GOOD), PATH) == [Blob("deletion-vector-v1", 4, 3, {})]
    assert read_blobs(framed(b"", b'{"blobs":[]}'), PATH) == []
    bad_properties = b'{"blobs":[{"type":"t","offset":4,"length":0,"properties":[1]}]}'
    assert read_blobs(framed(b"", bad_properties), PATH) == [Blob("t", 4, 0, {})]  # ignored, as the reference does
