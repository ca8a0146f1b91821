/*
 * pcapgro._restore: the compiled restore of `pcapgro split --restore` for
 * the common kind of record (pcapgro/restore.py is the reference, and
 * does everything else).
 *
 * restore() reads one packet's restore record (see the module docstring
 * of pcapgro/restore.py) and lays out the packets it gives back as
 * classic pcap records in the host's byte order with nanosecond
 * fractions (PcapWriter turns them into its own format: pcap_headers()).
 * It handles what merge writes for Ethernet / IPv4 or IPv6 (Hop-by-Hop,
 * Routing, Destination Options headers walked) / TCP without a tunnel:
 * a short record "i=.. t=.." or a full one "i=.. t=.. h=.. s=.. k=..";
 * every check of restore.decode(), restore._restore() and
 * restore._check_fit() is made, and whatever does not pass, or is not
 * that kind (b=, f=, m=, x=, fields of later versions, VLAN tags, UDP,
 * tunnels, times a pcap record cannot hold, numbers beyond 63 bits), is
 * answered None: the Python path then decides (the same bytes out:
 * tests/test_restore_cfast.py runs both).  Optional, like the other
 * extensions; PCAPGRO_NO_C=1 turns it off.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#define TAG "pcapgro-restore v1 "
#define MAX_HDR 512                 /* header bytes a record may give back */
#define PCAP_TS_END 4294967296000000000LL     /* 2**32 s in ns */
#define IN_POSITION (-1LL)          /* a run's index: wherever the next one is */

#include "_crc32.h"          /* crc32_cont: the k= field */

/* ASCII digits p[0:n] (at least one, leading zeros allowed) as a value
 * below 2**62; -1 if not */
static long long
digits(const char *p, Py_ssize_t n)
{
    if (n < 1)
        return -1;
    long long v = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (p[k] < '0' || p[k] > '9' || v >= (1LL << 62) / 10)
            return -1;
        v = v * 10 + (p[k] - '0');
    }
    return v;
}

/* hex_table[c]: the value of lowercase hex digit c, else -1 (upper case is
 * not what merge writes) */
static signed char hex_table[256];

static void
hex_init(void)
{
    memset(hex_table, -1, sizeof hex_table);
    for (int c = 0; c < 10; c++)
        hex_table['0' + c] = (signed char)c;
    for (int c = 0; c < 6; c++)
        hex_table['a' + c] = (signed char)(10 + c);
}

static int
hexval(char c)
{
    return hex_table[(unsigned char)c];
}

/* lowercase hex p[0:n] (n even, > 0, at most 2 * room bytes) into o;
 * bytes written, or -1 */
static Py_ssize_t
unhex(const char *p, Py_ssize_t n, unsigned char *o, Py_ssize_t room)
{
    if (n < 2 || n & 1 || n / 2 > room)
        return -1;
    const unsigned char *q = (const unsigned char *)p;
    for (Py_ssize_t k = 0; k < n; k += 2) {
        int a = hex_table[q[k]], b = hex_table[q[k + 1]];
        if ((a | b) < 0)
            return -1;
        o[k / 2] = (unsigned char)(a << 4 | b);
    }
    return n / 2;
}

/* restore._apply: header ref (rn bytes) with diffs p[0:n] into o (room
 * MAX_HDR); its length, or -1 when not valid (the Python path says why) */
static Py_ssize_t
apply_diffs(const unsigned char *ref, Py_ssize_t rn, const char *p, Py_ssize_t n,
            unsigned char *o)
{
    if (n == 0) {
        if (rn > MAX_HDR)
            return -1;
        memcpy(o, ref, rn);
        return rn;
    }
    if (p[0] == '*')
        return unhex(p + 1, n - 1, o, MAX_HDR);
    if (rn > MAX_HDR)
        return -1;
    memcpy(o, ref, rn);
    Py_ssize_t end = 0, i = 0;
    while (i < n) {
        Py_ssize_t j = i;
        while (j < n && p[j] != ':')
            j++;
        long long off = digits(p + i, j - i);
        if (off < 0 || j == n || off < end)
            return -1;
        Py_ssize_t a = j + 1, b = a;
        while (b < n && p[b] != '/')
            b++;
        if (b - a < 2 || (b - a) & 1 || off + (b - a) / 2 > rn)
            return -1;
        if (unhex(p + a, b - a, o + off, rn - off) < 0)
            return -1;
        end = off + (b - a) / 2;
        if (b < n && b + 1 == n)
            return -1;              /* a trailing '/' */
        i = b + 1;
    }
    return rn;
}

/* restore._transport for untagged Ethernet / IPv4 or IPv6 / TCP with no
 * tunnel: the payload offset of frame d (n bytes), or -1 (not that kind,
 * or not whole: the Python path decides); *v6 the IP version's flag */
static Py_ssize_t
tcp_payload(const unsigned char *d, Py_ssize_t n, int *v6)
{
    if (n < 14)
        return -1;
    unsigned et = (unsigned)d[12] << 8 | d[13];
    Py_ssize_t off;
    unsigned nh;
    if (et == 0x0800) {
        if (n < 34 || (d[14] >> 4) != 4 || (d[14] & 15) < 5)
            return -1;
        off = 14 + ((d[14] & 15) << 2);
        nh = d[23];
        *v6 = 0;
    } else if (et == 0x86DD) {
        if (n < 54)
            return -1;
        nh = d[20];
        off = 54;
        while (nh == 0 || nh == 43 || nh == 60) {
            if (n < off + 8)
                return -1;
            nh = d[off];
            off += ((Py_ssize_t)d[off + 1] + 1) << 3;
        }
        *v6 = 1;
    } else {
        return -1;
    }
    if (nh != 6 || n < off + 20)
        return -1;
    off += (d[off + 12] >> 4) << 2;
    return off <= n ? off : -1;
}

