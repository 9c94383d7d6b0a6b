"""Record what a check measured, then judge it. The record lands in the report and in
results.json whether the check passes or not; failure text names host, value, limit, source."""

from __future__ import annotations

import pytest

from signoff import outlier, rerun, retry
from signoff.profiles import Threshold, matches
from signoff.units import readable
from signoff.unseen import CannotShow

NA_PREFIX = "N.A.:"


def not_applicable(reason: str):
    """A check that does not apply to this host under this profile (never counted as PASS)."""
    pytest.skip(f"{NA_PREFIX} {reason}")


def cannot_show(ask: str, why: str):
    """A check this machine's form cannot show (a VM slice's fabric, DCGM on a VM, a container's
    kernel log): UNSEEN, never a PASS and by default no ERROR; `ask` is what to ask the provider
    for, `why` why this machine cannot show it (signoff/unseen.py; --unseen-error: an ERROR)."""
    raise CannotShow(ask, why)


def class_guard(profile, views, what: str = "measured") -> None:
    """NOT RUN (a skip without the N.A. prefix) when any of these hosts (HostViews) fails the
    profile's class guard (gpu_model, gpu_count, NVLink): a heavy measurement at another
    class's sizes proves nothing, and the class checks FAIL those hosts already."""
    why = [f"{v}: {'; '.join(w)}" for v in views if (w := matches(profile, v.hardware))]
    if why:
        pytest.skip(f"not run: class guard of profile {profile.name} ({profile.describe_class()}) "
                    f"failed for {', '.join(why)}: not {what} at that class's sizes")


class Check:
    def __init__(self, item, host: str | None, again: dict | None = None):
        self.item, self.host = item, host
        self.again = again  # --rerun's (signoff/rerun.py): the earlier run's fleet figures
        self.notes: list[str] = []

    @property
    def criterion(self) -> str:
        return getattr(self.item, "originalname", self.item.name).removeprefix("test_")

    def note(self, text: str) -> None:
        """What the verdict stands on besides the figure (e.g. a kernel log shorter than its
        window), said on the cover, in report.md and the terminal whatever the status; call it
        before the verdict (it is kept with the record)."""
        self.notes.append(text)

    def record(self, measured, expected: str = "", unit: str = "", source: str = "",
               details: dict | None = None) -> None:
        self.item.user_properties.append(("signoff", {
            "measured": measured, "expected": expected, "unit": unit, "source": source,
            "details": details or {}, **({"note": "; ".join(self.notes)} if self.notes else {}),
        }))

    def expect(self, measured, threshold: Threshold, what: str | None = None,
               cause="", details: dict | None = None, fleet: dict | None = None) -> None:
        """Assert a measurement against a profile threshold, then (`fleet`: every measured
        host's or pair's figure of the class in this run, this one's among them) against the
        fleet's median. `cause` may be a callable: worked out only for a FAIL."""
        __tracebackhide__ = True
        self.judge(measured, threshold, [] if threshold.ok(measured) else
                   [f"{what or threshold.criterion} = {readable(measured)} {threshold.unit}, {threshold}"],
                   threshold.expected, threshold.source, cause, details, fleet, what)

    def require(self, failures: list[str], measured, expected: str, source: str,
                cause="", details: dict | None = None, fleet: tuple | None = None) -> None:
        """Assert a rule (e.g. ECC on for every GPU): `failures` lists what broke it. `fleet`:
        (threshold, figures) to judge `measured` against the fleet too (expect)."""
        __tracebackhide__ = True
        t, figures = fleet or (None, None)
        self.judge(measured, t, [f"{'; '.join(failures)} (expected {expected}; {source})"] if failures
                   else [], expected, source, cause, details, figures)

    def judge(self, measured, t: Threshold | None, failures: list[str], expected: str, source: str,
              cause, details: dict | None, fleet: dict | None, what: str | None = None) -> None:
        __tracebackhide__ = True
        details = dict(details or {})
        why = retry.unstable(details, t, t.unit) if t is not None and not failures else None
        if why:
            failures = [f"{what or t.criterion} = {readable(measured)} {t.unit}, {why}"]
        if fleet is not None and t is not None:
            # a rerun measured only the hosts that did not pass: the earlier run's fleet judges them
            fleet, where = rerun.fleet(self.again, self.criterion, fleet) if self.again else (fleet, None)
            res = details["fleet"] = outlier.compare(self.host, fleet, t.fleet_min, t.profile)
            if where:
                res["rerun"] = where
            res["text"] = outlier.describe(res, t.unit, "pairs" if "->" in str(self.host) else "hosts")
            if res["status"] == "outlier" and not failures:
                failures = [f"{what or t.criterion} = {readable(measured)} {t.unit}: a fleet outlier, "
                            f"{res['text']}; the absolute threshold ({t.expected}, {t.profile}) is met; "
                            f"{outlier.RULE}"]
        self.record(measured, expected, t.unit if t else "", source, details)
        if failures:
            why = cause() if callable(cause) else cause
            pytest.fail(f"{self.host}: " + "; ".join(failures) + (f"; likely cause: {why}" if why else ""),
                        pytrace=False)
