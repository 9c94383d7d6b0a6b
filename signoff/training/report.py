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
    par = _parallel_rows(records)
    if not steps and not par and not (nodes and (nodes.get("details") or {}).get("efficiency")):
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
    return render("training/section.jinja2", rows=rows, nodes=across, parallel=par)


def _parallel_rows(records: list[dict]) -> list[dict]:
    """Per host, the tensor-parallel step and the pipeline: ranks, ms/step, TFLOP/s per GPU, comm
    share, and the pipeline's bubble against its schedule's ideal (the status: its own checks')."""
    by = {(r["criterion"], r["host"]): r for r in records}
    rows = []
    for (crit, host), r in by.items():
        step = {"tp_step_tflops": "tensor_parallel", "pipeline_step_tflops": "pipeline"}.get(crit)
        d = ((r.get("details") or {}).get(step) or {}) if step else {}
        if not d:
            continue
        other = by.get(("tp_comm_share" if step == "tensor_parallel" else "pipeline_bubble", host), {})
        worst = "FAIL" if "FAIL" in (r["status"], other.get("status")) else r["status"]
        pipe = step == "pipeline"
        rows.append({"cls": status_class(worst), "host": host,
                     "step": f"pipeline ({d['schedule']}, {d['micro_batches']} micro-batches)" if pipe
                     else "tensor parallel (Megatron MLP)",
                     "ranks": d["ranks"], "step_ms": f"{d['step_s'] * 1e3:.1f}",
                     "tflops": f"{d['tflops_per_gpu']:g}", "comm": f"{d['comm_share']:.0%}",
                     "bubble": f"{d['bubble']:.0%} (ideal {d['ideal_bubble']:.0%})" if pipe else ""})
    return sorted(rows, key=lambda x: (x["host"], x["step"]))


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
                    "local CPUs against the process's CPU affinity"},
            {"check": "tp_step_tflops, tp_comm_share, pipeline_step_tflops, pipeline_bubble",
             "tool": "torch.distributed all_reduce, send/recv (NCCL; gloo on CPU hosts)",
             "how": f"{s['layers']} MLP blocks x + gelu(x W1) W2 (d_model {s['d_model']}, ffn {s['ffn']}), "
                    f"seq {s['seq']}, batch {s['batch']}, over the host's GPUs (2 gloo ranks without one); "
                    f"tensor parallel: W1 by columns, W2 by rows (Megatron-LM), one all-reduce per layer "
                    f"forward and one backward; pipeline: the layers in one stage per GPU, GPipe's schedule "
                    f"of {s['parallel']['micro_batches'] or '4 x stages'} micro-batches with blocking "
                    f"send/recv; {s['warmup']} warm-up then {s['steps']} timed steps, the slowest rank; "
                    f"model FLOP per GPU = 6 x params x tokens / p; TP comm share = 1 - the step without "
                    f"its all-reduces / the step; bubble = a stage's idle (step - its own work - its "
                    f"messages at the ping-pong time of its links) / the step, the idlest stage, judged "
                    f"against (p-1)/(m+p-1) plus the threshold's margin"}]
