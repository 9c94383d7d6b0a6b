"""The report directory (issue 51 items 3 and 13): a run refuses a --report-dir another user owns
or can write to, writes every file fresh (a link planted at a name is replaced, never written
through) into directories it made, and a reused one keeps the earlier run's every artifact, each
family's raw files included, under earlier/<run>/. The runs are real local runs; dcgm's on
recorded hosts with the stand-in dcgmi (tests/test_dcgm_recorded.py: no GPU, no DCGM here)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import dcgm_fake
import pytest
from test_cli import LOCK_WAIT, ROOT, run
from test_dcgm_recorded import PROFILE, accept, serials

from signoff import plugin, safefile

# a quick local run (one check) that writes every report file
QUICK_RUN = ("--profile", "local", "-k", "torch_cuda_build", "--partial")


def victims(tmp_path) -> dict:
    """Files outside the report dir a planted link points at, with what they hold."""
    out = tmp_path / "outside"
    out.mkdir()
    made = {}
    for name in ("results.json", "results.jsonl", "report.md", "report.html", "junit.xml", "drain.sh",
                 "exclude.hostlist", "localhost.json", "pass-node.json"):
        (out / name).write_text(f"victim {name}\n")
        made[out / name] = f"victim {name}\n"
    return made


def untouched(made: dict) -> None:
    for path, text in made.items():
        assert path.read_text() == text, path


@pytest.mark.parametrize("case", ["owned by another user", "mode 0777", "group-writable",
                                  "under a directory anyone can write"])
def test_a_report_dir_another_user_could_write_into_is_refused_naming_it(tmp_path, case):
    rd = tmp_path / "r"
    rd.mkdir(mode=0o755)
    if case == "owned by another user":
        os.chown(rd, 65534, 65534)  # nobody's
        why = f"{rd} is owned by {safefile.user(65534)}, not by {safefile.user(os.geteuid())}"
    elif case == "mode 0777":
        rd.chmod(0o777)
        why = f"{rd} is writable by group and others (mode 0777)"
    elif case == "group-writable":
        rd.chmod(0o775)
        why = f"{rd} is writable by group (mode 0775)"
    else:  # a shared directory without the sticky bit: anyone could swap the report dir for a link
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared").chmod(0o777)
        rd = tmp_path / "shared" / "run1"
        why = f"{tmp_path / 'shared'} is writable by group and others (mode 0777)"
    p = run("--report-dir", str(rd), *QUICK_RUN)
    assert p.returncode == 4, p.stdout[-2000:] + p.stderr[-2000:]
    line = next(ln for ln in p.stderr.splitlines() if "--report-dir" in ln)
    assert f"--report-dir {rd}: refused: {why}" in line, p.stderr
    assert not rd.exists() or os.listdir(rd) == []  # nothing written


def test_a_report_dir_of_the_runs_user_under_sticky_tmp_is_taken(tmp_path):
    """/tmp is open to all but sticky (tmp_path lies under it): a directory of ours there is fine."""
    assert os.stat("/tmp").st_mode & stat.S_ISVTX and str(tmp_path).startswith("/tmp/")
    assert safefile.refused(tmp_path) is None


def test_a_report_dir_named_by_the_runs_own_link_is_taken(tmp_path):
    """The user's own link at the name (root's here, as the run's): where it leads is checked, and
    written into."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    p = run("--report-dir", str(tmp_path / "link"), *QUICK_RUN)
    assert p.returncode != 4 and (tmp_path / "real" / "results.json").is_file(), p.stdout[-2000:] + p.stderr
    assert (tmp_path / "real" / "report.html").is_file() and (tmp_path / "real" / "hosts").is_dir()


def test_links_planted_in_a_report_dir_are_never_written_through(tmp_path):
    """No earlier run's results: the planted names are removed, the run's files are new files,
    its hosts/ a new directory (a link to a directory of another's, which a failed rmtree left
    in place, had hosts/localhost.json written into it)."""
    made = victims(tmp_path)
    rd = tmp_path / "r"
    rd.mkdir()
    for name in ("report.md", "junit.xml", "drain.sh", "exclude.hostlist", "report.html"):
        (rd / name).symlink_to(tmp_path / "outside" / name)
    (rd / "hosts").symlink_to(tmp_path / "outside")  # hosts/localhost.json -> outside/localhost.json
    p = run("--report-dir", str(rd), *QUICK_RUN)
    assert (rd / "results.json").is_file(), p.stdout[-2000:] + p.stderr[-2000:]
    untouched(made)
    for name in ("report.md", "junit.xml", "drain.sh", "exclude.hostlist", "report.html", "results.json",
                 "results.jsonl", "hosts", "hosts/localhost.json"):
        assert not (rd / name).is_symlink(), name
    assert json.loads((rd / "hosts" / "localhost.json").read_text())["hostname"]
    assert "# GPU cluster sign-off" in (rd / "report.md").read_text()


