#!/usr/bin/env python3
"""The data steps of scripts/real-apf-simulate.sh (standard library only).

    real-apf-simulate.py object-counts METRICS
        prints simulate's --object-counts for ConfigMaps from the apiserver's /metrics text: what
        its list estimate reads (apiserver_resource_objects, apiserver_resource_size_estimate_bytes).
    real-apf-simulate.py traces AUDIT_LOG METRICS OUT_DIR
        writes OUT_DIR/audit-calibrated.log: the log with the executions of the bench flows'
        dispatched requests scaled so that they add up to the execution time the apiserver measured
        itself for level bench (apiserver_flowcontrol_request_execution_seconds_sum). An execution
        is what simulate replays by default: the recorded time less the recorded APF queue wait
        (audit annotation apiserver.latency.k8s.io/apf-queue-wait, written for requests over
        500 ms), which simulate takes out itself; the wait is left in the log for it to do so.
    real-apf-simulate.py compare BASE SECS HEAVY LIGHT MRI MMRI
        prints per flow the clients' outcomes (BASE/apiserver-alone/requests.txt) against
        simulate's (BASE/simulate-{raw,nowait,calibrated}.json), and the waits.
"""

import json
import re
import sys
from datetime import datetime, timedelta

FLOWS = ("alice", "bob")
UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
WAIT = "apiserver.latency.k8s.io/apf-queue-wait"


def go_duration(text):
    """Seconds of a Go time.Duration string (`1.5s`, `850ms`, `1m2.5s`)."""
    return sum(float(n) * UNITS[u] for n, u in re.findall(r"([0-9.]+)(h|ms|m|s|us|µs|μs|ns)", text))


