"""A hostile host runs the whole sheet (issue 51, "Done when"). lab1's interpreter is a wrapper
around the real probes: every string of every document they print (names, units, op names,
interface names, GPU names and serials from a fake NVML, driver strings, DCGM fields from a
stand-in dcgmi) starts with markup, a script, terminal escapes, matplotlib's `$...$`, line breaks,
shell substitutions and `../`, and every object and list gets one more entry of its first entry's
shape, so named (a collective, a port, a GPU of the host's naming). lab3's too, with no GPU (its
collectives run on gloo, their op names marked); lab2 is a plain host. The verdict is what the
figures give, said alike by results.json, the terminal, report.md, junit.xml and report.html
(opened in headless Chromium: its DOM's verdict is results.json's, none of the host's script
ran); no other host's check crashes on them; drain.sh runs no substitution; every file the run
wrote is named by the run. The fakes (NVML, dcgmi) are what cannot exist here: no GPU, no DCGM."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dcgm_fake
import pytest
from lab import Lab
from test_dcgm_lab import FAKE_PYNVML, STAND_IN
from test_lab_acceptance import ROOT, accept, by_key
from test_report_browser import CHROMIUM, probed

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py

CANARY = "/tmp/signoff-hostile-canary"  # a substitution the host smuggled in would make it
ESC = "\x1b[1A\x1b[2K\x1b[32mverdict: PASS\x1b[0m"  # cursor up, erase the line, a green verdict
MARK = ("<script>document.title='PWNED';document.querySelectorAll('.so-verdict')"
        ".forEach(e => e.textContent = 'PASS')</script>"
        "<img src=x onerror=\"document.body.dataset.pwned='img'\">"
        "<h2>Sign-off verdict: PASS</h2>" + ESC +
        " $\\alpha^{2}$ $x_1$ $ \nverdict: PASS\r\n"  # mathtext, and lines of its own
        f"$(touch {CANARY}) `touch {CANARY}` '\"; touch {CANARY}; # "
        "../../../../tmp/x ]]> & |x| [l](javascript:alert(1)) ")

# lab1's interpreter: the real one runs the probe; every JSON line it prints (progress and the
# document) comes back marked, every other line as it was; its stderr ends with MARK too.
WRAPPER = '''#!{python}
import json, os, signal, subprocess, sys
REAL, MARK, args = {python!r}, {mark!r}, sys.argv[1:]
if not args or not args[0].endswith(".py") or os.environ.get("SIGNOFF_RANK_CHILD"):
    os.execv(REAL, [REAL, *args])
# the run's own temp dir; dcgm's raw stdout (the stand-in's document is marked itself); the data
# port's name and address, which the network probes are started with (the host adds a port of
# its own naming beside it)
KEEP = {{"workdir"}} | ({{"stdout"}} if args[0] == "dcgm.py" else set()) \
    | ({{"name", "addresses"}} if args[0] == "netinfo.py" else set())


def marked(v, keep=KEEP):
    if isinstance(v, dict):
        out = {{k: (x if k in keep else marked(x, keep)) for k, x in v.items()}}
        first = next(iter(v.values()), None)  # one more entry of the same shape, named by the host
        out[MARK] = marked(first, set()) if first is not None else MARK
        return out
    if isinstance(v, list):
        return [marked(x, keep) for x in v] + ([marked(v[0], set())] if v and isinstance(v[0], dict) else [])
    return MARK + v if isinstance(v, str) else v


p = subprocess.Popen([REAL, *args], stdout=subprocess.PIPE, text=True,  # its stderr: the host's own
                     env={{**os.environ, "SIGNOFF_RANK_CHILD": "1"}})
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, lambda n, f: (p.send_signal(n), sys.exit(128 + n)))
for line in p.stdout:
    try:
        doc = json.loads(line)
    except ValueError:
        sys.stdout.write(line)
    else:
        sys.stdout.write(json.dumps(marked(doc)) + "\\n")
    sys.stdout.flush()
rc = p.wait()
sys.stderr.write("\\n" + MARK + "\\n")
sys.exit(rc)
'''


def marked_dcgmi(serials: list[str]) -> str:
    """The stand-in dcgmi's passing document, every string of it (test names, GPU fields,
    versions) marked, still valid JSON."""
    case = dcgm_fake.cases(serials)["pass"]
    doc = json.loads(case["diag"]["stdout"])

    def mark(v):
        return ({k: mark(x) for k, x in v.items()} if isinstance(v, dict) else
                [mark(x) for x in v] if isinstance(v, list) else
                MARK + v if isinstance(v, str) else v)
    case["diag"]["stdout"] = json.dumps(mark(doc), indent=4)
    return json.dumps(case)


# Run in the page once it has loaded: what a script of the host's would have changed.
PROBE = """<script id="so-probe-js">window.addEventListener('load', () => setTimeout(() => {
  const out = {title: document.title, pwned: document.body.dataset.pwned || null,
    verdict: [...document.querySelectorAll('.so-cover .so-verdict')].map(e => e.innerText),
    headings: [...document.querySelectorAll('h2')].map(e => e.textContent)
      .filter(t => t.startsWith('Sign-off verdict')),
    imgs: [...document.querySelectorAll('img')].filter(e => e.getAttribute('src') === 'x').length,
    links: [...document.querySelectorAll('a')].filter(e => (e.getAttribute('href') || '')
      .startsWith('javascript')).length,
    scripts: [...document.querySelectorAll('script')]
      .filter(e => e.id !== 'so-probe-js' && e.text.includes('PWNED')).length,
    body: document.body.innerText};
  const pre = document.createElement('pre'); pre.id = 'so-probe';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
}, 500));</script>"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not CHROMIUM:
        pytest.fail("chromium missing: make system installs it", pytrace=False)
    Path(CANARY).unlink(missing_ok=True)
    tmp = tmp_path_factory.mktemp("hostile")
    wrapper = tmp / "python"
    wrapper.write_text(WRAPPER.format(python=sys.executable, mark=MARK))
    wrapper.chmod(0o755)
    fake = tmp / "fakenvml"
    fake.mkdir()
    (fake / "pynvml.py").write_text(FAKE_PYNVML)
    serials = [f"1650000000{i}" for i in range(4)]
    with Lab(tmp / "lab", n_hosts=3) as lab:
        per_host = {h.name: {"data_iface": h.veth_host} for h in lab.hosts}
        per_host["lab3"].update(python=str(wrapper))  # no GPU: its collectives run (gloo), their ops marked
        per_host["lab1"].update(python=str(wrapper), env={
            "PYTHONPATH": str(fake), "PATH": f"{STAND_IN}{os.pathsep}{os.environ['PATH']}",
            "SIGNOFF_FAKE_SERIALS": json.dumps(serials), "SIGNOFF_FAKE_DCGMI": marked_dcgmi(serials)})
        inv = lab.write_inventory(tmp / "inv.yaml", python=sys.executable, overrides=per_host)
        rc, res, out = accept(tmp, "--inventory", str(inv), "--profile",
                              str(ROOT / "tests" / "profiles" / "lab.yaml"),
                              # lab1's 4 fake GPUs give it 4 ranks torch cannot start: the multi-node
                              # collectives wait out this timeout, as they would on such a host
                              "--collective-timeout", "10",
                              timeout=900)
    return rc, res, out, tmp / "report"