def test_a_link_planted_at_dcgm_host_json_is_not_written_through(tmp_path):
    """Links planted at dcgm/<host>.json (dcgm/ is no name the run cleaned before: a plain
    write_text followed it), results.json, report.md and results.jsonl: nothing outside changes."""
    made = victims(tmp_path)
    rd = tmp_path / "report"  # accept()'s report dir
    (rd / "dcgm").mkdir(parents=True)
    (rd / "dcgm" / "pass-node.json").symlink_to(tmp_path / "outside" / "pass-node.json")
    for name in ("results.json", "report.md", "results.jsonl"):
        (rd / name).symlink_to(tmp_path / "outside" / name)
    _, _, doc = accept(tmp_path, {"pass-node": "pass"}, PROFILE)
    untouched(made)
    assert not (rd / "dcgm" / "pass-node.json").is_symlink()
    assert (rd / "dcgm" / "pass-node.json").read_text() == \
        dcgm_fake.cases(serials("pass-node"))["pass"]["diag"]["stdout"]
    assert doc["results"][0]["details"]["raw"] == "dcgm/pass-node.json"


def test_a_reused_report_dir_keeps_the_earlier_runs_dcgm_evidence(tmp_path):
    """Run 2 in run 1's report dir: run 1's dcgm/<host>.json moved to earlier/<run 1>/ with all
    else it wrote (the one list of per-run artifacts), run 2's own in dcgm/."""
    rd = tmp_path / "report"  # accept()'s report dir
    raw = dcgm_fake.cases(serials("pass-node"))
    _, _, first = accept(tmp_path, {"pass-node": "pass"}, PROFILE)
    assert (rd / "dcgm" / "pass-node.json").read_text() == raw["pass"]["diag"]["stdout"]
    # what a run leaves is the one list of per-run artifacts: nothing unlisted
    artifacts = {*plugin.RUN_FILES, *plugin.RUN_DIRS}
    assert set(os.listdir(rd)) <= artifacts, set(os.listdir(rd)) - artifacts
    p, _, second = accept(tmp_path, {"pass-node": "warn"}, PROFILE)
    old = rd / "earlier" / first["meta"]["run"]
    assert f"held an earlier run: moved to {old}" in p.stderr
    assert (old / "dcgm" / "pass-node.json").read_text() == raw["pass"]["diag"]["stdout"]
    assert (rd / "dcgm" / "pass-node.json").read_text() == raw["warn"]["diag"]["stdout"]
    assert json.loads((old / "results.json").read_text())["meta"]["run"] == first["meta"]["run"]
    # run 2's warn is a FAIL: its host's evidence (signoff/evidence) is run 2's alone, run 1 passed
    assert set(os.listdir(old)) == set(os.listdir(rd)) - {"earlier", "evidence"}, os.listdir(old)
    assert sorted(os.listdir(rd / "evidence")) == ["pass-node", "pass-node.tar.gz"]
    assert second["meta"]["run"] != first["meta"]["run"]


PLANTER = """import os

def pytest_runtest_setup(item):  # a link at report.html mid-run, after the run cleaned its dir
    os.symlink(os.environ["PLANT_TO"], os.path.join(os.environ["PLANT_IN"], "report.html"))
"""


def test_pytest_htmls_report_html_is_written_fresh_never_through_a_link(tmp_path):
    """pytest-html writes report.html at the end with a plain open("w"): a link put there mid-run
    (only the run's own user can: the dir is refused otherwise) is replaced, not written through."""
    made = victims(tmp_path)
    (tmp_path / "planter.py").write_text(PLANTER)
    rd = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/", "-p", "planter", "-p",
                        "no:cacheprovider", "--python", sys.executable, *LOCK_WAIT, "--report-dir", str(rd),
                        *QUICK_RUN],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(tmp_path), "PLANT_IN": str(rd),
                            "PLANT_TO": str(tmp_path / "outside" / "report.html")})
    assert (rd / "results.json").is_file(), p.stdout[-2000:] + p.stderr[-2000:]
    untouched(made)
    assert not (rd / "report.html").is_symlink() and "torch_cuda_build" in (rd / "report.html").read_text()
    assert "FileExistsError" not in p.stdout  # the planter's link was made: the check ran


def test_write_replaces_a_planted_link_and_subdir_refuses_one(tmp_path):
    target = tmp_path / "victim"
    target.write_text("victim")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.json").symlink_to(target)
    safefile.write(tmp_path / "d" / "f.json", "{}")
    assert target.read_text() == "victim" and (tmp_path / "d" / "f.json").read_text() == "{}"
    assert not (tmp_path / "d" / "f.json").is_symlink()
    (tmp_path / "l").symlink_to(tmp_path / "d")  # a link where the run makes a directory: refused
    with pytest.raises(OSError, match="is not a directory: not written into"):
        safefile.subdir(tmp_path / "l")
    with safefile.open_new(tmp_path / "d" / "f.json") as f:  # a log: a new file, the old one replaced
        f.write("line\n")
    assert (tmp_path / "d" / "f.json").read_text() == "line\n" and target.read_text() == "victim"
    assert sorted(os.listdir(tmp_path / "d")) == ["f.json"]  # no temp file left
