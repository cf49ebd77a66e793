/* geohash.c's encoding on Redis's WGS84 ranges, shared by _hot.c (GEOADD's score) and _geo.c
   (a search's cells, a score's decode); pyrepl/keyspace/geohash.py is the reference. */
#ifndef PYREPL_GEOHASH_H
#define PYREPL_GEOHASH_H

#include <stdint.h>

#define GEO_LAT_MIN (-85.05112878)
#define GEO_LAT_MAX 85.05112878
#define GEO_LONG_MIN (-180.0)
#define GEO_LONG_MAX 180.0

/* geohash.interleave64: x in the even bits, y in the odd ones */
static inline uint64_t
interleave64(uint32_t xlo, uint32_t ylo)
{
    static const uint64_t B[] = {0x5555555555555555ULL, 0x3333333333333333ULL,
                                 0x0F0F0F0F0F0F0F0FULL, 0x00FF00FF00FF00FFULL,
                                 0x0000FFFF0000FFFFULL};
    static const unsigned S[] = {1, 2, 4, 8, 16};
    uint64_t x = xlo, y = ylo;
    for (int k = 4; k >= 0; k--) {
        x = (x | (x << S[k])) & B[k];
        y = (y | (y << S[k])) & B[k];
    }
    return x | (y << 1);
}

/* geohash.deinterleave64: the even bits in the low word, the odd ones in the high word */
static inline uint64_t
deinterleave64(uint64_t v)
{
    static const uint64_t B[] = {0x5555555555555555ULL, 0x3333333333333333ULL,
                                 0x0F0F0F0F0F0F0F0FULL, 0x00FF00FF00FF00FFULL,
                                 0x0000FFFF0000FFFFULL, 0x00000000FFFFFFFFULL};
    static const unsigned S[] = {0, 1, 2, 4, 8, 16};
    uint64_t x = v, y = v >> 1;
    for (int k = 0; k < 6; k++) {
        x = (x | (x >> S[k])) & B[k];
        y = (y | (y >> S[k])) & B[k];
    }
    return x | (y << 32);
}

/* geohash.encode on WGS84's ranges (geohashEncodeWGS84 at any step): the cell's bits in *bits,
   1; 0 where the Python answers None (a step out of 1..32, a position out of the ranges) */
static inline int
geohash_encode(double lon, double lat, int step, uint64_t *bits)
{
    if (step > 32 || step == 0 || lon > GEO_LONG_MAX || lon < GEO_LONG_MIN ||
            lat > GEO_LAT_MAX || lat < GEO_LAT_MIN)
        return 0;
    double lat_offset = (lat - GEO_LAT_MIN) / (GEO_LAT_MAX - GEO_LAT_MIN);
    double long_offset = (lon - GEO_LONG_MIN) / (GEO_LONG_MAX - GEO_LONG_MIN);
    double scale = (double)(1ULL << step);
    lat_offset *= scale;
    long_offset *= scale;
    /* (uint32_t)x as x86-64 does it: cvttsd2si's low 32 bits (geohash._uint32) */
    *bits = interleave64((uint32_t)(int64_t)lat_offset, (uint32_t)(int64_t)long_offset);
    return 1;
}

#endif
