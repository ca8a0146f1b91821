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
 * tests/test_gso_tunnels_cseg.py runs both).  The decisions (which
 * packets are split, the segment size, timestamps) are made by the Python
 * reference (pcapgro/gso/engine.py, gso/tunnel.py) and, for the records
 * split_chunk's loop takes (plain Ethernet / IPv4 / TCP; tunnelled frames
 * under untagged Ethernet: tunnel_frame), again here, the same way.
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
 * `ok` 0: not all captured, the super-frame's field stays).  `l4` >= 0:
 * the inner TCP segment from offset l4 on, its checksum valid, sums to
 * `l4sum` (mod 0xFFFF): only the bytes before it are summed again (the
 * kernel's local checksum offload, lco_csum, does the same) */
static void
outer_tunnel(const struct outer *t, unsigned char *f, Py_ssize_t cap, Py_ssize_t wire, int ok,
             Py_ssize_t l4, uint64_t l4sum)
{
    if (t->udp)
        put16(f + t->tun_off + 4, (unsigned)(wire - t->tun_off));
    if (t->csum_at < 0 || !ok)
        return;
    f[t->csum_at] = f[t->csum_at + 1] = 0;
    uint64_t s = l4 >= 0 ? be_sum(f + t->tun_off, l4 - t->tun_off) + l4sum
                         : be_sum(f + t->tun_off, cap - t->tun_off);
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
    Py_ssize_t l4 = c->l3off + c->hl, wire = l4 + c->thl + len;
    outer_ip(t, rec + 16, wire, k);
    if (t->tun_off < 0)
        return;
    /* a valid TCP checksum makes the segment's bytes sum to minus its
     * pseudo-header (psum + length); at an even distance from the tunnel
     * header that is their share of the outer sum */
    if (c->proto != 6 || ((l4 - t->tun_off) & 1))
        l4 = -1;
    outer_tunnel(t, rec + 16, caplen, wire, ok, l4,
                 0xFFFF - (c->psum + (uint64_t)(c->thl + len)) % 0xFFFF);
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

/* what tunnel_frame decides for a record: left to the engine (the
 * Python reference decides), passed unchanged for one of the PASS_*
 * reasons (pcapgro/gso/reasons.py Pass, in the order of cseg._PASSES),
 * or cut (TUN_CUT) */
enum { TUN_DECIDE = -2 };
enum { PASS_SMALL, PASS_NO_HANDLER, PASS_TUNNEL, PASS_RECORD_LENGTHS, PASS_TRUNCATED,
       PASS_BAD_LENGTH, NPASS, TUN_CUT = NPASS };

/* split_chunk's settings and running totals */
struct chunk {
    PyObject *out, *flows, *sec, *zero, *flow_cls, *aggs;
    Py_ssize_t mtu, cfg_mss, gso_size, used, alloc;
    int swap, complete, mtu_explicit, fixed_id;
    long long mul, rate, last_ts;
    Py_ssize_t nrec, maxcap, npassed, nseg, ncut;
    Py_ssize_t npass[NPASS];           /* tunnelled records passed, per PASS_* reason */
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

/* the SYN MSS options that bound a segment of flow fl (NULL: not seen
 * yet) in frame d: the peer flow's (*ps; *peer whether that flow is
 * known) and its own (*fs); 0 where there is none; 0, or -1 with an
 * exception */
static int
syn_mss_of(struct chunk *ch, const unsigned char *d, PyObject *fl, long *ps, long *fs,
           int *peer)
{
    PyObject *pk = flow_key(ch, d, 1);
    if (pk == NULL)
        return -1;
    PyObject *pf = PyDict_GetItemWithError(ch->flows, pk);
    Py_DECREF(pk);
    if (pf == NULL && PyErr_Occurred())
        return -1;
    *peer = pf != NULL;
    *ps = pf ? flow_attr(pf, "syn_mss") : 0;
    *fs = fl ? flow_attr(fl, "syn_mss") : 0;
    return (*ps < 0 || *fs < 0) && PyErr_Occurred() ? -1 : 0;
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
    long ps, fs;
    int peer;
    if (syn_mss_of(ch, d, fl, &ps, &fs, &peer) < 0)
        return -1;
    long lg = fl ? flow_attr(fl, "largest") : 0;
    if (lg < 0 && PyErr_Occurred())
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

/* engine._step: ns between segments (the first first_len bytes on the
 * wire, n segments, the next record at next: -1 none known) */
static long long
seg_step(const struct chunk *ch, Py_ssize_t first_len, Py_ssize_t n, long long ts, long long next)
{
    long long step = 0;
    if (ch->rate) {
        long long bits = (long long)first_len * 8000000000LL;
        step = bits / ch->rate + (bits % ch->rate != 0);
        if (next >= 0) {
            long long gap = next - ts;
            long long cap = gap > 0 ? gap / n : 0;
            if (cap < step)
                step = cap;
        }
    }
    return step;
}

/* the segments of super-frame *c (and, for one inside a tunnel, its
 * outer headers *o fixed per segment; NULL: none) appended to ch->out,
 * its (key, n, size source, size) to ch->aggs (`key`: a new reference,
 * taken; NULL: the error of making it); 0, or -1 with an exception */
static int
write_cut(struct chunk *ch, const struct cut *c, const struct outer *o, PyObject *key, int how)
{
    int r = -1;
    if (key == NULL || room(ch, c->n * (16 + c->l3off + c->hl + c->thl) + c->cap_pay) < 0)
        goto done;
    unsigned char *o0 = (unsigned char *)PyByteArray_AS_STRING(ch->out) + ch->used, *w = o0;
    Py_ssize_t caplen, ncut = 0;
    int ok;
    for (Py_ssize_t k = 0; k < c->n; k++) {
        unsigned char *rec = w;
        w = write_segment(c, k, w, &caplen, &ok);
        if (o)
            fix_outer(o, c, rec, k, caplen, ok);
        ncut += !ok;
        if (caplen > ch->maxcap)
            ch->maxcap = caplen;
    }
    ch->used += w - o0;
    ch->nrec += c->n;
    ch->nseg += c->n;
    ch->ncut += ncut;
    ch->last_ts = c->ts + (c->n - 1) * c->step;
    PyObject *a = Py_BuildValue("(Onin)", key, c->n, how, c->mss);
    if (a == NULL || PyList_Append(ch->aggs, a) < 0) {
        Py_XDECREF(a);
        goto done;
    }
    Py_DECREF(a);
    r = 0;
done:
    Py_XDECREF(key);
    return r;
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
    Py_INCREF(key);
    if (write_cut(ch, &c, NULL, key, how) < 0)
        goto done;
    r = 1;
done:
    Py_DECREF(key);
    return r;
}

/* whether payload P of the TCP segment in frame d (opt bytes of TCP
 * options) exceeds the segment size --mss sets, or else a SYN's MSS option
 * (the peer flow's, else its own flow fl's, when at least
 * TCP_MIN_GSO_SIZE after the options): 1 (to be cut), 0, -1 with an
 * exception */
static int
beyond_mss(struct chunk *ch, PyObject *fl, const unsigned char *d, Py_ssize_t opt, Py_ssize_t P)
{
    if (ch->cfg_mss)
        return P > ch->cfg_mss;
    long ps, fs;
    int peer;
    if (syn_mss_of(ch, d, fl, &ps, &fs, &peer) < 0)
        return -1;
    if (peer && ps - opt >= TCP_MIN_GSO_SIZE)
        return P > ps - opt;
    return fl && fs - opt >= TCP_MIN_GSO_SIZE && P > fs - opt;
}

/* the flow (key; fl when known, NULL: added) has seen payload P: its
 * largest raised; 0, or -1 with an exception */
static int
note_largest(struct chunk *ch, PyObject *key, PyObject *fl, Py_ssize_t P)
{
    if (fl == NULL) {
        PyObject *nf = PyObject_CallNoArgs(ch->flow_cls);
        if (nf == NULL || PyDict_SetItem(ch->flows, key, nf) < 0) {
            Py_XDECREF(nf);
            return -1;
        }
        fl = nf;
        Py_DECREF(nf);              /* the dict holds it */
    }
    long lg = flow_attr(fl, "largest");
    if (lg < 0 && PyErr_Occurred())
        return -1;
    if (P <= lg)
        return 0;
    PyObject *v = PyLong_FromSsize_t(P);
    if (v == NULL || PyObject_SetAttrString(fl, "largest", v) < 0) {
        Py_XDECREF(v);
        return -1;
    }
    Py_DECREF(v);
    return 0;
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
    int cut = beyond_mss(ch, fl, d, thl - 20, P);
    if (cut) {
        r = cut > 0 ? 0 : -1;       /* to be cut: the general path */
        goto done;
    }
    if (note_largest(ch, key, fl, P) < 0)
        goto done;
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


/* pcapgro/gso/tunnel.py's kinds (the flow key names them) */
static const char *const KIND_NAME[] = {"vxlan", "geneve", "gre", "ipip"};
enum { KIND_VXLAN, KIND_GENEVE, KIND_GRE, KIND_IPIP };

#define GSO_MAX_SIZE 524280         /* pcapgro/gso/ipv4.py GSO_MAX_SIZE */
#define TCP_SYN 0x02
#define TCP_RST 0x04

static inline unsigned
get16(const unsigned char *p)
{
    return ((unsigned)p[0] << 8) | p[1];
}

/* a tunnelled record as tunnel_frame reads it: the outer IP header at 14
 * (untagged Ethernet), the tunnel, the inner IP and TCP headers; what
 * it cuts with */
struct tframe {
    const unsigned char *d;
    Py_ssize_t cap, end;                /* captured bytes, original length (no FCS) */
    Py_ssize_t ohl, ol4off, ol4len;     /* outer IP header length, its payload */
    int ofamily, oproto, kind;
    unsigned long oipid;
    Py_ssize_t tun_off, csum_at;        /* UDP / GRE header, its checksum; -1: none */
    Py_ssize_t off, ihl, l4off, l4len, thl, P, mss;   /* inner IP, TCP, payload */
    int ifamily, how;                   /* inner IP version; size source SRC_* */
    unsigned long iipid;
    unsigned et;                        /* inner EtherType */
    const unsigned char *pdst;          /* inner pseudo-header destination (16 or 4 bytes) */
};

/* the outer IP header of untagged Ethernet frame t->d as
 * pcapgro/gso/ipv4.py / ipv6.py parse() reads it (orig length t->end),
 * for the shapes taken here: IPv4 (captured, not a fragment, total
 * length not 0) or IPv6 without extension headers (payload length not 0)
 * carrying UDP, GRE, IPIP or IPv6; 0 for every other frame (the engine
 * decides) */
static int
outer_l3(struct tframe *t)
{
    const unsigned char *d = t->d;
    Py_ssize_t cap = t->cap;
    if (cap < 34 || cap > t->end)
        return 0;
    if (d[12] == 0x08 && d[13] == 0x00) {
        Py_ssize_t ihl = (Py_ssize_t)(d[14] & 15) << 2, tot = get16(d + 16);
        if (d[14] >> 4 != 4 || ihl < 20 || cap < 14 + ihl || (get16(d + 20) & 0x3FFF)
                || tot == 0 || tot < ihl || tot > t->end - 14)
            return 0;
        t->ofamily = 4;
        t->ohl = ihl;
        t->ol4len = tot - ihl;
        t->oproto = d[23];
        t->oipid = get16(d + 18);
    } else {
        if (cap < 54 || d[12] != 0x86 || d[13] != 0xDD || d[14] >> 4 != 6)
            return 0;
        Py_ssize_t plen = get16(d + 18);
        if (plen == 0 || 54 + plen > t->end)
            return 0;
        t->ofamily = 6;
        t->ohl = 40;
        t->ol4len = plen;
        t->oproto = d[20];
        t->oipid = 0;
    }
    t->ol4off = 14 + t->ohl;
    return t->oproto == 17 || t->oproto == 47 || t->oproto == 4 || t->oproto == 41;
}

/* tunnel.py _inner_eth: the inner IP behind an inner Ethernet header at
 * mac (no VLAN tag); 0 when there is none */
static int
inner_eth(struct tframe *t, Py_ssize_t mac)
{
    if (t->cap < mac + 14)
        return 0;
    t->et = get16(t->d + mac + 12);
    t->off = mac + 14;
    return t->et == 0x0800 || t->et == 0x86DD;
}

/* tunnel.py locate (_udp_tunnel, _gre, IP-in-IP): the tunnel's kind,
 * header and checksum offsets, the inner IP's offset and EtherType; 0
 * when there is no tunnel it cuts */
static int
tun_locate(struct tframe *t)
{
    const unsigned char *d = t->d;
    Py_ssize_t u = t->ol4off;
    t->tun_off = t->csum_at = -1;
    if (t->oproto == 4 || t->oproto == 41) {
        t->kind = KIND_IPIP;
        t->off = u;
        t->et = t->oproto == 4 ? 0x0800 : 0x86DD;
        return 1;
    }
    t->tun_off = u;
    if (t->oproto == 47) {                              /* _gre */
        t->kind = KIND_GRE;
        if (t->cap < u + 4)
            return 0;
        unsigned flags = get16(d + u);
        if (flags & ~0xA000u)
            return 0;
        Py_ssize_t hl = 4 + (flags & 0x2000 ? 4 : 0) + (flags & 0x8000 ? 4 : 0);
        if (flags & 0x8000)
            t->csum_at = u + 4;
        t->et = get16(d + u + 2);
        if (t->et == 0x6558)
            return inner_eth(t, u + hl);
        t->off = u + hl;
        return t->et == 0x0800 || t->et == 0x86DD;
    }
    Py_ssize_t h = u + 8;                               /* _udp_tunnel */
    t->kind = get16(d + u + 2) == 6081 ? KIND_GENEVE : KIND_VXLAN;
    if (t->cap < h + 8)
        return 0;
    if (d[u + 6] | d[u + 7])
        t->csum_at = u + 6;
    if (t->kind == KIND_VXLAN)
        return inner_eth(t, h + 8);
    Py_ssize_t hl = 8 + (Py_ssize_t)(d[h] & 0x3F) * 4;
    t->et = get16(d + h + 2);
    if (d[h] >> 6)
        return 0;
    if (t->et == 0x6558)
        return inner_eth(t, h + hl);
    t->off = h + hl;
    return t->et == 0x0800 || t->et == 0x86DD;
}

/* ipv6.py _has_jumbo: the options header at d + off (hl bytes) holds a
 * Jumbo Payload option */
static int
has_jumbo(const unsigned char *d, Py_ssize_t off, Py_ssize_t hl)
{
    Py_ssize_t i = off + 2, end = off + hl;
    while (i < end) {
        if (d[i] == 0) {
            i++;
            continue;
        }
        if (i + 1 >= end)
            return 0;
        if (d[i] == 0xC2)
            return 1;
        i += 2 + d[i + 1];
    }
    return 0;
}

/* ipv6.py _walk_ext: the Hop-by-Hop (first only), Routing and
 * Destination Options headers from *off (next header *nh) of frame d
 * (cap bytes captured): *nh, *off the upper layer's, t->pdst the final
 * destination a Routing header with segments left names; 0 for a Pass
 * (TRUNCATED, EXT_HEADER, FRAGMENT) */
static int
v6_walk(struct tframe *t, int *nh, Py_ssize_t *off)
{
    const unsigned char *d = t->d;
    int first = 1;
    while (*nh == 0 || *nh == 43 || *nh == 60) {
        Py_ssize_t o = *off;
        if ((*nh == 0 && !first) || t->cap < o + 2)
            return 0;
        Py_ssize_t hl = ((Py_ssize_t)d[o + 1] + 1) << 3;
        if (t->cap < o + hl)
            return 0;
        if (*nh != 43) {
            if (has_jumbo(d, o, hl))
                return 0;
        } else if (d[o + 3] && hl >= 24) {          /* segments left */
            if (d[o + 2] == 0)
                t->pdst = d + o + hl - 16;
            else if (d[o + 2] == 2 || d[o + 2] == 4)
                t->pdst = d + o + 8;
        }
        *nh = d[o];
        *off = o + hl;
        first = 0;
    }
    return *nh != 44;
}

/* the inner IP header at t->off as ipv4.py / ipv6.py parse() reads it
 * with the record's original length as the frame's end: 1 for TCP
 * (t->ihl: IP header with options or IPv6 extension headers, t->l4off,
 * t->l4len, t->pdst set), 0 when the parse fails or it is not TCP
 * (tunnel.py split returns None), TUN_DECIDE for an IPv6 Hop-by-Hop
 * header with payload length 0 (a BIG TCP jumbo header: left to the
 * engine) */
static int
inner_l3(struct tframe *t)
{
    const unsigned char *d = t->d;
    Py_ssize_t off = t->off, cap = t->cap, wire = t->end - off;
    if (t->et == 0x0800) {
        if (cap < off + 20 || d[off] >> 4 != 4)
            return 0;
        Py_ssize_t ihl = (Py_ssize_t)(d[off] & 15) << 2, tot = get16(d + off + 2), l3len = tot;
        if (ihl < 20 || cap < off + ihl || (get16(d + off + 6) & 0x3FFF))
            return 0;
        if (tot == 0) {
            if (wire > GSO_MAX_SIZE)
                return 0;
            l3len = wire;
        } else if (tot < ihl || tot > wire) {
            return 0;
        }
        if (l3len < ihl || d[off + 9] != 6)
            return 0;
        t->ifamily = 4;
        t->ihl = ihl;
        t->iipid = get16(d + off + 4);
        t->l4len = l3len - ihl;
        t->pdst = d + off + 16;
        t->l4off = off + ihl;
        return 1;
    }
    if (cap < off + 40 || d[off] >> 4 != 6)
        return 0;
    Py_ssize_t plen = get16(d + off + 4), e = plen ? off + 40 + plen : t->end, l4off = off + 40;
    int nh = d[off + 6];
    if (nh == 0 && plen == 0)
        return TUN_DECIDE;                              /* a BIG TCP jumbo header to remove */
    t->pdst = d + off + 24;
    if (!v6_walk(t, &nh, &l4off) || (!plen && e - off > GSO_MAX_SIZE) || e > t->end
            || e < l4off || nh != 6)
        return 0;                                       /* a Pass, or not TCP */
    t->ifamily = 6;
    t->ihl = l4off - off;
    t->iipid = 0;
    t->l4len = e - l4off;
    t->l4off = l4off;
    return 1;
}

/* tcp.py syn_mss: the MSS option of the TCP header at th (thl bytes, all
 * captured), 0 when it has none (the option walk of tcp_parse_options) */
static unsigned
syn_mss(const unsigned char *th, Py_ssize_t thl)
{
    Py_ssize_t i = 20;
    while (i < thl) {
        unsigned kind = th[i];
        if (kind == 0)
            return 0;
        if (kind == 1) {
            i++;
            continue;
        }
        if (i + 1 >= thl || th[i + 1] < 2)
            return 0;
        unsigned size = th[i + 1];
        if (kind == 2 && size == 4 && i + 4 <= thl)
            return get16(th + i + 2);
        i += size;
    }
    return 0;
}

/* the inner flow's key as tunnel.py split builds it: (section, 0, kind,
 * inner src, inner dst, sport, dport); new reference or NULL */
static PyObject *
tun_key(const struct chunk *ch, const struct tframe *t)
{
    const unsigned char *d = t->d, *th = d + t->l4off;
    const unsigned char *a = d + t->off + (t->ifamily == 4 ? 12 : 8);
    Py_ssize_t alen = t->ifamily == 4 ? 4 : 16;
    return Py_BuildValue("(OOsy#y#ll)", ch->sec, ch->zero, KIND_NAME[t->kind], a, alen,
                         t->pdst, alen, (long)get16(th), (long)get16(th + 2));
}

/* tunnel.py split's SYN rule: the MSS option of an inner SYN noted in
 * its flow (flows.setdefault(key, flow_cls()).syn_mss = m); 0, or -1
 * with an exception */
static int
note_syn(const struct chunk *ch, PyObject *key, unsigned m)
{
    PyObject *fl = PyDict_GetItemWithError(ch->flows, key), *nf = NULL;
    if (fl == NULL) {
        if (PyErr_Occurred())
            return -1;
        nf = PyObject_CallNoArgs(ch->flow_cls);
        if (nf == NULL || PyDict_SetItem(ch->flows, key, nf) < 0) {
            Py_XDECREF(nf);
            return -1;
        }
        fl = nf;
    }
    PyObject *v = PyLong_FromUnsignedLong(m);
    int r = v == NULL ? -1 : PyObject_SetAttrString(fl, "syn_mss", v);
    Py_XDECREF(v);
    Py_XDECREF(nf);
    return r;
}

/* tunnel.py _mss (no recorded gso_size: pcap has none): --mss, else the
 * inner flow's SYN MSS less the TCP options (OWN_SYN), else what fits
 * the MTU with every header; t->mss, t->how set: 1, 0 when there is no
 * size (>= TCP_MIN_GSO_SIZE), -1 with an exception */
static int
tun_mss(const struct chunk *ch, struct tframe *t, PyObject *key)
{
    if (ch->cfg_mss) {
        t->mss = ch->cfg_mss;
        t->how = SRC_OPTION;
        return 1;
    }
    PyObject *fl = PyDict_GetItemWithError(ch->flows, key);
    if (fl == NULL && PyErr_Occurred())
        return -1;
    long m = fl ? flow_attr(fl, "syn_mss") : 0;
    if (m == -1 && PyErr_Occurred())
        return -1;
    if (fl && m - (t->thl - 20) >= TCP_MIN_GSO_SIZE) {
        t->mss = m - (t->thl - 20);
        t->how = SRC_OWN_SYN;
        return 1;
    }
    t->mss = ch->mtu - (t->l4off + t->thl - 14);
    t->how = SRC_MTU;
    return t->mss >= TCP_MIN_GSO_SIZE;
}

/* tunnel.py split after locate: the inner IP and TCP headers (a
 * GSO_PARTIAL frame's TCP length from the frame), an inner SYN's MSS
 * noted, the segment size, and whether it is cut (TUN_CUT), not cut
 * (`none`: the reason the engine passes it for), passed as
 * PASS_RECORD_LENGTHS, or left to the engine (TUN_DECIDE); -1 with an
 * exception */
static int
tun_split(const struct chunk *ch, struct tframe *t, int none)
{
    int r = inner_l3(t);
    if (r != 1)
        return r ? r : none;
    int big = t->end - 14 > ch->mtu;
    if (big && t->l4off + t->l4len < t->end) {
        if (t->end - 14 > GSO_MAX_SIZE)
            return PASS_RECORD_LENGTHS;                 /* no skb GSO is handed is that long */
        t->l4len = t->end - t->l4off;                   /* GSO_PARTIAL */
    }
    const unsigned char *th = t->d + t->l4off;
    if (t->cap < t->l4off + 20)
        return none;                                    /* tcp.parse: TRUNCATED */
    t->thl = (Py_ssize_t)(th[12] >> 4) << 2;
    if (t->thl < 20 || t->l4len < t->thl || t->cap < t->l4off + t->thl)
        return none;
    t->P = t->l4len - t->thl;
    if (!(th[13] & TCP_SYN) && (t->P == 0 || (th[13] & TCP_RST)))
        return none;                                    /* nothing to cut, no MSS to note */
    PyObject *key = tun_key(ch, t);
    if (key == NULL)
        return -1;
    unsigned m = th[13] & TCP_SYN ? syn_mss(th, t->thl) : 0;
    r = m && note_syn(ch, key, m) < 0 ? -1 : tun_mss(ch, t, key);
    Py_DECREF(key);
    if (r <= 0)
        return r < 0 ? -1 : none;
    Py_ssize_t first = t->l4off + t->thl + (t->mss < t->P ? t->mss : t->P);
    if (t->P <= t->mss || (th[13] & (TCP_SYN | TCP_RST)) || (!big && t->how == SRC_MTU))
        return none;                                    /* not a super-frame */
    if (first - 14 - (t->ofamily == 4 ? 0 : 40) > 0xFFFF
            || (t->kind <= KIND_GENEVE && first - t->tun_off > 0xFFFF)
            || first - t->off - (t->ifamily == 4 ? 0 : 40) > 0xFFFF)
        return none;                                    /* a length field would overflow */
    return TUN_CUT;
}

/* a record (frame d, cap bytes of orig) as engine.GSOSplitter.split
 * decides it when it is tunnelled (the outer shapes outer_l3 takes): a
 * PASS_* reason, TUN_CUT (*t filled in), TUN_DECIDE (the engine
 * decides: other frames), -1 with an exception.  GSOSplitter._udp for
 * UDP to a VXLAN / Geneve port (passed "small" when tunnel.split does
 * not cut it and it is no larger than the MTU nor --gso-size, else
 * "tunnel"); GSOSplitter.split / _tunnel for GRE, IPIP, SIT, IP4IP6,
 * IP6IP6 (cut only when over the MTU or with --mss, else passed
 * "no_handler"; "tunnel" when over the MTU and not cut) */
static int
tunnel_frame(const struct chunk *ch, const unsigned char *d, uint32_t cap, uint32_t orig,
             struct tframe *t)
{
    t->d = d;
    t->cap = cap;
    t->end = orig;
    if (!outer_l3(t))
        return TUN_DECIDE;
    int big = (t->ohl + t->ol4len > orig - 14 ? t->ohl + t->ol4len : orig - 14) > ch->mtu;
    if (t->oproto != 17) {
        if (!big && !ch->cfg_mss)
            return PASS_NO_HANDLER;
        return tun_locate(t) ? tun_split(ch, t, big ? PASS_TUNNEL : PASS_NO_HANDLER)
                             : (big ? PASS_TUNNEL : PASS_NO_HANDLER);
    }
    if ((Py_ssize_t)cap < t->ol4off + 8)
        return PASS_TRUNCATED;
    if (t->ol4len < 8)
        return PASS_BAD_LENGTH;
    unsigned dport = get16(d + t->ol4off + 2);
    if (dport != 4789 && dport != 8472 && dport != 6081)
        return TUN_DECIDE;                              /* plain UDP */
    if (ch->gso_size >= 0 && t->ol4len - 8 > ch->gso_size)
        big = 1;
    int none = big ? PASS_TUNNEL : PASS_SMALL;
    return tun_locate(t) ? tun_split(ch, t, none) : none;
}

/* the segments of a tunnelled super-frame tunnel_frame cut (*t), as
 * GSOSplitter._emit_raw lays them out with the compiled segmenter: the
 * inner TCP as write_segment cuts it, every outer header fixed
 * (fix_outer); time ts, the next record's next (-1: none); its
 * (key, n, source, size) appended to ch->aggs; 0, or -1 with an
 * exception */
static int
tun_cut(struct chunk *ch, const struct tframe *t, long long ts, long long next)
{
    const unsigned char *d = t->d;
    struct cut c;
    struct outer o;
    c.d = d;
    c.h3 = d + t->off;
    c.l3off = t->off;
    c.hl = t->ihl;
    c.thl = t->thl;
    c.family = t->ifamily;
    c.proto = 6;
    c.ipid = t->iipid;
    c.fixed_id = ch->fixed_id;
    c.swap = ch->swap;
    c.mul = ch->mul;
    c.P = t->P;
    c.mss = t->mss;
    c.n = (t->P + t->mss - 1) / t->mss;
    c.poff = t->l4off + t->thl;
    c.cap_pay = t->cap - c.poff < t->P ? t->cap - c.poff : t->P;
    Py_ssize_t alen = t->ifamily == 4 ? 4 : 16;
    c.psum = 6 + be_sum(d + t->off + (t->ifamily == 4 ? 12 : 8), alen) + be_sum(t->pdst, alen);
    c.ts = ts;
    c.step = seg_step(ch, c.poff + (t->mss < t->P ? t->mss : t->P), c.n, ts, next);
    memcpy(c.l4, d + t->l4off, t->thl);
    c.seq0 = ((uint32_t)c.l4[4] << 24) | ((uint32_t)c.l4[5] << 16) | ((uint32_t)c.l4[6] << 8)
             | c.l4[7];
    c.flags0 = c.l4[13];
    o.l3off = 14;
    o.hl = t->ohl;
    o.family = t->ofamily;
    o.ipid = t->oipid;
    o.tun_off = t->tun_off;
    o.csum_at = t->csum_at;
    o.udp = t->kind <= KIND_GENEVE;
    o.psum = o.udp ? 17 + be_sum(d + (t->ofamily == 4 ? 26 : 22), t->ofamily == 4 ? 8 : 32) : 0;
    return write_cut(ch, &c, &o, tun_key(ch, t), t->how);
}

/* a record's time in ns (RecordChunk.columns: sec * 1e9 + fraction * mul) */
static inline long long
rec_time(const unsigned char *h, int swap, long long mul)
{
    return (long long)get32h(h, swap) * 1000000000LL + (long long)get32h(h + 4, swap) * mul;
}

PyDoc_STRVAR(split_chunk_doc,
"split_chunk(out, buf, recs, start, swap, mul, mtu, complete, mss, mtu_explicit,\n"
"            fixed_id, link_rate, flows, section, flow_cls[, gso_size[, tail]])\n"
"    -> (end, nrec, maxcap, last_ts, npassed, nseg, ncut, aggs, tunnel_passes)\n\n"
"The records of a pcap chunk (``buf``, record header offsets ``recs``)\n"
"from index ``start`` that split handles without a\n"
"Packet, appended to bytearray ``out`` as pcap records (``swap``: headers\n"
"in the other byte order; ``mul``: ns per fraction unit): those\n"
"pcapgro/gso/engine.py passes with no flow state are copied, and so are\n"
"the data segments it passes with flow state only (_fast_small_tcp4: no\n"
"larger than the MTU and the segment size; the flow's largest raised);\n"
"untagged Ethernet / IPv4 / TCP super-frames are cut as the general path\n"
"(the Python reference, engine.GSOSplitter.split) cuts them:\n"
"segment size from ``mss`` (0: none), the flows dict ``flows`` (keys\n"
"(section, 0, src, dst, sport, dport), values flow_cls() objects with\n"
"syn_mss and largest; a new flow is added) and ``mtu``; timestamps\n"
"spread at ``link_rate`` bit/s.  Tunnelled records (untagged Ethernet,\n"
"outer IPv4 or IPv6 without extension headers, VXLAN, Geneve, GRE, IPIP,\n"
"SIT, IP4IP6, IP6IP6) are decided as engine.GSOSplitter.split and\n"
"gso/tunnel.py split decide them (an inner SYN's MSS noted in the flow\n"
"(section, 0, kind, src, dst, sport, dport); ``gso_size``: -1 none): cut\n"
"with every outer header fixed, or copied, counted per reason in\n"
"``tunnel_passes`` (small, no_handler, tunnel, record_lengths,\n"
"truncated, bad_length).  A super-frame that is the last record waits\n"
"for the next record's time: ``tail`` is that time (ns), -1 when there\n"
"is none (end of input), -2 (the default) when it is not known yet: the\n"
"loop stops before it.  Stops at the first record it does not\n"
"handle.  Returns the index it stopped at, records written, the largest\n"
"captured length, the time of the last record written (-1: none), the\n"
"plain records passed, the segments made (of those not all captured)\n"
"and a list (key, n, source code, size) per super-frame cut (the\n"
"statistics are kept in Python).");

/* one record of split_chunk's loop (header at buf + r, its frame d; the
 * record after it at r2, -1: none, then `tail` its time): 1 handled, 0
 * not (the loop stops), -1 with an exception */
static int
chunk_record(struct chunk *ch, const unsigned char *buf, Py_ssize_t r, Py_ssize_t r2,
             long long tail)
{
    uint32_t cap = get32h(buf + r + 8, ch->swap), orig = get32h(buf + r + 12, ch->swap);
    const unsigned char *d = buf + r + 16;
    long long ts = rec_time(buf + r, ch->swap, ch->mul);
    long long next = r2 >= 0 ? rec_time(buf + r2, ch->swap, ch->mul) : tail;
    if (stateless_pass(d, cap, orig, ch->mtu, ch->complete)) {
        ch->npassed++;
        return copy_record(ch, buf + r, cap, ts) < 0 ? -1 : 1;
    }
    struct tframe t;
    int tp = tunnel_frame(ch, d, cap, orig, &t);
    if (tp == -1)
        return -1;
    if (tp == TUN_CUT)
        return next == -2 ? 0 : tun_cut(ch, &t, ts, next) < 0 ? -1 : 1;
    if (tp >= 0) {
        ch->npass[tp]++;
        return copy_record(ch, buf + r, cap, ts) < 0 ? -1 : 1;
    }
    int sm = small_tcp4(ch, buf + r, d, cap, orig);
    if (sm) {
        if (sm > 0)
            ch->last_ts = ts;
        return sm;
    }
    return next == -2 ? 0 : super_tcp4(ch, d, cap, orig, ts, next);
}

static PyObject *
split_chunk(PyObject *self, PyObject *args)
{
    Py_buffer b;
    PyObject *recs, *res = NULL;
    Py_ssize_t start;
    long long tail = -2;
    struct chunk ch;
    memset(&ch, 0, sizeof ch);
    ch.gso_size = -1;
    if (!PyArg_ParseTuple(args, "Oy*O!niLnpnppLO!OO|nL", &ch.out, &b, &PyList_Type, &recs,
                          &start, &ch.swap, &ch.mul, &ch.mtu,
                          &ch.complete, &ch.cfg_mss, &ch.mtu_explicit, &ch.fixed_id, &ch.rate,
                          &PyDict_Type, &ch.flows, &ch.sec, &ch.flow_cls, &ch.gso_size, &tail))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(recs), i = start;
    if (!PyByteArray_Check(ch.out) || ch.mul < 1 || ch.rate < 0 || tail < -2) {
        PyErr_SetString(PyExc_ValueError, "split_chunk: bad arguments");
        goto fail;
    }
    ch.used = ch.alloc = PyByteArray_GET_SIZE(ch.out);
    ch.last_ts = -1;
    ch.zero = PyLong_FromLong(0);
    ch.aggs = PyList_New(0);
    if (ch.zero == NULL || ch.aggs == NULL)
        goto fail;
    for (; i < n; i++) {
        Py_ssize_t r = PyLong_AsSsize_t(PyList_GET_ITEM(recs, i)), r2 = -1;
        if (r < 0 || r + 16 > b.len) {
            PyErr_Clear();
            break;
        }
        if (r + 16 + (Py_ssize_t)get32h((const unsigned char *)b.buf + r + 8, ch.swap) > b.len)
            break;
        if (i + 1 < n) {
            r2 = PyLong_AsSsize_t(PyList_GET_ITEM(recs, i + 1));
            if (r2 < 0 || r2 + 16 > b.len) {
                PyErr_Clear();
                break;
            }
        }
        int h = chunk_record(&ch, b.buf, r, r2, tail);
        if (h < 0)
            goto fail;
        if (!h)
            break;
    }
    if (PyByteArray_Resize(ch.out, ch.used) < 0)
        goto fail;
    typedef char six_pass_reasons[NPASS == 6 ? 1 : -1];    /* the tuple below */
    (void)sizeof(six_pass_reasons);
    res = Py_BuildValue("nnnLnnnO(nnnnnn)", i, ch.nrec, ch.maxcap, ch.last_ts, ch.npassed,
                        ch.nseg, ch.ncut, ch.aggs, ch.npass[0], ch.npass[1], ch.npass[2],
                        ch.npass[3], ch.npass[4], ch.npass[5]);
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
