"""The docs in layers (issue 45 item 8): a README of at most ~150 lines that starts with the two
commands, reference pages under docs/ whose links resolve, a CLI reference generated from the
parsers, a troubleshooting page whose messages are signoff's own, and every command the README
and docs/ show run by a test: here (the cheap ones, for real: list, show-profile, plan without
contacting hosts, run and `pytest acceptance/` with --collect-only, `make -n accept`, the CI's
key step) or by the test named for it (a lab, a real Slurm, a fresh install)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```$", re.S | re.M)
INVENTORY = str(ROOT / "examples/cluster.yaml")

# Commands no cheap test can run here (real GPU hosts, root, a Slurm allocation, a fresh clone):
# each names the test that runs it, or what it stands for, in a test that exists.
# docs/profiles.md's calibration from several golden runs, then the same hosts signed off with it
CALIBRATE = ("tests/test_lab_acceptance.py::"
             "test_calibrated_from_two_golden_runs_a_faulted_run_fails_and_its_rerun_completes_it")
RUN_ELSEWHERE = {
    r"^make test$": ".ci/run::make test",
    r"^git clone ": "tests/test_walkthrough.py::test_new_user_walkthrough",
    r"^cp examples/cluster\.yaml cluster\.yaml$": "tests/test_walkthrough.py::adapted_inventory",
    r"^python3 -m venv \.venv && \.venv/bin/pip install -e \.$": "tests/test_walkthrough.py::editable",
    r"^\. \.venv/bin/activate$": "tests/test_walkthrough.py::test_new_user_walkthrough",
    r"^ssh-keyscan -H ": "tests/test_readme_examples.py::test_hashed_known_hosts_are_found",
    r"^ssh-keygen -lf ": "tests/test_readme_examples.py::test_hashed_known_hosts_are_found",
    r"^salloc ": "tests/test_slurm_lab.py::test_acceptance_suite_passes_over_srun",
    r"--launcher[ =]slurm": "tests/test_slurm_lab.py::test_acceptance_suite_passes_over_srun",
    r"^signoff clean ": "tests/test_command.py::test_clean_removes_dead_runs_dirs_and_their_probes",
    r"-m signoff\.calibrate ": CALIBRATE,
    r"PROFILE=site-h100": CALIBRATE,
    r"^\.venv/bin/python bench/cli_reference\.py --write$":
        "tests/test_docs.py::test_cli_reference_is_generated",
    r"^install -d -m 700 ~/\.ssh$|^printf '%s\\n' \"\$SIGNOFF_": "tests/test_docs.py::test_ci_key_step_runs",
    # docs/outputs.md's signed report: a key made, a run signed with it, each way of verifying it
    r"^ssh-keygen -t ed25519 |--sign-key |^echo \"ops@example\.com |^signoff verify |^sha256sum -c |"
    r"^ssh-keygen -Y verify ":
        "tests/test_manifest.py::test_a_signed_run_verifies_untouched_and_fails_each_edit",
}
# what a placeholder of the docs stands for in a command run here
PLACEHOLDERS = {"cluster.yaml": INVENTORY, "golden.yaml": INVENTORY, "staging.yaml": INVENTORY,
                "reports/20261130T020000Z/results.json": str(ROOT / "reports/examples/h200-1x/results.json"),
                "/opt/venv/bin/python": sys.executable}


def shown_commands() -> list[tuple[str, str]]:
    """(page, command) for every command line of a shell block (fenced, no language or sh/bash);
    yaml and text blocks are files and output."""
    out = []
    for page in PAGES:
        for lang, block in FENCE.findall(page.read_text()):
            if lang in ("", "sh", "bash"):
                for line in block.splitlines():
                    cmd = line.split(" #")[0].strip()
                    if cmd and not cmd.startswith("#"):
                        out.append((page.relative_to(ROOT).as_posix(), cmd))
    return out


def elsewhere(cmd: str) -> str | None:
    return next((test for rx, test in RUN_ELSEWHERE.items() if re.search(rx, cmd)), None)


def here(cmd: str) -> list[list[str]] | None:
    """The command lines that run `cmd` here, each expected to exit 0; None: not one of ours."""
    words = [PLACEHOLDERS.get(w, w) for w in shlex.split(cmd)]
    words = [w.removeprefix(".venv/bin/") if w.startswith(".venv/bin/") else w for w in words]
    if words[:2] in (["python3", "-m"], ["python", "-m"]) and words[2:3] == ["pytest"]:
        words = ["pytest", *words[3:]]
    if words[0] == "signoff":
        sub = words[1]
        if sub in ("list", "show-profile"):
            return [[sys.executable, "-m", "signoff", *words[1:]]]
        if sub == "plan":  # nothing is asked of the hosts: the options, inventory and profile judged
            return [[sys.executable, "-m", "signoff", *words[1:], "--no-contact"]]
        if sub == "run":
            return [[sys.executable, "-m", "signoff", *words[1:], "--collect-only", "-q"]]
    if words[0] == "pytest" and words[1].startswith("acceptance/"):
        return [[sys.executable, "-m", "pytest", *words[1:], "--collect-only", "-q"]]
    if words[0] == "make" and words[1:2] == ["accept"]:
        p = subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
        line = next(ln for ln in p.stdout.splitlines() if ln.startswith("echo ") and "signoff run" in ln)
        run = shlex.split(shlex.split(line)[1])  # the recipe's echo of the command it runs
        return here(" ".join(shlex.quote(w) for w in run))
    return None


def test_every_command_the_docs_show_is_run_by_a_test():
    commands = shown_commands()
    assert len(commands) > 20, commands  # the parser found the blocks
    ran: dict[str, str] = {}
    for page, cmd in commands:
        test = elsewhere(cmd)
        if test:
            path, _, name = test.partition("::")
            assert (ROOT / path).exists() and name in (ROOT / path).read_text(), f"{page}: {cmd}: {test}"
            continue
        lines = here(cmd)
        assert lines is not None, f"{page}: `{cmd}` is run by no test: run it in here() or name its test"
        for argv in lines:
            key = " ".join(argv)
            if key in ran:
                continue
            p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120,
                               env={**os.environ, "COLUMNS": "100"})
            assert p.returncode == 0, \
                f"{page}: `{cmd}` ({key}) exited {p.returncode}: {p.stdout[-800:]}{p.stderr[-800:]}"
            ran[key] = page
    assert any("plan" in k for k in ran) and any("--collect-only" in k for k in ran), ran


def test_a_command_no_test_runs_is_refused():
    """The check above can fail: a command of a kind it does not know is named."""
    assert here("rm -rf reports") is None and elsewhere("rm -rf reports") is None
    assert here("signoff run --inventory cluster.yaml")[0][-2:] == ["--collect-only", "-q"]


def test_readme_is_short_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    first = FENCE.search(text)
    assert text.index(first.group(0)) < 60, "the two commands come first"
    assert [ln.split()[:2] for ln in first.group(2).splitlines()] == [["make", "accept"], ["make", "test"]]
    for heading in ("## Quickstart", "## Exit codes", "### Which profile for which hardware",
                    "## Where to go next"):
        assert f"\n{heading}\n" in text, heading
    # the quickstart installs editable from the clone: `signoff run` is the clone's code (item 2)
    quick = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert "make accept" in quick and "pip install -e ." in quick


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_the_pages_resolve():
    bad = []
    for page in PAGES:
        text = FENCE.sub("", page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"https?://", target):
                continue
            path, _, frag = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                bad.append(f"{page.name}: {target}")
            elif frag and dest.suffix == ".md":
                heads = {anchor(h) for h in re.findall(r"^#+ (.*)$", FENCE.sub("", dest.read_text()), re.M)}
                if frag not in heads:
                    bad.append(f"{page.name}: {target} (no such heading)")
    assert not bad, bad


def test_cli_reference_is_generated():
    """docs/cli.md is what bench/cli_reference.py makes of today's parsers."""
    import cli_reference
    page = cli_reference.page()
    assert "## signoff plan" in page and "| `--inventory INVENTORY` |" in page and "| `--storage-path" in page
    assert (ROOT / "docs/cli.md").read_text() == page, \
        "docs/cli.md is stale: .venv/bin/python bench/cli_reference.py --write"


