/*
 * pcapgro._gso: the compiled TCP/UDP segmenter of `pcapgro split`.
 *
 * One function, segment(), lays out the segments of one super-frame as
 * classic pcap records (16-byte record header + frame) appended to a
 * bytearray.  It is the compiled twin of pcapgro/gso/tcp.py segment() and
 * pcapgro/gso/udp.py segment() (which mirror net/ipv4/tcp_offload.c
 * tcp_gso_segment, net/ipv4/udp_offload.c __udp_gso_segment,
 * net/ipv4/af_inet.c inet_gso_segment and net/ipv6/ip6_offload.c
 * ipv6_gso_segment of Linux 6.18): the same bytes, byte for byte
 * (tests/test_gso_cseg.py runs both on the same inputs).  Every decision
 * (which packets are split, the segment size, timestamps) stays in Python
 * (pcapgro/gso/engine.py); this file only writes bytes.
 *
 * Optional, like pcapgro._native: without a C compiler split runs the
 * Python segmenter (PCAPGRO_NO_C=1 forces that).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* one's-complement sum of buf[0:n] as big-endian 16-bit words (an odd
 * last byte padded with zero on the right), unreduced but < 2**63 */
static uint64_t
be_sum(const unsigned char *p, Py_ssize_t n)
{
    uint64_t s = 0, t = 0, c = 0;
    /* 64-bit words, end-around carries counted apart (two chains) */
    while (n >= 16) {
        uint64_t a, b;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        s += a;
        c += s < a;
        t += b;
        c += t < b;
        p += 16;
        n -= 16;
    }
    /* fold the chains into 32-bit-safe form */
    s = (s & 0xFFFFFFFF) + (s >> 32) + (t & 0xFFFFFFFF) + (t >> 32) + c;
    while (n >= 4) {
        uint32_t a;
        memcpy(&a, p, 4);
        s += a;
        p += 4;
        n -= 4;
    }
    while (n >= 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        s += w;
        p += 2;
        n -= 2;
    }
    /* s holds a native-order sum; fold it to 16 bits first */
    while (s >> 16)
        s = (s & 0xFFFF) + (s >> 16);
#if PY_LITTLE_ENDIAN
    s = ((s & 0xFF) << 8) | (s >> 8);
#endif
    if (n)
        s += (uint64_t)p[0] << 8;
    return s;
}

static inline unsigned
fold_seed(uint64_t s)            /* pcapgro.checksum.fold */
{
    if (s == 0)
        return 0;
    s %= 0xFFFF;
    return s ? (unsigned)s : 0xFFFF;
}

static inline unsigned
csum_field(uint64_t s)           /* (-s) % 0xFFFF, s > 0: checksum() */
{
    s %= 0xFFFF;
    return s ? (unsigned)(0xFFFF - s) : 0;
}

static inline void
put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static inline void
put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void
put32h(unsigned char *p, uint32_t v, int swap)   /* record header word */
{
    if (swap)
        v = ((v & 0xFF) << 24) | ((v & 0xFF00) << 8) | ((v >> 8) & 0xFF00) | (v >> 24);
    memcpy(p, &v, 4);
}

PyDoc_STRVAR(segment_doc,
"segment(out, frame, l3off, l3hdr, family, ipid, fixed_id, l4off, l4hdr_len,\n"
"        proto, payload_len, mss, psum, ts, step, mul, swap) -> (n, ncut, maxcap)\n\n"
"Append the segments of one TCP (proto 6) or UDP (proto 17) super-frame to\n"
"bytearray ``out`` as classic pcap records.\n\n"
"frame: its captured bytes; l3off: offset of the IP header (the link-layer\n"
"header frame[:l3off] is copied); l3hdr: the L3 header block every segment\n"
"starts with (IPv4 header with options, or IPv6 header + extension headers,\n"
"a jumbo header removed); family 4 or 6; ipid: IPv4 ID (segment k gets\n"
"ipid + k unless fixed_id); l4off / l4hdr_len: offset and length in bytes\n"
"of the TCP/UDP header in frame; payload_len: payload bytes of the\n"
"super-frame (beyond what is captured: cut segments); mss: payload bytes\n"
"per segment (>= 1); psum: pseudo-header sum without the length (int);\n"
"ts, step: ns, segment k stamped ts + k*step; mul: ns per timestamp\n"
"fraction unit (1000 or 1); swap: record headers in the other byte order.\n"
"Returns the number of segments, of those cut (payload not all captured:\n"
"the checksum seed left) and the largest captured length.\n"
"Raises ValueError when a length does not fit its field or the headers\n"
"are not captured.");

