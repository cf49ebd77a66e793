"""Differential tests of the geo commands: pyrepl against real redis-server 7.0.15, byte for byte.

An edge table replayed in RESP2 and RESP3: GEOADD with its options and the scores it stores
(ZRANGE WITHSCORES), positions at the edges of the ranges, GEOPOS / GEOHASH / GEODIST of
members written with ZADD at absurd scores, every search form with every option, their
errors in Redis's order of checks, STORE / STOREDIST / GEOSEARCHSTORE, COMMAND GETKEYS. Then
searches over a few hundred points with many shared positions (ties: the order of equal
distances is qsort's or pqsort's), hypothesis sequences of random geo commands, and the
propagation (GEOADD reaches a replica as ZADD, the STORE forms as they were sent).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.differential import (
    PROTOS,
    PropagationTaps,
    check_propagation,
    run_sequence,
    same_propagation,
    sequence_settings,
)

pytestmark = [pytest.mark.slow, pytest.mark.interop]

SICILY = ("GEOADD", "Sicily", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669",
          "Catania", "12.758489", "38.788135", "edge1", "17.241510", "38.788135", "edge2")
NYC = ("GEOADD", "nyc", "-73.9454966", "40.747533", "lic market", "-73.9733487", "40.7648057",
       "central park n/q/r", "-73.9903085", "40.7362513", "union square", "-74.0131604",
       "40.7126674", "wtc one", "-73.7858139", "40.6428986", "jfk", "-73.9375699", "40.7498929",
       "q4", "-73.9564142", "40.7480973", "4545")
C = ("-73.9798091", "40.7598464")      # a search centre in nyc

CASES: list[tuple[str, ...]] = [
    SICILY, NYC, ("ZRANGE", "Sicily", "0", "-1", "WITHSCORES"),
    ("ZRANGE", "nyc", "0", "-1", "WITHSCORES"),
    # GEOADD options and errors
    ("GEOADD", "nyc", "CH", "40.747533", "-73.9454966", "lic market"),
    ("GEOADD", "nyc", "NX", "-73.9454966", "40.747533", "lic market"),
    ("GEOADD", "nyc", "XX", "-83.9454966", "40.747533", "lic market"),
    ("GEOADD", "nyc", "CH", "NX", "-73.9454966", "40.747533", "lic market"),
    ("GEOADD", "nyc", "CH", "XX", "-73.9454966", "40.747533", "lic market"),
    ("GEOADD", "nyc", "xx", "nx", "-73.9454966", "40.747533", "lic market"),
    ("GEOADD", "nyc", "ch", "xx", "foo", "-73.9454966", "40.747533", "lic market"),
    ("GEOADD", "nyc", "-73.9454966", "40.747533", "lic market", "-73.9454966"),
    ("GEOADD", "nyc", "NX", "NX", "NX"), ("GEOADD", "nyc", "CH", "CH", "CH", "CH"),
    ("GEOADD", "nyc", "GT", "1", "2", "m"), ("GEOADD", "nyc", "1", "2"),
    ("GEOADD", "bad", "200", "10", "a"), ("GEOADD", "bad", "10", "86", "a"),
    ("GEOADD", "bad", "inf", "10", "a"), ("GEOADD", "bad", "-0", "-85.05112879", "a"),
    ("GEOADD", "bad", "x", "10", "a"), ("GEOADD", "bad", "10", "", "a"),
    ("GEOADD", "bad", "1", "1", "ok", "1", "100", "a"), ("EXISTS", "bad"),
    ("GEOADD", "bad", "0x10", "1e1", "hex"), ("GEOADD", "bad", " 1", "1", "sp"),
    ("GEOADD", "nyc", "XX", "1", "1", "new"), ("GEOADD", "nokey", "XX", "1", "1", "new"),
    ("EXISTS", "nokey"), ("GEOADD", "nyc", "ch\x00junk", "1", "1", "nulopt"),
    ("GEOADD", "edges", "180", "85.05112878", "ne", "-180", "-85.05112878", "sw",
     "180", "-85.05112878", "se", "-180", "85.05112878", "nw", "0", "0", "zero",
     "-0.0000001", "0.0000001", "tiny", "179.99999999", "0", "east"),
    ("ZRANGE", "edges", "0", "-1", "WITHSCORES"), ("GEOPOS", "edges", "ne", "sw", "se", "nw",
                                                    "zero", "tiny", "east", "none"),
    ("GEOHASH", "edges", "ne", "sw", "se", "nw", "zero", "tiny", "east", "none"),
    ("GEODIST", "edges", "ne", "sw"), ("GEODIST", "edges", "se", "nw", "km"),
    ("GEODIST", "edges", "zero", "east", "mi"), ("GEODIST", "edges", "zero", "tiny", "ft"),
    ("GEODIST", "edges", "zero", "zero"),
    ("GEOSEARCH", "edges", "FROMMEMBER", "ne", "BYRADIUS", "1", "km", "WITHCOORD", "WITHHASH"),
    ("GEOSEARCH", "edges", "FROMLONLAT", "0", "0", "BYRADIUS", "100000", "km", "ASC",
     "WITHDIST"),
    ("GEOSEARCH", "edges", "FROMLONLAT", "0", "0", "BYBOX", "1e9", "1e9", "m", "DESC",
     "WITHDIST"),
    ("GEORADIUS", "edges", "0", "0", "inf", "m", "WITHDIST", "ASC"),
    # absurd scores written with ZADD: decodeGeohash's (uint64_t) cast
    ("ZADD", "w", "-1", "a", "-1.5", "b", "1e19", "c", "2e19", "d", "inf", "e", "-inf", "f",
     "0.5", "g", "9223372036854775808", "h", "4503599627370496", "i", "-1e30", "j", "1e25", "k",
     "1.5", "l", "13510798882111488", "m"),
    ("GEOPOS", "w", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"),
    ("GEOHASH", "w", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"),
    ("GEODIST", "w", "a", "f"), ("GEODIST", "w", "e", "m"),
    ("GEOSEARCH", "w", "FROMMEMBER", "g", "BYRADIUS", "10", "km", "WITHHASH", "WITHCOORD"),
    ("GEORADIUSBYMEMBER", "w", "a", "50", "km", "WITHDIST", "WITHHASH"),
    # GEOPOS / GEOHASH / GEODIST
    ("GEOPOS", "Sicily", "Palermo", "nope", "Catania"), ("GEOPOS", "nokey", "a", "b"),
    ("GEOPOS", "Sicily"), ("GEOHASH", "Sicily", "Palermo", "Catania", "nope"),
    ("GEOHASH", "nokey", "a"), ("GEOHASH", "Sicily"),
    ("GEODIST", "Sicily", "Palermo", "Catania"), ("GEODIST", "Sicily", "Palermo", "Catania",
                                                   "KM"),
    ("GEODIST", "Sicily", "Palermo", "Catania", "mi"), ("GEODIST", "Sicily", "Palermo",
                                                         "Catania", "Ft"),
    ("GEODIST", "Sicily", "Palermo", "Catania", "yd"), ("GEODIST", "Sicily", "Palermo",
                                                         "Catania", "km", "x"),
    ("GEODIST", "Sicily", "Palermo", "nope"), ("GEODIST", "nokey", "a", "b"),
    ("GEODIST", "nokey", "a", "b", "parsec"), ("GEODIST", "Sicily", "Palermo", "Palermo"),
    ("GEOADD", "anti", "0", "10", "a", "180", "-10", "b", "0", "20", "c", "180", "-20", "d",
     "1", "1", "e", "-179", "-1", "f", "0", "0", "g", "180", "0", "h", "90", "45", "i", "-90",
     "-45", "j"),
    ("GEODIST", "anti", "a", "b"), ("GEODIST", "anti", "c", "d"), ("GEODIST", "anti", "e", "f"),
    ("GEODIST", "anti", "g", "h"), ("GEODIST", "anti", "i", "j", "km"),
    ("GEOSEARCH", "anti", "FROMMEMBER", "g", "BYRADIUS", "30000", "km", "ASC", "WITHDIST"),
    # GEORADIUS family
    ("GEORADIUS", "nyc", *C, "3", "km", "ASC"), ("GEORADIUS", "nyc", *C, "3", "km", "DESC"),
    ("GEORADIUS", "nyc", *C, "3", "km", "WITHDIST", "ASC"),
    ("GEORADIUS", "nyc", *C, "10", "km", "COUNT", "3"),
    ("GEORADIUS", "nyc", *C, "10", "km", "COUNT", "3", "ANY"),
    ("GEORADIUS", "nyc", *C, "10", "km", "COUNT", "3", "ANY", "ASC"),
    ("GEORADIUS", "nyc", *C, "10", "km", "ANY", "ASC"),
    ("GEORADIUS", "nyc", *C, "10", "km", "COUNT"),
    ("GEORADIUS", "nyc", *C, "10", "km", "COUNT", "0"),
    ("GEORADIUS", "nyc", *C, "10", "km", "COUNT", "-3"),
    ("GEORADIUS", "nyc", *C, "10", "km", "COUNT", "x"),
    ("GEORADIUS", "nyc", *C, "10", "km", "COUNT", "2", "DESC"),
    ("GEORADIUS", "nyc", *C, "10", "km", "COUNT", "99", "WITHCOORD", "WITHHASH", "WITHDIST"),
    ("GEORADIUS", "nyc", *C, "10", "km", "withcoord", "count", "2", "asc", "desc"),
    ("GEORADIUS", "nyc", *C, "10", "mi"), ("GEORADIUS", "nyc", *C, "10000", "ft", "WITHDIST"),
    ("GEORADIUS", "nyc", *C, "10", "lightyears"), ("GEORADIUS", "nyc", *C, "-1", "km"),
    ("GEORADIUS", "nyc", *C, "ten", "km"), ("GEORADIUS", "nyc", "200", "0", "1", "km"),
    ("GEORADIUS", "nyc", "x", "0", "1", "km"), ("GEORADIUS", "nyc", *C, "0", "km", "WITHDIST"),
    ("GEORADIUS", "nyc", *C, "10", "km", "BOGUS"), ("GEORADIUS", "nyc", *C, "10", "km",
                                                      "FROMMEMBER", "jfk"),
    ("GEORADIUS", "nokey", *C, "10", "km"), ("GEORADIUS", "nokey", *C, "-1", "km"),
    ("GEORADIUS", "nokey", *C, "10", "km", "BOGUS"),
    ("GEORADIUSBYMEMBER", "nyc", "wtc one", "7", "km"),
    ("GEORADIUSBYMEMBER", "nyc", "wtc one", "7", "km", "WITHDIST", "WITHCOORD", "WITHHASH"),
    ("GEORADIUSBYMEMBER", "nyc", "nope", "7", "km"),
    ("GEORADIUSBYMEMBER", "nyc", "nope", "-7", "km"),
    ("GEORADIUSBYMEMBER", "nyc", "wtc one", "-7", "km"),
    ("GEORADIUSBYMEMBER", "nokey", "m", "bad", "units"),
    ("GEORADIUSBYMEMBER", "nokey", "m", "bad", "units", "BOGUS"),
    ("GEORADIUSBYMEMBER", "nokey", "m", "1", "km", "STORE", "d"),
    ("GEORADIUS_RO", "nyc", *C, "10", "km", "ASC", "WITHDIST"),
    ("GEORADIUS_RO", "nyc", *C, "10", "km", "STORE", "d"),
    ("GEORADIUSBYMEMBER_RO", "nyc", "jfk", "30", "km", "DESC", "COUNT", "2"),
    ("GEORADIUSBYMEMBER_RO", "nyc", "jfk", "30", "km", "STOREDIST", "d"),
    # GEOSEARCH
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYBOX", "6", "6", "km", "ASC"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYBOX", "6", "6", "km", "WITHDIST", "ASC"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "FROMMEMBER", "xxx", "BYBOX", "6", "6", "km"),
    ("GEOSEARCH", "nyc", "FROMMEMBER", "jfk", "FROMLONLAT", *C, "BYBOX", "6", "6", "km"),
    ("GEOSEARCH", "nyc", "FROMMEMBER", "jfk", "FROMMEMBER", "q4", "BYRADIUS", "5", "km"),
    ("GEOSEARCH", "nyc", "FROMMEMBER", "nope", "BYRADIUS", "5", "km"),
    ("GEOSEARCH", "nyc", "BYBOX", "3", "3", "km", "ASC", "DESC", "WITHHASH", "WITHDIST",
     "WITHCOORD"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYRADIUS", "3", "km", "BYBOX", "3", "3", "km"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYBOX", "3", "3", "km", "BYRADIUS", "3", "km"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYRADIUS", "3", "km", "BYRADIUS", "30", "km"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "ASC", "DESC", "WITHHASH", "WITHDIST"),
    ("geosearch", "nyc", "FROMLONLAT", *C, "ASC", "DESC", "WITHHASH", "WITHDIST"),
    ("GeoSearch", "nyc", "ASC", "DESC", "WITHHASH", "WITHDIST", "WITHCOORD"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYBOX", "6", "6", "km", "ASC", "STOREDIST"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYBOX", "6", "6", "km", "STORE", "d"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYBOX", "6", "-6", "km"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYBOX", "w", "6", "km"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYBOX", "6", "h", "km"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYBOX", "6", "6", "au"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYBOX", "6", "6"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", *C, "BYRADIUS", "6"),
    ("GEOSEARCH", "nyc", "FROMLONLAT", "-73.9", "BYRADIUS", "6", "km"),
    ("GEOSEARCH", "nyc", "FROMMEMBER", "wtc one", "BYBOX", "14", "14", "km"),
    ("GEOSEARCH", "nyc", "FROMMEMBER", "wtc one", "BYBOX", "14", "14", "km", "COUNT", "3",
     "WITHDIST"),
    ("GEOSEARCH", "nyc", "FROMMEMBER", "wtc one", "BYBOX", "14", "14", "km", "COUNT", "3",
     "ANY", "WITHDIST", "WITHHASH"),
    ("GEOSEARCH", "nyc", "FROMMEMBER", "wtc one", "BYBOX", "0", "0", "km", "WITHCOORD"),
    ("GEOSEARCH", "nyc", "FROMMEMBER", "wtc one", "BYRADIUS", "0", "m", "WITHCOORD"),
    ("GEOSEARCH", "nokey", "FROMMEMBER", "m", "BYRADIUS", "1", "km"),
    ("GEOSEARCH", "nokey", "FROMMEMBER", "m", "BYRADIUS", "-1", "km"),
    ("GEOSEARCH", "nokey", "FROMMEMBER", "m"),
    ("GEOSEARCH", "nokey", "BYRADIUS", "1", "km", "ANY"),
    ("GEOSEARCH", "nokey", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "ANY"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "2", "km"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "3000", "2", "km", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1e10", "km", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1e308", "1e308", "km", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "inf", "0", "km", "ASC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1e-300", "km"),
    ("GEOSEARCH", "Sicily", "fromlonlat", "15", "37", "byradius", "300", "KM", "withdist",
     "desc", "count", "2"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "300", "km\x00x",
     "desc\x00", "WITHDIST\x00?"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "300", "km", "COUNT", "2\x00"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "300", "km", "COUNT",
     "9223372036854775807", "DESC"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "300", "km", "COUNT",
     "9223372036854775808"),
    ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "300\x00", "km"),
    ("GEOADD", "wrap", "179.5", "36", "point1", "-179.5", "36", "point2"),
    ("GEOSEARCH", "wrap", "FROMLONLAT", "179", "37", "BYBOX", "400", "400", "km", "ASC"),
    ("GEOSEARCH", "wrap", "FROMLONLAT", "-179", "37", "BYBOX", "400", "400", "km", "ASC"),
    ("GEOADD", "k1", "-0.15307903289794921875", "85", "n1", "0.3515625",
     "85.00019260486917005437", "n2", "-4.95211958885192871094", "85", "n3", "11.25",
     "85.0511", "n4", "-45", "65.50900022111811438208", "n5", "90", "85.0511", "n6"),
    ("GEORADIUS", "k1", "0", "85", "1000", "km", "ASC", "WITHDIST"),
    ("GEORADIUS", "k1", "-0.15307903289794921875", "85", "500", "km", "WITHCOORD"),
    ("GEORADIUS", "k1", "0", "85", "50", "km", "ASC"),
    # STORE / STOREDIST / GEOSEARCHSTORE
    ("GEORADIUS", "Sicily", "13.361389", "38.115556", "50", "km", "STORE"),
    ("GEOSEARCHSTORE", "abc", "Sicily", "FROMLONLAT", "13.361389", "38.115556", "BYRADIUS",
     "50", "km", "STORE", "abc"),
    ("GEORADIUS", "Sicily", "13.361389", "38.115556", "50", "km", "STORE", "p2", "WITHDIST"),
    ("GEORADIUS", "Sicily", "13.361389", "38.115556", "50", "km", "STORE", "p2", "WITHHASH"),
    ("GEORADIUS", "Sicily", "13.361389", "38.115556", "50", "km", "STORE", "p2", "WITHCOORD"),
    ("GEOSEARCHSTORE", "p2", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "50", "km",
     "WITHDIST"),
    ("GEORADIUS", "Sicily", "13.361389", "38.115556", "500", "km", "STORE", "p2"),
    ("ZRANGE", "p2", "0", "-1", "WITHSCORES"),
    ("GEORADIUSBYMEMBER", "Sicily", "Catania", "500", "km", "STOREDIST", "p2"),
    ("ZRANGE", "p2", "0", "-1", "WITHSCORES"),
    ("GEORADIUS", "Sicily", "13.361389", "38.115556", "500", "km", "STOREDIST", "p3", "ASC",
     "COUNT", "1"),
    ("ZRANGE", "p3", "0", "-1", "WITHSCORES"),
    ("GEORADIUS", "Sicily", "13.361389", "38.115556", "500", "km", "STOREDIST", "p3", "DESC",
     "COUNT", "1"),
    ("ZRANGE", "p3", "0", "-1", "WITHSCORES"),
    ("GEORADIUS", "Sicily", "13.361389", "38.115556", "500", "mi", "STORE", "p4", "STOREDIST",
     "p5"),
    ("EXISTS", "p4", "p5"), ("ZRANGE", "p5", "0", "-1", "WITHSCORES"),
    ("GEOSEARCHSTORE", "p6", "Sicily", "FROMLONLAT", "13.361389", "38.115556", "BYRADIUS",
     "500", "km"),
    ("ZRANGE", "p6", "0", "-1", "WITHSCORES"),
    ("GEOSEARCHSTORE", "p6", "Sicily", "FROMLONLAT", "13.361389", "38.115556", "BYBOX",
     "500", "500", "km", "STOREDIST", "COUNT", "2", "DESC"),
    ("ZRANGE", "p6", "0", "-1", "WITHSCORES"),
    ("GEOSEARCHSTORE", "p6", "Sicily", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"),
    ("EXISTS", "p6"),
    ("GEOSEARCHSTORE", "p6", "Sicily", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"),
    ("GEORADIUS", "Sicily", "0", "0", "1", "km", "STORE", "p5"), ("EXISTS", "p5"),
    ("SET", "p7", "x", "EX", "100"),
    ("GEOSEARCHSTORE", "p7", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "m"),
    ("TTL", "p7"), ("TYPE", "p7"), ("GEOSEARCHSTORE", "p7", "nokey", "FROMMEMBER", "Palermo",
                                     "BYRADIUS", "1", "m"),
    ("EXISTS", "p7"),
    ("GEOSEARCHSTORE", "Sicily", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "200", "km",
     "STOREDIST"),
    ("ZRANGE", "Sicily", "0", "-1", "WITHSCORES"),
    # wrong types and arity
    ("SET", "str", "x"), ("GEOADD", "str", "1", "1", "a"), ("GEOADD", "str", "1", "100", "a"),
    ("GEOPOS", "str", "a"), ("GEOHASH", "str", "a"), ("GEODIST", "str", "a", "b"),
    ("GEODIST", "str", "a", "b", "yd"), ("GEORADIUS", "str", "1", "1", "1", "km"),
    ("GEORADIUS", "str", "1", "1000", "1", "km"),
    ("GEORADIUSBYMEMBER", "str", "a", "1", "km"),
    ("GEOSEARCH", "str", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km"),
    ("GEOSEARCHSTORE", "d", "str", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km"),
    ("GEOSEARCHSTORE", "str", "nyc", "FROMLONLAT", *C, "BYRADIUS", "10", "km"),
    ("TYPE", "str"), ("GEOADD", "k"), ("GEOADD", "k", "1", "2"), ("GEOPOS",), ("GEOHASH",),
    ("GEODIST", "k", "a"), ("GEORADIUS", "k", "1", "2", "3"), ("GEORADIUSBYMEMBER", "k", "a",
                                                                "1"),
    ("GEOSEARCH", "k", "FROMMEMBER", "a", "BYRADIUS", "1"),
    ("GEOSEARCHSTORE", "d", "k", "FROMMEMBER", "a", "BYRADIUS", "1"),
    # COMMAND GETKEYS (GEORADIUS's keyword key specs)
    ("COMMAND", "GETKEYS", "GEORADIUS", "k", "1", "2", "3", "km", "STORE", "d"),
    ("COMMAND", "GETKEYS", "GEORADIUS", "k", "1", "2", "3", "km", "STORE", "a", "STOREDIST",
     "b"),
    ("COMMAND", "GETKEYS", "GEORADIUS", "k", "1", "2", "3", "km", "ASC", "STORE"),
    ("COMMAND", "GETKEYS", "GEORADIUSBYMEMBER", "k", "m", "3", "km", "storedist", "d"),
    ("COMMAND", "GETKEYS", "GEORADIUSBYMEMBER", "k", "store", "3", "km", "x"),
    ("COMMAND", "GETKEYS", "GEOSEARCHSTORE", "d", "s", "FROMMEMBER", "a", "BYRADIUS", "1", "m"),
    ("COMMAND", "GETKEYS", "GEOADD", "k", "1", "2", "m"),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_cases_byte_for_byte(pair) -> None:
    for argv in CASES:
        pair.check(*argv)


def _points(rng: random.Random, n: int) -> list[str]:
    """GEOADD arguments: n members around a few centres, many sharing a position (ties)."""
    spots = [(rng.uniform(-1, 1), rng.uniform(-1, 1)) for _ in range(25)]
    args: list[str] = []
    for i in range(n):
        if rng.random() < 0.5:
            lon, lat = rng.choice(spots)
        else:
            lon, lat = rng.uniform(-2, 2), rng.uniform(-2, 2)
        args += [f"{lon:.6f}", f"{lat:.6f}", f"m{i}"]
    return args


@pytest.mark.parametrize("proto", [2, 3])
def test_many_points_and_ties(pair) -> None:
    rng = random.Random(1234)
    pair.check("GEOADD", "pts", *_points(rng, 400))
    pair.check("ZRANGE", "pts", "0", "-1", "WITHSCORES")
    for _ in range(60):
        lon, lat = f"{rng.uniform(-1, 1):.5f}", f"{rng.uniform(-1, 1):.5f}"
        by = rng.choice([("BYRADIUS", str(rng.choice([20, 50, 120, 400])), "km"),
                         ("BYBOX", str(rng.choice([30, 90, 300])), str(rng.choice([40, 200])),
                          "km")])
        opts: list[str] = []
        if rng.random() < 0.7:
            opts += ["COUNT", str(rng.choice([1, 2, 5, 17, 60, 1000]))]
            if rng.random() < 0.3:
                opts.append("ANY")
        opts += rng.sample(["ASC", "DESC", "WITHDIST", "WITHHASH", "WITHCOORD"], 2)
        src = rng.choice([("FROMLONLAT", lon, lat), ("FROMMEMBER", f"m{rng.randrange(400)}")])
        pair.check("GEOSEARCH", "pts", *src, *by, *opts)
        store = [o for o in opts if not o.startswith("WITH")]
        pair.check("GEOSEARCHSTORE", "dst", "pts", *src, *by, *store, "STOREDIST")
        pair.check("ZRANGE", "dst", "0", "-1", "WITHSCORES")
    pair.check("GEORADIUSBYMEMBER", "pts", "m7", "300", "km", "WITHDIST", "COUNT", "30", "DESC")
    pair.check("GEORADIUS", "pts", "0", "0", "100", "km", "COUNT", "100", "ASC", "WITHHASH")


# Positions cluster in a small area (searches find things, and shared positions make ties),
# with a few at the edges of the ranges; bad arguments are drawn now and then.
SPOTS = ["0", "0.1", "-0.1", "0.05", "0.2", "-0.25", "0.3"]
NEAR = st.one_of(st.sampled_from(SPOTS), st.floats(-0.5, 0.5).map(lambda f: f"{f:.5f}"))
LONS = st.one_of(NEAR, NEAR, NEAR, st.sampled_from(["179.9", "-179.9", "180"]))
LATS = st.one_of(NEAR, NEAR, NEAR, st.sampled_from(["85.05112878", "-85", "60"]))
MEMBERS = st.one_of(st.sampled_from([f"m{i}" for i in range(6)]),
                    st.sampled_from([f"m{i}" for i in range(20)]))
POINT = st.tuples(LONS, LATS, MEMBERS)
BAD_POINT = st.tuples(st.sampled_from(["181", "0", "x"]), st.sampled_from(["-86", "0"]),
                      MEMBERS)
KEYS = st.sampled_from(["g0", "g0", "g1"])
UNITS = st.one_of(st.just("km"), st.just("km"), st.sampled_from(["m", "mi", "ft", "KM"]),
                  st.just("yd"))
GOOD_DIST = st.sampled_from(["0", "1", "5", "10", "20", "30", "50", "100", "1000", "20000",
                             "15.5", "1e-3"])
DIST = st.one_of(GOOD_DIST, GOOD_DIST, GOOD_DIST, st.sampled_from(["-1", "x", "inf"]))
SHAPE = st.one_of(
    st.tuples(st.just("BYRADIUS"), DIST, UNITS),
    st.tuples(st.just("BYBOX"), DIST, DIST, UNITS),
)
FROM = st.one_of(st.tuples(st.just("FROMMEMBER"), MEMBERS),
                 st.tuples(st.just("FROMLONLAT"), LONS, LATS))
GOOD_OPTION = st.one_of(
    st.sampled_from([("ASC",), ("DESC",), ("WITHDIST",), ("WITHHASH",), ("WITHCOORD",)]),
    st.tuples(st.just("COUNT"), st.sampled_from(["1", "2", "3", "4", "7"])),
    st.tuples(st.just("COUNT"), st.sampled_from(["1", "3", "5"]), st.just("ANY")),
)
OPTION = st.one_of(GOOD_OPTION, GOOD_OPTION, GOOD_OPTION, GOOD_OPTION,
                   st.sampled_from([("ANY",), ("BOGUS",), ("COUNT", "0")]))
OPTIONS = st.lists(OPTION, max_size=4).map(lambda os: tuple(a for o in os for a in o))

SEARCH = st.one_of(
    st.tuples(st.just("GEOSEARCH"), KEYS, FROM, SHAPE, OPTIONS),
    st.tuples(st.just("GEOSEARCHSTORE"), KEYS, KEYS, FROM, SHAPE, OPTIONS,
              st.sampled_from([(), ("STOREDIST",)])),
    st.tuples(st.sampled_from(["GEORADIUS", "GEORADIUS_RO"]), KEYS, LONS, LATS, DIST, UNITS,
              OPTIONS),
    st.tuples(st.sampled_from(["GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO"]), KEYS, MEMBERS,
              DIST, UNITS, OPTIONS),
    st.tuples(st.just("GEORADIUS"), KEYS, LONS, LATS, DIST, UNITS, OPTIONS,
              st.sampled_from(["STORE", "STOREDIST"]), KEYS),
    st.tuples(st.just("GEORADIUSBYMEMBER"), KEYS, MEMBERS, DIST, UNITS, OPTIONS,
              st.sampled_from(["STORE", "STOREDIST"]), KEYS),
).map(lambda t: tuple(a for p in t for a in (p if isinstance(p, tuple) else (p,))))

OTHER = st.one_of(
    st.tuples(st.just("GEOADD"), KEYS, st.lists(st.sampled_from(["NX", "XX", "CH"]),
                                                 max_size=2),
              st.lists(st.one_of(POINT, POINT, POINT, BAD_POINT), min_size=1, max_size=6))
    .map(lambda t: ("GEOADD", t[1], *t[2], *(a for p in t[3] for a in p))),
    st.tuples(st.just("ZADD"), KEYS, st.sampled_from(["-1", "1.5", "3479099956230698", "inf",
                                                      "2251799813685248"]), MEMBERS),
    st.tuples(st.sampled_from(["GEOPOS", "GEOHASH"]), KEYS, st.lists(MEMBERS, max_size=4))
    .map(lambda t: (t[0], t[1], *t[2])),
    st.tuples(st.just("GEODIST"), KEYS, MEMBERS, MEMBERS, st.lists(UNITS, max_size=1))
    .map(lambda t: ("GEODIST", t[1], t[2], t[3], *t[4])),
    st.tuples(st.just("ZRANGE"), KEYS, st.just("0"), st.just("-1"), st.just("WITHSCORES")),
    st.tuples(st.just("DEL"), KEYS),
)
COMMAND = st.one_of(SEARCH, SEARCH, OTHER)
SETUP = st.lists(st.tuples(LONS, LATS), min_size=6, max_size=20)   # members m0, m1, ...


@sequence_settings(200)
@given(proto=PROTOS, g0=SETUP, g1=SETUP, cmds=st.lists(COMMAND, min_size=3, max_size=20))
def test_random_sequences(pairs, proto, g0, g1, cmds) -> None:
    setup = [("GEOADD", k, *(a for i, (x, y) in enumerate(g) for a in (x, y, f"m{i}")))
             for k, g in (("g0", g0), ("g1", g1))]
    run_sequence(pairs[proto], [*setup, *cmds],
                 final=[("ZRANGE", k, "0", "-1", "WITHSCORES") for k in ("g0", "g1")])


def test_propagation(tapped_redis) -> None:
    check_propagation(tapped_redis.port, [
        SICILY, ("GEOADD", "Sicily", "CH", "XX", "13.361389", "38.115556", "Palermo", "1", "1",
                 "nope"),
        ("GEOADD", "Sicily", "NX", "13.361389", "38.115556", "Palermo"),
        ("GEOADD", "Sicily", "13.361389", "38.115556", "Palermo"),
        ("GEOADD", "Sicily", "ch", "13.5", "38.1", "Palermo", "0", "0", "zero"),
        ("GEOADD", "Sicily", "1", "100", "bad"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "d1"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "ASC", "COUNT", "2", "STOREDIST", "d2"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km"),
        ("GEORADIUS", "Sicily", "0", "0", "1", "km", "STORE", "d1"),
        ("GEORADIUS", "Sicily", "0", "0", "1", "km", "STORE", "d1"),
        ("GEORADIUSBYMEMBER", "Sicily", "Catania", "500", "km", "STOREDIST", "d3"),
        ("GEORADIUSBYMEMBER", "none", "Catania", "500", "km", "STORE", "d3"),
        ("GEOSEARCHSTORE", "d4", "Sicily", "FROMMEMBER", "Palermo", "BYBOX", "400", "400", "km"),
        ("GEOSEARCHSTORE", "d4", "none", "FROMMEMBER", "Palermo", "BYBOX", "400", "400", "km"),
        ("GEOSEARCHSTORE", "d4", "none", "FROMMEMBER", "Palermo", "BYBOX", "400", "400", "km"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "km"),
        ("ZRANGE", "d2", "0", "-1", "WITHSCORES"),
    ])


def test_propagation_in_multi(tapped_redis) -> None:
    """Inside MULTI the rewritten GEOADD and the STORE forms reach replicas in the block."""
    cmds = [SICILY, ("MULTI",), ("GEOADD", "Sicily", "XX", "CH", "15", "37", "Catania"),
            ("GEORADIUSBYMEMBER", "Sicily", "Catania", "100", "km", "STORE", "d5"),
            ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "100", "km"),
            ("GEOADD", "Sicily", "1", "100", "bad"), ("EXEC",)]
    with PropagationTaps(tapped_redis.port) as taps:
        want_replies = [taps.data.call(*argv) for argv in cmds]
        want = taps.tap.next_commands(taps.data)
        got_replies: list[bytes] = []
        got: list[list[bytes]] = []
        for argv in cmds:
            reply, fed = taps.pyrepl(*argv)
            got_replies.append(reply)
            got += fed
    assert got_replies == want_replies
    assert same_propagation(got, want), f"pyrepl propagated {got}, redis {want}"
