/* pcapng output of the compiled GRO loop: text buffers, the restore
 * record's pieces, EPB options (included by _native.c, one translation
 * unit; pure functions of their arguments, no engine state).
 *
 * The Python twins, which stay the reference:
 *   restore record     pcapgro/restore.py encode_rows, _rows_py, _diffs,
 *                      record_crc; pcapgro/gro/annotate.py passed, single,
 *                      aggregate, restore_record
 *   EPB and options    pcapgro/capture/pcapng.py PcapngWriter._packet_meta,
 *                      _options (pcapng spec: opt_comment 1, epb_flags 2,
 *                      opt_endofopt 0, every value padded to 32 bits)
 * tests/test_gro_cfast.py checks the bytes against the Python engine's.
 */
#ifndef PCAPGRO_ANNOTATE_H
#define PCAPGRO_ANNOTATE_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#define TAG_RESTORE "pcapgro-restore v1 "      /* restore.TAG */
#define OPT_COMMENT 1
#define OPT_FLAGS 2
#define EPB_FLAG_TSO (1u << 11)                 /* record.EPB_FLAG_TSO */
#define BT_EPB 6

/* a growable byte buffer (PyMem: the GIL is held) */
typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static int sb_grow(sbuf *b, size_t more)
{
    if (b->n + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more)
        cap *= 2;
    char *q = PyMem_Realloc(b->p, cap);
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = q;
    b->cap = cap;
    return 0;
}

static int sb_put(sbuf *b, char c)
{
    if (sb_grow(b, 1) < 0)
        return -1;
    b->p[b->n++] = c;
    return 0;
}

static int sb_mem(sbuf *b, const void *d, size_t n)
{
    if (sb_grow(b, n) < 0)
        return -1;
    memcpy(b->p + b->n, d, n);
    b->n += n;
    return 0;
}

static int sb_str(sbuf *b, const char *s)
{
    return sb_mem(b, s, strlen(s));
}

static const char HEXD[] = "0123456789abcdef";

static int sb_hex(sbuf *b, const uint8_t *d, Py_ssize_t n)
{
    if (sb_grow(b, 2 * (size_t)n) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        b->p[b->n++] = HEXD[d[i] >> 4];
        b->p[b->n++] = HEXD[d[i] & 15];
    }
    return 0;
}

/* v in decimal, then the character end (if not 0); by hand: glibc's
 * snprintf cost ~300 ns a number here, most of the row encoder's time */
