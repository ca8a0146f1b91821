"""Which record header an old classic pcap file uses.

Some 1999-era libpcaps and Nokia IPSO wrote longer record headers without
saying so in a way a reader can rely on: the file header is standard, and
only the records show the layout.  This mirrors Wireshark's
wiretap/libpcap.c (``libpcap_try_variants``): each candidate layout is tried
on the first three records and scored (a "figure of merit": 0 when nothing
looks wrong, +1 per implausible field); the first layout scoring 0 wins,
else the lowest score (the earlier candidate on a tie).

Record header layouts (after the standard 16 bytes: ts_sec, ts_usec,
incl_len, orig_len), all in the file's byte order:

* ``pcap``       16 bytes.
* ``ss990417``   24 bytes: ifindex (4), protocol (2), pkt_type (1), pad (1);
  standard magic (Alexey Kuznetzov's patch of 1999-04-17, Red Hat 6.1).
* ``nokia``      20 bytes: 4 bytes of unknown use; standard magic (Nokia
  IPSO).
* ``ss991029``   24 bytes, as ss990417, with the "modified" magic
  0xa1b2cd34 (patch of 1999-10-29).
* ``ss990915``   28 bytes: ifindex (4), protocol (2), pkt_type (1), cpu1,
  cpu2 (1 each), pad (3); modified magic (patch of 1999-09-15, SuSE 6.3).

Candidates: standard magic (microsecond, version 2.4 or later) tries
pcap, ss990417, nokia; the modified magic tries ss991029, ss990915.  On a
pipe the records are looked at only as far as they have already arrived
(a live capture is not held back until three records have come; plain
pcap, which then fits "so far", wins a tie), where Wireshark does not look
at all (standard magic: plain pcap; modified magic: refused).
"""

import struct

__all__ = ["RECORD_HEADER", "STANDARD", "MODIFIED", "choose"]

# layout -> record header length (bytes)
RECORD_HEADER = {"pcap": 16, "ss990417": 24, "nokia": 20, "ss991029": 24, "ss990915": 28}
STANDARD = ("pcap", "ss990417", "nokia")
MODIFIED = ("ss991029", "ss990915")

RECORDS_TRIED = 3
MAX_CAPLEN = 262144           # Wireshark's maximum snaplen for most link types
MAX_ORIG_LEN = 128 * 1024 * 1024


def choose(candidates, peek, base, byteorder, snaplen, complete=True):
    """The record layout (a key of :data:`RECORD_HEADER`) of a file whose
    records start at offset ``base`` of what ``peek(n)`` returns.

    Args:
        candidates: layouts to try, in order (:data:`STANDARD` or
                    :data:`MODIFIED`).
        peek:       ``peek(n)`` -> bytes-like holding at least ``n`` bytes
                    (from the start of the input), fewer only at its end.
        base:       offset of the first record (24: after the file header).
        byteorder:  '<' or '>' (the file's).
        snaplen:    the file header's snaplen (bytes).
        complete:   False when ``peek`` gives only what has arrived so far
                    (a pipe): its end is then taken as "nothing wrong so
                    far", not as a record cut short.
    """
    best, best_score = candidates[0], None
    for name in candidates:
        score = _score(name, peek, base, byteorder, snaplen, complete)
        if score == 0:
            return name
        if best_score is None or score < best_score:
            best, best_score = name, score
    return best


def _score(name, peek, pos, bo, snaplen, complete):
    """Figure of merit of layout ``name`` on the first records, the first
    at ``pos`` (0 = fits)."""
    hl = RECORD_HEADER[name]
    score = 0
    for _ in range(RECORDS_TRIED):
        buf = peek(pos + hl)
        if len(buf) <= pos:
            break                                 # end of input: fits so far
        if len(buf) < pos + hl:
            return score + complete               # a header cut short
        _sec, usec, incl, orig = struct.unpack_from(bo + "IIII", buf, pos)
        score += (usec >= 1000000) + (incl > snaplen) + (orig > MAX_ORIG_LEN) + (incl > orig)
        score += _extra_fields(name, buf, pos + 16, bo)
        if incl > MAX_CAPLEN:
            return score + 1                      # no use reading on
        pos += hl + incl
        if len(peek(pos)) < pos:
            return score + complete               # data cut short
    return score


def _extra_fields(name, buf, off, bo):
    """+1 for each implausible field of the layout's extra header bytes."""
    if name == "pcap":
        return 0
    if name == "nokia":
        # read as Wireshark reads it on a little-endian host: 0xXfbfYZ0W
        (v,) = struct.unpack_from("<I", buf, off)
        ok = ((v & 0x0FFF00F0) == 0x0FBF0000 and (v & 0xF0000000) in (0x90000000, 0xB0000000)
              and (v & 0xF000) in (0xB000, 0xD000) and (v & 0xF00) in (0x600, 0x900)
              and (v & 0xF) in (1, 2))
        return 0 if ok else 1
    ifindex, proto, pkt_type = struct.unpack_from(bo + "IHB", buf, off)
    proto_ok = (proto >= 0x0600 or proto in (0x0060, 0x0200, 0x0400, 0x0000)
                or 0x0001 <= proto <= 0x0017)
    return (ifindex > 10000) + (not proto_ok) + (pkt_type > 4)
