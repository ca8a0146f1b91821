"""The pump between tcpdump and pcapgro in a live capture: a process of its
own that reads its standard input (tcpdump's output) as fast as it comes and
writes it to its standard output (pcapgro's reader) as fast as that is read,
holding the difference in memory.

Why a process and not a thread of pcapgro: a thread needs pcapgro's GIL
after every read, and gets it only when the merge lets it go (every 5 ms,
later inside a compiled call): at most one pipe (1 MiB) per turn, less than
a 1 Gbit/s stream brings, so tcpdump waited and the kernel dropped.  Here
the two threads spend their time in read() and write() with the GIL let go.

Run as ``python -s -E livepump.py LIMIT`` (not ``-m``: the package is not
imported).  LIMIT: bytes held at most; past it reading waits (tcpdump then
waits and the kernel drops, which tcpdump counts).  At the end one line on
standard error: ``peak N`` (the most bytes held).  Exit 0 at the end of
input, also when standard output's reader went away (then input is read and
dropped to its end, so that tcpdump is never blocked).
"""

import collections
import os
import sys
import threading

READ = 1 << 20      # the pipe's size at most: a read never returns more
WRITE = 4 << 20     # bytes joined into one write at most


def main(argv):
    """Pump fd 0 to fd 1 through memory; ``argv[1]``: LIMIT (bytes)."""
    limit = int(argv[1]) if len(argv) > 1 else 1 << 30
    chunks = collections.deque()
    state = {"held": 0, "peak": 0, "eof": False, "gone": False}
    cond = threading.Condition()
    t = threading.Thread(target=_read, args=(chunks, state, cond, limit), daemon=True)
    t.start()
    _write(chunks, state, cond)
    t.join()
    try:
        os.write(2, f"peak {state['peak']}\n".encode())
    except OSError:
        pass
    return 0


def _read(chunks, state, cond, limit):
    while True:
        with cond:
            while state["held"] >= limit and not state["gone"]:
                cond.wait()
        try:
            data = os.read(0, READ)
        except OSError:
            data = b""
        with cond:
            if not data:
                state["eof"] = True
                cond.notify_all()
                return
            if state["gone"]:
                continue
            chunks.append(data)
            state["held"] += len(data)
            state["peak"] = max(state["peak"], state["held"])
            cond.notify_all()


def _write(chunks, state, cond):
    while True:
        with cond:
            while not chunks and not state["eof"]:
                cond.wait()
            if not chunks:
                return
            parts, n = [], 0
            while chunks and n < WRITE:
                c = chunks.popleft()
                parts.append(c)
                n += len(c)
        data = memoryview(parts[0] if len(parts) == 1 else b"".join(parts))
        try:
            while data:
                data = data[os.write(1, data):]
        except OSError:             # the reader is gone: drain to the end
            with cond:
                state["gone"] = True
                chunks.clear()
                cond.notify_all()
            return
        with cond:
            state["held"] -= n
            cond.notify_all()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
