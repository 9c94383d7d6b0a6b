"""GPU inventory and health through NVML, per host."""

from signoff.check import not_applicable
from signoff.fleet import ProbeError
from signoff.profiles import matches

AZURE = "Azure azurehpc-health-checks (shared/reference/thresholds.md)"
RULE = "signoff acceptance rule"


def test_gpu_model(host, gpus, profile, check):
    model = profile.hardware.get("gpu_model")
    names = sorted({g["name"] for g in gpus})
    if not model:
        not_applicable(f"profile {profile.name} names no GPU model (found {names})")
    why = [w for w in matches(profile, host.hardware) if w.startswith("GPU model")]
    bad = [f"GPU {g['index']} is {g['name']}" for g in gpus if g["name"] != gpus[0]["name"]]
    check.require(why + bad, ", ".join(names), f"every GPU {model}", f"profile {profile.name}",
                  cause="the profile does not match this hardware class")


def test_gpu_count(host, gpus, profile, check):
    want = profile.hardware.get("gpu_count")
    if not want:
        not_applicable(f"profile {profile.name} sets no GPU count (found {len(gpus)})")
    check.require([] if len(gpus) == want else [f"{len(gpus)} GPUs visible to NVML"],
                  len(gpus), f"{want} GPUs", f"profile {profile.name}",
                  cause="a GPU fell off the bus or the profile is for another class")


def test_nvlink_up(host, gpus, profile, check):
    if profile.hardware.get("interconnect") != "nvlink":
        not_applicable(f"profile {profile.name} does not require NVLink")
    bad = [f"GPU {g['index']} has {g['nvlink']['up']}/{g['nvlink']['links']} NVLinks up"
           for g in gpus if not g["nvlink"]["links"] or g["nvlink"]["up"] < g["nvlink"]["links"]]
    up = sum(g["nvlink"]["up"] for g in gpus)
    check.require(bad, f"{up} links up", "every NVLink of every GPU up", f"profile {profile.name}",
                  cause="a link is down or the GPUs are PCIe-only",
                  details={g["index"]: g["nvlink"] for g in gpus})


def test_ecc_enabled(host, gpus, check):
    bad = [f"GPU {g['index']} ECC {'off' if g['ecc_current'] is False else 'unreadable'}"
           + (" (on after reboot)" if g["ecc_pending"] else "")
           for g in gpus if not g["ecc_current"]]
    check.require(bad, f"{len(gpus) - len(bad)}/{len(gpus)} on", "ECC on for every GPU", RULE)


def test_ecc_uncorrectable(host, gpus, check):
    counts = {g["index"]: g["ecc_volatile_uncorrectable"] for g in gpus}
    if any(v is None for v in counts.values()):
        raise ProbeError(f"{host}: NVML could not read volatile ECC counters: {counts}")
    bad = [f"GPU {i} has {v} uncorrectable ECC errors since driver load"
           for i, v in counts.items() if v]
    check.require(bad, sum(counts.values()), "0 uncorrectable ECC errors", RULE,
                  cause="failing HBM", details=counts)


def test_row_remap(host, gpus, profile, check):
    rows = {g["index"]: g["row_remap"] for g in gpus}
    if any(r is None for r in rows.values()):
        raise ProbeError(f"{host}: NVML could not read row remapping: {rows}")
    limit = profile.threshold("row_remap_uncorrectable")
    bad = [f"GPU {i} has a row remap pending (reset the GPU)" for i, r in rows.items() if r["pending"]]
    bad += [f"GPU {i} had a row remap failure" for i, r in rows.items() if r["failure"]]
    bad += [f"GPU {i} has {r['uncorrected']} uncorrectable remaps, {limit}"
            for i, r in rows.items() if not limit.ok(r["uncorrected"])]
    worst = max(r["uncorrected"] for r in rows.values())
    check.require(bad, worst, f"no pending or failed remaps, uncorrectable {limit.expected}", AZURE,
                  details=rows)


def test_pcie_link(host, gpus, check):
    bad, idle = [], False
    for g in gpus:
        p = g["pcie"]
        if None in (p["gen"], p["width"], p["max_gen"], p["max_width"]):
            raise ProbeError(f"{host}: NVML could not read the PCIe link of GPU {g['index']}: {p}")
        if p["gen"] < p["max_gen"] or p["width"] < p["max_width"]:
            bad.append(f"GPU {g['index']} PCIe Gen{p['gen']} x{p['width']} "
                       f"< Gen{p['max_gen']} x{p['max_width']}")
            idle |= not p["under_load"]
    if bad and idle:
        # Idle links downshift on purpose: without load the reading proves nothing.
        raise ProbeError(f"{host}: {'; '.join(bad)}, read at idle (torch could not load the "
                         f"GPUs), inconclusive")
    g0 = gpus[0]["pcie"]
    check.require(bad, f"Gen{g0['gen']} x{g0['width']}", "every GPU at its maximum PCIe "
                  "generation and width under load", RULE,
                  cause="a riser, slot or BIOS setting limits the link",
                  details={g["index"]: g["pcie"] for g in gpus})


def test_persistence_mode(host, gpus, check):
    bad = [f"GPU {g['index']} persistence mode "
           f"{'unreadable' if g['persistence_mode'] is None else 'off'}"
           for g in gpus if g["persistence_mode"] != 1]
    check.require(bad, f"{len(gpus) - len(bad)}/{len(gpus)} on", "persistence mode on", RULE,
                  cause="nvidia-persistenced not running: the driver re-initialises per job")


def test_mig_mode(host, gpus, profile, check):
    want = profile.hardware.get("mig")
    if want is None:
        not_applicable(f"profile {profile.name} does not set a MIG mode")
    unread = [g["index"] for g in gpus if g["mig_current"] is None]
    if unread:
        raise ProbeError(f"{host}: NVML could not read the MIG mode of GPU(s) {unread}")
    bad = [f"GPU {g['index']} MIG {'on' if g['mig_current'] else 'off'}"
           + (" (changes at next reset)" if (g["mig_pending"] or 0) != (g["mig_current"] or 0) else "")
           for g in gpus if bool(g["mig_current"]) != want]
    check.require(bad, f"MIG {'on' if any(g['mig_current'] for g in gpus) else 'off'}",
                  f"MIG {'on' if want else 'off'} on every GPU", f"profile {profile.name}")
