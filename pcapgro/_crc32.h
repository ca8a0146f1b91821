/* zlib's CRC-32 (IEEE 802.3, reflected 0xEDB88320) for the compiled
 * modules: the k= field of a restore record (restore.record_crc: written by
 * _native.c through _annotate.h, checked by _restore.c) and the flow hash
 * of the GRO loop (zlib.crc32 of addresses and ports).  Slicing-by-8:
 * crc_table[k][b] is the CRC of byte b followed by k zero bytes, eight
 * input bytes a step (the byte-wise loop was 2/3 of restore(), and ~5% of
 * a merge to annotated pcapng).  Each module including this has its own
 * table, filled once by crc32_init at import. */
#ifndef PCAPGRO_CRC32_H
#define PCAPGRO_CRC32_H

#include <stddef.h>
#include <stdint.h>

static uint32_t crc_table[8][256];

static void crc32_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            crc_table[k][n] = (crc_table[k - 1][n] >> 8)
                              ^ crc_table[0][crc_table[k - 1][n] & 0xFF];
}

static inline uint32_t crc32_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* zlib.crc32(p[:n], crc): crc 0 to start */
static uint32_t crc32_cont(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n >= 8) {
        uint32_t a = crc ^ crc32_le32(p), b = crc32_le32(p + 4);
        crc = crc_table[7][a & 0xFF] ^ crc_table[6][(a >> 8) & 0xFF]
              ^ crc_table[5][(a >> 16) & 0xFF] ^ crc_table[4][a >> 24]
              ^ crc_table[3][b & 0xFF] ^ crc_table[2][(b >> 8) & 0xFF]
              ^ crc_table[1][(b >> 16) & 0xFF] ^ crc_table[0][b >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#endif
