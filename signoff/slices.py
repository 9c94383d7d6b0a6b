"""Slices: the machine a user rents, N GPUs of a class's board ("h100-8x-nvlink@2": 2 of an HGX
H100's 8). A slice is its class with the hardware of N GPUs and the figures that depend on how
many GPUs there are worked out from the class's own by a stated rule (docs/thresholds.md,
"Slices"); measured figures in the class file's `slices:` section win over the rule."""

from __future__ import annotations

from dataclasses import replace

from signoff import InputError, families, outlier

SEP = "@"
RULE = "signoff/slices.py rule"  # what show-profile names as the origin of a key set here
# nccl-tests 2.19.6 all_reduce_perf, NVLS off, 8 GiB, on 2x and 4x H200 NVLink slices of an HGX
# board (docs/reference-figures.md, measured by this project, 2026-11-29)
RING = {2: 344.7, 4: 364.8}
RING_SOURCE = "nccl-tests all_reduce_perf busbw at 8 GiB, NVLS off, on 2x / 4x H200: 344.7 / 364.8 GB/s " \
              "(docs/reference-figures.md, measured by this project)"
# the same at 8 GPUs of 8x H200, NVLS off and on (h200-8x-nvlink.yaml's allreduce_busbw source)
FULL_RING = (367.2, "stas00/ml-engineering network/README.md: 367.2 GB/s on 8x H200, NCCL_NVLS_ENABLE=0")
FULL_NVLS = (480.0, "Azure/AI-benchmarking-guide Azure_Results/ND_H200_v5_results.md: 480.0 GB/s at 8 GiB "
                     "with NVLS")
# the profiles issue 52 made slices of h200-8x-nvlink: --profile's "no such file" names the new one
RENAMED = {"h200-1x": "h200-8x-nvlink@1", "h200-2x-nvlink": "h200-8x-nvlink@2",
           "h200-4x-nvlink": "h200-8x-nvlink@4"}
# A slice has the provider's NIC, never the server's ports: these take the nearest `derived:`
# rule up the class's chain (nvidia-base.yaml: fleet_rate, line_rate, node_bound, ...).
NETWORK = ("nic_rate", "net_pair_bandwidth", "multinode_allreduce_busbw", "multinode_alltoall_busbw",
           "rail_alltoall_busbw", "multinode_allgather_busbw", "multinode_reduce_scatter_busbw",
           "multinode_sendrecv_busbw", "train_scaling_nodes")


def split(name: str) -> tuple[str, int | None]:
    """"h100-8x-nvlink@2" -> ("h100-8x-nvlink", 2); a name or path without "@N" -> (it, None).
    A file named x@y.yaml is a file, not a slice."""
    head, sep, tail = str(name).rpartition(SEP)
    if not sep or not head or "/" in tail or tail.endswith((".yaml", ".yml")):
        return str(name), None
    if not tail.isdigit():
        raise InputError(f"profile {name!r}: a slice is <class>@<N>, N the GPUs it has (e.g. "
                         f"h100-8x-nvlink@2), got {tail!r} after {SEP!r}")
    return head, int(tail)


def section(inherited: dict, sec, path, gpu_count) -> dict:
    """The class file's `slices: {2: {criteria: {...}}, ...}`, over the parent's: per N, each
    criterion a threshold validated as under criteria: (null drops the parent's; uncalibrated:
    as there). Returns {N: {criterion: (entry, where)}}."""
    from signoff import profiles
    w = f"profile {path}: slices"
    if not isinstance(sec, dict):
        raise InputError(f"{w}: expected a mapping of GPU count -> {{criteria: {{...}}}}")
    out = {n: dict(v) for n, v in inherited.items()}
    for key, val in sec.items():
        n = int(key) if isinstance(key, int) or (isinstance(key, str) and key.isdigit()) else None
        if isinstance(key, bool) or n is None or not gpu_count or not 1 <= n < gpu_count:
            raise InputError(f"{w}.{key}: expected a GPU count from 1 to {(gpu_count or 2) - 1} (a slice "
                             f"has fewer GPUs than the class's {gpu_count})")
        if not isinstance(val, dict) or set(val) != {"criteria"} or not isinstance(val["criteria"], dict):
            raise InputError(f"{w}.{key}: expected {{criteria: {{criterion: threshold}}}}")
        where = f"{path} slices.{n}"
        for cname, spec in val["criteria"].items():
            if spec is not None and profiles._uncalibrated(cname, spec, where) is None:
                profiles._threshold(cname, spec, where, "slice")  # whole: limit, unit, source
            out.setdefault(n, {})[cname] = (spec, where)
    return out


