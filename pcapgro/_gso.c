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
 * (tests/test_gso_cseg.py runs both on the same inputs).  With `outer`
 * it also cuts a TCP super-frame inside one tunnel level (VXLAN, Geneve,
 * GRE, IPIP, SIT, IP4IP6, IP6IP6, GSO_PARTIAL frames), the twin of
 * pcapgro/gso/tunnel.py (tcp.segment + _fix_outer, mirroring
 * net/ipv4/udp_offload.c __skb_udp_tunnel_segment / skb_udp_tunnel_segment,
 * net/ipv4/gre_offload.c gre_gso_segment and inet_gso_segment /
 * ipv6_gso_segment for the outer header: outer_ip, outer_tunnel below;
 * tests/test_gso_tunnels_cseg.py runs both).  Every decision
 * (which packets are split, the segment size, timestamps) stays in Python
 * (pcapgro/gso/engine.py, gso/tunnel.py); this file only writes bytes,
 * except split_chunk's walk over plain Ethernet / IPv4 / TCP records.
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
"        proto, payload_len, mss, psum, ts, step, mul, swap[, outer]) -> (n, ncut, maxcap)\n\n"
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
"outer: None, or for a super-frame inside a tunnel (l3off, l3off the inner\n"
"IP header's) the tuple (l3off, hl, family, ipid, tun_off, csum_at, udp,\n"
"psum) of its outer IP header (offset, length, 4 or 6, IPv4 ID: segment k\n"
"gets ipid + k), the UDP or GRE header's offset (-1: IPIP, SIT, IP4IP6,\n"
"IP6IP6), the outer UDP / GRE checksum field's offset (-1: none, or a UDP\n"
"checksum of 0), udp (VXLAN, Geneve: the UDP length is set per segment)\n"
"and the outer UDP pseudo-header sum without the length: each segment's\n"
"outer headers are then fixed as pcapgro/gso/tunnel.py _fix_outer does.\n"
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

/* the outer headers of a tunnelled super-frame (segment()'s `outer`) */
struct outer {
    Py_ssize_t l3off, hl, tun_off, csum_at;     /* tun_off, csum_at: -1 none */
    int family, udp;
    unsigned long ipid;
    uint64_t psum;                 /* outer UDP pseudo-header sum, no length */
};

/* the checksum field pcapgro/gso/tunnel.py _fix_outer writes for a block
 * summing to s: ~fold(s), never 0 (a UDP 0 is sent as 0xFFFF, and a GRE
 * sum of 0 gives 0xFFFF) */
static inline unsigned
outer_csum_field(uint64_t s)
{
    return 0xFFFF - (unsigned)(s % 0xFFFF);
}

/* net/ipv4/af_inet.c inet_gso_segment / net/ipv6/ip6_offload.c
 * ipv6_gso_segment on a tunnel's outer header (also SKB_GSO_IPXIP4/6: IPIP,
 * SIT, IP4IP6, IP6IP6): segment k (frame f, `wire` bytes on the wire) gets
 * the outer IPv4 total length, ID base + k and header checksum, or the
 * outer IPv6 payload length */
static void
outer_ip(const struct outer *t, unsigned char *f, Py_ssize_t wire, Py_ssize_t k)
{
    unsigned char *ip = f + t->l3off;
    if (t->family == 4) {
        put16(ip + 2, (unsigned)(wire - t->l3off));
        put16(ip + 4, (unsigned)((t->ipid + k) & 0xFFFF));
        ip[10] = ip[11] = 0;
        put16(ip + 10, outer_csum_field(be_sum(ip, t->hl)));
    } else {
        put16(ip + 4, (unsigned)(wire - t->l3off - 40));
    }
}

/* net/ipv4/udp_offload.c __skb_udp_tunnel_segment (VXLAN, Geneve: the
 * outer UDP length per segment; its checksum recomputed when it was set,
 * SKB_GSO_UDP_TUNNEL_CSUM, and left 0 when it was 0) and
 * net/ipv4/gre_offload.c gre_gso_segment (a GRE checksum, C flag,
 * recomputed over the GRE header and what follows): after the inner
 * segment is written (frame f, `cap` bytes captured, `wire` on the wire;
 * `ok` 0: not all captured, the super-frame's field stays) */
static void
outer_tunnel(const struct outer *t, unsigned char *f, Py_ssize_t cap, Py_ssize_t wire, int ok)
{
    if (t->udp)
        put16(f + t->tun_off + 4, (unsigned)(wire - t->tun_off));
    if (t->csum_at < 0 || !ok)
        return;
    f[t->csum_at] = f[t->csum_at + 1] = 0;
    uint64_t s = be_sum(f + t->tun_off, cap - t->tun_off);
    if (t->udp)
        s += t->psum + (uint64_t)(wire - t->tun_off);
    put16(f + t->csum_at, outer_csum_field(s));
}

/* segment()'s `outer` tuple (l3off, hl, family, ipid, tun_off, csum_at, udp,
 * psum) checked against the inner headers (inner IP at `in3`, the first
 * segment `first` bytes on the wire); 0, or -1 with an exception */