/* restore._check_fit for such a frame: 1 when it is one GRO could have
 * taken with its payload at hlen, else 0 */
static int
fits(const unsigned char *d, Py_ssize_t n, Py_ssize_t hlen)
{
    int v6;
    if (tcp_payload(d, n, &v6) != hlen)
        return 0;
    if (v6)
        return ((Py_ssize_t)d[18] << 8 | d[19]) == n - 54;
    if (((Py_ssize_t)d[16] << 8 | d[17]) != n - 14)
        return 0;
    uint64_t s = 0;
    Py_ssize_t ihl = (d[14] & 15) << 2;
    for (Py_ssize_t k = 0; k < ihl; k += 2)
        s += (unsigned)d[14 + k] << 8 | d[15 + k];
    return s % 0xFFFF == 0;
}

/* one pcap record at o: host byte order, nanosecond fraction */
static unsigned char *
put_record(unsigned char *o, long long t, const unsigned char *h, Py_ssize_t hn,
           const unsigned char *pay, Py_ssize_t pn, uint32_t orig)
{
    uint32_t w[4] = {(uint32_t)(t / 1000000000LL), (uint32_t)(t % 1000000000LL),
                     (uint32_t)(hn + pn), orig};
    memcpy(o, w, 16);
    memcpy(o + 16, h, hn);
    memcpy(o + 16 + hn, pay, pn);
    return o + 16 + hn + pn;
}

/* what restore() collects while it lays out the packets of one record */
struct out {
    PyObject *runs;                 /* [(index, count, buf, start, end, maxcap)] */
    PyObject *buf;                  /* the bytearray laid out */
    unsigned char *base, *o;
    long long run_idx, next_idx, tmin, tmax;
    Py_ssize_t run_start, count, n, maxcap, run_max;
};

/* the run of consecutive input indexes laid out so far goes into runs */
static int
close_run(struct out *st)
{
    if (!st->count)
        return 0;
    PyObject *r = Py_BuildValue("(LnOnnn)", st->run_idx, st->count, st->buf, st->run_start,
                                (Py_ssize_t)(st->o - st->base), st->run_max);
    if (r == NULL || PyList_Append(st->runs, r) < 0) {
        Py_XDECREF(r);
        return -1;
    }
    Py_DECREF(r);
    st->count = 0;
    return 0;
}

/* the packet with input index idx, time t, just laid out at out->o..o2 */
static int
add(struct out *st, long long idx, long long t, unsigned char *o2)
{
    Py_ssize_t len = o2 - st->o - 16;
    if (st->count && idx != st->next_idx && close_run(st) < 0)
        return -1;
    if (!st->count) {
        st->run_idx = idx;
        st->run_start = st->o - st->base;
        st->run_max = 0;
    }
    if (len > st->run_max)
        st->run_max = len;
    st->count++;
    st->n++;
    st->next_idx = idx + 1;
    if (t < st->tmin)
        st->tmin = t;
    if (t > st->tmax)
        st->tmax = t;
    if (len > st->maxcap)
        st->maxcap = len;
    st->o = o2;
    return 0;
}

/* a field "key=" at p (field end e): its value, or NULL */
static const char *
field(const char *p, const char *e, char key)
{
    return e - p >= 2 && p[0] == key && p[1] == '=' ? p + 2 : NULL;
}

static const char *
field_end(const char *p, const char *e)
{
    const char *q = memchr(p, ' ', e - p);
    return q ? q : e;
}

/* the time field t= ("-?digits", not "-0..."): 0 <= t < 2**32 s, else -1 */
static long long
time_field(const char *v, const char *e)
{
    if (v == NULL || e - v < 1 || v[0] == '-')
        return -1;
    long long t = digits(v, e - v);
    return t < PCAP_TS_END ? t : -1;
}

/* the s= rows of a full record over the aggregate's payload: each row's
 * packet laid out; 1 done, 0 not this kind / not fitting, -1 error */
static int
rows(struct out *st, const char *p, const char *e, const unsigned char *h0, Py_ssize_t h0n,
     const unsigned char *data, Py_ssize_t dn, Py_ssize_t pos, long long i0, long long t0)
{
    unsigned char h[MAX_HDR];
    long long last = 0;
    while (p < e) {
        const char *q = memchr(p, ';', e - p);
        const char *re = q ? q : e, *c1, *c2, *c3;
        if ((c1 = memchr(p, ',', re - p)) == NULL || (c2 = memchr(c1 + 1, ',', re - c1 - 1))
                == NULL || (c3 = memchr(c2 + 1, ',', re - c2 - 1)) == NULL
                || memchr(c3 + 1, ',', re - c3 - 1))
            return 0;
        int neg = c1[1] == '-';
        long long di = digits(p, c1 - p), dt = digits(c1 + 1 + neg, c2 - c1 - 1 - neg);
        long long n = digits(c2 + 1, c3 - c2 - 1);
        if (di <= last || dt < 0 || n < 0 || n > dn - pos || di > (1LL << 62) - i0)
            return 0;
        last = di;
        long long t = t0 + (neg ? -dt : dt);
        if (t < 0 || t >= PCAP_TS_END)
            return 0;
        Py_ssize_t hn = apply_diffs(h0, h0n, c3 + 1, re - c3 - 1, h);
        if (hn < 0)
            return 0;
        unsigned char *o2 = put_record(st->o, t, h, hn, data + pos, n, (uint32_t)(hn + n));
        if (!fits(st->o + 16, hn + n, hn) || hn + n >= 1LL << 32)
            return 0;
        if (add(st, i0 + di, t, o2) < 0)
            return -1;
        pos += n;
        p = q ? q + 1 : e;
        if (q && p == e)
            return 0;               /* a trailing ';' */
    }
    return pos == dn;
}

