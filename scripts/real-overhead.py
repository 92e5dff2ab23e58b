#!/usr/bin/env python3
"""The measuring half of scripts/real-overhead.sh (which sets up the apiserver and the proxy).

Every round runs each cell against the apiserver directly and through the proxy, one right after
the other (the order flips every round), so both see the same machine. Cells:

- get / list / create at a fixed rate (oha -q, --latency-correction): p50 and p99 at the same
  offered load;
- get / list / create closed-loop at CONC connections: throughput at the same offered concurrency;
- watch: the time from sending a create to the arrival of its ADDED event on an open watch.

CPU per request: utime + stime of /proc/PID/stat over the cell, divided by the requests served.
Standard library only; loopback only; every loop bounded.
"""

import argparse
import http.client
import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

CLK_TCK = os.sysconf("SC_CLK_TCK")


def env_int(name, default):
    return int(os.environ.get(name, default))


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # The command name may hold spaces; fields after its closing parenthesis are fixed.
    fields = stat[stat.rindex(")") + 2 :].split()
    # utime and stime are fields 14 and 15 (1-based) of the whole line: 11 and 12 after comm+state.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def quantile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


class Cell:
    """One oha load: a path, a method, an optional body, fixed rate or closed loop."""

    def __init__(self, name, method, path, body, rate, conc):
        self.name, self.method, self.path, self.body = name, method, path, body
        self.rate, self.conc = rate, conc


def run_oha(args, base, cell, secs):
    cmd = [
        args.oha,
        "--no-tui",
        "--output-format",
        "json",
        "--insecure",
        "-z",
        f"{secs}s",
        "-c",
        str(cell.conc),
        "-m",
        cell.method,
        "-H",
        f"Authorization: Bearer {args.token}",
        "-H",
        "Accept: application/json",
    ]
    if os.environ.get("PROTO", "h1") == "h2":
        cmd += ["--http2", "-p", "1"]
    if cell.rate:
        cmd += ["-q", str(cell.rate), "--latency-correction"]
    if cell.body is not None:
        cmd += ["-T", "application/json", "-d", cell.body]
    cmd.append(base + cell.path)
    before = {k: cpu_seconds(p) for k, p in args.pids.items()}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 60, check=False)
    after = {k: cpu_seconds(p) for k, p in args.pids.items()}
    if out.returncode != 0:
        sys.exit(f"real-overhead.py: oha failed ({out.returncode}): {out.stderr.strip()}")
    report = json.loads(out.stdout)
    codes = {str(k): v for k, v in (report.get("statusCodeDistribution") or {}).items()}
    ok = sum(v for k, v in codes.items() if k.startswith("2"))
    total = sum(codes.values())
    # oha aborts the requests still in flight when -z ends; those are not failures.
    errors = {k: v for k, v in (report.get("errorDistribution") or {}).items() if "deadline" not in k}
    pct = report.get("latencyPercentiles") or {}
    summary = report["summary"]
    elapsed = summary.get("total") or secs
    return {
        "ok": ok,
        "non_2xx": total - ok,
        "errors": sum(errors.values()),
        "codes": codes,
        "rps": ok / elapsed,
        "p50_ms": (pct.get("p50") or float("nan")) * 1000,
        "p99_ms": (pct.get("p99") or float("nan")) * 1000,
        "cpu_s": {k: after[k] - before[k] for k in after},
    }


def connect(base):
    url = urllib.parse.urlsplit(base)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=30)


