"""`pytest acceptance/` as a user runs it: the local default, and bad input."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Every local run takes this machine's run lock: wait for another one (a concurrent test
# process on a shared machine), never ERROR "in use by another signoff run".
LOCK_WAIT = ("--lock-wait", "300")
QUICK = str(ROOT / "tests/profiles/quick.yaml")  # one all-reduce size: for runs that test flags


def run(*args, cwd=ROOT, command=("pytest", "acceptance/")):
    # --python: the training environment here is this venv (torch), not the python3 on PATH
    return subprocess.run([sys.executable, "-m", *command, "-p", "no:cacheprovider",
                           "--python", sys.executable, *LOCK_WAIT, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def assert_self_contained(html: str) -> None:
    """The report opens anywhere: no stylesheet, script, image or frame fetched from
    elsewhere (every such reference is a data: URI or empty: filled in by the report's own
    script), and its styles are inline."""
    tags = re.findall(r"<(link|script|img|iframe|frame|source|embed|object)\b([^>]*)>", html, re.I)
    outside = [f"<{t}{a}>" for t, a in tags if t.lower() == "link"
               or re.search(r"\b(?:src|href|data)\s*=\s*['\"]?(?!data:|['\"\s>])", a, re.I)]
    assert outside == [], outside
    styles = re.findall(r"<style[^>]*>(.*?)</style>", html, re.S | re.I)
    assert not re.search(r"@import|url\(\s*(?!['\"]?data:)", "".join(styles), re.I)
    assert any(".so-table{" in css for css in styles), "the report's own styles are not inline"
    assert any(re.search(r"\.summary|#results-table", css) for css in styles), \
        "pytest-html's styles are not inline"


def test_no_options_runs_locally_without_ssh(tmp_path):
    # through the command (make accept's): the whole sheet, end to end (tests/test_command.py: the rest)
    p = run("--report-dir", str(tmp_path), command=("signoff", "run"))
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["meta"]["inventory"] == "default" and res["meta"]["hosts"] == ["localhost"]
    assert res["meta"]["profile"] == "local"  # auto on a GPU-less machine
    assert res["hosts"]["localhost"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert res["verdict"] == "PASS" and p.returncode == 0, p.stdout
    assert {r["status"] for r in res["results"]} == {"PASS", "N.A."}
    html = (tmp_path / "report.html").read_text()
    assert_self_contained(html)
    assert (tmp_path / "junit.xml").exists()
    # no GPU, no soak: no soak/ dir and no "soak: 0/0 hosts measured" line (make accept's, before)
    assert not (tmp_path / "soak").exists() and "0/0 hosts" not in p.stdout, p.stdout


def test_reports_go_to_a_timestamped_dir_by_default(tmp_path, clone_reports):
    before = set(clone_reports.glob("2*"))
    p = run("-k", "allreduce_correct", "--partial", "--profile", QUICK)
    new = set(clone_reports.glob("2*")) - before
    try:
        assert p.returncode == 0, p.stdout
        assert len(new) == 1
        d = next(iter(new))
        assert {f.name for f in d.iterdir()} >= {"report.html", "results.json", "junit.xml"}
        # the progress lines of a measuring phase leave pytest's rows whole: its "." after them
        # is on its file's row again, not an orphan line of letters
        assert "interconnect: 1/1 hosts measured, 0 errors" in p.stdout
        assert not re.search(r"^[.FEn-]+ *(\[ *\d+%\])?$", p.stdout, re.M), p.stdout
    finally:
        for d in new:
            subprocess.run(["rm", "-rf", str(d)])


def _one_clear_message(p, *needles):
    assert p.returncode == 4, p.stdout + p.stderr
    err = p.stderr.strip()
    assert "Traceback" not in p.stdout + p.stderr
    for n in needles:
        assert n in err, err


def test_bad_profile_names_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: local\ncriteria:\n  nvidia_driver_version: {unit: x, source: y}\n")
    _one_clear_message(run("--profile", str(bad)), str(bad), "criteria.nvidia_driver_version",
                       "needs exactly one threshold")


def test_unknown_profile_lists_the_known_ones():
    _one_clear_message(run("--profile", "b200-72x"), "b200-72x", "h200-8x-nvlink")


def test_bad_inventory_names_file_and_key(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  - name: node01\n    adress: 10.0.0.1\n")
    _one_clear_message(run("--inventory", str(inv)), str(inv), "hosts[0]", "'adress'")


def test_bad_hostlist_is_one_message():
    _one_clear_message(run("--hosts", "node[01-"), "node[01-", "unbalanced")


def test_a_subset_is_not_a_sign_off(tmp_path):
    p = run("-k", "allreduce_correct", "--report-dir", str(tmp_path), "--profile", QUICK)
    res = json.loads((tmp_path / "results.json").read_text())
    assert p.returncode == 3 and res["verdict"] == "INCOMPLETE"  # README: Exit codes
    assert "deselected" in res["meta"]["partial"] and "not a sign-off" in p.stdout
    p = run("-k", "allreduce_correct", "--partial", "--report-dir", str(tmp_path / "ok"), "--profile", QUICK)
    assert p.returncode == 0
    assert json.loads((tmp_path / "ok" / "results.json").read_text())["verdict"] == "PASS"


def test_empty_hosts_is_an_error_not_the_local_machine():
    _one_clear_message(run("--hosts", ""), "--hosts is empty")


def test_bad_numbers_in_options_are_one_message():
    _one_clear_message(run("--net-port", "99999"), "--net-port 99999: expected 1024-65533")
    _one_clear_message(run("--collective-timeout", "-5"), "--collective-timeout -5: expected seconds > 0")


def test_all_pairs_of_many_hosts_say_their_cost_and_are_refused_above_the_cap(tmp_path):
    """--net-pairs all on 100 hosts (none reachable: it is refused at configure, before
    any host is touched) names pairs, rounds and time; --net-pairs-max lets it run."""
    p = run("--hosts", "node[001-100]", "--net-pairs", "all", "--profile", "local",
            "--report-dir", str(tmp_path))
    assert p.returncode == 4, p.stdout + p.stderr
    assert ("--net-pairs all: 100 hosts make 4950 host pairs in 99 rounds of 5 s "
            "(net_pair_bandwidth.duration of profile local): about 8 min 15 s of measuring, "
            "plus each round's start-up; "
            "that is above --net-pairs-max 2016: pass --net-pairs-max 4950 to run them all, or use "
            "--net-pairs ring (100 pairs)") in p.stderr, p.stderr
    assert not (tmp_path / "results.json").exists()
    # under the cap (or asked for with --net-pairs-max) the cost is said before anything
    # starts; collected only: no host is reached (collecting 4950 pairs alone takes minutes)
    p = run("--hosts", "node[1-4]", "--net-pairs", "all", "--profile", "local", "--collect-only",
            "-k", "net_pair", "--report-dir", str(tmp_path / "co"))
    assert "--net-pairs all: 4 hosts make 6 host pairs in 3 rounds of 5 s" in p.stdout, p.stdout
    assert "6/" in p.stdout and "tests collected" in p.stdout, p.stdout[-500:]
    p = run("--hosts", "node[1-4]", "--net-pairs", "all", "--net-pairs-max", "5", "--profile",
            "local", "--collect-only", "--report-dir", str(tmp_path / "co2"))
    assert p.returncode == 4 and "above --net-pairs-max 5: pass --net-pairs-max 6" in p.stderr


def test_all_pairs_run_in_n_minus_1_rounds():
    from signoff.network.judge import all_pairs, rounds

    for n in (2, 3, 5, 10, 64):
        names = [f"n{i}" for i in range(n)]
        pairs = all_pairs(names)
        assert sorted(pairs) == sorted((a, b) for i, a in enumerate(names) for b in names[i + 1:])
        assert len(rounds(pairs)) == (n - 1 if n % 2 == 0 else n)


def test_a_class_base_no_profile_extends_is_refused(tmp_path):
    """A class base picks its variant from the hosts' NVML (tests/test_class_base.py); one that no
    profile beside it extends has none to pick: its gaps would ERROR on every healthy host."""
    (tmp_path / "base.yaml").write_text("abstract: true\nextends: nvidia-base\n")
    p = run("--profile", str(tmp_path / "base.yaml"), "-k", "gpu_count")
    _one_clear_message(p, f"--profile {tmp_path / 'base.yaml'}: base is a class base (abstract: true) "
                       "that no profile beside it extends: use one that extends it (or --profile auto)")


def test_the_terminal_names_the_html_report_where_it_was_written(tmp_path):
    """--html PATH: the report is there and the terminal says so, not <report-dir>/report.html;
    the core options' help says their defaults."""
    page = tmp_path / "elsewhere" / "r.html"
    p = run("acceptance/test_versions.py", "-k", "version_parity", "--partial", "--report-dir",
            str(tmp_path / "rd"), f"--html={page}", command=("pytest",))
    assert page.exists() and f"report: {page}  results: {tmp_path / 'rd'}/results.json" in p.stdout, p.stdout
    assert not (tmp_path / "rd" / "report.html").exists()
    helps = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60).stdout
    for opt, default in (("--connect-timeout", "10"), ("--probe-timeout", "180")):
        assert re.search(rf"{opt}=\S+\s+[^-]*?\(default\s+{default}\)", helps), opt


