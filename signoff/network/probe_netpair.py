#!/usr/bin/env python3
"""Host-side probe: one side of a host-to-host throughput measurement.

    netpair.py server --bind ADDR --port P [--tool T] [--streams N] [--duration S]
    netpair.py client --connect ADDR --bind ADDR --port P [--tool T] [--streams N] [--duration S]

Tools: iperf3 (several parallel streams: one stream is CPU-bound on fast links),
ib_write_bw (perftest, RDMA), or the built-in multi-stream TCP sender/receiver. Listeners
bind to the measured interface's address only and exit after one test. The client prints
the received rate in Gb/s (1e9 bit/s). One JSON document each.
"""
import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

CHUNK = 1 << 20


def builtin_server(a):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.bind, a.port))
    srv.listen(a.streams)
    srv.settimeout(a.duration + 30)
    got, first, last, lock = [0], [None], [None], threading.Lock()

    def sink(conn):
        buf = bytearray(CHUNK)
        n = 0
        with conn:
            while True:
                k = conn.recv_into(buf)
                if not k:
                    break
                now = time.time()
                with lock:
                    first[0] = first[0] or now
                    last[0] = now
                n += k
        with lock:
            got[0] += n

    threads = []
    for _ in range(a.streams):
        conn, _addr = srv.accept()
        t = threading.Thread(target=sink, args=(conn,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    srv.close()
    secs = (last[0] - first[0]) if first[0] else 0
    return {"bytes": got[0], "seconds": round(secs, 3),
            "gbps": round(got[0] * 8 / secs / 1e9, 3) if secs else 0}


def connect(a):
    deadline = time.time() + 15  # the server may still be starting
    while True:
        try:
            s = socket.create_connection((a.connect, a.port), timeout=10,
                                         source_address=(a.bind, 0) if a.bind else None)
            return s
        except ConnectionRefusedError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def builtin_client(a):
    socks = [connect(a) for _ in range(a.streams)]
    payload = memoryview(bytearray(CHUNK))
    sent, stop = [0] * a.streams, time.time() + a.duration

    def pump(i, s):
        with s:
            while time.time() < stop:
                s.sendall(payload)
                sent[i] += CHUNK
            s.shutdown(socket.SHUT_WR)
            s.recv(1)  # wait for the server to drain and close

    ts = [threading.Thread(target=pump, args=(i, s)) for i, s in enumerate(socks)]
    t0 = time.time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"bytes_sent": sum(sent), "seconds": round(time.time() - t0, 3)}


def iperf3_server(a):
    p = subprocess.run(["iperf3", "-s", "-1", "-B", a.bind, "-p", str(a.port), "-J"],
                       capture_output=True, text=True, timeout=a.duration + 40)
    return {"rc": p.returncode}


def iperf3_client(a):
    deadline = time.time() + 15
    while True:
        cmd = ["iperf3", "-c", a.connect, "-p", str(a.port), "-P", str(a.streams),
               "-t", str(a.duration), "-J"] + (["-B", a.bind] if a.bind else [])
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.duration + 40)
        doc = json.loads(p.stdout or "{}")
        if "error" not in doc or time.time() > deadline:
            break
        time.sleep(0.3)  # server not listening yet
    if "error" in doc:
        return {"error": "iperf3: %s" % doc["error"]}
    end = doc["end"]
    return {"gbps": round(end["sum_received"]["bits_per_second"] / 1e9, 3),
            "seconds": round(end["sum_received"]["seconds"], 3),
            "retransmits": end.get("sum_sent", {}).get("retransmits"),
            "cmd": " ".join(cmd)}


def parse_ib_write_bw(text):
    """Average Gb/s from perftest's table: #bytes #iterations BW-peak BW-average MsgRate."""
    rows = [ln.split() for ln in text.splitlines() if re.match(r"\s*\d+\s+\d+\s+[\d.]+\s+[\d.]+", ln)]
    return float(rows[-1][3]) if rows else None


def ib_write_bw(a, server):
    """perftest on the data interface's own card and port (-d/-i): without them it picks
    the first card it finds, whose rate is not the one judged."""
    cmd = ["ib_write_bw", "--report_gbits", "-p", str(a.port), "-D", str(a.duration),
           "-q", str(a.streams)] + (["-d", a.device, "-i", str(a.ib_port)] if a.device else [])
    if not server:
        cmd.append(a.connect)
    deadline = time.time() + 15
    while True:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.duration + 40)
        gbps = parse_ib_write_bw(p.stdout)
        out = p.stdout + p.stderr
        # the client starts at once and the server may not listen yet: perftest then exits
        # "Couldn't connect to ADDR:PORT"; retry, bounded like iperf3's
        if server or gbps or time.time() > deadline or "Couldn't connect" not in out:
            break
        time.sleep(0.3)
    if server:
        return {"rc": p.returncode}
    if gbps:
        return {"gbps": gbps, "cmd": " ".join(cmd)}
    tail = " | ".join(out.strip().splitlines()[-3:]) or "no output"
    return {"error": "ib_write_bw (exit %d): %s" % (p.returncode, tail), "cmd": " ".join(cmd)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("server", "client"))
    ap.add_argument("--tool", choices=("auto", "iperf3", "ib_write_bw", "builtin"), default="auto")
    ap.add_argument("--bind", default="")
    ap.add_argument("--connect", default="")
    ap.add_argument("--port", type=int, default=29400)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--device", default="", help="RDMA device for ib_write_bw")
    ap.add_argument("--ib-port", type=int, default=1, help="its port (ib_write_bw -i)")
    a = ap.parse_args()
    tool = a.tool if a.tool != "auto" else ("iperf3" if shutil.which("iperf3") else "builtin")
    doc = {"probe": "netpair", "mode": a.mode, "tool": tool, "streams": a.streams,
           "duration": a.duration, "bind": a.bind, "connect": a.connect, "port": a.port}
    try:
        if tool == "iperf3":
            doc.update(iperf3_server(a) if a.mode == "server" else iperf3_client(a))
        elif tool == "ib_write_bw":
            doc.update(ib_write_bw(a, a.mode == "server"))
        else:
            doc.update(builtin_server(a) if a.mode == "server" else builtin_client(a))
    except Exception as exc:  # noqa: BLE001
        doc["error"] = "%s: %s" % (type(exc).__name__, exc)
    print(json.dumps(doc))
    return 1 if "error" in doc else 0


if __name__ == "__main__":
    sys.exit(main())
