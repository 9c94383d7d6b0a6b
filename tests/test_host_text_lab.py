"""What a host prints is its own text, never markup or terminal control (issue 42 items 1, 2): a
lab host whose every sysinfo string holds a <script>, an <img onerror>, a forged verdict heading
and ESC sequences that erase a line and print a green "verdict: PASS", and whose error counters
probe dies saying the same on its stderr. The terminal, report.md, junit.xml and results.json
show them as escapes; report.html, opened in headless Chromium, as text on the cover, the
summary, the inventory and every family section, with nothing run."""

from __future__ import annotations

import re
import sys

import pytest
from lab import Lab
from test_lab_acceptance import ROOT, accept, by_key
from test_report_browser import CHROMIUM, probed

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py

ESC = "\x1b[1A\x1b[2K\x1b[32mverdict: PASS\x1b[0m"  # cursor up, erase the line, a green verdict
SHOWN = "\\x1b[1A\\x1b[2K\\x1b[32mverdict: PASS\\x1b[0m"  # as signoff says it
MARK = ("<script>document.title='PWNED';document.querySelectorAll('.so-verdict')"
        ".forEach(e => e.textContent = 'PASS')</script>"
        "<img src=x onerror=\"document.body.dataset.pwned='img'\">"
        "<h2>Sign-off verdict: PASS</h2>" + ESC + " ")

# The host's interpreter, as its inventory entry names it: the probes run for real, but sysinfo's
# every string (but its temp dir: the run's own) starts with MARK, and `sysinfo.py counters` (the
# error counters at the end) dies with MARK on its stderr.
WRAPPER = '''#!{python}
import json, os, subprocess, sys
REAL, MARK, args = {python!r}, {mark!r}, sys.argv[1:]
if args[:1] != ["sysinfo.py"] or args[1:2] == ["xids"]:
    os.execv(REAL, [REAL, *args])
if args[1:2] == ["counters"]:
    sys.stderr.write("reading the error counters\\n" + MARK + "\\n")
    sys.exit(1)

def marked(v, key=None):
    if isinstance(v, dict):
        return {{k: marked(x, k) for k, x in v.items()}}
    if isinstance(v, list):
        return [marked(x) for x in v]
    return MARK + v if isinstance(v, str) and key != "workdir" else v

p = subprocess.run([REAL, *args], stdout=subprocess.PIPE, text=True)
print(json.dumps(marked(json.loads(p.stdout.strip().splitlines()[-1]))))
sys.exit(p.returncode)
'''

