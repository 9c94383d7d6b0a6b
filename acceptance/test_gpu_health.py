"""GPU inventory and health through NVML, per host."""

from signoff.check import not_applicable
from signoff.fleet import ProbeError
from signoff.gpu import judge
from signoff.profiles import GENERIC_NAMES, matches

AZURE = "Azure azurehpc-health-checks (github.com/Azure/azurehpc-health-checks, conf/<sku>.conf)"
RULE = "signoff acceptance rule"


def test_gpu_model(host, gpus, profile, check):
    model = profile.hardware.get("gpu_model")
    names = sorted({g["name"] for g in gpus})
    if not model:
        not_applicable(f"profile {profile.name} names no GPU model (found {names})")
    why = [w for w in matches(profile, host.hardware) if w.startswith("GPU model")]
    bad = [f"GPU {g['index']} is {g['name']}" for g in gpus if g["name"] != gpus[0]["name"]]
    ids = profile.hardware.get("pci_ids")
    if gpus[0]["name"] in GENERIC_NAMES and ids and not why:  # no product name: told by PCI id
        bad += [f"GPU {g['index']} is PCI device {g.get('pci_device_id') or 'unread'}" for g in gpus
                if g.get("pci_device_id") not in ids]
        check.note(f"NVML names the GPUs {gpus[0]['name']!r} (a driver without their product name): "
                   f"the class told by PCI device id {gpus[0]['pci_device_id']}, {model}'s "
                   f"({', '.join(ids)})")
    check.require(why + bad, ", ".join(names), f"every GPU {model}", f"profile {profile.name}",
                  cause="the profile does not match this hardware class")


def test_gpu_count(host, gpus, profile, check):
    want = profile.hardware.get("gpu_count")
    if not want:
        not_applicable(f"profile {profile.name} sets no GPU count (found {len(gpus)})")
    check.require([] if len(gpus) == want else [f"{len(gpus)} GPUs visible to NVML"],
                  len(gpus), f"{want} GPU{'s' if want != 1 else ''}", f"profile {profile.name}",
                  cause="a GPU fell off the bus or the profile is for another class")


def test_nvlink_up(host, gpus, profile, check):
    if profile.hardware.get("interconnect") != "nvlink":
        not_applicable(f"profile {profile.name} does not require NVLink")
    want = profile.hardware.get("nvlinks")  # links per GPU of the class
    bad = []
    for g in gpus:
        nvl = g["nvlink"]
        unread = nvl.get("unreadable") or {}
        if unread:
            bad.append(f"GPU {g['index']} NVLink state unreadable on link(s) " + ", ".join(
                f"{k} ({v})" for k, v in sorted(unread.items(), key=lambda kv: int(kv[0]))))
        if want and nvl["links"] < want:
            bad.append(f"GPU {g['index']} has {nvl['up']}/{nvl['links']} NVLinks up, "
                       f"{want} expected")
        elif not nvl["links"] or nvl["up"] < nvl["links"] - len(unread):
            bad.append(f"GPU {g['index']} has {nvl['up']}/{nvl['links']} NVLinks up")
    up = sum(g["nvlink"]["up"] for g in gpus)
    expected = f"{want} NVLinks per GPU, every one up" if want else "every NVLink of every GPU up"
    check.require(bad, f"{up} links up", expected, f"profile {profile.name}",
                  cause="a link is down or the GPUs are PCIe-only",
                  details={g["index"]: g["nvlink"] for g in gpus})


