"""Checkpoint save and restore, controller side: where each host writes (the storage checks'
path: --storage-path, else the inventory's storage_path, else the host's temp dir), the model's
size, the probe on every host at once (signoff.fleet's measured phase), and the cleanup by
marker name of whatever a killed probe left (as the storage reads clean theirs)."""

from __future__ import annotations

import shlex

from signoff.check import class_guard, not_applicable
from signoff.checkpoint import section
from signoff.checkpoint.judge import need_bytes, sizing
from signoff.fleet import CLEANUP_S, ProbeError, bounded
from signoff.storage.run import CLEAN, MARK, TERM_PROBES, min_free, new_runid
from signoff.training import section as train_section

TESTS = ("test_checkpoint_save", "test_checkpoint_restore", "test_checkpoint_intact")
MIN_GBPS = 0.05  # the slowest write and read the probe's timeout allows for (50 MB/s)


class CheckpointRun:
    """Per module: each host's checkpoint measured once (Fleet.measured), its files removed at
    the end, whatever happened."""

    def __init__(self, fleet, profile, path: str | None, readonly: bool, free: str = "10%"):
        self.fleet, self.profile = fleet, profile
        self.path_opt, self.readonly_opt = path, readonly
        self.min_free = min_free(free)
        self.runid = new_runid()
        self.size = sizing(train_section(profile), section(profile)["size_gb"])
        self._touched: set[str] = set()  # hosts a probe was sent to

    def target(self, name: str) -> tuple[str, bool]:
        """(path, read-only) as the storage checks have it; "@tmp": the host's temp dir."""
        h = self.fleet.sessions[name].host
        path = self.path_opt or getattr(h, "storage_path", None) or "@tmp"
        return path, bool(self.readonly_opt or getattr(h, "storage_readonly", False))

    def args(self, name: str) -> list[str]:
        s, path = self.size, self.target(name)[0]
        return ["--path", path, "--runid", self.runid, "--host", name, "--layers", str(s["layers"]),
                "--d-model", str(s["d_model"]), "--heads", str(s["heads"]), "--ffn", str(s["ffn"]),
                "--steps", str(section(self.profile)["steps"]), "--need", str(need_bytes(s["bytes"])),
                "--min-free", self.min_free]

    def timeout(self) -> float:
        # written and read back at >= 50 MB/s; a probe slower than that is killed on its host
        return self.fleet.probe_timeout + 2 * self.size["bytes"] / (MIN_GBPS * 1e9)

    def measure(self, host) -> dict:
        """One host's checkpoint (a HostView): N.A. where the storage path is read-only."""
        class_guard(self.profile, [host])
        path, readonly = self.target(host.name)
        if readonly:
            not_applicable(f"{host}: the storage path {path} is read-only in this run (--storage-readonly, "
                           f"or the inventory's storage_readonly): the checkpoint writes a file, so "
                           f"nothing was written or measured")
        self._touched.add(host.name)
        doc = host.probe("checkpoint", *self.args(host.name), timeout=self.timeout())
        if "error" in doc:
            raise ProbeError(f"{host}: checkpoint probe: {doc['error']}")
        if host.gpus and not str(doc.get("device", "")).startswith("cuda"):
            raise ProbeError(f"{host}: the checkpoint ran on {doc.get('device')}: torch {doc.get('torch')} "
                             f"sees none of the {len(host.gpus)} GPUs NVML reports (a CPU build of torch, "
                             f"or CUDA_VISIBLE_DEVICES)")
        doc["size_from"] = self.size["from"]
        return doc

    def close(self) -> None:
        """Stop this run's checkpoint probes, then remove <path>/.signoff-<runid>-* on every host a
        probe went to (the probe removes its own; a SIGKILL or a lost controller leaves them)."""
        def where(n):
            return self.target(n)[0]

        def clean(n):
            s = self.fleet.sessions[n]
            path = "${TMPDIR:-/tmp}" if where(n) == "@tmp" else shlex.quote(where(n))
            if s.workdir:
                s.run(TERM_PROBES.format(wd=shlex.quote(s.workdir)), CLEANUP_S)
            s.run(CLEAN.format(path=path, pattern=shlex.quote(f"{MARK}{self.runid}-*")), CLEANUP_S)
        for n in bounded(clean, sorted(self._touched)):
            self.fleet.note("left_behind", n, f"checkpoint files {where(n)}/{MARK}{self.runid}-{n}: no "
                                              f"answer to the cleanup within {CLEANUP_S} s")
