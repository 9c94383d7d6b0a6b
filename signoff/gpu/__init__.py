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
    # `require_history` (e.g. 168h): the log must reach that far back, else ERROR (burn-in sites);
    # `rows`: XIDs whose fatality the line decides, {code: rule} (judge.XID_RULES, Blackwell's)
    "xid_fatal": {"type": "number", "ops": ("max",), "extra": ("window", "codes", "require_history", "rows")},
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
    # optional: how much each of `counters` (judge.GROWTH_KINDS: an NVLink error counter of one
    # link, a GPU's volatile corrected ECC count) may grow during the run; without it none may
    # (test_error_counters); the counters go with the limit's source
    "error_counter_growth": {"type": "number", "ops": ("max",), "extra": ("counters",),
                             "with_limit": ("counters",)},
    # on a class with hardware.large_bar: every GPU's BAR1 / its memory (NVML); with
    # hardware.uvm_disable_hmm: nvidia_uvm's uvm_disable_hmm as sysfs prints it (Y)
    "bar1_size": {"type": "number"},
    "uvm_hmm": {"type": "name", "ops": ("equals",)},
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
        rows = extra.get("rows", {})
        if not isinstance(rows, dict):
            raise InputError(f"{where}.rows: expected a mapping of XID number to rule, got {rows!r}")
        from signoff.gpu.judge import XID_RULES
        for code, rule in rows.items():
            if isinstance(code, bool) or not isinstance(code, int):
                raise InputError(f"{where}.rows: expected XID numbers as keys, got {code!r}")
            if rule not in XID_RULES:
                raise InputError(f"{where}.rows.{code}: expected one of {', '.join(XID_RULES)}, got {rule!r}")
            if code in codes:  # one rule per XID
                raise InputError(f"{where}.rows.{code}: also in codes (fatal every time): keep it in one")
        if "require_history" in extra:
            need = extra["require_history"]
            try:
                if window == "boot" or not 0 < parse_duration(need) <= parse_duration(window):
                    raise ValueError
            except ValueError:
                raise InputError(f"{where}.require_history: expected a duration within window "
                                 f"({window}), like 168h, got {need!r}") from None
    if name == "error_counter_growth":
        from signoff.gpu.judge import GROWTH_KINDS
        counters = extra.get("counters")
        if not isinstance(counters, list) or not counters or not set(counters) <= set(GROWTH_KINDS):
            raise InputError(f"{where}.counters: expected a list of {', '.join(GROWTH_KINDS)} (an "
                             f"uncorrected ECC error is never allowed), got {counters!r}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"{where}.max: expected a whole number of errors >= 0, got {value!r}")
    for key, v in extra.items():
        if name == "thermal_slowdown" and key != "derived" and \
                (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise InputError(f"{where}.{key}: expected degrees C, got {v!r}")


def preflight(ctx, host, facts) -> tuple[list[str], list[str]]:
    """The probe interpreter and its torch, the kernel log the XID checks will read; warned: an
    interpreter without torch or nvidia-ml-py, a log that holds this boot only, error_counters
    with nothing to watch (signoff/preflight.py)."""
    from signoff.fleet import lacks
    from signoff.gpu import judge
    torch = facts.get("torch") or {}
    said = [f"python {facts.get('python_executable') or host.python} ({facts.get('python', '?')}), "
            + (f"torch {torch['version']} (CUDA {torch.get('cuda') or 'none'}, "
               f"NCCL {torch.get('nccl') or 'none'})" if torch.get("version") else "no torch")]
    warned = []
    missing = lacks(facts)
    if missing:  # every probe that imports them ERRORs naming the interpreter (fleet.HostSession)
        warned.append(f"the probes' interpreter {host.python} lacks {' and '.join(missing)}: the checks "
                      f"whose probes import it ERROR; name the training environment with --python PATH "
                      f"or the inventory's python:")
    pf = facts.get("preflight")
    if not pf:  # a sysinfo of an older version, or a recording: nothing more to say
        return said, warned
    tools = pf.get("tools") or {}
    log = ("journal" + (", persistent" if pf.get("journal_persistent") else ", this boot only")
           if tools.get("journalctl") else "dmesg, this boot only (no journalctl)")
    said.append(f"kernel log: {log}")
    t = ctx.profile.criteria.get("xid_fatal") if ctx.profile else None
    from signoff import unseen  # a container's or a user's kernel log the form says is unreadable
    denied = unseen.xid_unseen(facts, "") if ctx.checks("xid_history", "xid_during_run") else None
    if denied:
        warned.append(unseen.plan_line(", ".join(ctx.checks("xid_history", "xid_during_run")), *denied,
                                       ctx.config))
    elif ctx.checks("xid_history", "xid_during_run") and unseen.xid_fix(facts, ""):  # bare metal: fix it
        warned.append(f"{', '.join(ctx.checks('xid_history', 'xid_during_run'))} ERROR: the kernel log is "
                      f"not readable here{unseen.xid_fix(facts, '')}")
    elif ctx.checks("xid_history") and t and not (tools.get("journalctl") and pf.get("journal_persistent")):
        why = judge.NO_PERSISTENT if tools.get("journalctl") else judge.NO_JOURNAL
        need = t.extra.get("require_history")
        warned.append(f"xid_history ERROR: {why}, and require_history {need} asks for more" if need else
                      f"xid_history judged over this boot only ({why}): XIDs before the boot are unseen "
                      f"(said on the cover); keep a persistent journal (journald Storage=persistent)")
    counters = facts.get("counters") or {}
    if ctx.checks("error_counters") and not (counters.get("infiniband") or counters.get("pcie_replay")
                                             or host.data_iface):
        warned.append(f"error_counters N.A.: {judge.NOTHING_TO_WATCH}")
    elif ctx.checks("error_counters") and counters:
        # a counter the start's snapshot could not read is one test_error_counters cannot compare:
        # it ERRORs naming them (unless another grew), so say so now, in its words
        grew, unread = judge.counter_growth(counters, counters, [host.data_iface] if host.data_iface else [])
        unread += judge.gpu_counter_growth(counters, counters)["unread"]
        if unread:
            warned.append(f"error_counters ERROR: counters unreadable: {', '.join(unread)}")
    return said, warned
