/* geohash.c's bit interleaving, shared by _hot.c (GEOADD's score) and _geo.c (a search's
   cells); geohash.py's interleave64 is the reference. */
#ifndef PYREPL_GEOHASH_H
#define PYREPL_GEOHASH_H

#include <stdint.h>

/* x in the even bits, y in the odd ones */
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

#endif