static int
parse_outer(PyObject *o, struct outer *t, Py_ssize_t in3, Py_ssize_t first)
{
    unsigned long long ps;
    if (!PyArg_ParseTuple(o, "nniknnpK", &t->l3off, &t->hl, &t->family, &t->ipid,
                          &t->tun_off, &t->csum_at, &t->udp, &ps))
        return -1;
    t->psum = ps;
    Py_ssize_t tun = t->tun_off < 0 ? in3 : t->tun_off;
    if (t->l3off < 0 || (t->family == 4 ? t->hl < 20 || t->hl > 60 : t->hl < 40)
            || t->l3off + t->hl > tun || tun > in3 || (t->udp && (t->tun_off < 0 || tun + 8 > in3))
            || (t->csum_at >= 0 && (t->tun_off < 0 || t->csum_at < tun || t->csum_at + 2 > in3))) {
        PyErr_SetString(PyExc_ValueError, "segment: bad outer headers");
        return -1;
    }
    if (first - t->l3off - (t->family == 4 ? 0 : 40) > 0xFFFF
            || (t->udp && first - t->tun_off > 0xFFFF)) {
        PyErr_SetString(PyExc_ValueError, "segment: a segment does not fit an outer length field");
        return -1;
    }
    return 0;
}

/* segment()'s arguments into *c (the frame and header block buffers held
 * in fr, hb); *outer the tunnel's outer tuple or NULL; 0, or -1 with an
 * exception (the buffers released) */
static int
parse_cut(PyObject *args, struct cut *c, PyObject **out, Py_buffer *fr, Py_buffer *hb,
          Py_ssize_t *l4off, PyObject **outer)
{
    unsigned long long psum;
    *outer = NULL;
    if (!PyArg_ParseTuple(args, "Oy*ny*ikpnninnKLLLp|O", out, fr, &c->l3off, hb, &c->family,
                          &c->ipid, &c->fixed_id, l4off, &c->thl, &c->proto, &c->P, &c->mss,
                          &psum, &c->ts, &c->step, &c->mul, &c->swap, outer))
        return -1;
    if (*outer == Py_None)
        *outer = NULL;
    c->d = fr->buf;
    c->h3 = hb->buf;
    c->hl = hb->len;
    c->psum = psum;
    Py_ssize_t cap = fr->len, thl = c->thl, hl = c->hl;
    if (!PyByteArray_Check(*out) || c->mss < 1 || c->P < 0 || c->l3off < 0 || *l4off < c->l3off
            || *l4off + thl > cap || (c->proto == 6 ? thl < 20 || thl > 60 : thl != 8)
            || (c->family == 4 ? hl < 20 || hl > 60 : hl < 40) || c->mul < 1) {
        PyErr_SetString(PyExc_ValueError, "segment: bad arguments");
        goto fail;
    }
    Py_ssize_t first = c->mss < c->P ? c->mss : c->P;
    if ((c->family == 4 ? hl : hl - 40) + thl + first > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "segment: a segment does not fit the IP length field");
        goto fail;
    }
    return 0;
fail:
    PyBuffer_Release(fr);
    PyBuffer_Release(hb);
    return -1;
}

/* segment()'s outer headers, when there are some: net/ipv4/udp_offload.c
 * skb_udp_tunnel_segment, net/ipv4/gre_offload.c gre_gso_segment and the
 * outer inet_gso_segment / ipv6_gso_segment call the inner segmentation
 * (write_segment) first, then fix the outer headers of every segment */
static void
fix_outer(const struct outer *t, const struct cut *c, unsigned char *rec, Py_ssize_t k,
          Py_ssize_t caplen, int ok)
{
    Py_ssize_t len = (k < c->n - 1) ? c->mss : c->P - k * c->mss;
    Py_ssize_t wire = c->l3off + c->hl + c->thl + len;
    outer_ip(t, rec + 16, wire, k);
    if (t->tun_off >= 0)
        outer_tunnel(t, rec + 16, caplen, wire, ok);
}

