"""`signoff clean`: remove what runs that are gone left on the hosts: their probe temp dirs
(/tmp/signoff.XXXXXXXX), and any probe still running in one. Which dirs are a dead run's is
the rule every run uses to list them (signoff/fleet.py SWEEP: its keeper dead, or its pid now
another process's; a dir of an older version without a keeper once 10 minutes old), so a live
run's dir, its keeper alive, is never touched. Only this user's dirs of mode 0700 (mktemp's) are
acted on, and only this user's processes signalled: another user's dir (or a link) is left alone
and said, as is a pid file naming another user's process (signoff/fleet.py KILL_PROBES).
Inside a Slurm allocation (--launcher slurm) it runs as one srun step across the nodes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from signoff import hostlist
from signoff.fleet import KILL_PROBES, SWEEP, SWEEP_S
from signoff.inventory import Inventory
from signoff.slurm import SlurmTransport
from signoff.transport import HostUnreachable, open_transport

# SWEEP lists the dead runs' dirs (none of them ours: there is no own dir, hence ''); each is
# removed after its probes' process groups are killed, as a run's own cleanup does.
CLEAN = ("{ " + SWEEP.format(own="''") + "; } | while read w d t; do if [ \"$w\" = leftover ]; then "
         + KILL_PROBES.format(wd='"$d"') + "; if rm -rf \"$d\"; then echo removed $d $t; "
         "else echo kept $d; fi; else echo $w $d $t; fi; done")
TIMEOUT_S = SWEEP_S + 50  # the sweep's own bound, then the removals


def clean_host(t) -> tuple[list[str], bool]:
    """(what was done on one host, whether it all went)."""
    r = t.run(CLEAN, TIMEOUT_S)
    removed, kept, more, skipped = [], [], [], []
    for ln in r.stdout.splitlines():
        w = ln.split()
        if w[:1] == ["removed"]:
            removed.append(w[1])
        elif w[:1] == ["kept"]:
            kept.append(w[1])
        elif w[:1] == ["stopped"]:
            more.append(f"listing stopped ({ln[8:]}): more are left, run signoff clean again")
        elif w[:1] == ["skipped"] and len(w) > 2:
            skipped.append(f"left {w[1]} alone: {' '.join(w[2:])}")
        elif w[:1] == ["spared"] and len(w) > 2:
            skipped.append(f"did not signal pid {w[1]} of {w[2]}: another user's process")
    out = ([f"removed {d}" for d in removed] + [f"could not remove {d}" for d in kept] + skipped
           + more)
    if not r.ok:
        out.append(f"exit {r.rc}: {(r.stderr or r.stdout).strip()[-300:] or 'no message'}")
    return out or ["nothing left by dead runs"], r.ok and not kept


def clean(inv: Inventory, accept_new_host_keys: bool = False, connect_timeout: float = 10,
          max_parallel: int = 1024, slurm=None) -> tuple[list[str], bool]:
    """Every host at once; lines `host: what`, hosts with the same outcome folded. `slurm`
    (signoff.slurm.Slurm): the hosts are its nodes, cleaned by srun (one step), not SSH."""
    def one(h):
        t = SlurmTransport(h, slurm) if slurm else \
            open_transport(h, inv.known_hosts, accept_new_host_keys, connect_timeout)
        try:
            return clean_host(t)
        except HostUnreachable as exc:
            return [str(exc).removeprefix(f"{h.name}: ")], False
        finally:
            t.close()
    with ThreadPoolExecutor(max(1, min(max_parallel, len(inv.hosts)))) as pool:
        done = dict(zip([h.name for h in inv.hosts], pool.map(one, inv.hosts)))
    by: dict[str, list[str]] = {}
    for name, (lines, _) in done.items():
        for ln in lines:  # one dir per host: its own line; a cause many share: one line
            by.setdefault(ln, []).append(name)
    return ([f"{hostlist.fold(names)}: {ln}" for ln, names in by.items()],
            all(ok for _, ok in done.values()))
