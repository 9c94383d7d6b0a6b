import pytest

from signoff.check import not_applicable


@pytest.fixture
def gpus(host, profile) -> list[dict]:
    """The host's GPUs; a GPU-less host FAILS under a GPU profile and is N.A. otherwise."""
    if host.gpus:
        return host.gpus
    nv = host.facts["nvidia"]
    why = nv.get("error") or "NVML reports no GPU"
    if host.hidden_gpus:  # GPUs present but unusable: never N.A., whatever the profile
        pytest.fail(f"{host}: {host.hidden_gpus}; likely cause: driver not loaded or "
                    f"nvidia-ml-py missing in the probe's Python", pytrace=False)
    if profile.gpu_required:
        pytest.fail(f"{host}: no NVIDIA GPU ({why}); profile {profile.name} expects "
                    f"{profile.describe_class()}", pytrace=False)
    not_applicable(f"{host} has no NVIDIA GPU ({why}) and profile {profile.name} needs none")
