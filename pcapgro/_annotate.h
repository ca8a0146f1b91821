/* pcapng output of the compiled GRO loop: text buffers, the restore
 * record's pieces, EPB options (included by _native.c, one translation
 * unit; pure functions of their arguments, no engine state).
 *
 * The Python twins, which stay the reference:
 *   restore record     pcapgro/restore.py encode_rows (f=, m=), _rows_py,
 *                      _diffs, _meta_items, record_crc;
 *                      pcapgro/gro/annotate.py passed, single, aggregate,
 *                      restore_record
 *   EPB and options    pcapgro/capture/pcapng.py PcapngWriter._packet_meta,
 *                      _options (pcapng spec: opt_comment 1, epb_flags 2,
 *                      opt_endofopt 0, every value padded to 32 bits);
 *                      an input EPB's options: parse_options, _packet_meta
 * tests/test_gro_cfast.py and tests/test_cfast_epb_options.py check the
 * bytes against the Python engine's.
 */
#ifndef PCAPGRO_ANNOTATE_H
#define PCAPGRO_ANNOTATE_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_crc32.h"     /* crc32_cont: the restore record's k= */

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
    char *q = b->p + b->n;      /* a local pointer: b->n is not reloaded per char */
    for (Py_ssize_t i = 0; i < n; i++) {
        *q++ = HEXD[d[i] >> 4];
        *q++ = HEXD[d[i] & 15];
    }
    b->n += 2 * (size_t)n;
    return 0;
}