@pytest.mark.parametrize("verdict, code", [("FAIL", 1), ("ERROR", 2)])
def test_make_accept_says_signoffs_exit_code_which_make_turns_into_2(tmp_path, verdict, code):
    """make exits 2 for any failed recipe: `make accept` says signoff's own code (README: Exit
    codes) and that CI calls `signoff run`. FAIL: a limit no CPU reaches; ERROR: probes in a
    Python without torch."""
    prof = tmp_path / "p.yaml"
    prof.write_text("extends: local\ncriteria:\n  allreduce_busbw: {min: 100000, unit: GB/s, size: 1M, "
                    "sweep: [1M, 1M], attempts: 1, "
                    "source: 'a limit no CPU reaches, to make this check FAIL'}\n")
    python = sys.executable
    if verdict == "ERROR":
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
        python = str(tmp_path / "bare" / "bin" / "python")
    venv = sys.prefix  # the venv running these tests: -o, never rebuilt by this make
    p = subprocess.run(["make", "-o", f"{venv}/.installed", "accept", f"VENV={venv}", f"PROFILE={prof}",
                        f"ARGS=--python {python} {' '.join(LOCK_WAIT)} --report-dir {tmp_path / 'r'} "
                        "-k allreduce_busbw --partial"], cwd=ROOT, capture_output=True, text=True,
                       timeout=400)
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    assert doc["verdict"] == verdict and doc["meta"]["exit_code"] == code, p.stdout[-3000:]
    assert p.returncode == 2, p.stdout[-3000:]  # make's own, whatever the recipe's
    assert (f"make accept: signoff exit code {code} (README: Exit codes); make's own exit status is 2 "
            "whatever the code: in CI call signoff run, not make accept") in p.stdout, p.stdout[-3000:]
    assert f"Error {code}" in p.stderr  # make's own line names the recipe's code too


