"""`signoff`: the command around `pytest acceptance/` (README: quickstart).

    signoff run [--only FAMILY,...] [options...]   sign off: pytest on the sheet, its exit code
    signoff run --rerun DIR [options...]           that earlier run's checks that did not pass, again
    signoff plan [--only FAMILY,...] [options...]  what a run would do; writes no report
    signoff list profiles | checks [--profile P]
    signoff show-profile P                         its thresholds after `extends`, each with its file
    signoff clean [--hosts H | --inventory F]      dead runs' temp dirs on the hosts
    signoff calibrate RUN... --out FILE [--margin M]  known-good runs: margins from their spread
    signoff rebuild RUN [--sign-key KEY]           python -m signoff.results rebuild
    signoff verify RUN [--allowed-signers F]       whether the report changed since (its manifest)

run and plan take every option of `pytest acceptance/` (--profile, --hosts, --inventory, ...);
run passes pytest's own flags through as well (-k, -x, -v, --report-dir ...)."""

from __future__ import annotations

import argparse
import os
import re
import sys

from signoff import InputError, paths
from signoff.printable import printable

USAGE_ERROR = 4  # pytest's own code for a usage error: one meaning whichever layer refused


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def pytest_args() -> list[str]:
    """What every pytest run of the command starts with. From a clone, nothing: the repository's
    own settings (pyproject.toml) and conftest.py apply, as for `pytest acceptance/`. Installed,
    the sheet alone: no pytest.ini, conftest.py or cache of the directories around site-packages
    (a venv inside someone's project would pick up theirs), and the plugin named here, since no
    conftest.py of ours is above the installed acceptance/."""
    if paths.checkout():
        return []
    root = str(paths.root())
    return ["-c", os.devnull, "--rootdir", root, "--confcutdir", root,
            "-p", "no:cacheprovider", "-p", "signoff.plugin"]