/* restore._restore for a full record "h=.. s=.. k=.." (fields from p,
 * text from txt: the checksum covers it up to " k="): 1, 0, -1 as rows() */
static int
full(struct out *st, const char *txt, const char *p, const char *e, const unsigned char *data,
     Py_ssize_t n, uint32_t orig, long long i0, long long t0)
{
    const char *he = field_end(p, e), *hv = field(p, he, 'h');
    if (hv == NULL || he == e || (Py_ssize_t)orig != n)
        return 0;
    const char *comma = memchr(hv, ',', he - hv);
    long long n0 = comma ? digits(hv, comma - hv) : -1;
    const char *sp = he + 1, *se = field_end(sp, e), *sv = field(sp, se, 's');
    if (n0 < 0 || n0 >= 1LL << 32 || sv == NULL || se == e)
        return 0;
    const char *kp = se + 1, *kv = field(kp, e, 'k');
    if (kv == NULL || e - kv != 8)
        return 0;
    uint32_t k = 0;
    for (int j = 0; j < 8; j++) {
        int x = hexval(kv[j]);
        if (x < 0)
            return 0;
        k = k << 4 | (uint32_t)x;
    }
    int v6;
    Py_ssize_t hlen = tcp_payload(data, n, &v6);
    if (hlen < 0 || crc32_cont(crc32_cont(0, (const uint8_t *)txt, (size_t)(kp - 1 - txt)), data,
                              hlen) != k)
        return 0;
    unsigned char h0[MAX_HDR];
    Py_ssize_t h0n = apply_diffs(data, hlen, comma + 1, he - comma - 1, h0);
    if (h0n < 0 || hlen + n0 > n || t0 >= PCAP_TS_END)
        return 0;
    unsigned char *o2 = put_record(st->o, t0, h0, h0n, data + hlen, n0, (uint32_t)(h0n + n0));
    if (!fits(st->o + 16, h0n + n0, h0n))
        return 0;
    if (add(st, i0, t0, o2) < 0)
        return -1;
    /* rows() checks that the payload lengths add up to the aggregate's */
    return rows(st, sv, se, h0, h0n, data, n, hlen + n0, i0, t0);
}

PyDoc_STRVAR(restore_doc,
"restore(data, orig_len, linktype, record) -> None or (runs, n, tmin, tmax)\n\n"
"The packets restore record ``record`` (str: the last merge's, see\n"
"pcapgro/restore.py) gives back from a packet (``data``: captured bytes,\n"
"``orig_len``, ``linktype``), laid out as classic pcap records in the\n"
"host's byte order with nanosecond fractions in a new bytearray ``buf``:\n"
"``runs`` a list of (first input index, count, buf, start, end, maxcap)\n"
"per run of consecutive input indexes (byte offsets into ``buf``, the\n"
"largest captured length in the run), ``n`` the packets, ``tmin``/``tmax``\n"
"their earliest and latest time (ns).  None when the record is not the kind this\n"
"code handles or does not fit (pcapgro.restore.restore() then decides).");

/* restore() on a frame d (n bytes captured, orig on the wire, link type
 * lt) and record text txt[0:tn]: the result tuple, None, or NULL */
static PyObject *
restore_core(const unsigned char *d, Py_ssize_t n, unsigned long orig, int lt, const char *txt,
             Py_ssize_t tn)
{
    PyObject *res = NULL, *buf = NULL;
    struct out st = {NULL};
    const char *e = txt + tn, *p = txt + strlen(TAG);
    if (lt != 1 || tn < (Py_ssize_t)strlen(TAG) || memcmp(txt, TAG, strlen(TAG))
            || orig > 0xFFFFFFFFul)
        goto none;
    const char *ie = field_end(p, e), *iv = field(p, ie, 'i');
    long long i0 = iv ? digits(iv, ie - iv) : -1;
    if (i0 < 0 || i0 >= 1LL << 62 || ie == e)
        goto none;
    const char *tp = ie + 1, *te = field_end(tp, e);
    long long t0 = time_field(field(tp, te, 't'), te);
    if (t0 < 0)
        goto none;
    /* packets: the first, and one per s= row (rows = semicolons + 1) */
    Py_ssize_t npk = 2;
    for (const char *q = te; (q = memchr(q, ';', e - q)) != NULL; q++)
        npk++;
    /* room: each packet's record header and header block (at most
     * MAX_HDR), and the payloads, which add up to at most the frame */
    Py_ssize_t size = te == e ? 16 + n : npk * (16 + MAX_HDR) + n;
    buf = PyByteArray_FromStringAndSize(NULL, size);
    st.runs = PyList_New(0);
    if (buf == NULL || st.runs == NULL)
        goto done;
    st.buf = buf;
    st.base = st.o = (unsigned char *)PyByteArray_AS_STRING(buf);
    st.tmin = PCAP_TS_END;
    st.tmax = -1;
    int r;
    if (te == e) {                  /* a packet written unchanged, moved */
        unsigned char *o2 = put_record(st.o, t0, d, n, NULL, 0, (uint32_t)orig);
        r = add(&st, i0, t0, o2) < 0 ? -1 : 1;
    } else {
        r = full(&st, txt, te + 1, e, d, n, (uint32_t)orig, i0, t0);
    }
    if (r < 0)
        goto done;
    if (r == 0)
        goto none;
    if (close_run(&st) < 0)
        goto done;
    if (PyByteArray_Resize(buf, st.o - st.base) < 0)
        goto done;
    res = Py_BuildValue("(OnLL)", st.runs, st.n, st.tmin, st.tmax);
    goto done;
none:
    res = Py_None;
    Py_INCREF(res);
done:
    Py_XDECREF(st.runs);
    Py_XDECREF(buf);
    return res;
}