def watch_latency(args, base, tag, samples):
    """The time from sending each create to its watch event, over one open watch."""
    headers = {"Authorization": f"Bearer {args.token}", "Accept": "application/json"}
    ns = "/api/v1/namespaces/bench-watch/configmaps"
    creator = connect(base)
    creator.request("GET", ns + "?limit=1", headers=headers)
    listed = creator.getresponse()
    rv = json.loads(listed.read())["metadata"]["resourceVersion"]
    watcher = connect(base)
    watcher.request("GET", f"{ns}?watch=1&resourceVersion={rv}", headers=headers)
    stream = watcher.getresponse()
    if stream.status != 200:
        sys.exit(f"real-overhead.py: watch through {base}: HTTP {stream.status}")
    arrived = {}
    cond = threading.Condition()

    def read_events():
        while True:
            try:
                line = stream.readline()
            except OSError:
                return
            if not line:
                return
            now = time.perf_counter()
            try:
                event = json.loads(line)
                name = event["object"]["metadata"]["name"]
            except (ValueError, KeyError, TypeError):
                continue
            if event.get("type") == "ADDED":
                with cond:
                    arrived[name] = now
                    cond.notify_all()

    reader = threading.Thread(target=read_events, daemon=True)
    reader.start()
    event_ms, response_ms = [], []
    for i in range(samples):
        name = f"w-{tag}-{i}"
        body = json.dumps({"metadata": {"name": name}, "data": {"k": "v"}})
        t0 = time.perf_counter()
        creator.request("POST", ns, body=body, headers={**headers, "Content-Type": "application/json"})
        resp = creator.getresponse()
        resp.read()
        t1 = time.perf_counter()
        if resp.status != 201:
            sys.exit(f"real-overhead.py: create {name} through {base}: HTTP {resp.status}")
        with cond:
            if not cond.wait_for(lambda: name in arrived, timeout=10):
                sys.exit(f"real-overhead.py: no watch event for {name} within 10 s through {base}")
            event_ms.append((arrived[name] - t0) * 1000)
        response_ms.append((t1 - t0) * 1000)
        time.sleep(0.02)
    # The reader is blocked in readline, holding the response's buffer: end the stream under it
    # first, or close() waits for the socket's timeout.
    try:
        watcher.sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    reader.join(timeout=5)
    watcher.close()
    creator.close()
    event_ms.sort()
    response_ms.sort()
    return {
        "samples": samples,
        "p50_ms": quantile(event_ms, 0.5),
        "p99_ms": quantile(event_ms, 0.99),
        "create_response_p50_ms": quantile(response_ms, 0.5),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--direct", required=True)
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--apiserver-pid", required=True, type=int)
    ap.add_argument("--proxy-pid", required=True, type=int)
    ap.add_argument("--token", required=True)
    ap.add_argument("--oha", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="NAME=URL:PID",
        help="another proxy in front of the same apiserver (nginx, HAProxy), measured like ours",
    )
    args = ap.parse_args()
    args.pids = {"apiserver": args.apiserver_pid, "proxy": args.proxy_pid}
    references = {}
    for ref in args.reference:
        name, _, rest = ref.partition("=")
        url, _, pid = rest.rpartition(":")
        if not name or not url or not pid.isdigit():
            sys.exit(f"real-overhead.py: --reference {ref!r} is not NAME=URL:PID")
        references[name] = url
        args.pids[name] = int(pid)

    rounds, secs = env_int("ROUNDS", 3), env_int("SECS", 8)
    conc = env_int("CONC", 8)
    get = "/api/v1/namespaces/bench-get/configmaps/one"
    lst = "/api/v1/namespaces/bench-list/configmaps"
    create = "/api/v1/namespaces/bench-create/configmaps"
    body = json.dumps({"metadata": {"generateName": "load-"}, "data": {"key": "value"}})
    cells = [
        Cell("get@rate", "GET", get, None, env_int("GET_RATE", 200), 4),
        Cell("list@rate", "GET", lst, None, env_int("LIST_RATE", 20), 4),
        Cell("create@rate", "POST", create, body, env_int("CREATE_RATE", 50), 4),
        Cell("get@conc", "GET", get, None, 0, conc),
        Cell("list@conc", "GET", lst, None, 0, conc),
        Cell("create@conc", "POST", create, body, 0, conc),
    ]
    targets = {"direct": args.direct, "proxy": args.proxy, **references}
    results = {c.name: {t: [] for t in targets} for c in cells}
    results["watch"] = {t: [] for t in targets}

    # Warm-up: connections, caches, the proxy's upstream pool.
    for target, base in targets.items():
        for c in cells[:3]:
            run_oha(args, base, Cell(c.name, c.method, c.path, c.body, c.rate, c.conc), 2)

    for r in range(rounds):
        # Every target in turn, the order rotated and flipped from round to round.
        names = list(targets)
        order = names[r % len(names):] + names[: r % len(names)]
        if r % 2 == 1:
            order.reverse()
        for c in cells:
            for target in order:
                res = run_oha(args, targets[target], c, secs)
                results[c.name][target].append(res)
                print(
                    f"round {r + 1} {c.name:12} {target:7} {res['rps']:8.1f} req/s "
                    f"p50 {res['p50_ms']:8.2f} ms p99 {res['p99_ms']:8.2f} ms "
                    f"non-2xx {res['non_2xx']} errors {res['errors']} cpu "
                    + " ".join(f"{k} {v:.2f}s" for k, v in res["cpu_s"].items()),
                    file=sys.stderr,
                    flush=True,
                )
        for target in order:
            res = watch_latency(args, targets[target], f"{target}-{r}", env_int("WATCH_SAMPLES", 50))
            results["watch"][target].append(res)
            print(
                f"round {r + 1} watch        {target:7} event p50 {res['p50_ms']:.2f} ms "
                f"p99 {res['p99_ms']:.2f} ms (create response p50 {res['create_response_p50_ms']:.2f} ms)",
                file=sys.stderr,
                flush=True,
            )

    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    report(results, rounds, secs, conc)
    if references:
        report_references(results, list(references))


def med(values):
    return statistics.median(values) if values else float("nan")


def report(results, rounds, secs, conc):
    print(f"\nMedians of {rounds} alternated rounds of {secs} s each; ratios are proxy / direct.\n")
    print("| cell | direct req/s | proxy req/s | × | direct p50 ms | proxy p50 ms | × | direct p99 ms | proxy p99 ms | × | apiserver CPU µs/req (direct) | apiserver + proxy CPU µs/req (through the proxy) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, per in results.items():
        if name == "watch":
            continue
        d, p = per["direct"], per["proxy"]
        rps_d, rps_p = med([x["rps"] for x in d]), med([x["rps"] for x in p])
        p50_d, p50_p = med([x["p50_ms"] for x in d]), med([x["p50_ms"] for x in p])
        p99_d, p99_p = med([x["p99_ms"] for x in d]), med([x["p99_ms"] for x in p])

        def per_req(runs, key):
            return med([x["cpu_s"][key] / x["ok"] * 1e6 for x in runs if x["ok"]])

        api_d = per_req(d, "apiserver")
        api_p, prx_p = per_req(p, "apiserver"), per_req(p, "proxy")
        bad = sum(x["non_2xx"] + x["errors"] for x in d + p)
        note = f" ({bad} non-2xx/errors)" if bad else ""
        print(
            f"| {name}{note} | {rps_d:.1f} | {rps_p:.1f} | {rps_p / rps_d:.2f} | {p50_d:.2f} | {p50_p:.2f} | "
            f"{p50_p / p50_d:.2f} | {p99_d:.2f} | {p99_p:.2f} | {p99_p / p99_d:.2f} | {api_d:.0f} | "
            f"{api_p:.0f} + {prx_p:.0f} |"
        )
    w = results["watch"]
    e50_d, e50_p = med([x["p50_ms"] for x in w["direct"]]), med([x["p50_ms"] for x in w["proxy"]])
    e99_d, e99_p = med([x["p99_ms"] for x in w["direct"]]), med([x["p99_ms"] for x in w["proxy"]])
    print(
        f"| watch event (create → ADDED, {w['direct'][0]['samples']} samples) | | | | {e50_d:.2f} | {e50_p:.2f} | "
        f"{e50_p / e50_d:.2f} | {e99_d:.2f} | {e99_p:.2f} | {e99_p / e99_d:.2f} | | |"
    )
    print(f"\nPer-round ratios (proxy / direct) of p50 and req/s:")
    for name, per in results.items():
        if name == "watch":
            continue
        pairs = zip(per["direct"], per["proxy"])
        print(
            f"- {name}: "
            + ", ".join(f"p50 {p['p50_ms'] / d['p50_ms']:.2f} rps {p['rps'] / d['rps']:.2f}" for d, p in pairs)
        )
    print(
        "- watch: "
        + ", ".join(f"p50 {p['p50_ms'] / d['p50_ms']:.2f}" for d, p in zip(w["direct"], w["proxy"]))
    )


def report_references(results, references):
    """Each proxy against direct, side by side: what any TLS-terminating hop costs here."""
    names = ["proxy", *references]
    print("\nEvery proxy against direct, medians of the same rounds (× is that proxy / direct):\n")
    head = " | ".join(f"{n} req/s × | {n} p50 × | {n} CPU µs/req" for n in names)
    print(f"| cell | {head} |")
    print("|---|" + "---|---|---|" * len(names))
    for name, per in results.items():
        cells = []
        for n in names:
            if name == "watch":
                d = med([x["p50_ms"] for x in per["direct"]])
                cells += ["", f"{med([x['p50_ms'] for x in per[n]]) / d:.2f}", ""]
                continue
            rps_d = med([x["rps"] for x in per["direct"]])
            p50_d = med([x["p50_ms"] for x in per["direct"]])
            rps = med([x["rps"] for x in per[n]])
            p50 = med([x["p50_ms"] for x in per[n]])
            cpu = med([x["cpu_s"][n] / x["ok"] * 1e6 for x in per[n] if x["ok"]])
            cells += [f"{rps / rps_d:.2f}", f"{p50 / p50_d:.2f}", f"{cpu:.0f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
