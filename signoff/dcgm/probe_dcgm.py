#!/usr/bin/env python3
"""Host-side probe: NVIDIA DCGM's diagnostic, `dcgmi diag -r LEVEL -j`, run once on this host
(every GPU). Prints one JSON document: dcgmi's own stdout kept verbatim (`stdout`: the raw
JSON, the provider's RMA evidence), its exit code and stderr's tail; the controller parses and
judges it (signoff/dcgm/judge.py). `dcgm.py --level 3 --timeout 1800`.

Before the diagnostic: is `dcgmi` on PATH, and does its host engine answer (`dcgmi discovery
-l`: every dcgmi command but --version talks to nv-hostengine)? preflight() is that check
alone, for the sysinfo probe's preflight (signoff/gpu/probe_sysinfo.py)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

TAIL = 2000  # characters of stderr kept: the raw JSON is stdout


def _run(cmd, timeout):
    """(rc, stdout, stderr, timed_out): the process group killed at the timeout (dcgmi diag
    waits on the host engine's nvvs; a hung one must not outlive the probe)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err, False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate()
        return p.returncode, out, err, True


def _text(raw):
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def preflight(timeout=15):
    """{"dcgmi": path or None, "hostengine": True / False / None (not asked: no dcgmi),
    "error": why not}: cheap, no diagnostic run."""
    path = shutil.which("dcgmi")
    if not path:
        return {"dcgmi": None, "hostengine": None,
                "error": "dcgmi not installed (not on PATH: DCGM's datacenter-gpu-manager package)"}
    try:
        rc, out, err, late = _run([path, "discovery", "-l"], timeout)
    except OSError as exc:
        return {"dcgmi": path, "hostengine": None, "error": "dcgmi: %s" % exc}
    if late:
        return {"dcgmi": path, "hostengine": False,
                "error": "dcgmi discovery -l did not answer in %d s (host engine hung?)" % timeout}
    if rc != 0:
        said = " ".join((_text(err) + " " + _text(out)).split())[:300]
        return {"dcgmi": path, "hostengine": False,
                "error": "DCGM host engine not running (dcgmi discovery -l exit %d: %s)" % (rc, said)}
    return {"dcgmi": path, "hostengine": True}


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--level", type=int, required=True)
    ap.add_argument("--timeout", type=float, required=True)
    a = ap.parse_args()
    doc = {"probe": "dcgm", "level": a.level, "timeout_s": a.timeout}
    pf = preflight()
    doc["preflight"] = pf
    if pf.get("error"):
        doc["missing"] = "dcgmi" if not pf["dcgmi"] else "hostengine"
        doc["error"] = pf["error"]
        print(json.dumps(doc))
        return 0
    cmd = [pf["dcgmi"], "diag", "-r", str(a.level), "-j"]
    t0 = time.time()
    rc, out, err, late = _run(cmd, a.timeout)
    doc.update(command=" ".join(cmd[1:]), rc=rc, timed_out=late, elapsed_s=round(time.time() - t0, 1),
               stdout=_text(out), stderr=_text(err)[-TAIL:])
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