def test_power_limit(host, gpus, profile, check):
    """The enforced power limit is the class's rated one: an admin cap (nvidia-smi -pl) below
    it holds every GPU at SW power cap, slow yet cool, the reason a GPU at full load shows anyway."""
    # a profile without a class (local) has no rated figure: the GPU's own default is the floor
    t = profile.threshold("power_limit") if profile.gpu_required or "power_limit" in profile.criteria \
        else None
    own = t if t is not None and t.extra.get("derived") == "own_default" else None  # local's rule
    t, frac = (None, own.value) if own else (t, 1.0)
    power = {g["index"]: g.get("power") or {} for g in gpus}
    unread = [i for i, p in power.items() if p.get("enforced_w") is None
              or (t is None and p.get("default_w") is None)]
    if unread:
        raise ProbeError(f"{host}: NVML could not read the power limits of GPU(s) {unread}: "
                         f"{ {i: power[i] for i in unread} }")
    bad = [f"GPU {i} enforced power limit {p['enforced_w']:g} W < {t.value:g} W"
           for i, p in power.items() if t and not t.ok(p["enforced_w"])]
    below = f"{frac:g} x its default" if frac != 1 else "its default"
    bad += [f"GPU {i} capped at {p['enforced_w']:g} W, below {below} {p['default_w']:g} W"
            for i, p in power.items() if p.get("default_w") and p["enforced_w"] < frac * p["default_w"]
            and (t is None or t.ok(p["enforced_w"]))]
    check.require(bad, min(p["enforced_w"] for p in power.values()),
                  f"every GPU's enforced power limit {t.expected + ' and ' if t else ''}"
                  f"not below {below}", t.source if t else own.source if own else RULE,
                  cause="an admin power cap (nvidia-smi -pl) or a lower-power variant of the GPU",
                  details=power)


def _no_ecc(host, gpus, profile, what: str) -> list[dict]:
    """The GPUs whose ECC is on, where the class runs without it (`hardware.ecc: false`: GeForce
    RTX 4090, ECC off by default); none such: N.A. naming why, never a PASS."""
    if profile.hardware.get("ecc") is not False:
        return gpus
    on = [g for g in gpus if g["ecc_current"]]
    if not on:
        not_applicable(f"{host}: ECC is off on every GPU, the normal state of profile {profile.name}'s "
                       f"class ({profile.hardware.get('gpu_model')}): {what}")
    return on


def test_ecc_enabled(host, gpus, profile, check):
    if profile.hardware.get("ecc") is False:
        not_applicable(f"{host}: profile {profile.name}'s class ({profile.hardware.get('gpu_model')}) "
                       f"runs with ECC off by default: not required (on for "
                       f"{sum(bool(g['ecc_current']) for g in gpus)} of {len(gpus)} GPUs)")
    bad = [f"GPU {g['index']} ECC {'off' if g['ecc_current'] is False else 'unreadable'}"
           + (" (on after reboot)" if g["ecc_pending"] else "")
           for g in gpus if not g["ecc_current"]]
    check.require(bad, f"{len(gpus) - len(bad)}/{len(gpus)} on", "ECC on for every GPU", RULE)


def test_ecc_uncorrectable(host, gpus, profile, check):
    gpus = _no_ecc(host, gpus, profile, "no ECC error is detected or counted")
    counts = {g["index"]: g["ecc_volatile_uncorrectable"] for g in gpus}
    if any(v is None for v in counts.values()):
        raise ProbeError(f"{host}: NVML could not read volatile ECC counters: {counts}")
    bad = [f"GPU {i} has {v} uncorrectable ECC errors since driver load"
           for i, v in counts.items() if v]
    check.require(bad, sum(counts.values()), "0 uncorrectable ECC errors", RULE,
                  cause="failing HBM", details=counts)


def test_row_remap(host, gpus, profile, check):
    # rows are remapped on the errors ECC detects: with ECC off none can be, its zeros prove nothing
    gpus = _no_ecc(host, gpus, profile, "rows are remapped on the errors ECC detects, so none can be "
                   "(NVML's remap counters read 0 and prove nothing)")
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