/* "00" "01" ... "99": two digits a division (sb_ll) */
static const char DIGITS2[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* v in decimal, then the character end (if not 0); by hand: glibc's
 * snprintf cost ~300 ns a number here, most of the row encoder's time */
static int sb_ll(sbuf *b, long long v, char end)
{
    char tmp[20];
    int k = 20;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    if (sb_grow(b, 22) < 0)     /* 20 digits, '-', end */
        return -1;
    while (u >= 100) {
        unsigned r = (unsigned)(u % 100) * 2;
        u /= 100;
        tmp[--k] = DIGITS2[r + 1];
        tmp[--k] = DIGITS2[r];
    }
    if (u >= 10) {
        tmp[--k] = DIGITS2[u * 2 + 1];
        tmp[--k] = DIGITS2[u * 2];
    } else {
        tmp[--k] = (char)('0' + u);
    }
    char *q = b->p + b->n;
    if (v < 0)
        *q++ = '-';
    memcpy(q, tmp + k, (size_t)(20 - k));
    q += 20 - k;
    if (end)
        *q++ = end;
    b->n = (size_t)(q - b->p);
    return 0;
}

/* the first j' >= j below n at which d and r differ (n when none); equal
 * headers are the common case (a segment's header differs from its
 * aggregate's head in a few bytes: sequence, IP ID, checksums), so eight
 * bytes are compared at a time and the first difference found from the
 * XOR's low (little-endian) or high (big-endian) zero bits */
static inline Py_ssize_t first_diff(const uint8_t *d, const uint8_t *r, Py_ssize_t j,
                                    Py_ssize_t n)
{
    for (; j + 8 <= n; j += 8) {
        uint64_t x, y;
        memcpy(&x, d + j, 8);
        memcpy(&y, r + j, 8);
        if (x != y)
#if PY_LITTLE_ENDIAN
            return j + (__builtin_ctzll(x ^ y) >> 3);
#else
            return j + (__builtin_clzll(x ^ y) >> 3);
#endif
    }
    while (j < n && d[j] == r[j])
        j++;
    return j;
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
    while ((j = first_diff(d, r, j, rn)) < rn) {
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

/* ------------------------------------------------ an input EPB's options
 * What the reference makes of the options of an input EPB (raw: the bytes
 * between the frame and the block's trailing length, in the input's byte
 * order): pcapng.py parse_options (up to opt_endofopt, do-not-copy custom
 * options dropped) and _packet_meta (PacketMeta: comments, the first
 * 4-byte epb_flags, every other option raw), written back by
 * PcapngWriter._packet_meta (comments, then epb_flags, then the others,
 * opt_endofopt; nothing at all when there is none). */
#define OPT_END 0

static inline uint32_t ng_get16(const uint8_t *p, int swap)
{
    uint16_t x;
    memcpy(&x, p, 2);
    return swap ? (uint32_t)(uint16_t)((x >> 8) | (x << 8)) : x;
}

static inline uint32_t ng_get32(const uint8_t *p, int swap)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return swap ? (v >> 24) | ((v >> 8) & 0xFF00) | ((v << 8) & 0xFF0000) | (v << 24) : v;
}

/* a walk over an option list as parse_options takes it */
typedef struct {
    const uint8_t *p, *end;
    int swap;
} optwalk;

static inline optwalk opt_walk(const uint8_t *raw, size_t n, int swap)
{
    optwalk w = {raw, raw + n, swap};
    return w;
}

/* the next option of walk w: its code, value and length; 0 after the last
 * (opt_endofopt, the end of the list, an option running past it); the
 * do-not-copy custom options (NOCOPY_OPTIONS 19372, 19373) skipped */
static int opt_next(optwalk *w, uint32_t *code, const uint8_t **v, uint32_t *n)
{
    while (w->end - w->p >= 4) {
        uint32_t c = ng_get16(w->p, w->swap), ln = ng_get16(w->p + 2, w->swap);
        size_t left = (size_t)(w->end - w->p) - 4;
        if (c == OPT_END || ln > left) {
            w->p = w->end;
            return 0;
        }
        const uint8_t *v0 = w->p + 4;
        size_t step = ((size_t)ln + 3) & ~(size_t)3;
        w->p = step > left ? w->end : v0 + step;
        if (c == 19372 || c == 19373)
            continue;
        *code = c;
        *v = v0;
        *n = ln;
        return 1;
    }
    return 0;
}

/* _packet_meta's flags: the first epb_flags of 4 bytes in raw (*flags, in
 * the input's byte order swap read); 0 when there is none (flags None) */
static int opt_flags(const uint8_t *raw, size_t n, int swap, uint32_t *flags)
{
    optwalk w = opt_walk(raw, n, swap);
    uint32_t c, ln;
    const uint8_t *v;
    while (opt_next(&w, &c, &v, &ln))
        if (c == OPT_FLAGS && ln == 4) {
            *flags = ng_get32(v, swap);
            return 1;
        }
    return 0;
}

/* restore.carries_own: a comment in raw that pcapgro writes (restore.TAG,
 * AGG_TAG, MOVED_TAG at its start) */
static int opt_own(const uint8_t *raw, size_t n, int swap)
{
    static const char *const own[] = {TAG_RESTORE, "pcapgro: GRO aggregate",
                                      "pcapgro: held by GRO"};
    optwalk w = opt_walk(raw, n, swap);
    uint32_t c, ln;
    const uint8_t *v;
    while (opt_next(&w, &c, &v, &ln))
        if (c == OPT_COMMENT)
            for (int k = 0; k < 3; k++) {
                size_t m = strlen(own[k]);
                if (ln >= m && !memcmp(v, own[k], m))
                    return 1;
            }
    return 0;
}

/* The options PcapngWriter._packet_meta writes for a packet whose input
 * EPB had the options raw (n bytes, 0: none; byte order in_swap), in the
 * output byte order swap: its comments, then the comments x1 and x2 (when
 * not NULL: annotate.with_comment, aggregate), then epb_flags -- its own
 * OR-ed with orf, or orf alone when it had none and force -- then its
 * other options (values as they were), then opt_endofopt; nothing when
 * there is no option.  opts is cleared first. */
static int ng_meta_opts(sbuf *opts, const uint8_t *raw, size_t n, int in_swap, int swap,
                        const sbuf *x1, const sbuf *x2, int force, uint32_t orf)
{
    optwalk w = opt_walk(raw, n, in_swap);
    uint32_t c, ln, flags = 0;
    const uint8_t *v;
    opts->n = 0;
    while (opt_next(&w, &c, &v, &ln))
        if (c == OPT_COMMENT && ng_option(opts, c, v, ln, swap) < 0)
            return -1;
    if ((x1 && ng_option(opts, OPT_COMMENT, x1->p, x1->n, swap) < 0)
            || (x2 && ng_option(opts, OPT_COMMENT, x2->p, x2->n, swap) < 0))
        return -1;
    int had = opt_flags(raw, n, in_swap, &flags);
    if (had || force) {
        uint8_t fl[4];
        ng_put32(fl, flags | orf, swap);
        if (ng_option(opts, OPT_FLAGS, fl, 4, swap) < 0)
            return -1;
    }
    w = opt_walk(raw, n, in_swap);
    while (opt_next(&w, &c, &v, &ln)) {
        if (c == OPT_COMMENT)
            continue;
        if (had && c == OPT_FLAGS && ln == 4) {
            had = 0;            /* the one written above */
            continue;
        }
        if (ng_option(opts, c, v, ln, swap) < 0)
            return -1;
    }
    return opts->n ? ng_end(opts) : 0;
}

/* restore._meta_items of a later segment's options raw: "f<flags>", then
 * "c<comment, percent-encoded as urllib.parse.quote(safe='')>" each, then
 * "o<code>.<hex of the value>" each, joined by ','; appended to b.
 * Returns how many items were written (-1: out of memory). */
static int sb_meta_items(sbuf *b, const uint8_t *raw, size_t n, int swap)
{
    optwalk w = opt_walk(raw, n, swap);
    uint32_t c, ln, flags;
    const uint8_t *v;
    int k = 0, had = opt_flags(raw, n, swap, &flags);
    if (had && (sb_put(b, 'f') < 0 || sb_ll(b, flags, 0) < 0))
        return -1;
    k += had;
    while (opt_next(&w, &c, &v, &ln)) {
        if (c != OPT_COMMENT)
            continue;
        if ((k && sb_put(b, ',') < 0) || sb_put(b, 'c') < 0 || sb_grow(b, 3 * (size_t)ln) < 0)
            return -1;
        for (uint32_t i = 0; i < ln; i++) {
            uint8_t x = v[i];
            if ((x >= 'a' && x <= 'z') || (x >= 'A' && x <= 'Z') || (x >= '0' && x <= '9')
                    || x == '_' || x == '.' || x == '-' || x == '~') {
                b->p[b->n++] = (char)x;
            } else {
                b->p[b->n++] = '%';
                b->p[b->n++] = "0123456789ABCDEF"[x >> 4];
                b->p[b->n++] = "0123456789ABCDEF"[x & 15];
            }
        }
        k++;
    }
    w = opt_walk(raw, n, swap);
    while (opt_next(&w, &c, &v, &ln)) {
        if (c == OPT_COMMENT)
            continue;
        if (had && c == OPT_FLAGS && ln == 4) {
            had = 0;
            continue;
        }
        if ((k && sb_put(b, ',') < 0) || sb_put(b, 'o') < 0 || sb_ll(b, c, '.') < 0
                || sb_hex(b, v, ln) < 0)
            return -1;
        k++;
    }
    return k;
}

/* one "row:items" entry of a restore record's m= field (restore.encode_rows)
 * for the segment of restore row `row` whose input EPB had the options raw
 * (in byte order swap), appended to b (';' before it unless b is empty);
 * nothing when its PacketMeta carries nothing.  -1: out of memory */
static int sb_meta_row(sbuf *b, long long row, const uint8_t *raw, size_t n, int swap)
{
    size_t n0 = b->n;
    if ((n0 && sb_put(b, ';') < 0) || sb_ll(b, row, ':') < 0)
        return -1;
    int k = sb_meta_items(b, raw, n, swap);
    if (k < 0)
        return -1;
    if (!k)
        b->n = n0;
    return 0;
}

/* the restore record of a packet handed up alone (annotate.passed when it
 * overtakes held packets or carries pcapgro's comments, annotate.single):
 * "pcapgro-restore v1 i=I t=T" as the last comment of the packet's own
 * options raw (n bytes, byte order in_swap; n 0: none); opts and txt are
 * cleared first */
static int ng_position(sbuf *opts, sbuf *txt, long long idx, long long ts,
                       const uint8_t *raw, size_t n, int in_swap, int swap)
{
    txt->n = 0;
    if (sb_str(txt, TAG_RESTORE "i=") < 0 || sb_ll(txt, idx, ' ') < 0 || sb_str(txt, "t=") < 0
            || sb_ll(txt, ts, 0) < 0)
        return -1;
    return ng_meta_opts(opts, raw, n, in_swap, swap, txt, NULL, 0, 0);
}

/* annotate.aggregate's comment ("pcapgro: GRO aggregate (proto) of count
 * segments, gso_size mss, ended by ended") as the text txt (cleared
 * first); -1 when out of memory */
static int ng_agg_comment(sbuf *txt, uint32_t count, uint32_t mss, const char *proto,
                          const char *ended)
{
    txt->n = 0;
    if (sb_str(txt, "pcapgro: GRO aggregate (") < 0 || sb_str(txt, proto) < 0
            || sb_str(txt, ") of ") < 0 || sb_ll(txt, count, 0) < 0
            || sb_str(txt, " segments, gso_size ") < 0 || sb_ll(txt, mss, 0) < 0
            || sb_str(txt, ", ended by ") < 0 || sb_str(txt, ended) < 0)
        return -1;
    return 0;
}

/* The restore record of an aggregate (restore.encode_rows) as the text rec
 * (cleared first): i= t= of the first packet, f= its epb_flags (when
 * has_flags), h= its payload length and its header's diffs against the
 * written header hdr, s= rows, m= the later segments' metadata (mrows,
 * when not empty), k= the CRC-32 of the text and hdr.  h0: the first
 * packet's header as received (h0n bytes); hdr: as written (hn bytes). */
static int ng_record(sbuf *rec, long long i0, long long t0, int has_flags, uint32_t flags,
                     uint32_t head_L, const uint8_t *h0, Py_ssize_t h0n, const uint8_t *hdr,
                     Py_ssize_t hn, const sbuf *rows, const sbuf *mrows)
{
    rec->n = 0;
    if (sb_str(rec, TAG_RESTORE "i=") < 0 || sb_ll(rec, i0, ' ') < 0 || sb_str(rec, "t=") < 0
            || sb_ll(rec, t0, ' ') < 0)
        return -1;
    if (has_flags && (sb_str(rec, "f=") < 0 || sb_ll(rec, flags, ' ') < 0))
        return -1;
    if (sb_str(rec, "h=") < 0 || sb_ll(rec, head_L, ',') < 0
            || sb_diffs(rec, h0, h0n, hdr, hn) < 0 || sb_str(rec, " s=") < 0
            || sb_mem(rec, rows->p, rows->n) < 0)
        return -1;
    if (mrows->n && (sb_str(rec, " m=") < 0 || sb_mem(rec, mrows->p, mrows->n) < 0))
        return -1;
    uint32_t k = crc32_cont(crc32_cont(0, (const uint8_t *)rec->p, rec->n), hdr, (size_t)hn);
    char kx[12] = " k=";
    for (int i = 0; i < 8; i++)
        kx[3 + i] = HEXD[(k >> (28 - 4 * i)) & 15];
    return sb_mem(rec, kx, 11);
}

/* The options of an aggregate (annotate.aggregate): its head's comments
 * (the head's input options raw, n bytes, byte order in_swap), the
 * aggregate comment (proto, count, mss, ended by `ended`), the restore
 * record (unless cut: a segment cut by a snaplen, no exact record possible;
 * ng_record's fields), epb_flags: the head's with the TSO bit, the head's
 * other options.  opts, txt and rec are cleared first. */
static int ng_aggregate(sbuf *opts, sbuf *txt, sbuf *rec, const uint8_t *raw, size_t n,
                        int in_swap, uint32_t count, uint32_t mss, int cut, long long i0,
                        long long t0, uint32_t head_L, const uint8_t *h0, Py_ssize_t h0n,
                        const uint8_t *hdr, Py_ssize_t hn, const sbuf *rows,
                        const sbuf *mrows, const char *proto, const char *ended, int swap)
{
    if (ng_agg_comment(txt, count, mss, proto, ended) < 0)
        return -1;
    if (!cut) {
        uint32_t flags = 0;
        int had = opt_flags(raw, n, in_swap, &flags);
        if (ng_record(rec, i0, t0, had, flags, head_L, h0, h0n, hdr, hn, rows, mrows) < 0)
            return -1;
    }
    return ng_meta_opts(opts, raw, n, in_swap, swap, txt, cut ? NULL : rec, 1, EPB_FLAG_TSO);
}

#endif