/* one super-frame being cut (what segment() parsed) */
struct cut {
    const unsigned char *d, *h3;       /* frame; L3 header block */
    Py_ssize_t l3off, hl, thl, poff, cap_pay, P, mss, n;
    int family, proto, fixed_id, swap;
    unsigned long ipid;
    uint64_t psum;
    long long ts, step, mul;
    unsigned char l4[60];              /* the TCP/UDP header */
    uint32_t seq0;
    unsigned flags0;
};

/* lay out segment k at o (record header, link layer, L3, L4, payload):
 * returns the end; *caplen its captured length, *ok 0 when cut */
static unsigned char *
write_segment(const struct cut *c, Py_ssize_t k, unsigned char *o, Py_ssize_t *caplen, int *ok)
{
    Py_ssize_t start = k * c->mss;
    Py_ssize_t len = (k < c->n - 1) ? c->mss : c->P - start;
    Py_ssize_t got = c->cap_pay - start;
    if (got > len)
        got = len;
    if (got < 0)
        got = 0;
    *ok = got == len;
    Py_ssize_t thl = c->thl, hl = c->hl, tl = thl + len;
    *caplen = c->l3off + hl + thl + got;
    long long t = c->ts + k * c->step;
    put32h(o, (uint32_t)(t / 1000000000LL), c->swap);
    put32h(o + 4, (uint32_t)((t % 1000000000LL) / c->mul), c->swap);
    put32h(o + 8, (uint32_t)*caplen, c->swap);
    put32h(o + 12, (uint32_t)(c->l3off + hl + tl), c->swap);
    o += 16;
    memcpy(o, c->d, c->l3off);
    unsigned char *ip = o + c->l3off;
    memcpy(ip, c->h3, hl);
    if (c->family == 4) {
        unsigned id = c->fixed_id && c->proto == 6 ? (unsigned)c->ipid
                                                   : (unsigned)((c->ipid + k) & 0xFFFF);
        put16(ip + 2, (unsigned)(hl + tl));
        put16(ip + 4, id);
        ip[10] = ip[11] = 0;
        put16(ip + 10, csum_field(be_sum(ip, hl)));
    } else {
        put16(ip + 4, (unsigned)(hl - 40 + tl));
    }
    unsigned char *th = ip + hl;
    memcpy(th, c->l4, thl);
    if (c->proto == 6) {
        unsigned fl = c->flags0;
        if (k < c->n - 1)
            fl &= ~0x09u;                   /* FIN, PSH: last only */
        if (k)
            fl &= ~0x80u;                   /* CWR: first only */
        put32(th + 4, c->seq0 + (uint32_t)start);
        th[13] = (unsigned char)fl;
        th[16] = th[17] = 0;
    } else {
        put16(th + 4, (unsigned)tl);
        th[6] = th[7] = 0;                  /* the length field is summed in th */
    }
    memcpy(th + thl, c->d + c->poff + start, got);
    unsigned v;
    if (*ok) {
        v = csum_field(c->psum + (uint64_t)tl + be_sum(th, thl) + be_sum(th + thl, got));
        if (c->proto == 17 && v == 0)
            v = 0xFFFF;
    } else {
        v = fold_seed(c->psum + (uint64_t)tl);
    }
    put16(th + (c->proto == 6 ? 16 : 6), v);
    return th + thl + got;
}

static PyObject *
segment(PyObject *self, PyObject *args)
{
    PyObject *out, *res = NULL;
    Py_buffer fr, hb;
    Py_ssize_t l4off;
    unsigned long long psum;
    struct cut c;
    if (!PyArg_ParseTuple(args, "Oy*ny*ikpnninnKLLLp", &out, &fr, &c.l3off, &hb, &c.family,
                          &c.ipid, &c.fixed_id, &l4off, &c.thl, &c.proto, &c.P, &c.mss, &psum,
                          &c.ts, &c.step, &c.mul, &c.swap))
        return NULL;
    c.d = fr.buf;
    c.h3 = hb.buf;
    c.hl = hb.len;
    c.psum = psum;
    Py_ssize_t cap = fr.len, thl = c.thl, hl = c.hl, P = c.P, mss = c.mss;
    if (!PyByteArray_Check(out) || mss < 1 || P < 0 || c.l3off < 0 || l4off < c.l3off
            || l4off + thl > cap || (c.proto == 6 ? thl < 20 || thl > 60 : thl != 8)
            || (c.family == 4 ? hl < 20 || hl > 60 : hl < 40) || c.mul < 1) {
        PyErr_SetString(PyExc_ValueError, "segment: bad arguments");
        goto done;
    }
    Py_ssize_t first = mss < P ? mss : P;
    if ((c.family == 4 ? hl : hl - 40) + thl + first > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "segment: a segment does not fit the IP length field");
        goto done;
    }
    c.n = P ? (P + mss - 1) / mss : 1;
    c.poff = l4off + thl;
    c.cap_pay = cap - c.poff < P ? cap - c.poff : P;     /* captured payload bytes */
    memcpy(c.l4, c.d + l4off, thl);
    c.seq0 = ((uint32_t)c.l4[4] << 24) | ((uint32_t)c.l4[5] << 16) | ((uint32_t)c.l4[6] << 8)
             | c.l4[7];
    c.flags0 = c.l4[13];
    /* room: every segment's record header, headers and captured payload */
    Py_ssize_t old = PyByteArray_GET_SIZE(out);
    if (PyByteArray_Resize(out, old + c.n * (16 + c.l3off + hl + thl) + c.cap_pay) < 0)
        goto done;
    unsigned char *o = (unsigned char *)PyByteArray_AS_STRING(out) + old;
    Py_ssize_t ncut = 0, maxcap = 0, caplen;
    int ok;
    for (Py_ssize_t k = 0; k < c.n; k++) {
        o = write_segment(&c, k, o, &caplen, &ok);
        ncut += !ok;
        if (caplen > maxcap)
            maxcap = caplen;
    }
    res = Py_BuildValue("nnn", c.n, ncut, maxcap);
