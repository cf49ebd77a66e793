"""pyrepl.keyspace.glob against a step-by-step model of Redis 7.0's stringmatchlen.

The model below walks the pattern byte by byte the way util.c does (pointer + remaining
length, the recursive star, signed chars, glibc tolower), so it is slow but obviously
faithful; the compiled matcher must agree with it on every input. The interop test
(tests/interop/test_diff_keys.py) also compares KEYS/SCAN MATCH with the real server.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.keyspace.glob import compile_pattern, stringmatch


def _sc(b: int) -> int:
    return b - 256 if b >= 128 else b


def _lower(x: int) -> int:
    if x < -1:  # glibc's table maps -128..-2 like 128..254; -1 is EOF and stays -1
        return x + 256
    return x + 32 if 65 <= x <= 90 else x


def model(pattern: bytes, string: bytes, nocase: bool = False) -> bool:
    pat = pattern + b"\0"  # sds strings are NUL-terminated; the C code peeks at it
    skip = [False]

    def at(i: int) -> int:
        return pat[i] if i < len(pat) else 0

    def impl(p: int, plen: int, s: int, slen: int) -> bool:
        while plen and slen:
            ch = pat[p]
            if ch == ord("*"):
                while plen and at(p + 1) == ord("*"):
                    p += 1
                    plen -= 1
                if plen == 1:
                    return True
                while slen:
                    if impl(p + 1, plen - 1, s, slen):
                        return True
                    if skip[0]:
                        return False
                    s += 1
                    slen -= 1
                skip[0] = True
                return False
            elif ch == ord("?"):
                s += 1
                slen -= 1
            elif ch == ord("["):
                p += 1
                plen -= 1
                neg = at(p) == ord("^")
                if neg:
                    p += 1
                    plen -= 1
                match = False
                while True:
                    if at(p) == ord("\\") and plen >= 2:
                        p += 1
                        plen -= 1
                        if pat[p] == string[s]:
                            match = True
                    elif at(p) == ord("]"):
                        break
                    elif plen == 0:
                        p -= 1
                        plen += 1
                        break
                    elif plen >= 3 and at(p + 1) == ord("-"):
                        start, end, c = _sc(pat[p]), _sc(pat[p + 2]), _sc(string[s])
                        if start > end:
                            start, end = end, start
                        if nocase:
                            start, end, c = _lower(start), _lower(end), _lower(c)
                        p += 2
                        plen -= 2
                        if start <= c <= end:
                            match = True
                    else:
                        if nocase:
                            if _lower(_sc(pat[p])) == _lower(_sc(string[s])):
                                match = True
                        elif pat[p] == string[s]:
                            match = True
                    p += 1
                    plen -= 1
                if neg:
                    match = not match
                if not match:
                    return False
                s += 1
                slen -= 1
            else:
                if ch == ord("\\") and plen >= 2:
                    p += 1
                    plen -= 1
                if nocase:
                    if _lower(_sc(pat[p])) != _lower(_sc(string[s])):
                        return False
                elif pat[p] != string[s]:
                    return False
                s += 1
                slen -= 1
            p += 1
            plen -= 1
            if slen == 0:
                while at(p) == ord("*"):
                    p += 1
                    plen -= 1
                break
        return plen == 0 and slen == 0

    return impl(0, len(pattern), 0, len(string))


CASES = [
    (b"*", b"", False), (b"", b"", True), (b"*", b"a", True), (b"a*", b"a", True),
    (b"h?llo", b"hello", True), (b"h*llo", b"hllo", True), (b"h[ae]llo", b"hallo", True),
    (b"h[^e]llo", b"hello", False), (b"h[a-b]llo", b"hbllo", True), (b"h[b-a]llo", b"hbllo", True),
    (b"[]", b"a", False), (b"[^]", b"a", True), (b"[^]", b"]", True), (b"[", b"[", False),
    (b"[^", b"x", True), (b"[a-]", b"]", True), (b"[a-]", b"-", False), (b"[abc", b"c", True),
    (b"\\*", b"*", True), (b"\\*", b"a", False), (b"a\\", b"a\\", True), (b"[\\]]", b"]", True),
    (b"[a-\xff]", b"\x80", False), (b"[a-\xff]", b"\xff", True), (b"[a-\xff]", b"A", True),
    (b"*a*a*a*a*a*a*a*b", b"a" * 200, False), (b"**", b"", False), (b"a**b", b"ab", True),
]


def test_known_cases() -> None:
    for pattern, s, expected in CASES:
        assert model(pattern, s) is expected, (pattern, s)
        assert stringmatch(pattern, s) is expected, (pattern, s)


def test_nocase() -> None:
    assert stringmatch(b"FOO*", b"foobar", nocase=True)
    assert not stringmatch(b"FOO*", b"foobar")
    assert stringmatch(b"[A-C]x", b"bX", nocase=True)
    assert not stringmatch(b"[\\A]", b"a", nocase=True)  # escaped class member: exact
    assert stringmatch(b"\\A", b"a", nocase=True)  # escaped literal outside a class: folds


def test_pathological_pattern_is_fast() -> None:
    m = compile_pattern(b"*a" * 30 + b"*b")
    assert not m(b"a" * 5000)


ALPHABET = b"ab*?[]^-\\\x00\x80\xffAB"
pattern_st = st.lists(st.sampled_from(list(ALPHABET)), max_size=10).map(bytes)
subject_st = st.lists(st.sampled_from(list(b"ab-]^[*\\?\x00\x80\xffAB")), max_size=8).map(bytes)


@settings(max_examples=1500, deadline=None)
@given(pattern_st, subject_st, st.booleans())
def test_matches_model(pattern: bytes, s: bytes, nocase: bool) -> None:
    assert stringmatch(pattern, s, nocase) is model(pattern, s, nocase), (pattern, s, nocase)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=12), st.binary(max_size=12), st.booleans())
def test_matches_model_any_bytes(pattern: bytes, s: bytes, nocase: bool) -> None:
    assert stringmatch(pattern, s, nocase) is model(pattern, s, nocase), (pattern, s, nocase)


def test_nesting_limit_as_redis() -> None:
    """stringmatchlen gives up past 1000 nested stars (keyspace.tcl's "very long nested
    loops"): 1000 star groups before the pattern's end may match, 1001 never do; a final star
    does not nest. Redis 7.0.15 answers the same for these (KEYS against a 2000-byte key)."""
    subject = b"a" * 2000
    assert stringmatch(b"*?" * 1000, subject)
    assert stringmatch(b"*?" * 1000 + b"*", subject)
    assert not stringmatch(b"*?" * 1001, subject)
    assert not stringmatch(b"*?" * 1001 + b"*", subject)
    assert not stringmatch(b"*?" * 50000, b"a" * 50000)