def parse(ts):
    return datetime.strptime(ts.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")


def metric(text, name, labels):
    m = re.search(r"^%s\{%s\} (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


def object_counts(metrics_path):
    text = open(metrics_path, encoding="utf-8").read()
    labels = 'group="",resource="configmaps"'
    count = metric(text, "apiserver_resource_objects", labels)
    size = metric(text, "apiserver_resource_size_estimate_bytes", labels)
    if count is None:
        sys.exit("no apiserver_resource_objects for configmaps in the apiserver's metrics")
    average = int(size // count) if size and size > 0 and count > 0 else 0
    print(f"configmaps: {{count: {int(count)}, averageObjectSizeBytes: {average}}}")


def is_bench_dispatched(e):
    return (
        e.get("user", {}).get("username") in FLOWS
        and e.get("stage") == "ResponseComplete"
        and e.get("responseStatus", {}).get("code") != 429
    )


def stamp(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def recorded(e):
    """An event's recorded time and the part of it simulate takes out (its recorded wait, at most
    the whole time), in seconds."""
    elapsed = (parse(e["stageTimestamp"]) - parse(e["requestReceivedTimestamp"])).total_seconds()
    wait = go_duration((e.get("annotations") or {}).get(WAIT, "0s"))
    return elapsed, min(wait, elapsed)


def traces(audit_path, metrics_path, out_dir):
    events = [json.loads(line) for line in open(audit_path, encoding="utf-8")]
    executed = 0.0
    for e in events:
        if is_bench_dispatched(e):
            elapsed, wait = recorded(e)
            executed += elapsed - wait
    measured = metric(
        open(metrics_path, encoding="utf-8").read(),
        "apiserver_flowcontrol_request_execution_seconds_sum",
        'flow_schema="bench",priority_level="bench",type="regular"',
    )
    scale = measured / executed if measured and executed > 0 else 1.0
    print(
        f"real-apf-simulate.sh: the apiserver executed level bench for {measured} s, its audit log without "
        f"the recorded waits says {executed:.1f} s: calibrated executions scaled by {scale:.3f}",
        file=sys.stderr,
    )
    with open(f"{out_dir}/audit-calibrated.log", "w", encoding="utf-8") as out:
        for e in events:
            if is_bench_dispatched(e):
                # The execution scaled, the wait left for simulate to take out.
                elapsed, wait = recorded(e)
                start = parse(e["requestReceivedTimestamp"])
                e["stageTimestamp"] = stamp(start + timedelta(seconds=wait + (elapsed - wait) * scale))
            out.write(json.dumps(e, separators=(",", ":")) + "\n")


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def err(pred, real):
    if real == 0:
        return "0" if pred == 0 else f"+{pred} (none real)"
    return f"{100 * (pred - real) / real:+.1f} %"


def compare(base, secs, heavy, light, mri, mmri):
    run = f"{base}/apiserver-alone"
    conns = {"alice": heavy, "bob": light}
    client = {f: {"ok": 0, "rej": 0, "other": 0, "lat_ok": []} for f in FLOWS}
    for line in open(f"{run}/requests.txt", encoding="utf-8"):
        flow, status, _, latency = line.split()
        c, status = client[flow], int(status)
        if 200 <= status < 300:
            c["ok"] += 1
            c["lat_ok"].append(float(latency))
        elif status == 429:
            c["rej"] += 1
        else:
            c["other"] += 1

    # The apiserver's own record: per user, arrivals and outcomes, and its APF queue wait where it
    # wrote one (requests over 500 ms; such a request without one did not wait).
    audit = {f: {"arrivals": 0, "ok": 0, "rej": 0, "waits": []} for f in FLOWS}
    for line in open(f"{run}/audit.log", encoding="utf-8"):
        e = json.loads(line)
        user = e.get("user", {}).get("username")
        if user not in audit or e.get("stage") != "ResponseComplete":
            continue
        a = audit[user]
        a["arrivals"] += 1
        code = e.get("responseStatus", {}).get("code", 0)
        if code == 429:
            a["rej"] += 1
            continue
        a["ok"] += 200 <= code < 300
        ann = e.get("annotations") or {}
        if "apiserver.latency.k8s.io/total" in ann:
            a["waits"].append(go_duration(ann.get(WAIT, "0s")))

    replays = (
        ("raw", "audit log as written (--keep-recorded-waits)"),
        ("nowait", "recorded waits taken out (simulate's default)"),
        ("calibrated", "calibrated executions"),
    )
    sims = {}
    for name, _ in replays:
        report = json.load(open(f"{base}/simulate-{name}.json", encoding="utf-8"))
        level = next(l for l in report["priorityLevels"] if l["name"] == "bench")
        rejected = {f["flowDistinguisher"]: f["rejected"] for f in level["topFlows"] if f["flowSchema"] == "bench"}
        sims[name] = (level, rejected, report.get("recordedWaitsTakenOut") or {})

    counts = open(f"{base}/object-counts.yaml", encoding="utf-8").read().strip()
    print(f"SECS={secs} HEAVY={heavy} LIGHT={light} MRI={mri} MMRI={mmri}; --object-counts {counts}")
    print()
    print("| flow (connections) | clients: 2xx | 429 | other | replay | simulate: dispatched | rejected | error: dispatched | rejected |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in FLOWS:
        c, a = client[f], audit[f]
        if (a["ok"], a["rej"]) != (c["ok"], c["rej"]):
            print(f"note: {f}: the audit log has {a['ok']} 2xx and {a['rej']} 429", file=sys.stderr)
        for i, (name, label) in enumerate(replays):
            rej = sims[name][1].get(f, 0)
            disp = a["arrivals"] - rej
            head = [f"{f} ({conns[f]})", c["ok"], c["rej"], c["other"]] if i == 0 else ["", "", "", ""]
            row = head + [label, disp, rej, err(disp, c["ok"]), err(rej, c["rej"])]
            print("| " + " | ".join(str(x) for x in row) + " |")
    print()
    print("| flow | client latency of 2xx p50 / p99 (s) | apiserver APF wait p50 / p99 (s; requests over 500 ms) |")
    print("|---|---|---|")
    for f in FLOWS:
        c, a = client[f], audit[f]
        print(
            f"| {f} | {pct(c['lat_ok'], .5):.3f} / {pct(c['lat_ok'], .99):.3f} | "
            f"{pct(a['waits'], .5):.3f} / {pct(a['waits'], .99):.3f} ({len(a['waits'])} of {a['ok']}) |"
        )
    print()
    for name, label in replays:
        level, _, taken_out = sims[name]
        w = level["waitSeconds"]
        print(
            f"simulate ({label}), level bench (both flows): dispatched {level['dispatched']}, "
            f"rejected {sum(level['rejected'].values())}, wait p50 {w['p50']:.3f} s, p99 {w['p99']:.3f} s, "
            f"nominal limit {level['nominalLimit']}, peak seats {level['maxSeatsInUse']}; "
            f"recorded waits taken out: {taken_out.get('requests', 0)} ({taken_out.get('seconds', 0.0):.1f} s)"
        )
    text = open(f"{run}/apiserver.metrics", encoding="utf-8").read()
    lv = 'flow_schema="bench",priority_level="bench"'
    ex_sum = metric(text, "apiserver_flowcontrol_request_execution_seconds_sum", lv + ',type="regular"')
    ex_n = metric(text, "apiserver_flowcontrol_request_execution_seconds_count", lv + ',type="regular"')
    w_sum = metric(text, "apiserver_flowcontrol_request_wait_duration_seconds_sum", 'execute="true",' + lv)
    seats = metric(text, "apiserver_flowcontrol_work_estimated_seats_sum", lv)
    seats_n = metric(text, "apiserver_flowcontrol_work_estimated_seats_count", lv)
    if ex_sum is not None and ex_n:
        print(
            f"apiserver, level bench: {ex_n:.0f} dispatched, executing {ex_sum:.1f} s in all "
            f"(mean {ex_sum / ex_n:.3f} s), mean wait {(w_sum or 0) / ex_n:.3f} s, "
            f"seats estimated {seats / seats_n:.2f} on average"
        )
    print()
    print(f"apiserver's bench counters ({run}/bench.metrics):")
    print(open(f"{run}/bench.metrics", encoding="utf-8").read().strip() or "(no rows)")


def main():
    args = sys.argv[1:]
    if args[:1] == ["object-counts"] and len(args) == 2:
        object_counts(args[1])
    elif args[:1] == ["traces"] and len(args) == 4:
        traces(*args[1:])
    elif args[:1] == ["compare"] and len(args) == 7:
        compare(*args[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
