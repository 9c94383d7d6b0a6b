"""The gpu family's controller: the health measurements of every host at once
(Fleet.measured), each behind the gates its checks apply."""

from __future__ import annotations

import time

from signoff.fixtures import HostView, selected_hosts

# the checks whose hosts each measurement takes at once
SDC_TESTS = ("test_sdc",)
HBM_TESTS = ("test_hbm_bandwidth", "test_hbm_uniformity")


class Health:
    def __init__(self, fleet, session):
        self.fleet, self.session = fleet, session
        self.started = time.time()  # a window ends at the run's start on every host alike

    def _measured(self, family: str, host: str, tests: tuple, measure):
        return self.fleet.measured(family, host, measure, selected_hosts(self.session, tests))

    def _probe(self, name: str, *args, timeout: float = 180):
        return lambda n: self.fleet.sessions[n].cached_probe(name, *args, timeout=timeout)

    def run_start(self, host: str) -> float:
        """The run's start on the host's own clock (sysinfo's), which its kernel log's times
        are in; the controller's where sysinfo did not say (a recording made before it did)."""
        clock = self.fleet.facts(host).get("clock")
        return clock if isinstance(clock, (int, float)) else self.started

    def xids(self, host: str, window_s: float | None) -> dict:
        """The host's kernel-log XIDs over the last window_s before the run; None: this boot."""
        since = "boot" if window_s is None else str(round(self.run_start(host) - window_s))
        return self._measured("xid history", host, ("test_xid_history",),
                              self._probe("sysinfo", "xids", since))

    def xids_during(self, host: str) -> dict:
        """The host's kernel-log XIDs since the run's start, read at its end (test_xid_during_run
        runs last): those the suite's own load raised."""
        since = str(self.run_start(host))
        return self._measured("xids during the run", host, ("test_xid_during_run",),
                              lambda n: self.fleet.sessions[n].probe("sysinfo", "xids", since, timeout=180))

    def counters(self, host: str) -> dict:
        """The error counters at the end of the run (test_error_counters runs last)."""
        return self._measured("error counters", host, ("test_error_counters",),
                              self._probe("sysinfo", "counters"))

    def sdc(self, host: str) -> dict:
        return self._measured("silent data corruption", host, SDC_TESTS, self._probe("sdc", timeout=600))

    def hbm(self, host: str) -> dict | None:
        def measure(n):  # GPU hosts only: a CPU host has no HBM (its checks are N.A.)
            gpus = HostView(n, self.fleet.facts(n), None).gpus
            return self.fleet.sessions[n].cached_probe("hbm", timeout=300) if gpus else None
        return self._measured("hbm", host, HBM_TESTS, measure)
