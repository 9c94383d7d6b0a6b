import pytest

from signoff.check import class_guard, not_applicable
from signoff.fixtures import HostView
from signoff.fleet import ProbeError


@pytest.fixture
def gpus(host, profile) -> list[dict]:
    """The host's GPUs; a GPU-less host FAILS under a GPU profile and is N.A. otherwise."""
    if host.gpus:
        return host.gpus
    nv = host.facts["nvidia"]
    why = nv.get("error") or "NVML reports no GPU"
    if host.hidden_gpus and host.lacks_nvml:  # the wrong interpreter: could not measure
        raise ProbeError(f"{host}: {host.hidden_gpus}")
    if host.hidden_gpus:  # GPUs present but unusable: never N.A., whatever the profile
        pytest.fail(f"{host}: {host.hidden_gpus}; likely cause: driver not loaded or "
                    f"nvidia-ml-py missing in the probe's Python", pytrace=False)
    if profile.gpu_required:
        pytest.fail(f"{host}: no NVIDIA GPU ({why}); profile {profile.name} expects "
                    f"{profile.describe_class()}", pytrace=False)
    not_applicable(f"{host} has no NVIDIA GPU ({why}) and profile {profile.name} needs none")


@pytest.fixture
def of_class(host, profile) -> None:
    """Heavy measurements (all-reduce sweeps, P2P) run at the profile's sizes only on a host of
    its class: elsewhere NOT RUN, naming the guard that failed."""
    class_guard(profile, [host])


@pytest.fixture
def fleet_of_class(fleet, profile) -> None:
    """The same for a measurement over every host at once (the multi-node all-reduce)."""
    class_guard(profile, [HostView(n, f, None) for n, f in fleet.all_facts().items()
                          if isinstance(f, dict)])
