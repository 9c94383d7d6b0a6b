"""The intended build: each host against the intent file (--intent, or the inventory's intent:),
N.A. without one. A difference FAILs naming the value, the intended one and its fix; the same
difference on several hosts is one finding on the cover (Against the intended build)."""

from signoff.check import not_applicable
from signoff.fleet import ProbeError
from signoff.intent import judge

EXPECTED = "the intended build"


def _judge(criterion, host, check, intent, intent_findings):
    __tracebackhide__ = True
    v = judge.judge(intent, host.facts, host.name, criterion)
    if v.na:
        not_applicable(f"{host}: {v.na}")
    if v.errors:
        raise ProbeError(f"{host}: {'; '.join(v.errors)} (intent {intent.path})")
    mine = [f for f in intent_findings if f["criterion"] == criterion and host.name in f["hosts"]]
    measured = "; ".join(f"{d.subject} {d.value}" for d in v.diffs) or "as intended: " + ", ".join(v.judged)
    check.require([d.line(host.name) for d in v.diffs], measured, EXPECTED, intent.source(),
                  details={"judged": v.judged, "differences": [d.__dict__ for d in v.diffs],
                           "findings": [f["line"] for f in mine]})


def test_intent_versions(host, check, intent, intent_findings):
    """Driver, CUDA, torch, its CUDA build and NCCL: as the intent says (exact, or within its range)."""
    _judge("intent_versions", host, check, intent, intent_findings)


def test_intent_firmware(host, check, intent, intent_findings):
    """Every GPU's VBIOS and every NIC's firmware, per model, as the intent says."""
    _judge("intent_firmware", host, check, intent, intent_findings)


def test_intent_kernel(host, check, intent, intent_findings):
    """The kernel parameters the intent names (/proc/cmdline; nvidia_uvm's uvm_disable_hmm)."""
    _judge("intent_kernel", host, check, intent, intent_findings)


def test_intent_hardware(host, check, intent, intent_findings):
    """GPUs and NICs per host, each GPU's BAR1 size, as the intent says."""
    _judge("intent_hardware", host, check, intent, intent_findings)


def test_intent_cabling(host, check, intent, intent_findings):
    """Each NIC port's LLDP neighbour (switch and port) as the intent says; LLDP unread (no lldpctl)
    where the file names the host's cabling is an ERROR naming its ports."""
    _judge("intent_cabling", host, check, intent, intent_findings)