static PyObject *
restore(PyObject *self, PyObject *args)
{
    Py_buffer b;
    PyObject *rec, *res;
    unsigned long orig;
    int lt;
    if (!PyArg_ParseTuple(args, "y*kiU", &b, &orig, &lt, &rec))
        return NULL;
    Py_ssize_t tn;
    const char *txt = PyUnicode_AsUTF8AndSize(rec, &tn);
    if (txt == NULL) {              /* surrogates: the Python path */
        PyErr_Clear();
        res = Py_None;
        Py_INCREF(res);
    } else {
        res = restore_core(b.buf, b.len, orig, lt, txt, tn);
    }
    PyBuffer_Release(&b);
    return res;
}

static inline uint32_t
rd32(const unsigned char *p, int big)
{
    return big ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
               : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static inline unsigned
rd16(const unsigned char *p, int big)
{
    return big ? (unsigned)p[0] << 8 | p[1] : (unsigned)p[1] << 8 | p[0];
}

#define AGG_TAG "pcapgro: GRO aggregate"
#define MOVED_TAG "pcapgro: held by GRO"

static int
starts(const unsigned char *p, Py_ssize_t n, const char *tag)
{
    Py_ssize_t k = (Py_ssize_t)strlen(tag);
    return n >= k && !memcmp(p, tag, k);
}

/* 1 when p[0:n] is plain ASCII without NUL bytes (8 bytes at a time) */
static int
plain_ascii(const unsigned char *p, Py_ssize_t n)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    Py_ssize_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint64_t w;
        memcpy(&w, p + k, 8);
        if ((w & highs) || ((w - ones) & ~w & highs))
            return 0;
    }
    for (; k < n; k++)
        if (p[k] >= 0x80 || p[k] == 0)
            return 0;
    return 1;
}

/* 1 when p[0:n] holds " h=" (a full record) */
static int
has_h(const unsigned char *p, Py_ssize_t n)
{
    const unsigned char *e = p + n;
    while ((p = memchr(p, ' ', e - p)) != NULL) {
        if (e - p >= 3 && p[1] == 'h' && p[2] == '=')
            return 1;
        p++;
    }
    return 0;
}

/* the options of an EPB (o..oe): the comments and flags Restorer._fast
 * takes (1 or 2 comments, the last a record in ASCII, an earlier one the
 * merge's note; no flags but TSO on a full record; nothing else): 1 and
 * *rec / *rn the record, else 0 */
static int
epb_options(const unsigned char *o, const unsigned char *oe, int big, const char **rec,
            Py_ssize_t *rn)
{
    const unsigned char *c[3];
    Py_ssize_t cn[3];
    int nc = 0, nflags = 0;
    uint32_t flags = 0;
    while (o + 4 <= oe) {
        unsigned code = rd16(o, big), len = rd16(o + 2, big);
        if (code == 0)
            break;
        if (o + 4 + len > oe)
            return 0;               /* the reader says it runs past its block */
        if (code == 1 && nc < 3) {
            c[nc] = o + 4;
            cn[nc++] = len;
        } else if (code == 2 && len == 4 && !nflags) {
            flags = rd32(o + 4, big);
            nflags = 1;
        } else {
            return 0;               /* other options stay on the packet */
        }
        o += 4 + ((len + 3) & ~3u);
    }
    if (nc < 1 || nc > 2 || !starts(c[nc - 1], cn[nc - 1], TAG))
        return 0;
    const unsigned char *r = c[nc - 1];
    if (!plain_ascii(r, cn[nc - 1]))
        return 0;                   /* the Python path */
    int full = has_h(r, cn[nc - 1]);
    if (nc == 2 && !starts(c[0], cn[0], full ? AGG_TAG : MOVED_TAG))
        return 0;
    if (nflags && (!full || (flags & ~0x800u)))
        return 0;
    *rec = (const char *)r;
    *rn = cn[nc - 1];
    return 1;
}

/* a packet without options (so without a restore record: merge wrote it
 * in its input position, Restorer._packet gives it out as it is, after
 * everything before): the answer of restore_core() for it, its one run at
 * input index IN_POSITION (the index place() gives it), or NULL */
static PyObject *
in_position(const unsigned char *d, uint32_t cl, uint32_t ol, long long ts)
{
    PyObject *buf = PyByteArray_FromStringAndSize(NULL, 16 + (Py_ssize_t)cl);
    if (buf == NULL)
        return NULL;
    put_record((unsigned char *)PyByteArray_AS_STRING(buf), ts, d, cl, NULL, 0, ol);
    return Py_BuildValue("([(LnNnnn)]nLL)", (long long)IN_POSITION, (Py_ssize_t)1, buf,
                         (Py_ssize_t)0, 16 + (Py_ssize_t)cl, (Py_ssize_t)cl, (Py_ssize_t)1,
                         ts, ts);
}

/* one EPB at buf[pos:end] restored as Restorer._fast would: the item
 * tuple, None (the reader takes it: not one the compiled path handles, or
 * damaged), or NULL */