def _ancestors(base) -> list:
    """Each file of the class's chain loaded on its own, the class's own file first."""
    from signoff import profiles
    return [profiles.load(f) for f in reversed(base.files)]


def _allreduce(base, n: int) -> tuple[float | None, str] | None:
    """(the slice's all-reduce floor, its rule) from the class's figure at its own M GPUs: NVLink
    classes scaled by the ring busbw measured at the largest measured width <= n over the ring's
    at M (NVLS on at M = 8: over 8x H200's NVLS figure, as a slice runs without NVLS); PCIe: the
    same figure. (None, why) where no measured figure relates the two: uncalibrated."""
    t = base.criteria.get("allreduce_busbw")
    if t is None or t.op != "min":
        return None
    full = base.hardware["gpu_count"]
    if base.hardware.get("interconnect") != "nvlink":
        return t.value, (f"{t.value:g} {t.unit}, the class's {full}-GPU figure x 1: a ring's busbw is "
                         f"bounded by its slowest link, and {n} GPUs of a PCIe board cross no link its "
                         f"{full}-GPU ring does not")
    nvls = bool(base.hardware.get("nvls"))
    kind = "NVLS on" if nvls else "NVLS off"
    rings = {**RING, 8: FULL_RING[0]}
    if full not in rings:
        return None, (f"no ring busbw measured at {full} GPUs (only at {', '.join(map(str, rings))}), so the "
                      f"class's {full}-GPU figure cannot be scaled to {n} (signoff/slices.py rule, "
                      f"docs/thresholds.md Slices); measure the slice and set it in the class's "
                      f"slices: section")
    if nvls and full != 8:
        # the NVLS gain is measured at 8 GPUs only: it is not the same at fewer (none at 4 or
        # fewer, GB200 NVL Partition User Guide), so 367.2 / 480.0 would not convert this figure
        return None, (f"the class's {full}-GPU figure is NVLS on, and no NVLS figure at {full} GPUs is "
                      f"measured to take its NVLS share out (signoff/slices.py rule, docs/thresholds.md "
                      f"Slices); measure the slice and set it in the class's slices: section")
    width = max(k for k in RING if k <= n)
    ref, ref_src = FULL_NVLS if nvls else (rings[full], FULL_RING[1] if full == 8 else RING_SOURCE)
    value = round(t.value * RING[width] / ref, 1)
    srcs = RING_SOURCE if ref_src == RING_SOURCE else f"{RING_SOURCE}; {ref_src}"
    return value, (f"{t.value:g} {t.unit} (the class's {full}-GPU figure, {kind}) x {RING[width]} / {ref} "
                   f"(ring busbw of {width}x H200, NVLS off, over {full}x H200's, {kind}) = {value:g} "
                   f"{t.unit} at {n} GPUs; {srcs}")