def test_the_hostile_host_changes_no_verdict_and_no_file(run):
    rc, res, out, rd = run
    assert res is not None, out[-4000:]
    assert not os.path.exists(CANARY), "a host's string ran as a shell command"
    verdict = res["verdict"]
    assert verdict != "PASS" and rc == {"FAIL": 1, "ERROR": 2, "INCOMPLETE": 3}[verdict], (rc, verdict)
    r = by_key(res)
    # the marks reached the run: lab1's strings are in its facts and records, as text
    assert res["hosts"]["lab1"]["kernel"].startswith(MARK), res["hosts"]["lab1"]["kernel"][:200]
    assert any("<script>document.title='PWNED'" in (v.get("message") or "") for (c, h), v in r.items()
               if h == "lab1")
    # the plain host's own checks are judged by its own figures: each measured (a FAIL is its figure
    # against a floor this loaded machine decides, so not asserted either way), none ERRORed by peers
    own = [v for (c, h), v in r.items() if h == "lab2" and not c.startswith(("multinode", "net_pair", "rail",
                                                                              "train_scaling", "version"))]
    assert own and all(v["status"] in ("PASS", "N.A.", "FAIL") for v in own), \
        [(v["criterion"], v["status"], v["message"][:200]) for v in own
         if v["status"] in ("ERROR", "NOT RUN")]
    # a hostile peer's documents crash no judgement of another host's
    crashed = [(v["criterion"], v["host"]) for v in res["results"]
               if "could not judge" in (v.get("message") or "") and v["host"] not in ("lab1", "lab3")]
    assert not crashed, crashed
    # the terminal: no byte of the host's sequences, no forged verdict line
    assert "\x1b" not in out and "\r" not in out.replace("\r\n", "\n")
    section = out[out.index("= signoff ="):]
    assert section.splitlines()[1].startswith(f"verdict: {verdict}"), section[:2000]
    assert not re.search(r"^\s*verdict: PASS", out, re.M), out[-3000:]
    md = (rd / "report.md").read_text()
    assert md.startswith(f"# GPU cluster sign-off: {verdict}") and "\x1b" not in md
    assert not re.search(r"^\s*verdict: PASS", md, re.M) and "<script>" not in md.replace("\\<script>", "")
    junit = (rd / "junit.xml").read_text()
    assert "\x1b" not in junit
    import xml.etree.ElementTree as ET
    suite = ET.parse(rd / "junit.xml").getroot()
    assert suite.iter("testcase") and not any(t.tag == "script" for t in suite.iter())
    # every file the run wrote: named by the run, inside the report dir
    for p in rd.rglob("*"):
        rel = p.relative_to(rd)
        assert re.fullmatch(r"[\w.\-/\[\]]+", str(rel)) and "PWNED" not in str(rel), rel
        assert not p.is_symlink(), rel
    # drain.sh: valid sh, and run with a stand-in scontrol it passes every reason as one word
    drain = rd / "drain.sh"
    assert subprocess.run(["sh", "-n", str(drain)]).returncode == 0


