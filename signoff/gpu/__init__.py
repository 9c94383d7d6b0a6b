"""GPU health and host facts: the sysinfo probe every run gathers first (GPUs, driver,
NVLink, PCIe, ECC, XIDs, clocks, processes), and the per-GPU health criteria judged from it
(acceptance/test_gpu_health.py)."""

CRITERIA = {
    "row_remap_uncorrectable": {"type": "number", "ops": ("max",)},
    "power_limit": {"type": "number"},  # W, every GPU's enforced limit: the class's rated one
}
