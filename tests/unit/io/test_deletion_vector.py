"""DuckLake 1.1's deletion vectors of several snapshots: written as the reference's
``WriteDeletionVectorFileWithSnapshots`` + ``DuckLakePuffinWriter`` write them, read as its
``ScanDeletionVectorFile`` reads them (each position tagged with the first snapshot whose blob holds it), and every
lie of a footer a typed error. The blob codec itself is tested against DuckDB and pyroaring elsewhere
(``tests/conformance/test_deletion_vectors.py``, ``tests/property/test_deletion_vector_codec.py``)."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pytest

from pyspark_ducklake.exceptions import DeletionVectorError
from pyspark_ducklake.io.deletion_vector import decode_file, encode, encode_history
from pyspark_ducklake.io.puffin import write_container

PATH = "/lake/main/t/ducklake-x-delete.puffin"
DATA_FILE = "/lake/main/t/ducklake-y.parquet"


def container(*blobs: tuple[list[int], dict[str, Any]], kind: str = "deletion-vector-v1") -> bytes:
    if all(isinstance(v, str) for _, props in blobs for v in props.values()):
        return write_container([(kind, encode(p), props) for p, props in blobs])[0]
    # a forged footer with values our writer never writes (a number where a string belongs)
    data, meta = b"", []
    for positions, props in blobs:
        blob = encode(positions)
        meta.append({"type": kind, "offset": 4 + len(data), "length": len(blob), "properties": props})
        data += blob
    payload = json.dumps({"blobs": meta}).encode()
    return b"PFA1" + data + b"PFA1" + payload + struct.pack("<II", len(payload), 0) + b"PFA1"


def at(snapshot: int) -> dict[str, Any]:
    return {"ducklake-snapshot-id": str(snapshot)}


def as_lists(result: tuple[np.ndarray, np.ndarray | None]) -> tuple[list[int], list[int] | None]:
    positions, snapshots = result
    return positions.tolist(), None if snapshots is None else snapshots.tolist()


def test_one_snapshot_is_the_bare_blob_duckdb_1_5_writes() -> None:
    data, footer_size, count = encode_history([9, 2, 5], [4, 4, 4], DATA_FILE)
    assert data == encode([2, 5, 9]) and footer_size == 0 and count == 3
    assert as_lists(decode_file(data, PATH)) == ([2, 5, 9], None)


def test_several_snapshots_are_one_cumulative_blob_each_in_the_reference_layout() -> None:
    """Positions given in any order; blobs by ascending snapshot, each every position deleted up to it; the
    footer as the C++ writer builds it (properties: referenced-data-file, cardinality, ducklake-snapshot-id)."""
    data, footer_size, count = encode_history([70000, 3, 1, 65536, 2], [5, 3, 9, 5, 3], DATA_FILE)
    b3, b5, b9 = encode([2, 3]), encode([2, 3, 65536, 70000]), encode([1, 2, 3, 65536, 70000])

    def entry(offset: int, blob: bytes, card: int, snap: int) -> str:
        return (
            f'{{"type":"deletion-vector-v1","fields":[],"snapshot-id":-1,"sequence-number":-1,"offset":{offset},'
            f'"length":{len(blob)},"properties":{{"referenced-data-file":"{DATA_FILE}","cardinality":"{card}",'
            f'"ducklake-snapshot-id":"{snap}"}}}}'
        )

    entries = [entry(4, b3, 2, 3), entry(4 + len(b3), b5, 4, 5), entry(4 + len(b3) + len(b5), b9, 5, 9)]
    payload = ('{"blobs":[' + ",".join(entries) + '],"properties":{"created-by":"ducklake"}}').encode()
    expected = b"PFA1" + b3 + b5 + b9 + b"PFA1" + payload + struct.pack("<I", len(payload)) + bytes(4) + b"PFA1"
    assert data == expected
    assert footer_size == len(payload) + 4 + 4 + 4 + 4  # the catalog's footer_size: payload + 12 + 4
    assert count == 5  # delete_count: the largest cardinality
    assert as_lists(decode_file(data, PATH, row_count=70001)) == ([1, 2, 3, 65536, 70000], [9, 3, 3, 5, 5])


def test_a_read_at_a_snapshot_sees_the_blobs_up_to_it_cumulative_or_not() -> None:
    """The reference tags each position with the first blob (by snapshot, not footer order) holding it: so a
    foreign writer's per-snapshot deltas, blobs out of order and two blobs of one snapshot read as their union."""
    deltas = container(([7], at(8)), ([1, 2], at(3)), ([4], at(5)), ([5], at(5)))
    positions, snapshots = decode_file(deltas, PATH)
    assert snapshots is not None
    assert {s: positions[snapshots <= s].tolist() for s in (2, 3, 5, 8)} == {
        2: [],
        3: [1, 2],
        5: [1, 2, 4, 5],
        8: [1, 2, 4, 5, 7],
    }


