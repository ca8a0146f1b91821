"""Is this tshark one whose fields mean what verify reads?

Before trusting a tshark, verify runs it (at the same time as the two real
passes, so it costs no time) over a two-packet capture it writes itself,
with exactly the command line of a real pass, and checks what comes back:
raw (not relative) TCP sequence and acknowledgment numbers above 2**31,
the TCP length, flags in hex, a bad TCP checksum reported bad and good IP
and UDP checksums good (so the checksum preferences took effect), the UDP
length, the IPv4 header length.  A tshark older than
:data:`~.fields.TSHARK_MIN_VERSION` (``tshark --version``) or one whose
fields read otherwise is refused with one line (UnusableInput, exit 2):
verify would otherwise report differences that are not there, or miss
some.
"""

from __future__ import annotations

import os
import struct
import subprocess

from ..checksum import checksum, ones_sum, pseudo_sum_v4
from ..errors import UnusableInput
from .fields import (SEP, FIELDS, _NLOCATED, TSHARK_MIN_VERSION, _BAD, F_SEQ, F_ACK, F_TLEN,
                     F_TFLAGS, F_TCS, F_IPCS, F_IPHL, F_ULEN, F_UCS, F_TSPORT, F_USPORT)

SEQ, ACK = 0x89ABCDEF, 0x9ABCDEF0       # above 2**31: relative numbers would be small
TCP_PAYLOAD, UDP_PAYLOAD = b"pcapgro", b"abc"
SRC, DST = bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])

# field index -> (what the probe's line must carry there, per packet)
EXPECT_TCP = {F_TSPORT: "40000", F_SEQ: str(SEQ), F_ACK: str(ACK), F_TLEN: str(len(TCP_PAYLOAD)),
              F_IPHL: "20"}
EXPECT_UDP = {F_USPORT: "40001", F_ULEN: str(8 + len(UDP_PAYLOAD))}


def _ip4(proto, l4):
    hdr = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 1, 0, 64, proto, 0,
                                SRC, DST))
    struct.pack_into("!H", hdr, 10, checksum(ones_sum(bytes(hdr))))
    return b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + bytes(hdr) + l4


def _l4_csum(proto, l4):
    return checksum(pseudo_sum_v4(SRC, DST, proto, len(l4)) + ones_sum(l4))


def probe_frames():
    """The probe's two Ethernet frames (bytes): IPv4/TCP with a bad TCP
    checksum, IPv4/UDP with a good one."""
    tcp = bytearray(struct.pack("!HHIIBBHHH", 40000, 5201, SEQ, ACK, 5 << 4, 0x18, 1000, 0, 0)
                    + TCP_PAYLOAD)
    struct.pack_into("!H", tcp, 16, _l4_csum(6, bytes(tcp)) ^ 0x0101)     # bad on purpose
    udp = bytearray(struct.pack("!HHHH", 40001, 5201, 8 + len(UDP_PAYLOAD), 0) + UDP_PAYLOAD)
    struct.pack_into("!H", udp, 6, _l4_csum(17, bytes(udp)) or 0xFFFF)
    return [_ip4(6, bytes(tcp)), _ip4(17, bytes(udp))]


def write_probe(path):
    """Write the probe capture (classic pcap, microseconds) to ``path``."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(probe_frames()):
            f.write(struct.pack("<IIII", 1_000_000_000 + i, 0, len(fr), len(fr)))
            f.write(fr)


def start(tshark, cmd, confdir, env):
    """Start ``tshark --version`` and ``cmd`` (a real pass's command line
    with the probe capture's path in place of ``{path}``) at once; returns
    what :func:`check` takes."""
    path = os.path.join(confdir, "probe.pcap")
    write_probe(path)
    run = dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
               env=env)
    version = subprocess.Popen([tshark, "--version"], **run)
    try:
        fields = subprocess.Popen([a if a != "{path}" else path for a in cmd], **run)
    except BaseException:
        version.kill()
        version.wait()
        raise
    return version, fields


def check(procs, version_of):
    """Wait for the probe (:func:`start`) and refuse this tshark when it is
    too old or its fields do not read as expected (UnusableInput, one
    line).  ``version_of``: bytes of ``tshark --version`` -> (major, minor,
    patch) or None.  Returns the version (or None when it does not say)."""
    vp, fp = procs
    try:
        vout, _ = vp.communicate(timeout=120)
        fout, _ = fp.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        raise UnusableInput("tshark did not answer verify's probe within 120 s") from None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    v = version_of(vout)
    name = f"tshark {'.'.join(map(str, v))}" if v else "this tshark"
    if v is not None and v[:2] < TSHARK_MIN_VERSION:
        raise UnusableInput(f"{name} is too old for verify: "
                            f"{'.'.join(map(str, TSHARK_MIN_VERSION))} or later is needed")
    if fp.returncode != 0:
        return v                # it refused a preference: the real pass says which
    bad = _mismatch(fout.decode("utf-8", "replace").split("\n"))  # not splitlines: \x1e
    if bad:
        raise UnusableInput(f"{name} does not give the fields verify reads as it expects "
                            f"({bad}): its preferences or field meanings differ")
    return v


def _mismatch(lines):
    """What of the probe's output is not as expected (str), or None."""
    rows = [ln.split(SEP) for ln in lines if ln]
    if len(rows) != 2 or any(len(r) < _NLOCATED for r in rows):
        n = [len(r) for r in rows]
        return (f"{len(rows)} lines of {min(n, default=0)}-{max(n, default=0)} fields "
                f"where 2 of {_NLOCATED} were expected")
    tcp, udp = rows
    for row, want in ((tcp, EXPECT_TCP), (udp, EXPECT_UDP)):
        for k, val in want.items():
            if row[k] != val:
                return f"{FIELDS[k]} is {row[k]!r}, not {val!r}"
    try:
        flags = int(tcp[F_TFLAGS], 16)
    except ValueError:
        flags = None
    if flags != 0x18:
        return f"tcp.flags is {tcp[F_TFLAGS]!r}, not 0x018 (hex)"
    if tcp[F_TCS] not in _BAD:
        return f"tcp.checksum.status of a bad checksum is {tcp[F_TCS]!r}"
    for row, k in ((tcp, F_IPCS), (udp, F_UCS)):
        if row[k] in _BAD or not row[k]:
            return f"{FIELDS[k]} of a good checksum is {row[k]!r}"
    return None