def pytest_alone(where: Path) -> str:
    """A Python with pytest and nothing of signoff's (a bare clone's system python3 and
    python3-pytest): Debian's where installed, else a venv that reaches only pytest's own
    distributions (this venv's, by symlinks: no download)."""
    system = "/usr/bin/python3"
    probe = "import pytest, importlib.util as u; assert u.find_spec('ClusterShell') is None"
    if Path(system).exists() and subprocess.run([system, "-c", probe], capture_output=True).returncode == 0:
        return system
    from importlib import metadata

    from packaging.requirements import Requirement
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where / "venv")], check=True)
    only = where / "pytest-only"
    only.mkdir()
    todo, seen = ["pytest"], set()
    while todo:
        dist = metadata.distribution(todo.pop())
        if dist.metadata["Name"] in seen:
            continue
        seen.add(dist.metadata["Name"])
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            if not (only / top).exists():
                (only / top).symlink_to(dist.locate_file(top))
        todo += [r.name for r in map(Requirement, dist.requires or [])
                 if r.marker is None or r.marker.evaluate({"extra": ""})]
    python = where / "venv" / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "pytest-only.pth").write_text(f"{only}\n")
    return str(python)


def test_a_bare_clone_says_how_to_install(tmp_path):
    """`pytest acceptance/` before any install: one line naming the install commands, pytest's
    usage code, not the plugin's ImportError traceback of a missing ClusterShell."""
    python = pytest_alone(tmp_path)
    p = subprocess.run([python, "-m", "pytest", "acceptance/", "--profile", "local"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 4, p.stdout + p.stderr
    lines = (p.stdout + p.stderr).strip().splitlines()
    assert len(lines) == 1 and "missing ClusterShell" in lines[0], lines
    assert "`make accept`" in lines[0] and "`pip install .` into a venv" in lines[0]


def test_collect_only_lists_the_checks_and_writes_nothing(tmp_path, clone_reports):
    """--collect-only is pytest's: the checks listed, exit 0, no run, so no report directory."""
    before = set(clone_reports.glob("2*"))
    p = run("--collect-only", "-q", "--profile", "local")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "acceptance/test_health.py::test_error_counters[localhost]" in p.stdout
    assert set(clone_reports.glob("2*")) == before
    p = run("--collect-only", "-q", "--profile", "local", "--report-dir", str(tmp_path / "r"))
    assert p.returncode == 0 and not (tmp_path / "r").exists(), p.stdout


def test_a_k_that_matches_nothing_says_so(tmp_path):
    p = run("-k", "nosuch or nosuch2", "--report-dir", str(tmp_path), "--profile", "local")
    doc = json.loads((tmp_path / "results.json").read_text())
    said = re.search(r"-k 'nosuch or nosuch2' matched no check of the sign-off sheet \(\d+ deselected\)",
                     p.stdout)
    assert p.returncode == 3 and said and said.group() in doc["meta"]["partial"], p.stdout
    assert "(profile local; no check judged)" in p.stdout


def test_rerun_runs_again_only_what_did_not_pass(tmp_path, clone_reports):
    """--rerun DIR (and --lf: the newest run's) takes up the earlier run's checks that did not
    pass, as a partial run that names it; a dir that is no run, or one with nothing to rerun, is
    refused in one line. Run A: storage_read_small ERRORs (a storage path that does not exist); it
    goes to reports/ (the newest run there, for --lf)."""
    before = set(clone_reports.glob("2*"))
    p = run("acceptance/test_storage.py", "-k", "read_small", "--profile", "local",
            "--storage-path", str(tmp_path / "gone"), command=("pytest",))
    made = set(clone_reports.glob("2*")) - before
    try:
        assert p.returncode == 2 and len(made) == 1, p.stdout[-2000:]
        a = next(iter(made))
        run_a = json.loads((a / "results.json").read_text())["meta"]["run"]
        small = "acceptance/test_storage.py::test_storage_read_small[localhost]"
        # the user's commands as typed (run() turns pytest's cache off on the command line, where
        # pytest has no --lf at all: the installed command's case, which signoff run maps)
        for how in (["pytest", "acceptance/", "--lf"], ["pytest", "acceptance/", "--rerun", str(a)],
                    ["signoff", "run", "--lf"]):
            p = subprocess.run([sys.executable, "-m", *how, "--collect-only", "-q", "--profile", "local"],
                               cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert p.returncode == 0 and re.search(rf"^{re.escape(small)}\n\n1/\d+ tests collected",
                                                   p.stdout, re.M), p.stdout + p.stderr
        assert f"--lf: signoff keeps no pytest cache, so it reruns the newest run's checks that did not " \
               f"pass: --rerun reports/{a.name}" in p.stderr
        p = subprocess.run([sys.executable, "-m", "pytest", "tests/test_hostlist.py", "--lf",
                            "--collect-only", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and "tests/test_hostlist.py::" in p.stdout, p.stdout  # not a sign-off run

        p = run("--rerun", str(a), "--profile", "local", "--report-dir", str(tmp_path / "b"))
        doc = json.loads((tmp_path / "b" / "results.json").read_text())
        assert [r["test"] for r in doc["results"]] == [small], p.stdout[-2000:]
        assert doc["results"][0]["status"] == "PASS" and doc["verdict"] == "INCOMPLETE" and p.returncode == 3
        said = f"Rerun of run {run_a} (reports/{a.name}): its 1 check that did not pass (1 ERROR)"
        assert doc["meta"]["rerun"]["run"] == run_a and said in p.stdout, p.stdout
        assert said in (tmp_path / "b" / "report.md").read_text()
        assert said in (tmp_path / "b" / "report.html").read_text()
    finally:
        for d in made:
            shutil.rmtree(d)
    b = tmp_path / "b"
    _one_clear_message(run("--rerun", str(b), "--profile", "local"), f"--rerun {b}: every check of run",
                       "passed or was N.A. or UNSEEN: nothing to rerun")
    _one_clear_message(run("--rerun", str(tmp_path / "nothing"), "--profile", "local"),
                       f"--rerun {tmp_path / 'nothing'}: cannot read it")
