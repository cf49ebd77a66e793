"""DUMP / RESTORE payloads: one value in RDB encoding, the RDB version and a CRC64.

Theory of operation: Redis's createDumpPayload writes the value's RDB type byte and encoding
(as in an RDB file, without the key), then the RDB version as 2 little-endian bytes, then the
CRC64 of all that as 8 little-endian bytes. :func:`dump_payload` writes pyrepl's encodings
(RDB 10: what Redis 7.0 RESTOREs). :func:`load_payload` checks the footer as
verifyDumpPayload does, accepting the versions pyrepl reads (Redis 7's 10, Redis 8's up to 13),
and decodes the value with the streaming RDB decoder by wrapping it into a one-key RDB, so
every encoding the decoder knows (listpack, ziplist, intset, quicklist, LZF...) is accepted.

FUNCTION DUMP / RESTORE payloads have the same footer; their body is one
``RDB_OPCODE_FUNCTION2`` entry (the opcode and the library's code as an RDB string) per
library (:func:`functions_payload`); :func:`read_functions_payload` also reads the 7.0-rc
``RDB_OPCODE_FUNCTION`` entries (name, engine, description, body) as Redis 7.0 does, turning
them into a library code with its ``#!<engine> name=<name>`` line.
"""

from __future__ import annotations

from typing import Any

from pyrepl.keyspace.hashttl import HashEx
from pyrepl.rdb.constants import (
    RDB_OPCODE_FUNCTION2,
    RDB_OPCODE_FUNCTION_PRE_GA,
    RDB_VERSION,
    RDB_VERSION_HFE,
    RDB_VERSION_MAX_READ,
)
from pyrepl.rdb.crc64 import crc64
from pyrepl.rdb.decoder import KeyValue, RdbDecoder, RdbError, read_length, read_string
from pyrepl.rdb.encoder import _collection, encode_function, encode_string


class PayloadError(Exception):
    """``str(e)`` is Redis's reply text; ``reason`` what was wrong with the payload (what
    Redis logs for a RESTORE, at verbose: "Internal error in RDB reading ...")."""

    def __init__(self, text: str, reason: str = "") -> None:
        super().__init__(text)
        self.reason = reason


def dump_payload(value: Any) -> bytes:
    """createDumpPayload for a value pyrepl holds."""
    if type(value) is bytes:
        body = b"\x00" + encode_string(value)
    else:
        rtype, pieces, _ = _collection(value, b"")
        body = bytes((rtype,)) + b"".join(pieces)
    # A hash with field TTLs is RDB_TYPE_HASH_METADATA: RDB 12 (Redis 7.4+ restores it).
    version = RDB_VERSION_HFE if type(value) is HashEx and value.ttl else RDB_VERSION
    body += version.to_bytes(2, "little")
    return body + crc64(body).to_bytes(8, "little")


def load_payload(payload: bytes, verify_checksum: bool = True, deep: bool = False) -> Any:
    """verifyDumpPayload + rdbLoadObject: the value, or PayloadError with Redis's text.
    ``verify_checksum`` False: the CRC64 is not checked (DEBUG SET-SKIP-CHECKSUM-VALIDATION)."""
    if len(payload) < 10:
        raise PayloadError("ERR DUMP payload version or checksum are wrong")
    version = int.from_bytes(payload[-10:-8], "little")
    if version > RDB_VERSION_MAX_READ or (verify_checksum and
                                          crc64(payload[:-8]).to_bytes(8, "little") !=
                                          payload[-8:]):
        raise PayloadError("ERR DUMP payload version or checksum are wrong")
    body = payload[:-10]
    if not body:
        raise PayloadError("ERR Bad data format")
    # A one-key RDB of that version: header, the type byte, an empty key, the value, then the
    # payload's footer (Redis reads the value from the whole payload, so a corrupt value that
    # runs past its end reads the footer, as there), EOF, and a zero checksum (which RDB
    # readers take as "not computed").
    rdb = (b"REDIS%04d" % max(version, 1) + body[:1] + b"\x00" + body[1:] + payload[-10:] +
           b"\xff" + bytes(8))
    dec = RdbDecoder(databases=1, verify_checksum=False, deep=deep)
    dec.receive_data(rdb)
    dec.receive_data(b"")
    try:
        while True:
            ev = dec.next_event()
            if ev is None:
                break
            if isinstance(ev, KeyValue):
                return ev.value          # what follows the value is not read (as Redis)
    except RdbError as e:
        raise PayloadError("ERR Bad data format", str(e)) from None
    raise PayloadError("ERR Bad data format")


def _footer_ok(payload: bytes) -> bool:
    """verifyDumpPayload (pyrepl reads RDB versions up to RDB_VERSION_MAX_READ)."""
    if len(payload) < 10:
        return False
    version = int.from_bytes(payload[-10:-8], "little")
    return version <= RDB_VERSION_MAX_READ and \
        crc64(payload[:-8]).to_bytes(8, "little") == payload[-8:]


def functions_payload(codes: list[bytes]) -> bytes:
    """FUNCTION DUMP: an RDB_OPCODE_FUNCTION2 entry per library, the version, the CRC64."""
    body = b"".join(encode_function(code) for code in codes) + RDB_VERSION.to_bytes(2, "little")
    return body + crc64(body).to_bytes(8, "little")


def read_functions_payload(payload: bytes) -> list[bytes]:
    """FUNCTION RESTORE's reading of a payload: the libraries' codes, or PayloadError with
    Redis's text (the entries are read up to the 10-byte footer, as Redis reads them)."""
    if not _footer_ok(payload):
        raise PayloadError("ERR DUMP payload version or checksum are wrong")
    n = len(payload)
    pos = 0
    codes: list[bytes] = []
    while n - pos > 10:
        t = payload[pos]
        pos += 1
        if t != RDB_OPCODE_FUNCTION2 and t != RDB_OPCODE_FUNCTION_PRE_GA:
            raise PayloadError("ERR given type is not a function")
        what = "library payload" if t == RDB_OPCODE_FUNCTION2 else "library name"
        try:
            if t == RDB_OPCODE_FUNCTION2:
                code, pos = read_string(payload, pos)
            else:
                name, pos = read_string(payload, pos)
                what = "engine name"
                engine, pos = read_string(payload, pos)
                what = "library description indicator"
                has_desc, pos = read_length(payload, pos)
                if has_desc:
                    what = "library description"
                    _, pos = read_string(payload, pos)
                what = "library blob"
                blob, pos = read_string(payload, pos)
                code = b"#!%s name=%s\n%s" % (engine, name, blob)
        except RdbError:
            raise PayloadError(f"ERR Failed loading {what}") from None
        codes.append(code)
    return codes
