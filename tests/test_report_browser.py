"""report.html of a real lab run, opened in headless Chromium (Debian's chromium, `make system`):
the cover's verdict and failure lines are in the first viewport, the plots are loaded images of
real size, nothing a provider reads is a controller path, a Python repr or pytest's plugin list;
printed to PDF, the pages (pdftoppm) hold the cover, the family sections and the methodology."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
from lab import Lab
from test_lab_acceptance import ROOT, accept, by_key

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py
CHROMIUM = shutil.which("chromium")
VIEW = (1280, 900)

# Run in the page once it has loaded: where the cover sits, what the plots are.
PROBE = """<script>window.addEventListener('load', () => setTimeout(() => {
  const r = e => e.getBoundingClientRect();
  const seen = e => r(e).top >= 0 && r(e).bottom <= window.innerHeight && r(e).height > 0;
  const out = {innerHeight: window.innerHeight,
    verdict: [...document.querySelectorAll('.so-cover .so-verdict')].map(e => [e.textContent, seen(e)]),
    badge: (e => [r(e).left, r(e).top, r(e).right, r(e).bottom])(document.querySelector('.so-verdict')),
    problems: [...document.querySelectorAll('.so-problem')].map(e => [e.textContent, seen(e)]),
    plots: [...document.querySelectorAll('img.so-plot')].map(e => [e.alt, e.complete, e.naturalWidth,
                                                                  e.naturalHeight, r(e).width]),
    rows: [...document.querySelectorAll('#results-table td.col-signoff')].map(e => e.textContent),
    environment: [...document.querySelectorAll('#environment tr')].filter(e => e.offsetParent).length,
    text: document.body.innerText};
  const pre = document.createElement('pre'); pre.id = 'so-probe';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
}, 500));</script>"""


def chromium(*args: str, profile_dir) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile_dir}", f"--window-size={VIEW[0]},{VIEW[1]}", "--hide-scrollbars",
         *args], capture_output=True, text=True, timeout=180)


def probed(report, tmp_path, probe: str = PROBE) -> dict:
    """What `probe` (a script writing JSON into <pre id="so-probe">) read of `report` once Chromium
    loaded it (a copy with the script in it)."""
    from html import unescape
    page = tmp_path / "probed.html"
    page.write_text(report.read_text().replace("</body>", probe + "</body>"))
    p = chromium("--virtual-time-budget=10000", "--dump-dom", page.as_uri(), profile_dir=tmp_path / "u1")
    m = re.search(r'<pre id="so-probe">(.*?)</pre>', p.stdout, re.S)
    assert m, p.stderr[-2000:]
    return json.loads(unescape(m.group(1)))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A 2-host lab run: the all-reduce (plots), NCCL transport (N.A. on gloo), the host pairs
    (matrix) and a pair floor no veth reaches (a FAIL with its cause on the cover)."""
    if not CHROMIUM or not shutil.which("pdftoppm"):
        pytest.fail("chromium and poppler-utils missing: make system installs them", pytrace=False)
    tmp = tmp_path_factory.mktemp("browser")
    with Lab(tmp / "lab", n_hosts=2) as lab:
        per_host = {h.name: {"data_iface": h.veth_host} for h in lab.hosts}
        inv = lab.write_inventory(tmp / "inv.yaml", python=sys.executable, overrides=per_host)
        prof = tmp / "p.yaml"
        prof.write_text(f"extends: {ROOT / 'tests' / 'profiles' / 'lab.yaml'}\ncriteria:\n"
                        "  allreduce_busbw: {min: 0.02, unit: GB/s, size: 16M, sweep: [1M, 16M], "
                        "source: 'a test floor: 1/10 of local, for hosts sharing 2 cores'}\n"
                        "  net_pair_bandwidth: {min: 100000, unit: Gb/s, streams: 2, duration: 2, "
                        "attempts: 1, source: 'test: beyond any veth, to put a FAIL on the cover'}\n")
        rc, res, out = accept(tmp, "acceptance/test_interconnect.py", "acceptance/test_network.py",
                              "-k", "allreduce_busbw or nccl_transport or pair", "--inventory", str(inv),
                              "--profile", str(prof))
    assert rc == 1, out
    md = (tmp / "report" / "report.md").read_text()  # the same cover for a CI job page
    assert md.startswith("# GPU cluster sign-off: FAIL") and "- **FAIL** `net_pair_bandwidth` on" in md
    assert by_key(res)[("net_pair_bandwidth", "lab1->lab2")]["status"] == "FAIL", out
    return tmp / "report", res