def _scaling(base, n: int, b_full: float, b_n: float) -> tuple[float, str] | None:
    """train_scaling_host at n GPUs from the class's bound at its M: F = 0.9 x r, r = t_c / (t_c +
    t_ar(M)), so t_c / t_ar(M) = r / (1 - r); t_ar scales with 2(n-1)/n / busbw."""
    t = base.criteria.get("train_scaling_host")
    m = base.hardware["gpu_count"]
    if t is None or t.op != "min" or t.value >= 0.9:
        return None
    r = t.value / 0.9
    share = ((2 * (n - 1) / n) / (2 * (m - 1) / m)) * (b_full / b_n)
    value = round(0.9 / (1 + (1 - r) / r * share), 3)
    return value, (f"0.9 / (1 + ((1 - r) / r) x ((2(N-1)/N) / (2(M-1)/M)) x (B_M / B_N)) with the class's "
                   f"floor {t.value:g} at M = {m} (r = {t.value:g} / 0.9 = {r:.4f}), N = {n}, all-reduce "
                   f"floors B_M = {b_full:g}, B_N = {b_n:g} GB/s: {value:g} (the step's compute time "
                   f"cancels: t_c / t_ar(M) = r / (1 - r))")


def make(base, n: int):
    """The n-GPU slice of the concrete class profile `base` (a Profile)."""
    from signoff import profiles
    full = base.hardware.get("gpu_count")
    name = f"{base.name}{SEP}{n}"
    if base.slice_of or base.abstract or not full or full < 2:
        why = "a slice already" if base.slice_of else "a class base" if base.abstract else \
            "of no GPU count to cut from"
        raise InputError(f"profile {name}: {base.name} is {why}; a slice is N GPUs of a concrete class "
                         f"profile with more than one GPU (e.g. h100-8x-nvlink@2)")
    if not 1 <= n < full:
        raise InputError(f"profile {name}: a slice of {base.name} has 1 to {full - 1} of its {full} GPUs "
                         f"(--profile {base.name}@1 ... @{full - 1}; all {full}: --profile {base.name})")
    hw = {**base.hardware, "gpu_count": n, "nvls": False,
          # a rented slice's fabric manager lives outside the VM: no fabric state to read
          "nvlink_fabric": False}
    hw.pop("nvlink_domain", None)  # a slice is not a whole tray of a rack's NVLink domain
    if n == 1:  # no peer: no NVLink to require
        hw.update(interconnect="any", nvlinks=None)
    specs = {k: dict(v) for k, v in base.specs.items()}
    origins = {k: dict(v) for k, v in base.origins.items()}
    criteria = {k: replace(t, profile=name) for k, t in base.criteria.items()}
    uncal = dict(base.uncalibrated)
    where = str(base.path)

    def put(crit, spec, origin, path=where):
        specs[crit], origins[crit] = spec, origin
        criteria[crit] = profiles._threshold(crit, spec, path, name)
        uncal.pop(crit, None)

    chain = None
    for crit in NETWORK:  # the nearest derived rule up the chain
        if crit not in criteria or "derived" in specs[crit]:
            continue
        chain = chain or _ancestors(base)
        for a in chain:
            if "derived" in a.specs.get(crit, {}):
                put(crit, dict(a.specs[crit]), dict(a.origins[crit]), a.origins[crit].get("min", where))
                break
    own = base.slices.get(n, {})
    got = _allreduce(base, n) if n >= 2 else None
    if got and got[0] is None:  # no measured figure relates N to M: uncalibrated, and what needs it
        criteria.pop("allreduce_busbw")
        uncal["allreduce_busbw"] = got[1]
        specs["allreduce_busbw"] = {"uncalibrated": got[1]}
        origins["allreduce_busbw"] = {"uncalibrated": RULE}
        ts = criteria.get("train_scaling_host")
        if ts is not None and ts.op == "min" and ts.value < 0.9:  # what _scaling would work out
            why = f"worked out from the slice's allreduce_busbw, uncalibrated: {got[1]}"
            criteria.pop("train_scaling_host")
            uncal["train_scaling_host"] = why
            specs["train_scaling_host"] = {"uncalibrated": why}
            origins["train_scaling_host"] = {"uncalibrated": RULE}
    elif got:
        value, rule = got
        t = base.criteria["allreduce_busbw"]
        keep = {k: v for k, v in specs["allreduce_busbw"].items() if k not in profiles.THRESHOLD_KEYS}
        put("allreduce_busbw", {"min": value, "unit": t.unit, **keep,
                                "source": f"{RULE} (docs/thresholds.md, Slices): {rule}; the class's figure: "
                                          f"{t.source}",
                                "provisional": f"derived: {rule}"},
            {**{k: v for k, v in origins["allreduce_busbw"].items() if k in keep},
             **dict.fromkeys(("min", "unit", "source", "provisional"), RULE)})
    measured = own.get("allreduce_busbw", (None,))[0]  # B_N: the slice's own figure where measured
    b_n = measured["min"] if isinstance(measured, dict) and "min" in measured else \
        criteria["allreduce_busbw"].value if "allreduce_busbw" in criteria else None
    if n >= 2 and b_n and "allreduce_busbw" in base.criteria and \
            (got := _scaling(base, n, base.criteria["allreduce_busbw"].value, b_n)):
        value, rule = got
        t = base.criteria["train_scaling_host"]
        put("train_scaling_host", {"min": value, "unit": t.unit,
                                   "source": f"{RULE} (docs/thresholds.md, Slices): the class's bound at {n} "
                                             f"GPUs, {rule}; the class's: {t.source}",
                                   "provisional": f"derived: {rule}"},
            dict.fromkeys(("min", "unit", "source", "provisional"), RULE))
    for crit, (spec, at) in own.items():  # the class file's measured figures for this slice
        if spec is None:
            for d in (criteria, uncal, specs, origins):
                d.pop(crit, None)
        elif "uncalibrated" in spec:
            criteria.pop(crit, None)
            uncal[crit] = spec["uncalibrated"].strip()
            specs[crit], origins[crit] = dict(spec), {"uncalibrated": at}
        else:
            uncal.pop(crit, None)
            inherited = (specs[crit], origins[crit]) if crit in criteria else ({}, {})
            merged, origin = profiles._merge(crit, spec, *inherited, at)
            put(crit, merged, origin, at)
    default = base.own_fleet_min if base.own_fleet_min is not None else outlier.FLEET_MIN
    for crit, t in criteria.items():
        if profiles.known_fleet(crit) and t.fleet_min is None:  # rebuilt here: the class's default
            criteria[crit] = replace(t, fleet_min=t.extra.get("fleet_min", default))
    out = replace(base, name=name, path=f"{base.path}{SEP}{n}", hardware=hw, criteria=criteria,
                  specs=specs, origins=origins, uncalibrated=uncal, chain=[*base.chain, name],
                  files=list(base.files), slices={}, slice_of=base.name, full_count=full,
                  description=f"{n} of the {full} GPUs of {base.description} (a slice)")
    for mod in families.modules():
        if hasattr(mod, "check_profile"):
            mod.check_profile(out, f"profile {out.path}: criteria")
    return out