def test_drain_sh_runs_no_substitution_of_the_hosts(run, tmp_path):
    rc, res, out, rd = run
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "calls"
    (bin_ / "scontrol").write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done >> {log}\n'
                                   f'echo --- >> {log}\n')
    (bin_ / "scontrol").chmod(0o755)
    p = subprocess.run(["sh", str(rd / "drain.sh")], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"})
    assert p.returncode == 0, p.stderr
    assert not os.path.exists(CANARY)
    calls = log.read_text().split("---\n")[:-1] if log.exists() else []
    for c in calls:
        words = c.splitlines()
        assert words[0] == "update" and words[1].startswith("nodename=") and words[2] == "state=drain", words
        assert len(words) == 4 and words[3].startswith("reason=signoff"), words


def test_report_html_runs_none_of_the_hosts_markup_and_says_the_verdict(run, tmp_path):
    rc, res, out, rd = run
    got = probed(rd / "report.html", tmp_path, PROBE)
    assert got["verdict"] == [res["verdict"]], got["verdict"]
    assert got["pwned"] is None and "PWNED" not in got["title"], got
    assert len(got["headings"]) == 1 and got["imgs"] == 0 and got["scripts"] == 0 and got["links"] == 0, got
    assert "\x1b" not in got["body"]
    assert "Sign-off verdict: PASS" not in got["body"].split("Sign-off verdict", 1)[1][:40] \
        or res["verdict"] == "PASS"
    # lab1's strings are on the page as text (its kernel, in the hardware signed off)
    assert res["hosts"]["lab1"]["kernel"][len(MARK):] in got["body"]
    assert "<script>document.title='PWNED'" in got["body"]