def test_first_viewport_has_the_verdict_and_the_failures_and_plots_are_loaded(run, tmp_path):
    rd, res = run
    got = probed(rd / "report.html", tmp_path)
    assert got["verdict"] == [["FAIL", True]]
    fails = [t for t, seen in got["problems"] if "net_pair_bandwidth" in t]
    assert fails and all(seen for _, seen in got["problems"]), got["problems"]
    assert "lab1, lab2" in fails[0] or "lab1->lab2" in fails[0], fails
    assert "expected >= 100000 Gb/s" in fails[0] and "likely cause" in fails[0]
    # every check's row is in the results table (pytest-html's filter hides none), with our status
    assert sorted(got["rows"]) == sorted(r["status"] for r in res["results"]), got["rows"]
    alts = [a for a, *_ in got["plots"]]
    assert "all-reduce busbw vs message size" in alts and "host pair throughput" in alts, alts
    for alt, complete, w, h, shown in got["plots"]:
        assert complete and w > 300 and h > 150 and shown > 300, (alt, w, h, shown)  # decoded, drawn
    text = got["text"]
    assert got["environment"] == 0 and "pytest-metadata" not in text and "Plugins" not in text
    for py in res["meta"]["probe_python"].values():  # a host's interpreter is the host's path, shown
        text = text.replace(py, "")
    assert str(ROOT) not in text, text[max(0, text.find(str(ROOT)) - 300):text.find(str(ROOT)) + 100]
    assert "('/" not in text and "Skipped: " not in text  # no Python reprs of a skip
    assert "N.A.: lab1 runs the all-reduce on gloo (no GPU): NCCL transport does not apply" in text
    assert "Methodology" in text and "busbw = algbw x 2(n-1)/n" in text and "Hardware signed off" in text
    # and the pixels: the screenshot's first viewport shows the FAIL badge's colour
    shot = tmp_path / "shot.png"
    chromium("--virtual-time-budget=10000", f"--screenshot={shot}", (rd / "report.html").as_uri(),
             profile_dir=tmp_path / "u2")
    from PIL import Image
    img = Image.open(shot).convert("RGB")
    assert img.size == VIEW
    badge = img.crop(tuple(round(x) for x in got["badge"]))  # where the page put the verdict
    colours = {c: n for n, c in badge.getcolors(VIEW[0] * VIEW[1])}
    assert colours.get((248, 200, 200), 0) > badge.width * badge.height / 2  # .so-FAIL's #f8c8c8
    assert len(colours) > 2  # and its text drawn on it


def test_printed_pdf_pages_hold_the_sections(run, tmp_path):
    rd, _ = run
    pdf = tmp_path / "report.pdf"
    chromium("--virtual-time-budget=10000", "--no-pdf-header-footer", f"--print-to-pdf={pdf}",
             (rd / "report.html").as_uri(), profile_dir=tmp_path / "u3")
    assert pdf.exists() and pdf.stat().st_size > 20_000
    subprocess.run(["pdftoppm", "-r", "30", "-png", str(pdf), str(tmp_path / "page")], check=True)
    pages = sorted(tmp_path.glob("page*.png"))
    texts = [subprocess.run(["pdftotext", "-f", str(i), "-l", str(i), "-layout", str(pdf), "-"],
                            capture_output=True, text=True, check=True).stdout
             for i in range(1, len(pages) + 1)]
    assert len(pages) == len(texts) >= 5, len(pages)

    def first_line(t: str) -> str:
        return next((line.strip() for line in t.splitlines() if line.strip()), "")
    assert "Sign-off verdict" in texts[0] and "net_pair_bandwidth" in texts[0]
    # each section starts its own page (print CSS), its heading on top, in order
    heads = ("Interconnect (intra-node)", "Network", "Methodology", "Hardware signed off")
    starts = [next((i for i, t in enumerate(texts) if first_line(t).startswith(h)), None) for h in heads]
    assert None not in starts and starts == sorted(set(starts)) and starts[0] > 0, \
        [first_line(t) for t in texts]
    # the collapsed result rows are printed open: a passing check's table is in the PDF
    assert any("busbw GB/s" in t for t in texts[starts[-1]:])