static PyObject *
walk_epb(PyObject *bufo, Py_ssize_t pos, Py_ssize_t end, const char *bo, PyObject *ifs,
         Py_ssize_t *next, Py_ssize_t *cl_out)
{
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(bufo);
    int big = bo[0] == '>';
    if (rd32(buf + pos, big) != 6)
        Py_RETURN_NONE;
    Py_ssize_t bl = rd32(buf + pos + 4, big), e = pos + bl;
    if (bl < 32 || bl & 3 || e > end || (Py_ssize_t)rd32(buf + e - 4, big) != bl)
        Py_RETURN_NONE;
    uint32_t iface = rd32(buf + pos + 8, big), hi = rd32(buf + pos + 12, big);
    uint32_t lo = rd32(buf + pos + 16, big), cl = rd32(buf + pos + 20, big);
    uint32_t ol = rd32(buf + pos + 24, big);
    Py_ssize_t s = pos + 28, oe = s + (((Py_ssize_t)cl + 3) & ~(Py_ssize_t)3);
    if (oe > e - 4 || (Py_ssize_t)iface >= PyList_GET_SIZE(ifs))
        Py_RETURN_NONE;
    PyObject *f = PyList_GET_ITEM(ifs, iface);
    if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) < 4 || PyTuple_GET_ITEM(f, 3) != Py_None)
        Py_RETURN_NONE;
    long lt = PyLong_AsLong(PyTuple_GET_ITEM(f, 0));
    long long mul = PyLong_AsLongLong(PyTuple_GET_ITEM(f, 1));
    long long off = PyLong_AsLongLong(PyTuple_GET_ITEM(f, 2));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    unsigned long long ticks = (unsigned long long)hi << 32 | lo;
    if (mul < 1 || ticks > (1ULL << 62) / (unsigned long long)mul || off < -(1LL << 61)
            || off > (1LL << 61))
        Py_RETURN_NONE;
    long long ts = (long long)ticks * mul + off;
    const char *rec;
    Py_ssize_t rn;
    PyObject *r;
    if (oe == e - 4) {
        /* no options: no record, written by merge in its input position */
        if (ts < 0 || ts >= PCAP_TS_END)
            Py_RETURN_NONE;         /* the writer's error: the Python path */
        r = in_position(buf + s, cl, ol, ts);
    } else {
        if (!epb_options(buf + oe, buf + e - 4, big, &rec, &rn))
            Py_RETURN_NONE;
        r = restore_core(buf + s, cl, ol, (int)lt, rec, rn);
    }
    if (r == NULL || r == Py_None)
        return r;
    PyObject *item = Py_BuildValue("(NlLlOnns)", r, (long)iface, ts, lt, bufo, pos, e, bo);
    *next = e;
    *cl_out = cl;
    return item;
}

PyDoc_STRVAR(walk_doc,
"walk(buf, pos, end, byteorder, ifs, out, packets, bytes) -> (pos, packets, bytes)\n\n"
"PcapngReader's epb_hook (Restorer.reader_hook): from ``pos`` of the chunk\n"
"``buf`` (bytes, blocks up to ``end``, section byte order ``byteorder``,\n"
"the reader's interfaces ``ifs``), each Enhanced Packet Block whose\n"
"restore record the compiled restore takes (what Restorer._fast takes),\n"
"and each one without options (no record: a packet merge wrote in its\n"
"input position; its one run's index is -1, wherever the next one is:\n"
"place() gives it the next index, Restorer._fits_now declines it), is\n"
"restored and appended to list ``out`` as a tuple ((runs, n, tmin,\n"
"tmax), iface, ts, linktype, buf, block start, block end, byteorder)\n"
"instead of a Packet (the block's place, to read it as a Packet after\n"
"all: pcapng.epb_packet).  Stops at the first block it does not take\n"
"(the reader's own loop reads it, and reports any damage).  Returns where\n"
"it stopped, and ``packets`` and ``bytes`` (counts so far) plus the\n"
"packets and captured bytes it took.");

static PyObject *
walk(PyObject *self, PyObject *args)
{
    PyObject *bufo, *ifs, *out;
    Py_ssize_t pos, end, n, nb;
    const char *bo;
    if (!PyArg_ParseTuple(args, "OnnsO!O!nn", &bufo, &pos, &end, &bo, &PyList_Type, &ifs,
                          &PyList_Type, &out, &n, &nb))
        return NULL;
    if (!PyBytes_Check(bufo) || end > PyBytes_GET_SIZE(bufo) || pos < 0)
        return Py_BuildValue("(nnn)", pos, n, nb);
    while (end - pos >= 12) {
        Py_ssize_t next = pos, cl = 0;
        PyObject *item = walk_epb(bufo, pos, end, bo, ifs, &next, &cl);
        if (item == NULL)
            return NULL;
        if (item == Py_None) {
            Py_DECREF(item);
            break;
        }
        int bad = PyList_Append(out, item);
        Py_DECREF(item);
        if (bad < 0)
            return NULL;
        pos = next;
        n++;
        nb += cl;
    }
    return Py_BuildValue("(nnn)", pos, n, nb);
}

/* --- placement: Restorer's _fits_now / _place_runs / _release in C ---- */

/* a run tuple (index, count, buf, start, end, maxcap) of restore(): its
 * fields, 0; -1 (TypeError/ValueError set) when it is not one */
static int
run_fields(PyObject *r, long long *k, long long *c, const char **d, Py_ssize_t *len,
           Py_ssize_t *mx)
{
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 6
            || !PyByteArray_Check(PyTuple_GET_ITEM(r, 2))) {
        PyErr_SetString(PyExc_TypeError, "place: not a run tuple");
        return -1;
    }
    PyObject *b = PyTuple_GET_ITEM(r, 2);
    *k = PyLong_AsLongLong(PyTuple_GET_ITEM(r, 0));
    *c = PyLong_AsLongLong(PyTuple_GET_ITEM(r, 1));
    Py_ssize_t a = PyLong_AsSsize_t(PyTuple_GET_ITEM(r, 3));
    Py_ssize_t e = PyLong_AsSsize_t(PyTuple_GET_ITEM(r, 4));
    *mx = PyLong_AsSsize_t(PyTuple_GET_ITEM(r, 5));
    if (PyErr_Occurred())
        return -1;
    if (a < 0 || e < a || e > PyByteArray_GET_SIZE(b) || *c < 1) {
        PyErr_SetString(PyExc_ValueError, "place: run outside its buffer");
        return -1;
    }
    *d = PyByteArray_AS_STRING(b) + a;
    *len = e - a;
    return 0;
}

