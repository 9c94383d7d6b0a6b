"""GPUDirect RDMA per rail (issue 53 item 4): each GPU with its PCIe-closest RDMA NIC, GPU memory to
GPU memory across a pair of nodes with perftest's ib_write_bw --use_cuda (probe_gdr.py, shipped as
gdr.py), rails one after another (run.py); where perftest has no CUDA, NCCL's channel lines of the
multi-node all-reduce say whether each GPU's traffic took GPUDirect RDMA (judge.py). Hosts without
an RDMA NIC, and a run of one host, are N.A."""

from signoff import InputError

CRITERIA = {
    # every rail's GPU-to-GPU ib_write_bw; derived line_rate: a fraction of the rail's NIC line rate
    # (the slower end's), the floor in GB/s worked out per rail; the worst rail recorded
    "gdr_rail_bw": {"type": "number", "extra": ("duration", "dmabuf"),
                    "derived": {"line_rate": "x line rate"}},
    # rails off GPUDirect RDMA (a buffer in host memory, NCCL without GDRDMA, a GPU whose closest NIC
    # is farther than `level` on nvidia-smi topo's scale)
    "gdr_rail_path": {"type": "number", "ops": ("max",), "extra": ("level",)},
}
PLUGIN = "signoff.rails.plugin"
LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")


def check_extra(name: str, value, extra: dict, where: str) -> None:
    if name == "gdr_rail_path" and extra.get("level", "PHB") not in LEVELS:
        raise InputError(f"{where}.level: expected one of {', '.join(LEVELS)}, got {extra.get('level')!r}")
    if name == "gdr_rail_bw":
        d = extra.get("duration", 5)
        if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= 600:
            raise InputError(f"{where}.duration: expected seconds 1-600, got {d!r}")
        if not isinstance(extra.get("dmabuf", False), bool):
            raise InputError(f"{where}.dmabuf: expected true or false, got {extra.get('dmabuf')!r}")


def estimate(config, prof, picked, pairs) -> list[str]:
    """`signoff plan`: every ring pair's rails one after another, disjoint pairs at once (8 rails a
    node assumed where the class says no GPU count)."""
    if not {"gdr_rail_bw", "gdr_rail_path"} & set(picked) or not pairs:
        return []
    from signoff.network.judge import rounds
    t = prof.criteria.get("gdr_rail_bw")
    dur = (t.extra.get("duration", 5) if t else 5) + 2  # perftest's own setup, about 2 s a rail
    gpus = prof.hardware.get("gpu_count") or 8
    n = len(rounds(pairs))
    return [f"rails (GPUDirect RDMA): {len(pairs)} pairs in {n} rounds x {gpus} rails of ~{dur} s: "
            f"~{n * gpus * dur} s where the hosts have RDMA NICs"]