def _only(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the acceptance paths to run, the other arguments): `--only a,b` picks files of the sheet
    (a run that leaves checks out is INCOMPLETE unless --partial: the plugin judges that)."""
    ap = _Parser(add_help=False, allow_abbrev=False)
    ap.add_argument("--only", action="append", default=[])
    known, rest = ap.parse_known_args(argv)
    if not known.only:
        return [str(paths.acceptance_dir())], rest
    from signoff import catalog
    return catalog.select(",".join(known.only)), rest


def run(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        print("usage: signoff run [--only FAMILY,...] [options]\n\n"
              "  --only NAME,...     only these families, files or checks of the sheet (signoff list\n"
              "                      checks names them); INCOMPLETE unless --partial is given too\n"
              "  --rerun DIR         the checks that did not pass in that earlier run, measured again on\n"
              "                      its hosts and profile (unless given); its other results carried:\n"
              "                      the verdict is the whole sheet's (--lf: the newest run's)\n\n"
              "signoff's own options (pytest's 'GPU cluster acceptance' group), then pytest's:\n")
    import pytest
    targets, rest = _only(_last_failed(argv))
    if {"-h", "--help"} & set(argv):
        return _help(lambda: pytest.main([*pytest_args(), *targets, *rest]))
    return int(pytest.main([*pytest_args(), *targets, *rest]))


OWN_GROUP = "GPU cluster acceptance:"  # signoff's option group in pytest's --help (plugin.py)


def _help(show) -> int:
    """pytest's --help with signoff's own group moved to the top: ~250 lines of pytest's options
    came first, and a reader stopped before reaching --profile or --inventory."""
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = int(show())
    text = buf.getvalue()
    start = text.find(f"\n{OWN_GROUP}\n")
    if start < 0:
        print(text, end="")
        return rc
    end = re.search(r"\n\n(?=\S)", text[start + 2:])  # the next group's heading
    stop = start + 2 + end.start() if end else len(text)
    print(text[start + 1:stop].rstrip() + "\n\npytest's own options:\n" + text[:start] + text[stop:], end="")
    return rc


def _last_failed(argv: list[str]) -> list[str]:
    """pytest's --lf as --rerun of the newest run (an installed sheet's pytest has no --lf at
    all: its cache is off), said on stderr."""
    lf = {"--lf", "--last-failed"} & set(argv)
    if not lf:
        return argv
    from signoff import report, rerun
    newest = rerun.newest()
    print(f"signoff: {rerun.LF}: --rerun {report.shown_path(newest)}", file=sys.stderr)
    return [*(a for a in argv if a not in lf), "--rerun", str(newest)]


def configured(argv: list[str], work):
    """pytest's parse of a run's options and the plugin's judgement of them (inventory, profile,
    ranges), without a session: nothing is collected or run, no report directory made. Returns
    work(config, the plugin's State). The acceptance directory is left out of the arguments,
    which is what keeps the plugin's pytest_configure from creating a report (an acceptance run)."""
    import pytest

    from signoff import plugin, pytest_adapter
    from signoff.state import STATE
    if any(a == "--report-dir" or a.startswith("--report-dir=") for a in argv):
        raise InputError("--report-dir: plan and clean write no report")

    def judged(config):
        try:
            plugin.pytest_configure(config)
        except pytest.UsageError as exc:
            raise InputError(str(exc)) from None
        state = config.stash[STATE]
        if state.report_dir is not None:  # the plugin took it for a run after all: say so, loudly
            raise RuntimeError(f"signoff plan made a report directory {state.report_dir}: a bug")
        return work(config, state)

    # no ini, conftest.py or cache of the current directory's; os.devnull as the one path: a
    # path that is not the sheet (nothing is collected), so the plugin makes no report for it
    base = ["-c", os.devnull, "--rootdir", str(paths.root()), "--noconftest", "-p", "no:cacheprovider",
            "-p", "signoff.plugin"]
    return pytest_adapter.parsed([*base, *argv, os.devnull], judged)


def plan(argv: list[str]) -> int:
    from signoff import plan as planning
    targets, rest = _only(argv)
    ap = _Parser(prog="signoff plan", add_help=False, allow_abbrev=False)
    ap.add_argument("--no-contact", action="store_true")
    known, rest = ap.parse_known_args(rest)
    said, fatal = configured(rest, lambda config, state: planning.planned(
        config, state, targets, contact=not known.no_contact))
    print(printable(said, lines=True))  # hosts' text in it
    return planning.PREDICTS_ERROR if fatal else 0  # a CI gate: the run would ERROR (README)


def list_(args) -> int:
    from signoff import catalog, profiles, slices
    if args.what == "profiles":
        for name in profiles.available():
            try:
                p = profiles.load(name)
            except InputError as exc:  # a broken file of the user's: said, the others listed
                print(f"{name:22} (does not load: {exc})")
                continue
            if not p.abstract:
                print(f"{name:22} {p.description}  [{p.describe_class()}]")
                if cut := slices.listed(p):  # N of its GPUs: --profile <class>@<N> (docs/thresholds.md)
                    print(f"{'':22}   {cut}")
            elif kids := [k.name for k in profiles.variants(p)]:  # a class base: --profile takes it too
                which = " or ".join(kids) if len(kids) <= 4 else f"one of its {len(kids)} variants"
                print(f"{name:22} {p.description}  [class base: --profile {name} picks {which} by the "
                      f"hosts' NVML]")
        return 0
    prof = profiles.load(args.profile) if args.profile else None
    entries = catalog.checks()
    width = max(len(e.criterion) for e in entries)
    files = max(len(f"acceptance/test_{e.file}.py") for e in entries)
    for e in entries:
        scope = catalog.SCOPES.get(e.scope, f"per {e.scope}")
        line = f"{e.criterion:{width}}  {e.family:12} {f'acceptance/test_{e.file}.py':{files}} {scope:24}"
        if prof:
            line += "  " + "; ".join(catalog.judged_by(e, prof))
        print(line.rstrip())
    return 0


def show_profile(args) -> int:
    from signoff import plan as planning
    from signoff import profiles
    print(planning.profile_text(profiles.load(args.profile)))
    return 0


def clean(argv: list[str]) -> int:
    from signoff import clean as cleaning

    def sweep(config, state):
        from signoff import slurm  # inside an allocation: srun steps, as a run's (--launcher)
        job = slurm.Slurm(state.job, slurm.allocation()[1], state.run_id) if state.job else None
        try:
            return cleaning.clean(state.inventory, config.getoption("accept_new_host_keys"),
                                  config.getoption("connect_timeout"), config.getoption("max_parallel"),
                                  slurm=job)
        finally:
            if job:
                job.close()
    lines, ok = configured(argv, sweep)
    print("\n".join(map(printable, lines)))  # dir names any local user makes, a host's stderr
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # `signoff list checks | head`: the reader is gone, nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: list[str]) -> int:
    passthrough = {"run": run, "plan": plan, "clean": clean,
                   "calibrate": lambda a: _calibrate(a), "rebuild": lambda a: _rebuild(a)}
    try:
        if argv and argv[0] in passthrough and not (argv[0] in ("plan", "clean") and
                                                   {"-h", "--help"} & set(argv)):
            return passthrough[argv[0]](argv[1:])
        ap = _Parser(prog="signoff", description=__doc__.split("\n\n")[0],
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog=__doc__.split("\n\n", 1)[1])
        sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
        sub.add_parser("run", help="sign off: pytest on the sheet (every pytest flag passes through)")
        more = "It takes every option of signoff run (signoff run --help)"
        p = sub.add_parser("plan", help="what a run with these options would do; writes no report",
                           description=more + ": --profile, --hosts, --inventory, ...")
        p.add_argument("--only", help="families, files or checks of the sheet (signoff list checks)")
        p.add_argument("--no-contact", action="store_true",
                       help="with --profile auto: do not ask the hosts for their sysinfo")
        p = sub.add_parser("list", help="the shipped profiles, or the checks of the sheet")
        p.add_argument("what", choices=("profiles", "checks"))
        p.add_argument("--profile", help="with checks: each check's threshold and source in this profile")
        p = sub.add_parser("show-profile", help="a profile's thresholds after extends, with their files")
        p.add_argument("profile", help="a name in thresholds/ or a YAML path")
        p = sub.add_parser("clean", help="remove the temp dirs of dead runs on the hosts",
                           description="The hosts as signoff run takes them. " + more
                           + ": --accept-new-host-keys, --connect-timeout, ...")
        p.add_argument("--hosts")
        p.add_argument("--inventory")
        sub.add_parser("calibrate", help="a site profile from runs on known-good nodes (margins from "
                       "their run-to-run spread)")
        sub.add_parser("rebuild", help="a killed run's results.json, junit.xml, report.md")
        from signoff import manifest
        manifest.add_arguments(sub.add_parser("verify", help=manifest.VERIFY_HELP,
                                              description=VERIFY_CODES))
        args = ap.parse_args(argv)
        return {"list": list_, "show-profile": show_profile, "verify": manifest.run}[args.cmd](args)
    except InputError as exc:
        print(printable(f"signoff: {exc}", lines=True), file=sys.stderr)
        return USAGE_ERROR


VERIFY_CODES = ("Every file of REPORT_DIR against its MANIFEST.sha256 (written last by the run), and the "
                "manifest's signature (--sign-key) with ssh-keygen. Exit 0: untouched, and a signature "
                "verified against --allowed-signers where there is one (unsigned: integrity only, not "
                "proof); 1: a file changed, missing or added; 8: a bad signature; 9: no manifest, or no "
                "signature where one is asked for; 10: signed, but the signer not checked against a "
                "list (no --allowed-signers: its key's fingerprint printed); 4: an option refused.")


def _calibrate(argv: list[str]) -> int:
    from signoff import calibrate
    return calibrate.main(argv)


def _rebuild(argv: list[str]) -> int:
    from signoff import results
    return results.main(["rebuild", *argv])


if __name__ == "__main__":
    sys.exit(main())