static int sb_ll(sbuf *b, long long v, char end)
{
    char tmp[24];
    int k = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    if (sb_grow(b, 24) < 0)
        return -1;
    do {
        tmp[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        b->p[b->n++] = '-';
    while (k)
        b->p[b->n++] = tmp[--k];
    if (end)
        b->p[b->n++] = end;
    return 0;
}

/* restore._diffs: the runs "off:hex" (joined by '/') in which header d
 * differs from ref, nothing when identical, "*hex" (all of d) when the
 * lengths differ */
static int sb_diffs(sbuf *b, const uint8_t *d, Py_ssize_t dn, const uint8_t *r, Py_ssize_t rn)
{
    if (dn != rn)
        return sb_put(b, '*') < 0 ? -1 : sb_hex(b, d, dn);
    int first = 1;
    Py_ssize_t j = 0;
    while (j < rn) {
        if (d[j] == r[j]) {
            j++;
            continue;
        }
        Py_ssize_t e = j + 1;
        while (e < rn && d[e] != r[e])
            e++;
        if (!first && sb_put(b, '/') < 0)
            return -1;
        first = 0;
        if (sb_ll(b, (long long)j, ':') < 0 || sb_hex(b, d + j, e - j) < 0)
            return -1;
        j = e;
    }
    return 0;
}

/* one row of a restore record's s= field (restore._rows_py): input index
 * and time offsets from the first packet, payload length, header diffs
 * against the first packet's header h0; ';' before every row but the first */
static int sb_row(sbuf *b, int first, long long di, long long dt, uint32_t len,
                  const uint8_t *h, Py_ssize_t hn, const uint8_t *h0, Py_ssize_t h0n)
{
    if (!first && sb_put(b, ';') < 0)
        return -1;
    if (sb_ll(b, di, ',') < 0 || sb_ll(b, dt, ',') < 0 || sb_ll(b, (long long)len, ',') < 0)
        return -1;
    return sb_diffs(b, h, hn, h0, h0n);
}

/* zlib's CRC-32 continued from crc (0 to start) over n bytes; table from
 * _native.c's crc_init */
static uint32_t crc_table[256];

static uint32_t crc32_cont(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t c = crc ^ 0xFFFFFFFFu;
    while (n--)
        c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static inline void ng_put16(uint8_t *p, uint32_t v, int swap)
{
    uint16_t x = (uint16_t)v;
    if (swap)
        x = (uint16_t)((x >> 8) | (x << 8));
    memcpy(p, &x, 2);
}

static inline void ng_put32(uint8_t *p, uint32_t v, int swap)
{
    if (swap)
        v = (v >> 24) | ((v >> 8) & 0xFF00) | ((v << 8) & 0xFF0000) | (v << 24);
    memcpy(p, &v, 4);
}

/* one EPB option (code, value of n bytes, padded to 32 bits) appended to b
 * in the output's byte order */
static int ng_option(sbuf *b, uint32_t code, const void *v, size_t n, int swap)
{
    size_t pad = (4 - (n & 3)) & 3;
    if (sb_grow(b, 4 + n + pad) < 0)
        return -1;
    uint8_t *q = (uint8_t *)b->p + b->n;
    ng_put16(q, code, swap);
    ng_put16(q + 2, (uint32_t)n, swap);
    memcpy(q + 4, v, n);
    memset(q + 4 + n, 0, pad);
    b->n += 4 + n + pad;
    return 0;
}

/* opt_endofopt, closing the options in b */
static int ng_end(sbuf *b)
{
    static const uint8_t z[4] = {0, 0, 0, 0};
    return sb_mem(b, z, 4);
}

/* the restore record of a packet handed up alone (annotate.passed when it
 * overtakes held packets, annotate.single): "pcapgro-restore v1 i=I t=T" as
 * an opt_comment; opts is cleared first */
static int ng_position(sbuf *opts, sbuf *txt, long long idx, long long ts, int swap)
{
    opts->n = txt->n = 0;
    if (sb_str(txt, TAG_RESTORE "i=") < 0 || sb_ll(txt, idx, ' ') < 0 || sb_str(txt, "t=") < 0
            || sb_ll(txt, ts, 0) < 0)
        return -1;
    if (ng_option(opts, OPT_COMMENT, txt->p, txt->n, swap) < 0)
        return -1;
    return ng_end(opts);
}

/* annotate.aggregate's comment ("pcapgro: GRO aggregate (proto) of count
 * segments, gso_size mss, ended by ended") as the first option of opts
 * (opts and txt cleared first); -1 when out of memory */
static int ng_agg_comment(sbuf *opts, sbuf *txt, uint32_t count, uint32_t mss,
                          const char *proto, const char *ended, int swap)
{
    opts->n = txt->n = 0;
    if (sb_str(txt, "pcapgro: GRO aggregate (") < 0 || sb_str(txt, proto) < 0
            || sb_str(txt, ") of ") < 0 || sb_ll(txt, count, 0) < 0
            || sb_str(txt, " segments, gso_size ") < 0 || sb_ll(txt, mss, 0) < 0
            || sb_str(txt, ", ended by ") < 0 || sb_str(txt, ended) < 0)
        return -1;
    return ng_option(opts, OPT_COMMENT, txt->p, txt->n, swap);
}

/* epb_flags with the TSO bit, then the end of options */
static int ng_tso_end(sbuf *opts, int swap)
{
    uint8_t fl[4];
    ng_put32(fl, EPB_FLAG_TSO, swap);
    if (ng_option(opts, OPT_FLAGS, fl, 4, swap) < 0)
        return -1;
    return ng_end(opts);
}

/* The options of an aggregate of standard GRO (proto "TCP" or "UDP") from a classic pcap
 * input (no metadata of its own): annotate.aggregate's comment (ending
 * ", ended by" the flush reason ended), the
 * restore record (restore.encode_rows: i= t= of the first packet, h= its
 * payload length and its header's diffs against the written header hdr, s=
 * rows, k= the CRC-32 of the text and hdr), epb_flags with the TSO bit.
 * h0: the first packet's header as received (h0n bytes); hdr: as written
 * (hn bytes).  opts and txt are cleared first. */
static int ng_aggregate(sbuf *opts, sbuf *txt, uint32_t count, uint32_t mss, long long i0,
                        long long t0, uint32_t head_L, const uint8_t *h0, Py_ssize_t h0n,
                        const uint8_t *hdr, Py_ssize_t hn, const sbuf *rows,
                        const char *proto, const char *ended, int swap)
{
    if (ng_agg_comment(opts, txt, count, mss, proto, ended, swap) < 0)
        return -1;
    txt->n = 0;
    if (sb_str(txt, TAG_RESTORE "i=") < 0 || sb_ll(txt, i0, ' ') < 0 || sb_str(txt, "t=") < 0
            || sb_ll(txt, t0, ' ') < 0 || sb_str(txt, "h=") < 0 || sb_ll(txt, head_L, ',') < 0
            || sb_diffs(txt, h0, h0n, hdr, hn) < 0 || sb_str(txt, " s=") < 0
            || sb_mem(txt, rows->p, rows->n) < 0)
        return -1;
    uint32_t k = crc32_cont(crc32_cont(0, (const uint8_t *)txt->p, txt->n), hdr, (size_t)hn);
    char kx[12] = " k=";
    for (int i = 0; i < 8; i++)
        kx[3 + i] = HEXD[(k >> (28 - 4 * i)) & 15];
    if (sb_mem(txt, kx, 11) < 0 || ng_option(opts, OPT_COMMENT, txt->p, txt->n, swap) < 0)
        return -1;
    return ng_tso_end(opts, swap);
}

#endif
