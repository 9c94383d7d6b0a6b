"""The report's training section: per host, the step at each width (tokens/s, model TFLOP/s
per GPU, comm share, efficiency), the loader's headroom, and the step over the nodes."""

from __future__ import annotations

from signoff.render import render
from signoff.report import status_class
from signoff.training import section


def training_section(records: list[dict]) -> str:
    by = {(r["criterion"], r["host"]): r for r in records}
    steps = [r for r in records
             if r["criterion"] == "train_throughput" and (r.get("details") or {}).get("widths")]
    nodes = by.get(("train_scaling_nodes", "all hosts"))
    if not steps and not (nodes and (nodes.get("details") or {}).get("efficiency")):
        return ""
    rows = []
    for r in steps:
        scale = by.get(("train_scaling_host", r["host"]), {})
        # int keys in the run's own document, str once read back from results.json
        eff = {str(k): v for k, v in ((scale.get("details") or {}).get("efficiency") or {}).items()}
        head = by.get(("train_input_headroom", r["host"]), {})
        for w in r["details"]["widths"]:
            rows.append({"cls": status_class(scale.get("status") or r["status"]), "host": r["host"],
                         "ranks": w["ranks"], "step_ms": f"{w['step_s'] * 1e3:.1f}",
                         "tokens": f"{w['tokens_per_s']:g}", "tflops": f"{w['tflops_per_gpu']:g}",
                         "comm": f"{w['comm_share']:.0%}", "efficiency": eff.get(str(w["ranks"]), ""),
                         "headroom": str(head.get("measured", ""))})
    d = (nodes or {}).get("details") or {}
    across = {"status": nodes["status"], "slowest": str(d.get("slowest_node")),
              "efficiency": ", ".join(f"{k} nodes {v}" for k, v in d["efficiency"].items())
              } if d.get("efficiency") else None
    return render("training/section.jinja2", rows=rows, nodes=across)


def methodology(doc: dict, profile) -> list[dict]:
    """How the training checks measured, for the report's Methodology."""
    if profile is None:
        return []
    s, ld = section(profile), section(profile)["loader"]
    step = next((r for r in doc["results"] if r["criterion"] == "train_throughput" and r.get("details")), {})
    st = (step.get("details") or {}).get("settings") or {}
    return [{"check": "train_throughput, train_loss_falls, train_scaling_host, train_scaling_nodes",
             "tool": f"torch {st.get('torch') or '?'} DistributedDataParallel, "
                     f"{(step.get('details') or {}).get('backend') or 'NCCL (gloo on CPU hosts)'}",
             "how": f"{s['layers']} x nn.TransformerEncoderLayer({s['d_model']}, {s['heads']} heads, ffn "
                    f"{s['ffn']}, norm_first), seq {s['seq']}, batch {s['batch']} per rank, one fixed "
                    f"synthetic batch, {st.get('amp_dtype') or 'bf16 autocast on GPU'}, "
                    f"{st.get('optimizer') or 'fused AdamW on GPU'}, lr {s['lr']}; {s['warmup']} warm-up "
                    f"then {s['steps']} timed steps, the slowest rank's time; at 1, 2, 4, ... all GPUs "
                    f"of a host and over 2, 4, ... all nodes; model FLOP per rank and step = 6 x params "
                    f"x batch x seq + 12 x layers x batch x seq^2 x d_model; efficiency(n) = tokens/s(n) "
                    f"/ (n x tokens/s(1)), over nodes / the nodes' own sum; comm share = 1 - the slowest "
                    f"rank's step without gradient sync (DDP no_sync) / the synced step; loss: mean of "
                    f"the last quarter of the steps / the first"},
            {"check": "train_input_headroom",
             "tool": "torch.utils.data.DataLoader",
             "how": f"uint8 3x{ld['size']}x{ld['size']} -> bilinear {ld['crop']}x{ld['crop']} -> "
                    f"normalise, batch {ld['batch']}, pin_memory on GPU hosts, {ld['samples']} samples "
                    f"after the first batch per worker count ({ld['workers'] or '0, 1, 2, 4, ... CPUs-1'}); "
                    f"the best rate / the samples/s of the host's step at all its GPUs"},
            {"check": "host_link_bandwidth",
             "tool": "torch copies, sysfs",
             "how": "1 GiB per GPU: pinned host-to-device and device-to-host, pageable host-to-device; "
                    "CUDA events, mean of 20 after 3 warm-ups (GB = 1e9 B); the GPU's NUMA node and "
                    "local CPUs against the process's CPU affinity"}]