done:
    PyBuffer_Release(&fr);
    PyBuffer_Release(&hb);
    return res;
}

static inline uint32_t
get32h(const unsigned char *p, int swap)
{
    uint32_t v;
    memcpy(&v, p, 4);
    if (swap)
        v = ((v & 0xFF) << 24) | ((v & 0xFF00) << 8) | ((v >> 8) & 0xFF00) | (v >> 24);
    return v;
}

PyDoc_STRVAR(scan_doc,
"scan_passed(buf, recs, start, swap, mtu, complete) -> (end, maxcap)\n\n"
"From record ``start`` of a pcap chunk (``buf``, record header offsets\n"
"``recs``), the run of records split passes unchanged with no flow state:\n"
"Ethernet / IPv4 (no options, not a fragment) / TCP without payload and\n"
"without SYN, captured in full, IP length exactly the frame's, at most\n"
"``mtu``; with ``complete``, its TCP checksum field neither seed (with or\n"
"without the length) and its IPv4 header checksum not 0 (the cases\n"
"pcapgro/gso/engine.py completes).  Returns the index after the run and\n"
"the largest captured length in it.");

static PyObject *
scan_passed(PyObject *self, PyObject *args)
{
    Py_buffer b;
    PyObject *recs;
    Py_ssize_t start, mtu;
    int swap, complete;
    if (!PyArg_ParseTuple(args, "y*O!nini", &b, &PyList_Type, &recs, &start, &swap, &mtu,
                          &complete))
        return NULL;
    const unsigned char *buf = b.buf;
    Py_ssize_t n = PyList_GET_SIZE(recs), i = start, maxcap = 0;
    for (; i < n; i++) {
        Py_ssize_t r = PyLong_AsSsize_t(PyList_GET_ITEM(recs, i));
        if (r < 0 || r + 16 > b.len) {
            PyErr_Clear();
            break;
        }
        uint32_t cap = get32h(buf + r + 8, swap), orig = get32h(buf + r + 12, swap);
        const unsigned char *d = buf + r + 16;
        if (cap != orig || cap < 54 || r + 16 + (Py_ssize_t)cap > b.len)
            break;
        if (d[12] != 0x08 || d[13] != 0x00 || d[14] != 0x45 || d[23] != 6)
            break;
        unsigned tot = ((unsigned)d[16] << 8) | d[17];
        if ((((unsigned)d[20] << 8 | d[21]) & 0x3FFF) || tot + 14 != cap || (Py_ssize_t)tot > mtu)
            break;
        unsigned thl = (unsigned)(d[46] >> 4) << 2;
        if (thl < 20 || tot != 20 + thl || (d[47] & 0x02))
            break;
        if (complete) {
            uint64_t ps = 0;
            for (int k = 26; k < 34; k += 2)
                ps += ((unsigned)d[k] << 8) | d[k + 1];
            ps += 6;
            unsigned field = ((unsigned)d[50] << 8) | d[51];
            if (field == fold_seed(ps + thl) || field == fold_seed(ps) || !(d[24] | d[25]))
                break;
        }
        if ((Py_ssize_t)cap > maxcap)
            maxcap = cap;
    }
    PyBuffer_Release(&b);
    return Py_BuildValue("nn", i, maxcap);
}

static PyMethodDef methods[] = {
    {"segment", segment, METH_VARARGS, segment_doc},
    {"scan_passed", scan_passed, METH_VARARGS, scan_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pcapgro._gso",
    "The compiled segmenter of pcapgro split (see pcapgro/_gso.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit__gso(void)
{
    return PyModule_Create(&module);
}