def test_blobs_without_snapshots_read_as_their_union() -> None:
    assert as_lists(decode_file(container(([3, 1], {}), ([2, 3], {"cardinality": "2"})), PATH)) == ([1, 2, 3], None)


CORRUPT: dict[str, tuple[bytes, str]] = {
    "no-blob": (container(), "does not contain any deletion vectors"),
    "unknown-type": (container(([1], at(3)), kind="apache-datasketches-theta-v1"), "blob 1 of 1 is of type"),
    "mixed": (container(([1], at(3)), ([1, 2], {})), "mixes deletion vectors with and without a snapshot"),
    "cardinality": (container(([1, 2], {"cardinality": "3", **at(3)})), "says its cardinality is '3'"),
    "cardinality-number": (container(([1, 2], {"cardinality": 2})), "says its cardinality is '2'"),
    "cardinality-text": (container(([1, 2], {"cardinality": "two"})), "says its cardinality is 'two'"),
    "bitmap-crc": (
        container(([1], at(3)), ([1, 2], at(4))).replace(encode([1, 2])[-4:], b"\0\0\0\0", 1),
        f"{PATH} (blob 2 of 2) is corrupt: CRC-32 mismatch",
    ),
    **{
        f"snapshot-{name}": (container(([1], at(3)), ([2], {"ducklake-snapshot-id": value})), "invalid")
        for name, value in [
            ("empty", ""),
            ("text", "x7"),
            ("negative", "-1"),
            ("space", " 5"),
            ("plus", "+5"),
            ("decimal", "5.0"),
            ("number", 5),
            ("too-big", str(2**63)),
        ]
    },
}


@pytest.mark.parametrize("case", CORRUPT, ids=list(CORRUPT))
def test_a_history_whose_footer_lies_is_a_typed_error_naming_the_file(case: str) -> None:
    data, what = CORRUPT[case]
    with pytest.raises(DeletionVectorError) as info:
        decode_file(data, PATH)
    assert PATH in str(info.value) and what in str(info.value)


def test_a_position_beyond_the_data_file_in_any_blob_is_an_error() -> None:
    data = container(([1], at(3)), ([1, 100], at(4)))
    assert as_lists(decode_file(data, PATH, row_count=101)) == ([1, 100], [3, 4])
    with pytest.raises(DeletionVectorError, match="deletes position 100 of a data file of 100 rows"):
        decode_file(data, PATH, row_count=100)


def test_a_file_that_is_neither_a_container_nor_a_blob_is_an_error() -> None:
    """As the reference decides: the leading magic and 20 bytes make a container, anything else must be a blob."""
    with pytest.raises(DeletionVectorError, match="trailing magic mismatch"):
        decode_file(b"PFA1" + bytes(16), PATH)
    for other in (b"PFA1", bytes(20), b"\x00\x00\x00\x0c" + b"PFA1" + bytes(12)):
        with pytest.raises(DeletionVectorError, match=f"deletion vector {PATH} is corrupt"):
            decode_file(other, PATH)


@pytest.mark.parametrize(
    ("positions", "snapshots"),
    [([], []), ([1, 2], [3]), ([1, 1], [3, 4]), ([-1, 2], [3, 4])],
    ids=["empty", "lengths", "twice", "negative"],
)
def test_a_history_that_cannot_be_written_is_refused(positions: list[int], snapshots: list[int]) -> None:
    with pytest.raises(ValueError):
        encode_history(positions, snapshots, DATA_FILE)