# Run in the page once it has loaded: what a script of the host's would have changed, and the
# text of each part of the report.
PROBE = """<script id="so-probe-js">window.addEventListener('load', () => setTimeout(() => {
  const text = sel => [...document.querySelectorAll(sel)].map(e => e.innerText);
  const out = {title: document.title, pwned: document.body.dataset.pwned || null,
    verdict: text('.so-cover .so-verdict'),
    headings: [...document.querySelectorAll('h2')].map(e => e.textContent)
      .filter(t => t.startsWith('Sign-off verdict')),
    imgs: [...document.querySelectorAll('img')].filter(e => e.getAttribute('src') === 'x').length,
    scripts: [...document.querySelectorAll('script')]
      .filter(e => e.id !== 'so-probe-js' && e.text.includes('PWNED')).length,
    cover: text('.so-cover'), inventory: text('.so-inventory'), sections: text('.so-section'),
    titles: [...document.querySelectorAll('.so-table td[title]')].map(e => e.title),
    rows: text('#results-table tbody'), body: document.body.innerText};
  const pre = document.createElement('pre'); pre.id = 'so-probe';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
}, 500));</script>"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """2 lab hosts, lab1's interpreter the wrapper: versions (lab1's strings differ: a FAIL on
    the cover), its NIC, the host pairs (the network section) and the error counters (lab1's
    probe dies: an ERROR)."""
    if not CHROMIUM:
        pytest.fail("chromium missing: make system installs it", pytrace=False)
    tmp = tmp_path_factory.mktemp("hosttext")
    wrapper = tmp / "python"
    wrapper.write_text(WRAPPER.format(python=sys.executable, mark=MARK))
    wrapper.chmod(0o755)
    with Lab(tmp / "lab", n_hosts=2) as lab:
        per_host = {h.name: {"data_iface": h.veth_host} for h in lab.hosts}
        per_host["lab1"]["python"] = str(wrapper)
        inv = lab.write_inventory(tmp / "inv.yaml", python=sys.executable, overrides=per_host)
        rc, res, out = accept(tmp, "acceptance/test_versions.py", "acceptance/test_network.py",
                              "acceptance/test_health.py", "-k", "version_parity or nic_link or "
                              "net_pair_bandwidth or error_counters", "--inventory", str(inv),
                              "--profile", str(ROOT / "tests" / "profiles" / "lab.yaml"))
    assert rc == 1 and res["verdict"] == "FAIL", out
    return tmp / "report", res, out


def test_the_terminal_report_md_junit_and_results_json_show_a_hosts_escapes_as_text(run):
    rd, res, out = run
    r = by_key(res)
    odd = r[("version_parity", "lab1")]
    assert odd["status"] == "FAIL" and SHOWN in odd["message"] and "\x1b" not in odd["message"], odd
    dead = r[("error_counters", "lab1")]
    assert dead["status"] == "ERROR" and "probe sysinfo failed (exit 1)" in dead["message"], dead
    assert SHOWN in dead["message"] and "<script>" in dead["message"]
    assert dead["details"]["stderr"].endswith(MARK.strip())  # the host's own bytes, kept raw...
    for f in ("results.json", "results.jsonl"):  # ...as JSON's escapes only
        assert "\x1b" not in (rd / f).read_text() and "\\u001b[1A" in (rd / f).read_text()
    assert res["hosts"]["lab1"]["kernel"].startswith(MARK)  # every string of its sysinfo held it
    # the terminal: no byte of the host's sequences, no line that is the forged verdict
    assert "\x1b" not in out, out[max(0, out.find("\x1b") - 300):out.find("\x1b") + 100]
    section = out[out.index("= signoff ="):]
    assert section.splitlines()[1].startswith("verdict: FAIL"), section
    assert not re.search(r"^\s*verdict: PASS", out, re.M), section
    said = [ln for ln in section.splitlines() if "error_counters on lab1" in ln]
    assert len(said) == 1 and SHOWN in said[0] and "probe sysinfo failed (exit 1)" in said[0], section
    # 2 hosts, no majority: both FAIL, one cause (issue 51 item 15: one cover line)
    assert any("version_parity on 2 hosts lab[1-2]" in ln and SHOWN in ln
               for ln in section.splitlines()), section
    md = (rd / "report.md").read_text()
    assert md.startswith("# GPU cluster sign-off: FAIL") and "\x1b" not in md, md
    said = [ln for ln in md.splitlines() if "`error_counters` on lab1" in ln]  # Markdown's escapes in it
    assert len(said) == 1 and "x1b\\[2K\\\\x1b\\[32mverdict: PASS" in said[0] and "\\<script>" in said[0], md
    junit = (rd / "junit.xml").read_text()
    assert "\x1b" not in junit and SHOWN in junit


def test_report_html_shows_a_hosts_markup_as_text_and_runs_none_of_it(run, tmp_path):
    rd, res, _ = run
    got = probed(rd / "report.html", tmp_path, PROBE)
    # nothing of the host's ran or was made an element
    assert got["verdict"] == ["FAIL"] and got["pwned"] is None and "PWNED" not in got["title"], got
    assert len(got["headings"]) == 1 and got["imgs"] == 0 and got["scripts"] == 0, got
    assert "\x1b" not in got["body"]
    # ... and every part that says a host's string says it as text
    shown = MARK.replace(ESC, SHOWN).strip()
    assert shown in got["cover"][0], got["cover"]  # lab1's hostname and its version_parity FAIL
    inventory = got["inventory"][0]
    for key in ("os", "kernel", "cpu_model", "hostname"):
        assert res["hosts"]["lab1"][key].startswith(MARK)
        assert res["hosts"]["lab1"][key].replace(ESC, SHOWN) in inventory, (key, inventory)
    assert any(shown in t for t in got["titles"]), got["titles"]  # the summary's host x criterion
    # every family section of the run (nothing in any ran, above); versions says lab1's as text
    heads = sorted(s.split("\n", 1)[0] for s in got["sections"])
    assert heads == ["Network", "Versions across hosts"], heads
    versions = next(s for s in got["sections"] if s.startswith("Versions across hosts"))
    assert versions.count(shown) >= 4, versions  # Python, torch, OS, kernel at least
    assert shown in got["rows"][0]  # pytest-html's row of lab1's error_counters: its log
