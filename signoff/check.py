"""Record what a check measured, then judge it. The record lands in the report and in
results.json whether the check passes or not; failure text names host, value, limit, source."""

from __future__ import annotations

import pytest

from signoff.profiles import Threshold, matches

NA_PREFIX = "N.A.:"


def not_applicable(reason: str):
    """A check that does not apply to this host under this profile (never counted as PASS)."""
    pytest.skip(f"{NA_PREFIX} {reason}")


def class_guard(profile, views, what: str = "measured") -> None:
    """NOT RUN (a skip without the N.A. prefix) when any of these hosts (HostViews) fails the
    profile's class guard (gpu_model, gpu_count, NVLink): a heavy measurement at another
    class's sizes proves nothing, and the class checks FAIL those hosts already."""
    why = [f"{v}: {'; '.join(w)}" for v in views if (w := matches(profile, v.hardware))]
    if why:
        pytest.skip(f"not run: class guard of profile {profile.name} ({profile.describe_class()}) "
                    f"failed for {', '.join(why)}: not {what} at that class's sizes")


class Check:
    def __init__(self, item, host: str | None):
        self.item, self.host = item, host

    def record(self, measured, expected: str = "", unit: str = "", source: str = "",
               details: dict | None = None) -> None:
        self.item.user_properties.append(("signoff", {
            "measured": measured, "expected": expected, "unit": unit, "source": source,
            "details": details or {},
        }))

    def expect(self, measured, threshold: Threshold, what: str | None = None,
               cause: str = "", details: dict | None = None) -> None:
        """Assert a measurement against a profile threshold."""
        __tracebackhide__ = True
        self.record(measured, threshold.expected, threshold.unit, threshold.source, details)
        if not threshold.ok(measured):
            msg = (f"{self.host}: {what or threshold.criterion} = {measured} {threshold.unit}, "
                   f"{threshold}")
            pytest.fail(msg + (f"; likely cause: {cause}" if cause else ""), pytrace=False)

    def require(self, failures: list[str], measured, expected: str, source: str,
                cause: str = "", details: dict | None = None) -> None:
        """Assert a rule (e.g. ECC on for every GPU): `failures` lists what broke it."""
        __tracebackhide__ = True
        self.record(measured, expected, "", source, details)
        if failures:
            msg = f"{self.host}: " + "; ".join(failures) + f" (expected {expected}; {source})"
            pytest.fail(msg + (f"; likely cause: {cause}" if cause else ""), pytrace=False)
