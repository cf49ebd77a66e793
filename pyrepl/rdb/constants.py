"""RDB format constants, named as in Redis's rdb.h (and quicklist.h / module.c / keymeta.c).

Theory of operation: these numbers are the on-disk format and never change meaning; the encoder
and the decoder import them from here so that a grep for a Redis name finds our use of it.
``RDB_TYPE_NAMES`` gives the lower-case names used in error messages (as redis-check-rdb's
``rdb_type_string``), so an unsupported value reads e.g. "type 15 (stream-listpacks)".
"""

from __future__ import annotations

# The version pyrepl writes: what Redis 7.0 writes and the newest it loads; newer Redis loads it.
RDB_VERSION = 10
# What pyrepl writes when a hash has field TTLs (RDB_TYPE_HASH_METADATA needs Redis 7.4+).
RDB_VERSION_HFE = 12
# ebuckets.h EB_EXPIRE_TIME_MAX: the largest field expiry an RDB may hold.
EB_EXPIRE_TIME_MAX = (1 << 48) - 1
# The newest version the decoder reads (Redis 8.6 writes 13).
RDB_VERSION_MAX_READ = 13

# Length encoding (two most significant bits of the first byte).
RDB_6BITLEN = 0
RDB_14BITLEN = 1
RDB_32BITLEN = 0x80
RDB_64BITLEN = 0x81
RDB_ENCVAL = 3

# Special string encodings (the six low bits after RDB_ENCVAL).
RDB_ENC_INT8 = 0
RDB_ENC_INT16 = 1
RDB_ENC_INT32 = 2
RDB_ENC_LZF = 3

# Object types.
RDB_TYPE_STRING = 0
RDB_TYPE_LIST = 1
RDB_TYPE_SET = 2
RDB_TYPE_ZSET = 3
RDB_TYPE_HASH = 4
RDB_TYPE_ZSET_2 = 5
RDB_TYPE_MODULE_PRE_GA = 6
RDB_TYPE_MODULE_2 = 7
RDB_TYPE_HASH_ZIPMAP = 9
RDB_TYPE_LIST_ZIPLIST = 10
RDB_TYPE_SET_INTSET = 11
RDB_TYPE_ZSET_ZIPLIST = 12
RDB_TYPE_HASH_ZIPLIST = 13
RDB_TYPE_LIST_QUICKLIST = 14
RDB_TYPE_STREAM_LISTPACKS = 15
RDB_TYPE_HASH_LISTPACK = 16
RDB_TYPE_ZSET_LISTPACK = 17
RDB_TYPE_LIST_QUICKLIST_2 = 18
RDB_TYPE_STREAM_LISTPACKS_2 = 19
RDB_TYPE_SET_LISTPACK = 20
RDB_TYPE_STREAM_LISTPACKS_3 = 21
RDB_TYPE_HASH_METADATA_PRE_GA = 22
RDB_TYPE_HASH_LISTPACK_EX_PRE_GA = 23
RDB_TYPE_HASH_METADATA = 24
RDB_TYPE_HASH_LISTPACK_EX = 25
RDB_TYPE_STREAM_LISTPACKS_4 = 26

# Opcodes.
RDB_OPCODE_KEY_META = 243
RDB_OPCODE_SLOT_INFO = 244
RDB_OPCODE_FUNCTION2 = 245
RDB_OPCODE_FUNCTION_PRE_GA = 246
RDB_OPCODE_MODULE_AUX = 247
RDB_OPCODE_IDLE = 248
RDB_OPCODE_FREQ = 249
RDB_OPCODE_AUX = 250
RDB_OPCODE_RESIZEDB = 251
RDB_OPCODE_EXPIRETIME_MS = 252
RDB_OPCODE_EXPIRETIME = 253
RDB_OPCODE_SELECTDB = 254
RDB_OPCODE_EOF = 255

# Module serialized values sub opcodes.
RDB_MODULE_OPCODE_EOF = 0
RDB_MODULE_OPCODE_SINT = 1
RDB_MODULE_OPCODE_UINT = 2
RDB_MODULE_OPCODE_FLOAT = 3
RDB_MODULE_OPCODE_DOUBLE = 4
RDB_MODULE_OPCODE_STRING = 5

# quicklist.h: node containers in RDB_TYPE_LIST_QUICKLIST_2.
QUICKLIST_NODE_CONTAINER_PLAIN = 1
QUICKLIST_NODE_CONTAINER_PACKED = 2


# stream.h: entry flags and the stream-node defaults of an RDB stream's listpacks.
STREAM_ITEM_FLAG_DELETED = 1
STREAM_ITEM_FLAG_SAMEFIELDS = 2

# module.c ModuleTypeNameCharSet (module type names are 9 chars of 6 bits each).
MODULE_TYPE_NAME_CHARSET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
# keymeta.c keyMetaCharSet (note: "_-", not "-_").
KEY_META_CHARSET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
KEY_META_FLAG_ALLOW_IGNORE = 0

RDB_TYPE_NAMES: dict[int, str] = {
    RDB_TYPE_STRING: "string",
    RDB_TYPE_LIST: "list-linked",
    RDB_TYPE_SET: "set-hashtable",
    RDB_TYPE_ZSET: "zset-v1",
    RDB_TYPE_HASH: "hash-hashtable",
    RDB_TYPE_ZSET_2: "zset-v2",
    RDB_TYPE_MODULE_PRE_GA: "module-pre-release",
    RDB_TYPE_MODULE_2: "module-value",
    RDB_TYPE_HASH_ZIPMAP: "hash-zipmap",
    RDB_TYPE_LIST_ZIPLIST: "list-ziplist",
    RDB_TYPE_SET_INTSET: "set-intset",
    RDB_TYPE_ZSET_ZIPLIST: "zset-ziplist",
    RDB_TYPE_HASH_ZIPLIST: "hash-ziplist",
    RDB_TYPE_LIST_QUICKLIST: "quicklist",
    RDB_TYPE_STREAM_LISTPACKS: "stream-listpacks",
    RDB_TYPE_HASH_LISTPACK: "hash-listpack",
    RDB_TYPE_ZSET_LISTPACK: "zset-listpack",
    RDB_TYPE_LIST_QUICKLIST_2: "quicklist-v2",
    RDB_TYPE_STREAM_LISTPACKS_2: "stream-listpacks-v2",
    RDB_TYPE_SET_LISTPACK: "set-listpack",
    RDB_TYPE_STREAM_LISTPACKS_3: "stream-listpacks-v3",
    RDB_TYPE_HASH_METADATA_PRE_GA: "hash-hashtable-md-pre-ga",
    RDB_TYPE_HASH_LISTPACK_EX_PRE_GA: "hash-listpack-md-pre-ga",
    RDB_TYPE_HASH_METADATA: "hash-hashtable-md",
    RDB_TYPE_HASH_LISTPACK_EX: "hash-listpack-md",
    RDB_TYPE_STREAM_LISTPACKS_4: "stream-listpacks-v4",
}


def rdb_type_name(t: int) -> str:
    return RDB_TYPE_NAMES.get(t, "unknown")


def module_type_name(module_id: int) -> str:
    """module.c moduleTypeNameByID: the 9-char type name in bits 63..10 of a module id."""
    chars = []
    mid = module_id >> 10
    for _ in range(9):
        chars.append(MODULE_TYPE_NAME_CHARSET[mid & 63])
        mid >>= 6
    return "".join(reversed(chars))
