#!/usr/bin/env python3
"""shadow_tee.py - a recording TCP relay for tests/e2e/shadow.sh.

    shadow_tee.py UPSTREAM_PORT DIR

Listens on 127.0.0.1 (an ephemeral port, printed as "PORT <n>"), relays
every connection to 127.0.0.1:UPSTREAM_PORT unchanged, and writes what the
upstream sent on connection N to DIR/conn.N (N from 1, in accept order), so
a test can compare the bytes a client got through the shadow proxy with the
bytes the primary really sent for that request. A reply whose headers say
text/event-stream is relayed in slices of 64 bytes 40 ms apart: a proxy that
buffers a stream to its end is seen by the client's first-byte time."""
import os
import socket
import sys
import threading
import time

up_port, out_dir = int(sys.argv[1]), sys.argv[2]
count = [0]
lock = threading.Lock()


def pump_up(c, u):
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            u.sendall(b)
    except OSError:
        pass
    try:
        u.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def serve(c, n):
    u = socket.create_connection(("127.0.0.1", up_port))
    threading.Thread(target=pump_up, args=(c, u), daemon=True).start()
    seen = b""
    with open(os.path.join(out_dir, "conn.%d" % n), "wb") as rec:
        try:
            while True:
                b = u.recv(65536)
                if not b:
                    break
                rec.write(b)
                rec.flush()
                seen += b[:4096] if len(seen) < 8192 else b""
                if b"text/event-stream" in seen:
                    for i in range(0, len(b), 64):
                        c.sendall(b[i:i + 64])
                        time.sleep(0.04)
                else:
                    c.sendall(b)
        except OSError:
            pass
    for s in (c, u):
        try:
            s.close()
        except OSError:
            pass


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(128)
print("PORT %d" % ls.getsockname()[1], flush=True)
deadline = time.time() + 600
while time.time() < deadline:
    c, _ = ls.accept()
    with lock:
        count[0] += 1
        n = count[0]
    threading.Thread(target=serve, args=(c, n), daemon=True).start()