/* the first position in held (runs sorted by first index) whose index is
 * >= k; -1 on error */
static Py_ssize_t
held_find(PyObject *held, long long k)
{
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(held);
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(PyList_GET_ITEM(held, mid), 0));
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (v < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* 1 when input indexes k..k+c-1 are all still to come (none below nxt,
 * none inside a held run), 0 if not, -1 on error */
static int
indexes_free(PyObject *held, long long nxt, long long k, long long c)
{
    if (k < nxt)
        return 0;
    Py_ssize_t at = held_find(held, k), nh = PyList_GET_SIZE(held);
    if (at < 0)
        return -1;
    long long hk, hc;
    const char *d;
    Py_ssize_t len, mx;
    if (at < nh) {
        if (run_fields(PyList_GET_ITEM(held, at), &hk, &hc, &d, &len, &mx) < 0)
            return -1;
        if (hk < k + c)
            return 0;
    }
    if (at > 0) {
        if (run_fields(PyList_GET_ITEM(held, at - 1), &hk, &hc, &d, &len, &mx) < 0)
            return -1;
        if (hk + hc > k)
            return 0;
    }
    return 1;
}

/* the span (lo, hi) of interface i in spans (Restorer._spans): 1 when the
 * times tmin..tmax fit it, 0 when not or when Python must decide */
static int
span_fits(PyObject *spans, long iface, long long tmin, long long tmax)
{
    if (iface < 0 || iface >= PyList_GET_SIZE(spans))
        return tmin >= 0;           /* (0, 2**64): tmax < 2**62 always */
    PyObject *sp = PyList_GET_ITEM(spans, iface);
    if (!PyTuple_Check(sp) || PyTuple_GET_SIZE(sp) != 2 || PyTuple_GET_ITEM(sp, 0) == Py_None)
        return 0;
    int olo, ohi;
    long long lo = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(sp, 0), &olo);
    long long hi = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(sp, 1), &ohi);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (olo > 0 || ohi < 0 || (olo == 0 && tmin < lo))
        return 0;
    return ohi > 0 || tmax < hi;
}

/* what place() gives out: the runs' bytes as parts (not copied) */
struct placed {
    PyObject *parts;                /* list of bytearrays / memoryviews */
    PyObject *cur;                  /* the bytearray of the part being grown */
    Py_ssize_t cur_a, cur_b;        /* its bytes cur_a..cur_b */
    Py_ssize_t nrec, maxcap, nbytes;
    long long nxt;
};

/* the part being grown goes into parts: the bytearray itself when whole,
 * else a memoryview of its bytes (which keeps it alive) */
static int
close_part(struct placed *p)
{
    if (p->cur == NULL)
        return 0;
    PyObject *part;
    if (p->cur_a == 0 && p->cur_b == PyByteArray_GET_SIZE(p->cur)) {
        part = p->cur;
        Py_INCREF(part);
    } else {
        PyObject *mv = PyMemoryView_FromObject(p->cur);
        part = mv == NULL ? NULL : PySequence_GetSlice(mv, p->cur_a, p->cur_b);
        Py_XDECREF(mv);
    }
    Py_CLEAR(p->cur);
    if (part == NULL || PyList_Append(p->parts, part) < 0) {
        Py_XDECREF(part);
        return -1;
    }
    Py_DECREF(part);
    return 0;
}

/* run given out next (at p->nxt: its index, or IN_POSITION) */
static int
emit(struct placed *p, PyObject *run)
{
    long long k, c;
    const char *d;
    Py_ssize_t len, mx;
    if (run_fields(run, &k, &c, &d, &len, &mx) < 0)
        return -1;
    if (k == IN_POSITION)
        k = p->nxt;
    PyObject *b = PyTuple_GET_ITEM(run, 2);
    Py_ssize_t a = d - PyByteArray_AS_STRING(b);
    if (p->cur != b || p->cur_b != a) {
        if (close_part(p) < 0)
            return -1;
        p->cur = b;
        Py_INCREF(b);
        p->cur_a = a;
    }
    p->cur_b = a + len;
    p->nbytes += len;
    p->nrec += c;
    if (mx > p->maxcap)
        p->maxcap = mx;
    p->nxt = k + c;
    return 0;
}

/* items[j:] checked to be walk()'s tuples: 0, or -1 (TypeError) */
static Py_ssize_t
check_items(PyObject *items, Py_ssize_t j)
{
    long long k, c;
    const char *d;
    Py_ssize_t len, mx;
    for (; j < PyList_GET_SIZE(items); j++) {
        PyObject *it = PyList_GET_ITEM(items, j), *r, *runs;
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) < 2 || !PyTuple_Check(r = PyTuple_GET_ITEM(it, 0))
                || PyTuple_GET_SIZE(r) != 4 || !PyList_Check(runs = PyTuple_GET_ITEM(r, 0))) {
            PyErr_SetString(PyExc_TypeError, "place: not an item of walk()");
            return -1;
        }
        for (Py_ssize_t q = 0; q < PyList_GET_SIZE(runs); q++) {
            if (run_fields(PyList_GET_ITEM(runs, q), &k, &c, &d, &len, &mx) < 0)
                return -1;
        }
    }
    return 0;
}

/* one item (a packet walk() restored) placed: 1, 0 when Python must place
 * it (times its interface cannot hold, indexes taken), -1 on error */
