"""RDB persistence format: constants (rdb.h names), CRC64, LZF, compact-container readers, a
streaming writer and a sans-io streaming reader.

Theory of operation: pyrepl writes RDB version 10 with plain type encodings (what every Redis
from 7.0 to 8.x loads) and reads everything Redis writes up to version 13 (Redis 8.6). See
``encoder`` and ``decoder`` for the details; ``pyrepl.keyspace.digest`` computes DEBUG DIGEST.
"""

from __future__ import annotations

# The package's API: the decoder's (its ``__all__``) and the encoder's entry points.
from pyrepl.rdb.decoder import *  # noqa: F403
from pyrepl.rdb.decoder import __all__ as _decoder_api
from pyrepl.rdb.encoder import encode_rdb, encode_rdb_bytes, save_rdb_file

__all__ = [*_decoder_api, "encode_rdb", "encode_rdb_bytes", "save_rdb_file"]
