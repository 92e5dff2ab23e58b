#!/usr/bin/env python3
"""A bounded closed-loop HTTPS load client (standard library only), for scripts/real-apf-simulate.sh.

    closed-loop.py URL PATH SECS OUT FLOW:TOKEN:THREADS [FLOW:TOKEN:THREADS ...]

Each of a flow's THREADS keeps one keep-alive TLS connection to URL and GETs PATH with
`Authorization: Bearer TOKEN`, reads the whole reply and at once sends the next request (a 429 too:
its Retry-After is ignored, as oha does), until SECS seconds have passed since the start; the
requests in flight then are answered and recorded, no new one starts. OUT receives one line per
request: `flow status start_seconds latency_seconds` (start from the common start; status 0 for a
connection error, after which the thread reconnects). The server's certificate is not verified:
loopback only.
"""

import http.client
import ssl
import sys
import threading
import time
import urllib.parse


def worker(host, port, path, token, flow, deadline, t0, ctx, out, lock):
    rows = []
    conn = None
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    while time.monotonic() < deadline:
        if conn is None:
            conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=90)
        start = time.monotonic()
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            resp.read()
            status = resp.status
        except (OSError, http.client.HTTPException):
            status = 0
            conn.close()
            conn = None
        rows.append(f"{flow} {status} {start - t0:.6f} {time.monotonic() - start:.6f}\n")
    if conn is not None:
        conn.close()
    with lock:
        out.writelines(rows)


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    url, path, secs, out_path = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    parsed = urllib.parse.urlsplit(url)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    lock = threading.Lock()
    with open(out_path, "w", encoding="utf-8") as out:
        t0 = time.monotonic()
        deadline = t0 + secs
        threads = []
        for spec in sys.argv[5:]:
            flow, token, n = spec.split(":")
            for _ in range(int(n)):
                t = threading.Thread(
                    target=worker,
                    args=(parsed.hostname, parsed.port, path, token, flow, deadline, t0, ctx, out, lock),
                )
                t.start()
                threads.append(t)
        for t in threads:
            t.join()


if __name__ == "__main__":
    main()