static PyObject *
segment(PyObject *self, PyObject *args)
{
    PyObject *out, *res = NULL, *outer;
    Py_buffer fr, hb;
    Py_ssize_t l4off;
    struct cut c;
    struct outer t;
    if (parse_cut(args, &c, &out, &fr, &hb, &l4off, &outer) < 0)
        return NULL;
    Py_ssize_t cap = fr.len, thl = c.thl, hl = c.hl, P = c.P, mss = c.mss;
    if (outer && parse_outer(outer, &t, c.l3off, c.l3off + hl + thl + (mss < P ? mss : P)) < 0)
        goto done;
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
        unsigned char *rec = o;
        o = write_segment(&c, k, o, &caplen, &ok);
        if (outer)
            fix_outer(&t, &c, rec, k, caplen, ok);
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

/* the size source codes split_chunk reports (pcapgro/gso/reasons.py
 * SizeSource, in the order of batches._SOURCES) */
enum { SRC_OPTION, SRC_SYN, SRC_OWN_SYN, SRC_LARGEST, SRC_MTU };
#define TCP_MIN_GSO_SIZE 8

/* split_chunk's settings and running totals */
struct chunk {
    PyObject *out, *flows, *sec, *zero, *flow_cls, *aggs;
    Py_ssize_t mtu, cfg_mss, gso_size, used, alloc;
    int swap, complete, mtu_explicit, fixed_id;
    long long mul, rate, last_ts;
    Py_ssize_t nrec, maxcap, npassed, nnohandler, nseg, ncut;
};

/* room for `more` bytes after what is used of ch->out (grown by a quarter
 * beyond the need: few reallocations); 0, or -1 with an exception */
static int
room(struct chunk *ch, Py_ssize_t more)
{
    Py_ssize_t need = ch->used + more;
    if (need <= ch->alloc)
        return 0;
    Py_ssize_t a = need + need / 4;
    if (PyByteArray_Resize(ch->out, a) < 0)
        return -1;
    ch->alloc = a;
    return 0;
}

/* record `rec` (16-byte header + cap bytes, time ts) copied to ch->out as it
 * is; 0, or -1 with an exception */
static int
copy_record(struct chunk *ch, const unsigned char *rec, uint32_t cap, long long ts)
{
    if (room(ch, 16 + cap) < 0)
        return -1;
    memcpy(PyByteArray_AS_STRING(ch->out) + ch->used, rec, 16 + cap);
    ch->used += 16 + cap;
    ch->nrec++;
    ch->last_ts = ts;
    if ((Py_ssize_t)cap > ch->maxcap)
        ch->maxcap = cap;
    return 0;
}

/* a record split passes unchanged with no flow state: Ethernet / IPv4 (no options, not a
 * fragment) / TCP without payload or SYN, in full, IP length the frame's,
 * at most mtu, with `complete` no seed in its TCP checksum and an IPv4
 * header checksum not 0 */
static int
stateless_pass(const unsigned char *d, uint32_t cap, uint32_t orig, Py_ssize_t mtu, int complete)
{
    if (cap != orig || cap < 54)
        return 0;
    if (d[12] != 0x08 || d[13] != 0x00 || d[14] != 0x45 || d[23] != 6)
        return 0;
    unsigned tot = ((unsigned)d[16] << 8) | d[17];
    if ((((unsigned)d[20] << 8 | d[21]) & 0x3FFF) || tot + 14 != cap || (Py_ssize_t)tot > mtu)
        return 0;
    unsigned thl = (unsigned)(d[46] >> 4) << 2;
    if (thl < 20 || tot != 20 + thl || (d[47] & 0x02))
        return 0;
    if (complete) {
        uint64_t ps = 0;
        for (int k = 26; k < 34; k += 2)
            ps += ((unsigned)d[k] << 8) | d[k + 1];
        ps += 6;
        unsigned field = ((unsigned)d[50] << 8) | d[51];
        if (field == fold_seed(ps + thl) || field == fold_seed(ps) || !(d[24] | d[25]))
            return 0;
    }
    return 1;
}

/* an int attribute of a flow object (_Flow.syn_mss / .largest); -1 with
 * an exception */
static long
flow_attr(PyObject *fl, const char *name)
{
    PyObject *v = PyObject_GetAttrString(fl, name);
    if (v == NULL)
        return -1;
    long r = PyLong_AsLong(v);
    Py_DECREF(v);
    return r;
}

/* the flow key (section, 0, src, dst, sport, dport) of frame d, or the
 * reverse direction's with `rev`; new reference or NULL */
static PyObject *
flow_key(struct chunk *ch, const unsigned char *d, int rev)
{
    const unsigned char *a = d + (rev ? 30 : 26), *b = d + (rev ? 26 : 30);
    const unsigned char *pa = d + (rev ? 36 : 34), *pb = d + (rev ? 34 : 36);
    PyObject *s = PyBytes_FromStringAndSize((const char *)a, 4);
    PyObject *t = PyBytes_FromStringAndSize((const char *)b, 4);
    PyObject *u = PyLong_FromLong(((long)pa[0] << 8) | pa[1]);
    PyObject *v = PyLong_FromLong(((long)pb[0] << 8) | pb[1]);
    PyObject *k = NULL;
    if (s && t && u && v)
        k = PyTuple_Pack(6, ch->sec, ch->zero, s, t, u, v);
    Py_XDECREF(s);
    Py_XDECREF(t);
    Py_XDECREF(u);
    Py_XDECREF(v);
    return k;
}

/* the segment size of a super-frame's flow as engine.GSOSplitter._tcp_mss
 * chooses it for such a record (no recorded gso_size: pcap has none): *how one of SRC_*; 0 when the general path decides (a size
 * from the MTU rule below TCP_MIN_GSO_SIZE); -1 with an exception */
static int
choose_mss(struct chunk *ch, const unsigned char *d, PyObject *fl, Py_ssize_t thl,
           Py_ssize_t *mss, int *how)
{
    if (ch->cfg_mss) {
        *mss = ch->cfg_mss;
        *how = SRC_OPTION;
        return 1;
    }
    Py_ssize_t opt = thl - 20;
    PyObject *pk = flow_key(ch, d, 1);
    if (pk == NULL)
        return -1;
    PyObject *peer = PyDict_GetItemWithError(ch->flows, pk);
    Py_DECREF(pk);
    if (peer == NULL && PyErr_Occurred())
        return -1;
    long ps = peer ? flow_attr(peer, "syn_mss") : 0;
    long fs = fl ? flow_attr(fl, "syn_mss") : 0;
    long lg = fl ? flow_attr(fl, "largest") : 0;
    if ((ps < 0 || fs < 0 || lg < 0) && PyErr_Occurred())
        return -1;
    if (peer && ps - opt >= TCP_MIN_GSO_SIZE)
        *mss = ps - opt, *how = SRC_SYN;
    else if (fl && fs - opt >= TCP_MIN_GSO_SIZE)
        *mss = fs - opt, *how = SRC_OWN_SYN;
    else if (fl && lg)
        *mss = lg, *how = SRC_LARGEST;
    else
        *mss = (Py_ssize_t)1 << 30, *how = SRC_MTU;
    if (*how == SRC_MTU || ch->mtu_explicit) {
        if (ch->mtu - 20 - thl < *mss)
            *mss = ch->mtu - 20 - thl, *how = SRC_MTU;
        if (*how == SRC_MTU && *mss < TCP_MIN_GSO_SIZE)
            return 0;
    }
    return 1;
}

/* engine._step: ns between segments */
static long long
seg_step(const struct chunk *ch, Py_ssize_t first_len, Py_ssize_t n, long long ts, long long next)
{
    long long step = 0;
    if (ch->rate) {
        long long bits = (long long)first_len * 8000000000LL;
        step = bits / ch->rate + (bits % ch->rate != 0);
        long long gap = next - ts;
        long long cap = gap > 0 ? gap / n : 0;
        if (cap < step)
            step = cap;
    }
    return step;
}

/* one record (frame d, cap bytes, time ts, the next record's time next)
 * when it is a super-frame engine.GSOSplitter._tcp would split: its
 * segments are written; 1.  0: not one (nothing changed); -1: error */
static int
super_tcp4(struct chunk *ch, const unsigned char *d, uint32_t cap, uint32_t orig,
           long long ts, long long next)
{
    if (cap != orig || cap < 54 || d[12] != 0x08 || d[13] != 0x00 || d[14] != 0x45
            || d[23] != 6)
        return 0;
    Py_ssize_t tot = ((Py_ssize_t)d[16] << 8) | d[17], thl = (Py_ssize_t)(d[46] >> 4) << 2;
    if ((((unsigned)d[20] << 8 | d[21]) & 0x3FFF) || tot + 14 != (Py_ssize_t)cap || thl < 20
            || (d[47] & 0x06))
        return 0;
    Py_ssize_t P = tot - 20 - thl;
    if (P <= 0 || (tot <= ch->mtu && !ch->cfg_mss))
        return 0;
    PyObject *key = flow_key(ch, d, 0);
    if (key == NULL)
        return -1;
    int r = -1, how;
    Py_ssize_t mss;
    PyObject *fl = PyDict_GetItemWithError(ch->flows, key);
    if (fl == NULL && PyErr_Occurred())
        goto done;
    r = choose_mss(ch, d, fl, thl, &mss, &how);
    if (r <= 0 || P <= mss) {
        r = r < 0 ? -1 : 0;
        goto done;
    }
    r = -1;
    if (fl == NULL) {
        PyObject *nf = PyObject_CallNoArgs(ch->flow_cls);
        if (nf == NULL || PyDict_SetItem(ch->flows, key, nf) < 0) {
            Py_XDECREF(nf);
            goto done;
        }
        Py_DECREF(nf);
    }
    struct cut c;
    c.d = d;
    c.h3 = d + 14;
    c.l3off = 14;
    c.hl = 20;
    c.thl = thl;
    c.family = 4;
    c.proto = 6;
    c.ipid = ((unsigned long)d[18] << 8) | d[19];
    c.fixed_id = ch->fixed_id;
    c.swap = ch->swap;
    c.mul = ch->mul;
    c.P = P;
    c.mss = mss;
    c.n = (P + mss - 1) / mss;
    c.poff = 34 + thl;
    c.cap_pay = P;
    c.psum = 6;
    for (int k = 26; k < 34; k += 2)
        c.psum += ((unsigned)d[k] << 8) | d[k + 1];
    c.ts = ts;
    c.step = seg_step(ch, 34 + thl + (mss < P ? mss : P), c.n, ts, next);
    memcpy(c.l4, d + 34, thl);
    c.seq0 = ((uint32_t)d[38] << 24) | ((uint32_t)d[39] << 16) | ((uint32_t)d[40] << 8) | d[41];
    c.flags0 = d[47];
    if (room(ch, c.n * (16 + 34 + thl) + P) < 0)
        goto done;
    unsigned char *o0 = (unsigned char *)PyByteArray_AS_STRING(ch->out) + ch->used, *o = o0;
    Py_ssize_t caplen, ncut = 0;
    int ok;
    for (Py_ssize_t k = 0; k < c.n; k++) {
        o = write_segment(&c, k, o, &caplen, &ok);
        ncut += !ok;
        if (caplen > ch->maxcap)
            ch->maxcap = caplen;
    }
    ch->used += o - o0;
    ch->nrec += c.n;
    ch->nseg += c.n;
    ch->ncut += ncut;
    ch->last_ts = ts + (c.n - 1) * c.step;
    PyObject *a = Py_BuildValue("(Onin)", key, c.n, how, mss);
    if (a == NULL || PyList_Append(ch->aggs, a) < 0) {
        Py_XDECREF(a);
        goto done;
    }
    Py_DECREF(a);
    r = 1;
done:
    Py_DECREF(key);
    return r;
}

/* a record engine.GSOSplitter._fast_small_tcp4 passes unchanged with
 * flow state: untagged Ethernet / IPv4 (no options, not a fragment) / TCP
 * with payload, no SYN, captured in full, IP length the frame's, at most
 * the MTU and at most the segment size a SYN's MSS option (the peer's,
 * else its own) or --mss sets; its checksum, with `complete`, not a seed
 * (nor the IPv4 header checksum 0): the general path completes those.
 * Copied to ch->out with its flow's largest payload raised (the flow
 * added when new); 1, 0 when not one (nothing changed), -1 with an
 * exception */
static int
small_tcp4(struct chunk *ch, const unsigned char *rec, const unsigned char *d, uint32_t cap,
           uint32_t orig)
{
    if (cap != orig || cap < 54 || d[12] != 0x08 || d[13] != 0x00 || d[14] != 0x45
            || d[23] != 6)
        return 0;
    Py_ssize_t tot = ((Py_ssize_t)d[16] << 8) | d[17], thl = (Py_ssize_t)(d[46] >> 4) << 2;
    if ((((unsigned)d[20] << 8 | d[21]) & 0x3FFF) || tot + 14 != (Py_ssize_t)cap
            || tot > ch->mtu || thl < 20 || tot < 20 + thl || (d[47] & 0x02))
        return 0;
    Py_ssize_t P = tot - 20 - thl;
    if (P <= 0)
        return 0;
    if (ch->complete) {
        uint64_t seed = 6;
        for (int k = 26; k < 34; k += 2)
            seed += ((unsigned)d[k] << 8) | d[k + 1];
        unsigned field = ((unsigned)d[50] << 8) | d[51];
        if (field == fold_seed(seed + (uint64_t)(tot - 20)) || field == fold_seed(seed)
                || !(d[24] | d[25]))
            return 0;               /* a seed to complete: the general path */
    }
    PyObject *key = flow_key(ch, d, 0);
    if (key == NULL)
        return -1;
    int r = -1;
    PyObject *fl = PyDict_GetItemWithError(ch->flows, key);
    if (fl == NULL && PyErr_Occurred())
        goto done;
    if (ch->cfg_mss) {
        if (P > ch->cfg_mss) {
            r = 0;
            goto done;
        }
    } else {
        Py_ssize_t opt = thl - 20;
        PyObject *pk = flow_key(ch, d, 1);
        if (pk == NULL)
            goto done;
        PyObject *peer = PyDict_GetItemWithError(ch->flows, pk);
        Py_DECREF(pk);
        if (peer == NULL && PyErr_Occurred())
            goto done;
        long ps = peer ? flow_attr(peer, "syn_mss") : 0;
        long fs = fl ? flow_attr(fl, "syn_mss") : 0;
        if ((ps < 0 || fs < 0) && PyErr_Occurred())
            goto done;
        if ((peer && ps - opt >= TCP_MIN_GSO_SIZE && P > ps - opt)
                || (!(peer && ps - opt >= TCP_MIN_GSO_SIZE) && fl && fs - opt >= TCP_MIN_GSO_SIZE
                    && P > fs - opt)) {
            r = 0;                  /* to be cut: the general path */
            goto done;
        }
    }
    if (fl == NULL) {
        PyObject *nf = PyObject_CallNoArgs(ch->flow_cls);
        if (nf == NULL || PyDict_SetItem(ch->flows, key, nf) < 0) {
            Py_XDECREF(nf);
            goto done;
        }
        fl = nf;
        Py_DECREF(nf);              /* the dict holds it */
    }
    long lg = flow_attr(fl, "largest");
    if (lg < 0 && PyErr_Occurred())
        goto done;
    if (P > lg) {
        PyObject *v = PyLong_FromSsize_t(P);
        if (v == NULL || PyObject_SetAttrString(fl, "largest", v) < 0) {
            Py_XDECREF(v);
            goto done;
        }
        Py_DECREF(v);
    }
    if (room(ch, 16 + cap) < 0)
        goto done;
    memcpy(PyByteArray_AS_STRING(ch->out) + ch->used, rec, 16 + cap);
    ch->used += 16 + cap;
    ch->nrec++;
    ch->npassed++;
    if ((Py_ssize_t)cap > ch->maxcap)
        ch->maxcap = cap;
    r = 1;
done:
    Py_DECREF(key);
    return r;
}

/* what tunnel_pass finds: the engine passes the record for one of these
 * (pcapgro/gso/reasons.py Pass.SMALL, Pass.NO_HANDLER) */
enum { TUN_DECIDE = 0, TUN_SMALL, TUN_NO_HANDLER, TUN_DATA };

static inline unsigned
get16(const unsigned char *p)
{
    return ((unsigned)p[0] << 8) | p[1];
}

/* the outer IP header of an untagged Ethernet frame d (cap bytes, all
 * captured) as pcapgro/gso/ipv4.py / ipv6.py parse() reads it, for the
 * shapes taken here: IPv4 (not a fragment, total length not 0 and within
 * the frame) or IPv6 without extension headers (payload length not 0);
 * *l4off, *l4len, *proto set; 0 when not one of these (the engine decides) */
static int
outer_l3(const unsigned char *d, Py_ssize_t cap, Py_ssize_t *l4off, Py_ssize_t *l4len,
         int *proto)
{
    if (cap < 54)
        return 0;
    if (d[12] == 0x08 && d[13] == 0x00) {
        Py_ssize_t ihl = (Py_ssize_t)(d[14] & 15) << 2, tot = get16(d + 16);
        if (d[14] >> 4 != 4 || ihl < 20 || cap < 14 + ihl || (get16(d + 20) & 0x3FFF)
                || tot == 0 || tot < ihl || tot > cap - 14)
            return 0;
        *l4off = 14 + ihl;
        *l4len = tot - ihl;
        *proto = d[23];
        return 1;
    }
    if (d[12] != 0x86 || d[13] != 0xDD || d[14] >> 4 != 6)
        return 0;
    Py_ssize_t plen = get16(d + 18);
    int nh = d[20];
    if (plen == 0 || 54 + plen > cap || (nh != 17 && nh != 47 && nh != 4 && nh != 41))
        return 0;
    *l4off = 54;
    *l4len = plen;
    *proto = nh;
    return 1;
}

/* the inner L3 at off of a tunnelled frame (cap bytes) as
 * pcapgro/gso/tunnel.py split parses it: 1 when its parse fails or it is
 * not TCP (split returns None: "small"), 2 with *l4off / *l4len of the
 * TCP header, 0 for shapes left to the engine (a length of 0, IPv6
 * extension headers) */
static int
inner_l3(const unsigned char *d, Py_ssize_t cap, Py_ssize_t off, unsigned et,
         Py_ssize_t *l4off, Py_ssize_t *l4len)
{
    if (et == 0x0800) {
        if (cap < off + 20 || d[off] >> 4 != 4)
            return 1;
        Py_ssize_t ihl = (Py_ssize_t)(d[off] & 15) << 2, tot = get16(d + off + 2);
        if (ihl < 20 || cap < off + ihl || (get16(d + off + 6) & 0x3FFF))
            return 1;
        if (tot == 0)
            return 0;
        if (tot < ihl || tot > cap - off || d[off + 9] != 6)
            return 1;
        *l4off = off + ihl;
        *l4len = tot - ihl;
        return 2;
    }
    if (cap < off + 40 || d[off] >> 4 != 6)
        return 1;
    Py_ssize_t plen = get16(d + off + 4);
    int nh = d[off + 6];
    if (plen == 0 || nh == 0 || nh == 43 || nh == 60)
        return 0;
    if (nh == 44 || off + 40 + plen > cap || nh != 6)
        return 1;                   /* FRAGMENT, BAD_LENGTH, not TCP */
    *l4off = off + 40;
    *l4len = plen;
    return 2;
}

/* where udp_tunnel_idle found an inner TCP segment with payload */
struct inner_tcp {
    Py_ssize_t off, l4off, thl, P;      /* inner IP, TCP header, payload */
    unsigned et;                        /* inner EtherType */
};

/* pcapgro/gso/tunnel.py locate + split up to its first decision, for a
 * VXLAN (4789, 8472) or Geneve (6081) frame no longer than the MTU, UDP
 * header at u: TUN_SMALL when split returns None without touching flow
 * state (no tunnel it knows, no inner TCP, an inner TCP header without
 * SYN and payload: nothing to cut, no MSS to note), TUN_DATA for an
 * inner TCP segment with payload and no SYN (*it: where), else
 * TUN_DECIDE */
static int
udp_tunnel_idle(const unsigned char *d, Py_ssize_t cap, Py_ssize_t u, unsigned dport,
                struct inner_tcp *it)
{
    Py_ssize_t h = u + 8, off, mac = -1, l4off, l4len;
    if (cap < h + 8)
        return TUN_SMALL;
    unsigned et;
    if (dport != 6081) {
        mac = h + 8;                                    /* VXLAN */
    } else {
        Py_ssize_t hl = 8 + (Py_ssize_t)(d[h] & 0x3F) * 4;
        et = get16(d + h + 2);
        if (d[h] >> 6)
            return TUN_SMALL;
        if (et == 0x6558)
            mac = h + hl;
        else if (et != 0x0800 && et != 0x86DD)
            return TUN_SMALL;
        off = h + hl;
    }
    if (mac >= 0) {
        if (cap < mac + 14)
            return TUN_SMALL;
        et = get16(d + mac + 12);
        if (et != 0x0800 && et != 0x86DD)
            return TUN_SMALL;
        off = mac + 14;
    }
    int r = inner_l3(d, cap, off, et, &l4off, &l4len);
    if (r != 2)
        return r ? TUN_SMALL : TUN_DECIDE;
    if (cap < l4off + 20)
        return TUN_SMALL;                               /* tcp.parse: TRUNCATED */
    Py_ssize_t thl = (Py_ssize_t)(d[l4off + 12] >> 4) << 2;
    if (thl < 20 || l4len < thl || cap < l4off + thl)
        return TUN_SMALL;
    if (d[l4off + 13] & 0x02)
        return TUN_DECIDE;                              /* a SYN's MSS */
    if (l4len == thl)
        return TUN_SMALL;
    it->off = off;
    it->l4off = l4off;
    it->thl = thl;
    it->P = l4len - thl;
    it->et = et;
    return TUN_DATA;
}

/* tunnel.py split's size rule for an inner TCP segment with payload no
 * longer than the MTU (TUN_DATA): with --mss it is cut when longer,
 * else only when its flow (key (section, 0, kind, src, dst, sport,
 * dport)) noted a SYN's MSS option it exceeds (tunnel._mss, OWN_SYN; the
 * MTU rule does not cut a frame that fits); TUN_SMALL when not cut,
 * TUN_DECIDE when cut, -1 with an exception */
static int
inner_data_fits(const struct chunk *ch, const unsigned char *d, unsigned dport,
                const struct inner_tcp *it)
{
    if (ch->cfg_mss)
        return it->P > ch->cfg_mss ? TUN_DECIDE : TUN_SMALL;
    int v4 = it->et == 0x0800;
    const unsigned char *a = d + it->off + (v4 ? 12 : 8), *th = d + it->l4off;
    Py_ssize_t alen = v4 ? 4 : 16;
    PyObject *key = Py_BuildValue("(OOsy#y#ll)", ch->sec, ch->zero,
                                  dport == 6081 ? "geneve" : "vxlan", a, alen, a + alen, alen,
                                  (long)get16(th), (long)get16(th + 2));
    if (key == NULL)
        return -1;
    PyObject *fl = PyDict_GetItemWithError(ch->flows, key);
    Py_DECREF(key);
    if (fl == NULL)
        return PyErr_Occurred() ? -1 : TUN_SMALL;
    long m = flow_attr(fl, "syn_mss");
    if (m < 0 && PyErr_Occurred())
        return -1;
    m -= (long)it->thl - 20;
    return m >= TCP_MIN_GSO_SIZE && it->P > m ? TUN_DECIDE : TUN_SMALL;
}

/* a tunnelled record engine.GSOSplitter.split passes unchanged without
 * changing flow state (the compiled loop copies it): untagged Ethernet,
 * captured in full, outer IP as outer_l3 takes it, at most the MTU,
 * carrying GRE, IPIP or SIT without --mss (TUN_NO_HANDLER: split cuts
 * only frames over the MTU), or UDP to a VXLAN / Geneve port, not over
 * --gso-size (gso_size; -1: none), that udp_tunnel_idle finds idle or
 * inner_data_fits lets through (TUN_SMALL, GSOSplitter._udp); TUN_DECIDE
 * for everything else, -1 with an exception */
static int
tunnel_pass(const struct chunk *ch, const unsigned char *d, uint32_t cap, uint32_t orig)
{
    Py_ssize_t l4off, l4len;
    int proto;
    if (cap != orig || (Py_ssize_t)cap - 14 > ch->mtu || !outer_l3(d, cap, &l4off, &l4len, &proto))
        return TUN_DECIDE;
    if (proto == 47 || proto == 4 || proto == 41)
        return ch->cfg_mss ? TUN_DECIDE : TUN_NO_HANDLER;
    if (proto != 17 || (Py_ssize_t)cap < l4off + 8 || l4len < 8)
        return TUN_DECIDE;
    unsigned dport = get16(d + l4off + 2);
    if (dport != 4789 && dport != 8472 && dport != 6081)
        return TUN_DECIDE;
    if (ch->gso_size >= 0 && l4len - 8 > ch->gso_size)
        return TUN_DECIDE;
    struct inner_tcp it;
    int r = udp_tunnel_idle(d, cap, l4off, dport, &it);
    return r == TUN_DATA ? inner_data_fits(ch, d, dport, &it) : r;
}

/* a record's time in ns (RecordChunk.columns: sec * 1e9 + fraction * mul) */
static inline long long
rec_time(const unsigned char *h, int swap, long long mul)
{
    return (long long)get32h(h, swap) * 1000000000LL + (long long)get32h(h + 4, swap) * mul;
}

PyDoc_STRVAR(split_chunk_doc,
"split_chunk(out, buf, recs, start, swap, mul, mtu, complete, mss, mtu_explicit,\n"
"            fixed_id, link_rate, flows, section, flow_cls[, gso_size])\n"
"    -> (end, nrec, maxcap, last_ts, npassed, nseg, ncut, aggs, nnohandler)\n\n"
"The records of a pcap chunk (``buf``, record header offsets ``recs``)\n"
"from index ``start`` that split handles without a\n"
"Packet, appended to bytearray ``out`` as pcap records (``swap``: headers\n"
"in the other byte order; ``mul``: ns per fraction unit): those\n"
"pcapgro/gso/engine.py passes with no flow state are copied (tunnelled\n"
"frames too: GRE / IPIP / SIT no larger than the MTU without --mss, counted\n"
"in ``nnohandler``; VXLAN / Geneve ones whose inner TCP has no payload and\n"
"no SYN, not over ``gso_size`` (-1: none)), and so are\n"
"the data segments it passes with flow state only (_fast_small_tcp4: no\n"
"larger than the MTU and the segment size; the flow's largest raised), untagged\n"
"Ethernet / IPv4 / TCP super-frames with a known next time (not the\n"
"chunk's last record) are cut as the general path (the Python reference,\n"
"engine.GSOSplitter.split) cuts them:\n"
"segment size from ``mss`` (0: none), the flows dict ``flows`` (keys\n"
"(section, 0, src, dst, sport, dport), values flow_cls() objects with\n"
"syn_mss and largest; a new flow is added) and ``mtu``; timestamps\n"
"spread at ``link_rate`` bit/s.  Stops at the first record it does not\n"
"handle.  Returns the index it stopped at, records written, the largest\n"
"captured length, the time of the last record written (-1: none), the\n"
"records passed, the segments made (of those not all captured: 0 here)\n"
"and a list (key, n, source code, size) per super-frame cut (the\n"
"statistics are kept in Python).");

static PyObject *
split_chunk(PyObject *self, PyObject *args)
{
    Py_buffer b;
    PyObject *recs, *res = NULL;
    Py_ssize_t start;
    struct chunk ch;
    memset(&ch, 0, sizeof ch);
    ch.gso_size = -1;
    if (!PyArg_ParseTuple(args, "Oy*O!niLnpnppLO!OO|n", &ch.out, &b, &PyList_Type, &recs,
                          &start, &ch.swap, &ch.mul, &ch.mtu,
                          &ch.complete, &ch.cfg_mss, &ch.mtu_explicit, &ch.fixed_id, &ch.rate,
                          &PyDict_Type, &ch.flows, &ch.sec, &ch.flow_cls, &ch.gso_size))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(recs), i = start;
    if (!PyByteArray_Check(ch.out) || ch.mul < 1 || ch.rate < 0) {
        PyErr_SetString(PyExc_ValueError, "split_chunk: bad arguments");
        goto fail;
    }
    ch.used = ch.alloc = PyByteArray_GET_SIZE(ch.out);
    ch.last_ts = -1;
    ch.zero = PyLong_FromLong(0);
    ch.aggs = PyList_New(0);
    if (ch.zero == NULL || ch.aggs == NULL)
        goto fail;
    const unsigned char *buf = b.buf;
    for (; i < n; i++) {
        Py_ssize_t r = PyLong_AsSsize_t(PyList_GET_ITEM(recs, i));
        if (r < 0 || r + 16 > b.len) {
            PyErr_Clear();
            break;
        }
        uint32_t cap = get32h(buf + r + 8, ch.swap), orig = get32h(buf + r + 12, ch.swap);
        const unsigned char *d = buf + r + 16;
        if (r + 16 + (Py_ssize_t)cap > b.len)
            break;
        long long ts = rec_time(buf + r, ch.swap, ch.mul);
        int tp = stateless_pass(d, cap, orig, ch.mtu, ch.complete) ? TUN_SMALL
                                                                   : tunnel_pass(&ch, d, cap, orig);
        if (tp < 0 || (tp && copy_record(&ch, buf + r, cap, ts) < 0))
            goto fail;
        if (tp) {
            *(tp == TUN_NO_HANDLER ? &ch.nnohandler : &ch.npassed) += 1;
            continue;
        }
        int sm = small_tcp4(&ch, buf + r, d, cap, orig);
        if (sm < 0)
            goto fail;
        if (sm) {
            ch.last_ts = ts;
            continue;
        }
        if (i + 1 >= n)
            break;
        Py_ssize_t r2 = PyLong_AsSsize_t(PyList_GET_ITEM(recs, i + 1));
        if (r2 < 0 || r2 + 16 > b.len) {
            PyErr_Clear();
            break;
        }
        long long next = rec_time(buf + r2, ch.swap, ch.mul);
        int s = super_tcp4(&ch, d, cap, orig, ts, next);
        if (s < 0)
            goto fail;
        if (!s)
            break;
    }
    if (PyByteArray_Resize(ch.out, ch.used) < 0)
        goto fail;
    res = Py_BuildValue("nnnLnnnOn", i, ch.nrec, ch.maxcap, ch.last_ts, ch.npassed, ch.nseg,
                        ch.ncut, ch.aggs, ch.nnohandler);
fail:
    if (res == NULL && ch.alloc > ch.used)
        PyByteArray_Resize(ch.out, ch.used);     /* what was written stays valid */
    Py_XDECREF(ch.zero);
    Py_XDECREF(ch.aggs);
    PyBuffer_Release(&b);
    return res;
}

static PyMethodDef methods[] = {
    {"segment", segment, METH_VARARGS, segment_doc},
    {"split_chunk", split_chunk, METH_VARARGS, split_chunk_doc},
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
