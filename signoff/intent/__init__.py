"""The intended build (issue 54 item 2): an optional intent file says what the contract says each
host is (driver, CUDA, NCCL and torch versions or ranges, VBIOS and NIC firmware per model,
kernel parameters, GPUs, NICs and BAR1 per host, each NIC port's switch and port), and every
host is judged against it (acceptance/test_intent.py: intent_versions, intent_firmware,
intent_kernel, intent_hardware, intent_cabling), N.A. without one. spec.py reads and checks the
file, judge.py compares (one finding per physical fault, its hosts folded, one fix sentence),
probe_build.py reads what sysinfo lacks (shipped as build.py: sysinfo's preflight calls it)."""

# no profile threshold: the intent file is what each check judges against (--intent, intent:)
CRITERIA: dict = {}
JUDGED_BY = "the intent file (--intent, or the inventory's intent:); N.A. without one"  # plan, list
PLUGIN = "signoff.intent.plugin"
