"""What several host-side probes share, shipped beside every probe as probelib.py (Fleet ships
families.shipped()): the rendezvous of a collective (probe_allreduce, probe_train) and the loader
of the co-tenant sampler (cotenants.py, signoff/gpu/probe_cotenants.py). Standard library only,
as the probes: it runs under the host's own Python, never the controller's venv.

A probe loads it by its path, never through sys.path (python -P or -I leaves the probe's dir
off it, and the old fallback then found the run dir's parent's: /tmp/probelib.py, anyone's): beside
the probe as shipped, else from the source tree (signoff/<family>/probe_<name>.py run by hand or by
a bench script). The same lines in every probe that loads it (tests/test_probe_import_lab.py):

    _dir = os.path.dirname(os.path.realpath(__file__))
    _lib = os.path.join(_dir, "probelib.py")
    if not os.path.exists(_lib) and os.path.basename(os.path.dirname(_dir)) == "signoff":
        _lib = os.path.join(os.path.dirname(_dir), "probelib.py")
    _spec = importlib.util.spec_from_file_location("probelib", _lib)
    probelib = sys.modules["probelib"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(probelib)
"""
import datetime
import importlib.util
import os
import socket
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def listen(addr, port):
    """The rendezvous listener, bound to the measured interface only (not 0.0.0.0)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(128)
    return s


def serve(sock, addr, world, timeout):
    """The rendezvous store on `sock` (node 0's first rank; None elsewhere), serving before any
    rank starts: a rank (another node's too) that connected to the bare listener before the
    store served it had its connection closed ("Failed to recv, got 0 bytes") under load."""
    if sock is None:
        return None
    import torch.distributed as dist
    return dist.TCPStore(addr, sock.getsockname()[1], world, is_master=True,
                         timeout=datetime.timedelta(seconds=timeout), wait_for_workers=False,
                         master_listen_fd=sock.fileno())


def torch_ranks(doc, args):
    """A collective probe's start (probe_allreduce, probe_train, probe_parallel): (torch,
    torch.multiprocessing, the GPUs torch sees, the ranks to start on this node: --nprocs, else one
    per GPU, 2 on gloo), `auto` resolved in args.backend (NCCL where torch sees a GPU). None where
    torch does not import, `doc` saying so."""
    try:
        import torch
        import torch.multiprocessing as mp
    except Exception as exc:  # noqa: BLE001
        doc["error"] = "torch not importable: %s" % exc
        return None
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if args.backend == "auto":
        args.backend = "nccl" if gpus else "gloo"
    return torch, mp, gpus, args.nprocs or (gpus if args.backend == "nccl" else 2)


def own_temp(logdir):
    """Every temp file of the probe and its ranks goes to `logdir`, which the probe removes.
    torch.multiprocessing writes a raising rank's error file (pytorch-errorfile-*.pickle) to the
    temp dir and never removes it; a spawned NCCL rank made torch's inductor cache dir
    (/tmp/torchinductor_<user>) on an H200. tempfile.tempdir covers this process and its forked
    ranks, TMPDIR the spawned ones (a fresh interpreter reads it)."""
    path = os.path.abspath(logdir)
    tempfile.tempdir = path
    os.environ["TMPDIR"] = path


def start_method(backend, gpus):
    """gloo's ranks on a CPU-only host fork: a spawned rank imports torch again (about 2 s of CPU
    each). Where this process counted GPUs, CUDA's driver is initialised and a forked rank's
    first CUDA call fails (gloo's training rank: AdamW asks whether a CUDA graph is capturing;
    "CUDA error: initialization error" on an H200), so NCCL's ranks and gloo's by hand on a GPU
    host spawn. A forked rank has no copy of the store's server thread (fork copies the calling
    thread only) and never touches the store object it inherits."""
    return "fork" if backend == "gloo" and not gpus else "spawn"


def load_cotenants():
    """cotenants.py, shipped beside every probe (signoff/gpu/probe_cotenants.py in the source
    tree): its sampler names another process on a GPU during the measurement. None where
    neither is there: the document then has no `cotenants` (not sampled). The source tree's first:
    its signoff/cotenants.py is the controller's judgement, not the sampler."""
    for path in (os.path.join(HERE, "gpu", "probe_cotenants.py"), os.path.join(HERE, "cotenants.py")):
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location("cotenants", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    return None