def test_pcie_link(host, gpus, profile, check):
    # NVML's max gen/width are what "this device and system" allow: a Gen5 GPU in a Gen4
    # slot reads max Gen4. The GPU's own max gen and the profile's class are the target.
    if profile.hardware.get("host_link") == "c2c" or all(g.get("c2c") for g in gpus):
        said = f"profile {profile.name}'s class" if profile.hardware.get("host_link") == "c2c" \
            else "NVML's C2C mode, on every GPU"
        not_applicable(f"the GPUs reach the Grace CPU over NVLink-C2C, not PCIe ({said}): no PCIe "
                       f"link to the host to judge; host_link_bandwidth judges the C2C copies")
    bad, idle, slot = [], False, False
    for g in gpus:
        p = g["pcie"]
        if None in (p["gen"], p["width"], p["max_gen"], p["max_width"]):
            raise ProbeError(f"{host}: NVML could not read the PCIe link of GPU {g['index']}: {p}")
        if p.get("gpu_max_gen") is None and not profile.hardware.get("pcie_gen"):
            raise ProbeError(f"{host}: NVML could not read GPU {g['index']}'s own maximum PCIe "
                             f"generation and profile {profile.name} sets no hardware.pcie_gen")
        gen = max(x for x in (p["max_gen"], p.get("gpu_max_gen"), profile.hardware.get("pcie_gen")) if x)
        width = max(p["max_width"], profile.hardware.get("pcie_width") or 0)
        if p["gen"] < gen or p["width"] < width:
            limited = p["max_gen"] < gen or p["max_width"] < width  # a fact, loaded or not
            bad.append(f"GPU {g['index']} PCIe Gen{p['gen']} x{p['width']} < Gen{gen} x{width}"
                       + (f" (slot/system max Gen{p['max_gen']} x{p['max_width']})" if limited else ""))
            slot |= limited
            idle |= not p["under_load"]
    if bad and idle and not slot:
        # Idle links downshift on purpose: without load the reading proves nothing.
        raise ProbeError(f"{host}: {'; '.join(bad)}, read at idle (torch could not load the "
                         f"GPUs), inconclusive")
    g0 = gpus[0]["pcie"]
    check.require(bad, f"Gen{g0['gen']} x{g0['width']}", "every GPU at its own maximum PCIe "
                  "generation and width (and the profile's) under load", RULE,
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


def test_bar1_size(host, gpus, profile, check):
    """Where the class needs it (hardware.large_bar: RTX PRO 6000), every GPU's BAR1 maps all
    its memory: a BIOS without large BAR leaves 256 MiB and P2P crawls."""
    if not profile.hardware.get("large_bar"):
        not_applicable(f"profile {profile.name}'s class does not need BAR1 to map the GPU's whole "
                       f"memory (hardware.large_bar unset)")
    t = profile.threshold("bar1_size")
    bad, unread, ratio = judge.bar1_short(gpus, t.value)
    if unread and not bad:
        raise ProbeError(f"{host}: NVML gave no BAR1 or memory size for {', '.join(unread)}")
    check.require(bad + [f"{g} unread" for g in unread], ratio, f"every GPU's BAR1 {t.expected}",
                  t.source, cause=judge.BAR1_CAUSE, details={g["index"]: g.get("bar1") for g in gpus})


def test_uvm_hmm(host, gpus, profile, check):
    """Where the class needs it (hardware.uvm_disable_hmm: RTX PRO 6000), nvidia_uvm runs with
    HMM off: with it on, NCCL's P2P locks up on these cards."""
    if not profile.hardware.get("uvm_disable_hmm"):
        not_applicable(f"profile {profile.name}'s class does not need nvidia_uvm's HMM off "
                       f"(hardware.uvm_disable_hmm unset)")
    t = profile.threshold("uvm_hmm")
    value, why = judge.uvm_hmm(host.facts)
    if why:
        raise ProbeError(f"{host}: {why}")
    check.expect(value, t, "nvidia_uvm uvm_disable_hmm", cause=judge.UVM_CAUSE,
                 details=host.facts["nvidia"]["uvm"])