def test_troubleshooting_quotes_signoffs_own_messages():
    """Each message the page quotes (a table row's first cell) is in signoff's code, so a
    reworded message cannot leave the page pointing at words no run prints."""
    code = "\n".join(p.read_text() for p in [*ROOT.glob("signoff/**/*.py"), ROOT / "conftest.py"])
    code = code.replace("\\n", "\n")
    rows = re.findall(r"^\| (`.*?) \|", (ROOT / "docs/troubleshooting.md").read_text(), re.M)
    quoted = [q for row in rows for q in re.findall(r"`([^`]+)`", row)]
    assert len(quoted) >= 25, quoted
    missing = [q for q in quoted if q not in code]
    assert not missing, missing


def test_ci_key_step_runs(tmp_path):
    """docs/ci.md's step writes the runner's key and known_hosts from the job's secrets where the
    inventory it shows looks, and signoff's own loader and SSH transport take them."""
    from signoff.inventory import load
    from signoff.transport import SSHTransport
    text = (ROOT / "docs/ci.md").read_text().split("## The runner's SSH key and known_hosts", 1)[1]
    (_, step), (lang, inv) = FENCE.findall(text)[:2]
    assert lang == "yaml"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
    pub = (tmp_path / "k.pub").read_text().split()[:2]
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(), work.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home),
           "SIGNOFF_SSH_KEY": (tmp_path / "k").read_text().strip(),
           "SIGNOFF_KNOWN_HOSTS": f"gpu001 {' '.join(pub)}"}
    subprocess.run(["bash", "-euc", step], cwd=work, env=env, check=True)
    key = home / ".ssh/id_signoff"
    assert key.stat().st_mode & 0o777 == 0o600 and (home / ".ssh").stat().st_mode & 0o777 == 0o700
    (work / "cluster.yaml").write_text(inv + "hosts:\n  - {name: gpu001}\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        inv = load(work / "cluster.yaml")
        host = inv.hosts[0]
        assert Path(os.path.expanduser(host.identity_file)) == key
        assert Path(inv.known_hosts) == work / "known_hosts"
        t = SSHTransport(host, known_hosts=inv.known_hosts)
        assert t.conn.client.get_host_keys().lookup("gpu001")


def test_an_installed_copy_names_the_commit_it_was_built_from(tmp_path, monkeypatch):
    """docs/outputs.md, Which code ran: `pip install .` (not editable) copies the package out of
    the clone, its .git left behind; the build (setup.py's build_py, as pip runs it) writes the
    clone's `git describe` into the installed sheet, and a run from that copy names it."""
    from signoff import report
    p = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    sheet = tmp_path / "signoff/_sheet"
    described = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--tags"],
                               capture_output=True, text=True, check=True).stdout.strip()
    assert (sheet / ".signoff-commit").read_text() == described + "\n"
    monkeypatch.setattr(report, "ROOT", sheet)  # the installed copy's sheet: no .git there
    assert report.suite_version() == f"0.1.0 (git {described})"
