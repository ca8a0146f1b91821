"""First-seen byte store of one stream (TCP sequence space or UDP payload
offsets) and the comparison of two stores."""

from __future__ import annotations

import bisect

class _Store:
    """First-seen byte store over an integer offset space."""

    __slots__ = ("st", "en", "buf", "order")

    def __init__(self):
        self.st, self.en, self.buf = [], [], []
        self.order = []     # [start, end, frame] of new data, arrival order, merged

    def add(self, s, data, frame):
        """Add ``data`` at offset ``s``; bytes already present win."""
        n = len(data)
        if not n:
            return
        e = s + n
        st, en, buf = self.st, self.en, self.buf
        if not st or s > en[-1]:
            st.append(s), en.append(e), buf.append(bytearray(data))
            self._new(s, e, frame)
            return
        if s == en[-1]:
            buf[-1] += data
            en[-1] = e
            self._new(s, e, frame)
            return
        lo = bisect.bisect_left(en, s)
        hi = bisect.bisect_right(st, e)
        if lo >= hi:
            st.insert(lo, s), en.insert(lo, e), buf.insert(lo, bytearray(data))
            self._new(s, e, frame)
            return
        ns, ne = min(s, st[lo]), max(e, en[hi - 1])
        out = bytearray()
        pos = ns
        for j in range(lo, hi):
            if st[j] > pos:
                out += data[pos - s:st[j] - s]
                self._new(pos, st[j], frame)
            out += buf[j]
            pos = en[j]
        if pos < ne:
            out += data[pos - s:]
            self._new(pos, ne, frame)
        st[lo:hi], en[lo:hi], buf[lo:hi] = [ns], [ne], [out]

    def _new(self, a, b, frame):
        o = self.order
        if o and o[-1][1] == a:
            o[-1][1] = b
        else:
            o.append([a, b, frame])

    def nbytes(self):
        return sum(e - s for s, e in zip(self.st, self.en))

    def get(self, s, e):
        """The stored bytes at offsets [s, e) (bytes; only those of the
        stored interval holding ``s``, so shorter where a hole begins)."""
        i = bisect.bisect_right(self.st, s) - 1
        if i < 0 or s >= self.en[i]:
            return b""
        b = self.buf[i]
        return bytes(b[s - self.st[i]:min(e, self.en[i]) - self.st[i]])


def _first_diff(a, b):
    """First offset where stores ``a`` (IN) and ``b`` (OUT) differ:
    (offset, 'missing' | 'extra' | 'differs') or None."""
    i = j = 0
    na, nb = len(a.st), len(b.st)
    while i < na or j < nb:
        if i == na:
            return b.st[j], "extra"
        if j == nb:
            return a.st[i], "missing"
        s1, e1, s2, e2 = a.st[i], a.en[i], b.st[j], b.en[j]
        if s1 != s2:
            return (s1, "missing") if s1 < s2 else (s2, "extra")
        n = min(e1, e2) - s1
        b1, b2 = a.buf[i], b.buf[j]
        if (b1 != b2) if e1 == e2 else (b1[:n] != b2[:n]):
            k, step = 0, 4096
            while k < n:
                if b1[k:k + step] != b2[k:k + step]:
                    while b1[k] == b2[k]:
                        k += 1
                    return s1 + k, "differs"
                k += step
        if e1 != e2:
            return (e2, "missing") if e1 > e2 else (e1, "extra")
        i += 1
        j += 1
    return None



def _union(ranges, adjacent=True):
    """Sorted disjoint (start, end) covering ``ranges`` (iterable of pairs);
    ranges that only touch are joined too unless ``adjacent`` is False."""
    out = []
    for s, e in sorted(ranges):
        if out and (s <= out[-1][1] if adjacent else s < out[-1][1]):
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return out

