"""The training probe's gloo ranks end with their process group gone (issue 30 item 1): no
rank's interpreter starts its teardown while gloo's threads still run. DDP's first
construction imported torch.distributed.nn.functional after init_process_group, whose
`group=group.WORLD` defaults then held the default group past destroy_process_group: gloo's
group was torn down inside the interpreter's own teardown (Py_FinalizeEx, gdb), its socket
loop live while the peers exited, the training probe's SIGABRTs under srun
(docs/measurements.md). For real on this CPU, one node and two "nodes" on loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from signoff import profiles
from signoff.training import section
from signoff.training.run import step_args

PROBE = Path(__file__).resolve().parent.parent / "signoff" / "training" / "probe_train.py"
# Every Python process of the probe writes, as it starts ending, the threads it still runs;
# gloo names its own (gloo_tcp_loop, pt_gloo_runloop). The probe's own process ends through its
# interpreter's teardown (atexit); a forked rank (gloo's start method) through os._exit.
SITE = """import atexit, os
def _threads(d=os.environ["TEARDOWN_DIR"]):
    names = [open("/proc/self/task/%s/comm" % t).read().strip() for t in os.listdir("/proc/self/task")]
    with open(os.path.join(d, "exit.%d" % os.getpid()), "w") as f:
        f.write(" ".join(sorted(names)))
atexit.register(_threads)
_exit = os._exit
def _said_exit(code):
    _threads()
    _exit(code)
os._exit = _said_exit
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("nodes", [1, 2])
def test_gloo_ranks_end_with_their_process_group_gone(tmp_path, nodes):
    site, seen = tmp_path / "site", tmp_path / "exits"
    site.mkdir()
    seen.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    env = {**os.environ, "PYTHONPATH": str(site), "TEARDOWN_DIR": str(seen)}
    argv = [sys.executable, str(PROBE), *step_args(section(profiles.load("local")))]
    if nodes > 1:  # as train_scaling_nodes: one gloo rank per node, the store on node 0
        port = str(_free_port())
        argv += ["--nnodes", str(nodes), "--nprocs", "1", "--master-addr", "127.0.0.1", "--master-port", port]
    procs = [subprocess.Popen([*argv, *(["--node-rank", str(i)] if nodes > 1 else [])], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(nodes)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        doc = json.loads(out.splitlines()[-1])
        assert p.returncode == 0 and "error" not in doc, err[-2000:]
    exits = {f.name: f.read_text().split() for f in seen.iterdir()}
    ranks = 2 if nodes == 1 else 1  # gloo's 2 ranks on one node; 1 per node across nodes
    assert len(exits) >= nodes * (1 + ranks), exits  # every node's probe and its ranks said
    live = {k: v for k, v in exits.items() if any("gloo" in t for t in v)}
    assert not live, f"processes that began their teardown with gloo's threads running: {live}"
