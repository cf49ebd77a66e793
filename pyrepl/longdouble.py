"""Long doubles as Redis computes with them on x86-64 (a leaf module: commands and the
blocking timeouts use it).

Theory of operation: :func:`parse_long_double` is ``string2ld`` (``strtold`` over the whole
string, then Redis's rejections), :func:`round_long_double` the x87 80-bit ``long double``
rounding and :func:`format_long_double_human` ``ld2string(LD_STR_HUMAN)`` (``%.17Lf``, trailing
zeros removed), which INCRBYFLOAT, HINCRBYFLOAT and the blocking commands' timeouts compute
with. Python floats are too narrow, so a long double is held as an exact ``Fraction``, rounded
by hand to a 64-bit significand (ties to even) with the format's exponent range, subnormals
included. ``strtold`` rounds the decimal text correctly once; Redis then rejects what
``strtold`` flags with ERANGE as infinite or zero.
"""

from __future__ import annotations

import re
from fractions import Fraction

C_SPACE = b" \t\n\v\f\r"  # isspace() in the C locale

LongDouble = Fraction  # a finite x87 extended value, held exactly

_SUBNORMAL_QUANTUM_EXP = -16445   # the smallest subnormal is 2**-16445
_LD_OVERFLOW = 1 << 16384         # values that round to this or more are infinite
_MAX_LONG_DOUBLE_CHARS = 5 * 1024
_LD_DEC = re.compile(rb"([+-]?)(?:([0-9]+)(?:\.([0-9]*))?|\.([0-9]+))(?:[eE]([+-]?[0-9]+))?\Z")
_LD_HEX = re.compile(rb"([+-]?)0[xX](?:([0-9a-fA-F]+)(?:\.([0-9a-fA-F]*))?|\.([0-9a-fA-F]+))"
                     rb"(?:[pP]([+-]?[0-9]+))?\Z")
_LD_INF = re.compile(rb"([+-]?)(?:inf|infinity)\Z", re.IGNORECASE)
_CHUNK = 3000  # digits per int() call: stays under Python's int/str conversion limit
_CHUNK_POW = 10 ** _CHUNK


def _int_from_digits(s: bytes) -> int:
    if len(s) <= _CHUNK:
        return int(s)
    cut = len(s) - _CHUNK
    return _int_from_digits(s[:cut]) * _CHUNK_POW + int(s[cut:])


def _int_to_digits(n: int) -> str:
    if n < _CHUNK_POW:
        return str(n)
    hi, lo = divmod(n, _CHUNK_POW)
    return _int_to_digits(hi) + str(lo).zfill(_CHUNK)


def _exponent(text: bytes | None) -> int:
    """An exponent's value, saturated (strtold saturates absurd exponents the same way)."""
    if not text:
        return 0
    neg = text[:1] == b"-"
    digits = text.lstrip(b"+-").lstrip(b"0")  # "e0", "e-00": no digit left, the value is 0
    v = int(digits or b"0") if len(digits) <= 12 else 10 ** 12
    return -v if neg else v


def _number_parts(m: re.Match[bytes]) -> tuple[bytes, bytes, int, bytes | None]:
    """A _LD_DEC / _LD_HEX match as (sign, its digits without leading zeros, how many of them
    follow the point, exponent text)."""
    sign, ipart, fpart, fonly, exp = m.groups()
    if fonly is not None:
        ipart, fpart = b"", fonly
    fpart = fpart or b""
    return sign, (ipart + fpart).lstrip(b"0"), len(fpart), exp


def round_long_double(q: Fraction) -> LongDouble | None:
    """Round an exact value to the nearest x87 extended double (ties to even). None: inf."""
    if q == 0:
        return Fraction(0)
    p, r = q.numerator, q.denominator
    neg = p < 0
    if neg:
        p = -p
    e = p.bit_length() - r.bit_length()  # 2**(e-1) < p/r < 2**(e+1)
    if (p < (r << e)) if e >= 0 else ((p << -e) < r):
        e -= 1
    shift = e - 63  # quantum of a 64-bit significand
    if shift < _SUBNORMAL_QUANTUM_EXP:
        shift = _SUBNORMAL_QUANTUM_EXP
    if shift >= 0:
        m, rem = divmod(p, r << shift)
        d = r << shift
    else:
        m, rem = divmod(p << -shift, r)
        d = r
    twice = rem << 1
    if twice > d or (twice == d and m & 1):
        m += 1
    if m == 0:
        return Fraction(0)
    v = Fraction(m << shift) if shift >= 0 else Fraction(m, 1 << -shift)
    if v >= _LD_OVERFLOW:
        return None
    return -v if neg else v


def parse_long_double(s: bytes) -> LongDouble | float | None:
    """Redis's string2ld: an exact (rounded) value, ``±inf`` as a float, or None if invalid.

    Like strtold followed by Redis's checks: no leading space, the whole string consumed, no
    nan, no overflow to infinity and no underflow of a non-zero number to zero.
    """
    if not s or len(s) >= _MAX_LONG_DOUBLE_CHARS or s[0] in C_SPACE:
        return None
    m = _LD_DEC.match(s)
    if m is not None:
        sign, digits, nfrac, exp = _number_parts(m)
        if not digits:
            return Fraction(0)
        e10 = _exponent(exp) - nfrac
        if len(digits) - 1 + e10 > 4933:
            return None  # overflow (the largest long double is about 1.19e4932)
        if len(digits) + e10 < -4952:
            return None  # underflow to zero (the smallest subnormal is about 3.6e-4951)
        mant = _int_from_digits(digits)
        q = Fraction(mant * 10 ** e10) if e10 >= 0 else Fraction(mant, 10 ** -e10)
    else:
        m = _LD_HEX.match(s)
        if m is not None:
            sign, hexdigits, nfrac, exp = _number_parts(m)
            if not hexdigits:
                return Fraction(0)
            mant = int(hexdigits, 16)
            e2 = _exponent(exp) - 4 * nfrac
            if mant.bit_length() - 1 + e2 > 16384:
                return None
            if mant.bit_length() + e2 < -16447:
                return None
            q = Fraction(mant << e2) if e2 >= 0 else Fraction(mant, 1 << -e2)
        else:
            m = _LD_INF.match(s)
            if m is None:
                return None
            return float("-inf") if m.group(1) == b"-" else float("inf")
    v = round_long_double(q)
    if v is None or v == 0:
        return None  # ERANGE: overflow to HUGE_VAL, or a non-zero value rounded to zero
    return -v if sign == b"-" else v


def format_long_double_human(v: LongDouble) -> bytes:
    """``ld2string(LD_STR_HUMAN)``: ``%.17Lf`` (ties to even), trailing zeros trimmed."""
    neg = v < 0
    if neg:
        v = -v
    d = v.denominator
    q, rem = divmod(v.numerator * 10 ** 17, d)
    twice = rem << 1
    if twice > d or (twice == d and q & 1):
        q += 1
    digits = _int_to_digits(q).rjust(18, "0")
    ipart, fpart = digits[:-17], digits[-17:].rstrip("0")
    text = ipart + "." + fpart if fpart else ipart
    if neg and text != "0":
        text = "-" + text
    return text.encode()


# -- options and ranges ---------------------------------------------------------------------
