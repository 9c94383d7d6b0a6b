#!/usr/bin/env python3
"""Host-side probe: one end of one rail's GPU-memory-to-GPU-memory RDMA bandwidth (perftest's
ib_write_bw with its buffer on a GPU: --use_cuda=<gpu>, with --use_cuda_dmabuf where asked).

    gdr.py caps
    gdr.py server --gpu G --device D --ib-port P --port N --duration S [--dmabuf]
    gdr.py client --connect ADDR --gpu G --device D --ib-port P --port N --duration S [--dmabuf]

caps: whether ib_write_bw is installed and was built with CUDA (its --help lists --use_cuda, and
--use_cuda_dmabuf where built with dma-buf: perftest src/perftest_parameters.c). server/client:
one ib_write_bw run on the rail's own card and port (-d/-i), its output's CUDA lines and its
average (Gb/s). ib_write_bw is run with a timeout (killed at it) and the server exits after one
test: nothing stays running. One JSON document; stdlib only."""
import argparse
import json
import re
import shutil
import subprocess
import sys
import time

MAX_OUT = 1 << 16
TABLE = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def caps():
    path = shutil.which("ib_write_bw")
    out = {"probe": "gdr caps", "ib_write_bw": path, "cuda": False, "dmabuf": False}
    if not path:
        return out
    try:  # perftest prints its usage and exits non-zero on --help: the text is what counts
        p = subprocess.run([path, "--help"], capture_output=True, text=True, errors="replace", timeout=10)
        usage = (p.stdout + p.stderr)[:MAX_OUT]
    except Exception as exc:  # noqa: BLE001
        out["error"] = "ib_write_bw --help: %s" % str(exc)[:200]
        return out
    out["cuda"] = "--use_cuda=" in usage
    out["dmabuf"] = "--use_cuda_dmabuf" in usage
    return out


def command(a):
    cmd = ["ib_write_bw", "--report_gbits", "-F", "-d", a.device, "-i", str(a.ib_port), "-p", str(a.port),
           "-D", str(a.duration), "--use_cuda=%d" % a.gpu]
    if a.dmabuf:  # after --use_cuda: perftest refuses it before (linux-rdma/perftest issue 336)
        cmd.append("--use_cuda_dmabuf")
    return cmd + ([a.connect] if a.connect else [])


def run(a):
    cmd = command(a)
    deadline = time.time() + 20
    while True:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=a.duration + 60)
            out, rc = (p.stdout + p.stderr)[-MAX_OUT:], p.returncode
        except subprocess.TimeoutExpired as exc:  # subprocess.run killed it
            out, rc = str(exc.stdout or "")[-MAX_OUT:], 124
        # the client starts at once and the server may not listen yet: "Couldn't connect to ADDR:PORT"
        if not a.connect or rc == 0 or "Couldn't connect" not in out or time.time() > deadline:
            break
        time.sleep(0.5)
    rows = [m for m in (TABLE.match(ln) for ln in out.splitlines()) if m]
    doc = {"cmd": " ".join(cmd), "rc": rc, "output": out[-6000:],
           "gbps": float(rows[-1].group(4)) if rows else None}
    if rc != 0 or (a.connect and doc["gbps"] is None):
        tail = " | ".join(out.strip().splitlines()[-3:]) or "no output"
        doc["error"] = "ib_write_bw (exit %d): %s" % (rc, tail[:400])
    return doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("caps", "server", "client"))
    ap.add_argument("--connect", default="")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--device", default="")
    ap.add_argument("--ib-port", type=int, default=1)
    ap.add_argument("--port", type=int, default=29410)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--dmabuf", action="store_true")
    a = ap.parse_args()
    if a.mode == "caps":
        print(json.dumps(caps()))
        return 0
    if a.mode == "client" and not a.connect:
        ap.error("client needs --connect")
    doc = {"probe": "gdr", "mode": a.mode, "gpu": a.gpu, "device": a.device, "ib_port": a.ib_port}
    if not shutil.which("ib_write_bw"):
        doc["error"] = "ib_write_bw is not installed (perftest)"
    else:
        try:
            doc.update(run(a))
        except Exception as exc:  # noqa: BLE001
            doc["error"] = "%s: %s" % (type(exc).__name__, exc)
    print(json.dumps(doc))
    return 0  # a rail's failure is its own, in the document: the pair's other rails still run


if __name__ == "__main__":
    sys.exit(main())