static int
place_item(struct placed *p, PyObject *it, PyObject *held, PyObject *spans, long long *stats)
{
    PyObject *r = PyTuple_GET_ITEM(it, 0), *runs = PyTuple_GET_ITEM(r, 0);
    long long n = PyLong_AsLongLong(PyTuple_GET_ITEM(r, 1));
    long long tmin = PyLong_AsLongLong(PyTuple_GET_ITEM(r, 2));
    long long tmax = PyLong_AsLongLong(PyTuple_GET_ITEM(r, 3));
    long iface = PyLong_AsLong(PyTuple_GET_ITEM(it, 1));
    if (PyErr_Occurred())
        return -1;
    if (!span_fits(spans, iface, tmin, tmax))
        return 0;
    Py_ssize_t nr = PyList_GET_SIZE(runs);
    long long k, c;
    const char *d;
    Py_ssize_t len, mx;
    for (Py_ssize_t q = 0; q < nr; q++) {
        if (run_fields(PyList_GET_ITEM(runs, q), &k, &c, &d, &len, &mx) < 0)
            return -1;
        if (k == IN_POSITION) {
            /* Restorer._packet: after everything known so far, which has
             * all been given out (else Python catches up: _drain) */
            if (nr != 1 || c != 1 || PyList_GET_SIZE(held))
                return 0;
            continue;
        }
        int f = indexes_free(held, p->nxt, k, c);
        if (f <= 0)
            return f;
    }
    stats[0]++;
    if (n > 1) {
        stats[1]++;
        stats[2] += n;
    } else {
        stats[3]++;
    }
    for (Py_ssize_t q = 0; q < nr; q++) {
        PyObject *run = PyList_GET_ITEM(runs, q);
        if (run_fields(run, &k, &c, &d, &len, &mx) < 0)
            return -1;
        if (k == p->nxt || k == IN_POSITION) {
            if (emit(p, run) < 0)
                return -1;
            continue;
        }
        Py_ssize_t at = held_find(held, k);
        if (at < 0 || PyList_Insert(held, at, run) < 0)
            return -1;
    }
    /* _release: the held runs that now follow on */
    while (PyList_GET_SIZE(held)) {
        PyObject *h0 = PyList_GET_ITEM(held, 0);
        if (run_fields(h0, &k, &c, &d, &len, &mx) < 0)
            return -1;
        if (k != p->nxt)
            break;
        if (emit(p, h0) < 0 || PyList_SetSlice(held, 0, 1, NULL) < 0)
            return -1;
    }
    return 1;
}

PyDoc_STRVAR(place_doc,
"place(items, j, nxt, held, spans) -> (j, nxt, data, nrec, maxcap, packets,\n"
"restored, segments, passed)\n\n"
"Restorer's placement (_fits_now, _place_runs, _release) of the packets\n"
"walk() restored, ``items[j:]`` (its tuples), while the Restorer holds\n"
"nothing of its own (no pending packets, no blocks placed before an\n"
"index): ``nxt`` the next input index to give out, ``held`` the list of\n"
"run tuples (index, count, buf, start, end, maxcap) placed ahead of it,\n"
"sorted by index (changed in place), ``spans`` the Restorer's (lo, hi) ns\n"
"per interface.  Stops at the first item the Python path must place\n"
"(times its interface cannot hold, indexes already given out or held, a\n"
"packet in its input position (index -1) while runs are held: the\n"
"caller must not call it while Restorer._cut holds aggregates).\n"
"Returns where it stopped, the new ``nxt``, the records given out in\n"
"input order (host byte order, ns: HostRecords) as a list of the run\n"
"buffers' bytearrays or memoryviews of them (not copied), or None, how\n"
"many records, their largest captured length, and the statistics of the\n"
"items placed (packets, restored, segments, passed).");

static PyObject *
place(PyObject *self, PyObject *args)
{
    PyObject *items, *held, *spans;
    Py_ssize_t j;
    long long nxt;
    if (!PyArg_ParseTuple(args, "O!nLO!O!", &PyList_Type, &items, &j, &nxt, &PyList_Type,
                          &held, &PyList_Type, &spans))
        return NULL;
    if (j < 0)
        j = 0;
    if (check_items(items, j) < 0)
        return NULL;
    struct placed p = {NULL};
    p.parts = PyList_New(0);
    if (p.parts == NULL)
        return NULL;
    p.nxt = nxt;
    long long stats[4] = {0, 0, 0, 0};
    for (; j < PyList_GET_SIZE(items); j++) {
        int r = place_item(&p, PyList_GET_ITEM(items, j), held, spans, stats);
        if (r < 0) {
            Py_XDECREF(p.cur);
            Py_DECREF(p.parts);
            return NULL;
        }
        if (r == 0)
            break;
    }
    if (close_part(&p) < 0) {
        Py_DECREF(p.parts);
        return NULL;
    }
    if (!p.nrec) {
        Py_DECREF(p.parts);
        p.parts = Py_None;
        Py_INCREF(p.parts);
    }
    return Py_BuildValue("(nLNnnLLLL)", j, p.nxt, p.parts, p.nrec, p.maxcap, stats[0],
                         stats[1], stats[2], stats[3]);
}

PyDoc_STRVAR(headers_doc,
"pcap_headers(buf, n, swap, div)\n\n"
"Turn the ``n`` classic pcap records of writable ``buf`` (from restore():\n"
"host byte order, nanosecond fractions; or a list of such buffers, each\n"
"holding whole records, ``n`` in all) into a writer's format in place:\n"
"fractions divided by ``div`` (1000: microseconds), the header words\n"
"byte-swapped when ``swap``.");