def candidates(hw: dict, classes: list) -> tuple[list, list[str]]:
    """The slices of `classes` a host of fewer GPUs than a class of its GPU model is of, and
    those tried that it is not (each with why)."""
    from signoff import profiles
    n, found, tried = hw.get("gpu_count"), [], []
    for p in classes:
        full = p.hardware.get("gpu_count")
        if p.abstract or p.slice_of or not n or not full or n >= full or \
                any(w.startswith("GPU model") for w in profiles.matches(p, hw)):
            continue
        s = make(p, n)
        why = profiles.matches(s, hw)
        if why:
            tried.append(f"{s.name} ({'; '.join(why)})")
        else:
            found.append(s)
    return found, tried


def listed(p) -> str | None:
    """`signoff list profiles`' line of a class's slices, None for a profile that has none."""
    full = p.hardware.get("gpu_count")
    if p.abstract or p.slice_of or not full or full < 2:
        return None
    span = f"{p.name}@1" if full == 2 else f"{p.name}@1 .. @{full - 1}"
    measured = sorted(p.slices)
    return (f"slices: {span} (1 to {full - 1} of its {full} GPUs; --profile auto picks one for fewer GPUs"
            + (f"; measured figures at {', '.join(f'@{k}' for k in measured)}" if measured else "") + ")")
