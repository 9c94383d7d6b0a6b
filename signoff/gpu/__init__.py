"""GPU health and host facts: the sysinfo probe every run gathers first (GPUs, driver,
NVLink, PCIe, ECC, clocks, processes, error counters, firmware, thermal thresholds, GPU-NIC
relation), and the per-GPU health criteria judged from it (acceptance/test_gpu_health.py);
the field's health checks (acceptance/test_health.py): XID history (sysinfo.py xids), error
counters at the start and end (sysinfo.py counters), silent data corruption (probe_sdc),
HBM bandwidth (probe_hbm), thermal thresholds and margin, GPU-NIC affinity and GPUDirect."""

from signoff import InputError

CRITERIA = {
    "row_remap_uncorrectable": {"type": "number", "ops": ("max",)},
    # W, every GPU's enforced limit: the class's rated one; derived own_default (no class): a
    # fraction of the GPU's own default limit
    "power_limit": {"type": "number", "derived": {"own_default": "x its default limit"}},
    # fatal XIDs in the kernel log over `window` (e.g. 168h, or boot); `codes`: the fatal ones;
    # `require_history` (e.g. 168h): the log must reach that far back, else ERROR (burn-in sites)
    "xid_fatal": {"type": "number", "ops": ("max",), "extra": ("window", "codes", "require_history")},
    # TB/s, device-to-device copy, read + written; derived memory_peak (no class): a fraction of
    # the GPU's own peak, NVML's memory bus width x max memory clock x 2 (judge.memory_peak)
    "hbm_bandwidth": {"type": "number", "fleet": True, "derived": {"memory_peak": "x memory peak"}},
    "hbm_uniformity": {"type": "number"},  # a GPU / its host's median GPU
    # C: NVML's slowdown threshold; shutdown, gpu_max, mem_max: the class's others, minimums too
    # with_limit: figures of the same source as the limit, set with it in a child (profiles.py)
    # derived same_model (no class): every threshold >= the highest its host's GPUs of the same
    # model read (one GPU set lower by its VBIOS or driver); N.A. on a GPU alone of its model
    "thermal_slowdown": {"type": "number", "extra": ("shutdown", "gpu_max", "mem_max"),
                         "with_limit": ("shutdown", "gpu_max", "mem_max"),
                         "derived": {"same_model": "x same model"}},
    "thermal_margin": {"type": "number"},  # C between slowdown and the soak's sustained maximum
    # the closest GPU-NIC relation every GPU must have (1 PIX .. 5 SYS): rail alignment
    "gpu_nic_affinity": {"type": "number", "ops": ("max",)},
}
PLUGIN = "signoff.gpu.plugin"


def check_extra(name: str, value, extra: dict, where: str) -> None:
    from signoff.soak.judge import parse_duration
    if name == "xid_fatal":
        window = extra.get("window")
        if window != "boot":  # boot: since this machine booted
            try:
                if parse_duration(window) <= 0:
                    raise ValueError
            except ValueError:
                raise InputError(f"{where}.window: expected a duration like 168h, or boot, got "
                                 f"{window!r}") from None
        codes = extra.get("codes")  # in every window: `codes: []` under boot would pass an XID 79
        if not isinstance(codes, list) or not codes or \
                not all(isinstance(c, int) and not isinstance(c, bool) for c in codes):
            raise InputError(f"{where}.codes: expected a list of XID numbers, got {codes!r}")
        if "require_history" in extra:
            need = extra["require_history"]
            try:
                if window == "boot" or not 0 < parse_duration(need) <= parse_duration(window):
                    raise ValueError
            except ValueError:
                raise InputError(f"{where}.require_history: expected a duration within window "
                                 f"({window}), like 168h, got {need!r}") from None
    for key, v in extra.items():
        if name == "thermal_slowdown" and key != "derived" and \
                (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise InputError(f"{where}.{key}: expected degrees C, got {v!r}")