/* pcap_headers on one buffer: the records converted, or -1 (ValueError) */
static Py_ssize_t
headers_in(PyObject *o, Py_ssize_t n, int swap, unsigned long div)
{
    Py_buffer b;
    if (PyObject_GetBuffer(o, &b, PyBUF_WRITABLE) < 0)
        return -1;
    unsigned char *p = b.buf;
    Py_ssize_t off = 0, len = b.len, i;
    for (i = 0; i < n && off < len; i++) {
        uint32_t w[4];
        if (off + 16 > len || div == 0)
            break;
        memcpy(w, p + off, 16);
        Py_ssize_t cap = w[2];
        w[1] /= (uint32_t)div;
        if (swap)
            for (int k = 0; k < 4; k++)
                w[k] = (w[k] >> 24) | ((w[k] >> 8) & 0xFF00) | ((w[k] & 0xFF00) << 8) | (w[k] << 24);
        memcpy(p + off, w, 16);
        off += 16 + cap;
    }
    PyBuffer_Release(&b);
    if (off != len) {
        PyErr_SetString(PyExc_ValueError, "pcap_headers: records do not fill the buffer");
        return -1;
    }
    return i;
}

static PyObject *
pcap_headers(PyObject *self, PyObject *args)
{
    PyObject *o;
    Py_ssize_t n;
    int swap;
    unsigned long div;
    if (!PyArg_ParseTuple(args, "Onpk", &o, &n, &swap, &div))
        return NULL;
    if (!PyList_Check(o)) {
        Py_ssize_t k = headers_in(o, n, swap, div);
        if (k < 0)
            return NULL;
        if (k != n) {
            PyErr_SetString(PyExc_ValueError, "pcap_headers: fewer records than n");
            return NULL;
        }
        Py_RETURN_NONE;
    }
    Py_ssize_t done = 0;
    for (Py_ssize_t q = 0; q < PyList_GET_SIZE(o); q++) {
        Py_ssize_t k = headers_in(PyList_GET_ITEM(o, q), n - done, swap, div);
        if (k < 0)
            return NULL;
        done += k;
    }
    if (done != n) {
        PyErr_SetString(PyExc_ValueError, "pcap_headers: records do not add up to n");
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(malloc_doc,
"keep_heap() -> bool\n\n"
"Fix glibc's malloc thresholds where its own adaptive rule would take them\n"
"for a process that frees blocks of a few MiB over and over (mmap threshold\n"
"32 MiB, its adaptive ceiling; trim threshold twice that): split --restore\n"
"allocates and frees ~4 MiB per reader chunk (the chunk, the records laid\n"
"out, the placed output), and without this each of them is fresh memory\n"
"from the kernel (page faults and zeroing: a third of the run's system\n"
"time).  Freed memory stays in the heap for the next chunk.  False where\n"
"the C library is not glibc (nothing done).");

static PyObject *
keep_heap(PyObject *self, PyObject *noargs)
{
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
    if (mallopt(M_MMAP_THRESHOLD, 32 << 20) && mallopt(M_TRIM_THRESHOLD, 64 << 20))
        Py_RETURN_TRUE;
#endif
    Py_RETURN_FALSE;
}

PyDoc_STRVAR(read_after_doc,
"read_after(fd, old, pos, n, need) -> (buf, got)\n\n"
"ByteSource.refill without the join: a new bytes ``buf`` holding\n"
"``old[pos:]`` followed by what read(2) of file descriptor ``fd`` gives,\n"
"up to ``n`` bytes, read until ``buf`` holds at least ``need`` bytes or\n"
"the end of the file (``got`` the bytes read; 0 when ``old[pos:]`` is\n"
"shorter than ``need``: end of file).  Each\n"
"input byte is copied once in user space instead of twice (read, then\n"
"b''.join with the leftover).  Raises OSError as read(2) fails.");

static PyObject *
read_after(PyObject *self, PyObject *args)
{
    int fd;
    PyObject *old;
    Py_ssize_t pos, n, need;
    if (!PyArg_ParseTuple(args, "iSnnn", &fd, &old, &pos, &n, &need))
        return NULL;
    Py_ssize_t have = PyBytes_GET_SIZE(old) - pos;
    if (pos < 0 || have < 0 || n < 0 || n > PY_SSIZE_T_MAX - have) {
        PyErr_SetString(PyExc_ValueError, "read_after: bad position or size");
        return NULL;
    }
    PyObject *buf = PyBytes_FromStringAndSize(NULL, have + n);
    if (buf == NULL)
        return NULL;
    char *b = PyBytes_AS_STRING(buf);
    memcpy(b, PyBytes_AS_STRING(old) + pos, have);
    Py_ssize_t got = 0;
    while (got < n && have + got < need) {
        ssize_t k;
        Py_BEGIN_ALLOW_THREADS
        k = read(fd, b + have + got, (size_t)(n - got));
        Py_END_ALLOW_THREADS
        if (k < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) {
                    Py_DECREF(buf);
                    return NULL;
                }
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            Py_DECREF(buf);
            return NULL;
        }
        if (k == 0)
            break;
        got += k;
    }
    if (got != n && _PyBytes_Resize(&buf, have + got) < 0)
        return NULL;
    return Py_BuildValue("(Nn)", buf, got);
}

static PyMethodDef methods[] = {
    {"read_after", read_after, METH_VARARGS, read_after_doc},
    {"keep_heap", keep_heap, METH_NOARGS, malloc_doc},
    {"restore", restore, METH_VARARGS, restore_doc},
    {"pcap_headers", pcap_headers, METH_VARARGS, headers_doc},
    {"walk", walk, METH_VARARGS, walk_doc},
    {"place", place, METH_VARARGS, place_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pcapgro._restore",
    "The compiled restore of pcapgro split --restore (see pcapgro/_restore.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit__restore(void)
{
    crc32_init();
    hex_init();
    return PyModule_Create(&module);
}
