#!/usr/bin/env python3
"""reports/examples/ made again from what each run recorded, with this checkout's renderer:
every report.md from its results.json (signoff.report.markdown, as `signoff rebuild` writes
it; where the example keeps no report.html, its Details line says so), and
h200-1x-calibrated/site-h200-vm.yaml from golden/ (python -m signoff.calibrate, as
bench/calibrate_h200.sh ran it). Nothing is measured again: report.html, junit.xml and the
run logs stay as their runs wrote them (report.html is pytest-html's, made only by a run).

    .venv/bin/python bench/examples.py
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from signoff import calibrate, report  # noqa: E402

EXAMPLES = ROOT / "reports" / "examples"


def main() -> int:
    cal = EXAMPLES / "h200-1x-calibrated"
    os.chdir(ROOT)  # the command as the file's first line says it
    site = cal.relative_to(ROOT) / "site-h200-vm.yaml"
    if calibrate.main([str(cal.relative_to(ROOT) / "golden"), "--out", str(site), "--margin", "0.8"]):
        return 1
    # golden/ recorded the profile's path on the machine that ran it: the file extends this
    # checkout's copy of it, by a path relative to itself (as calibrate writes one)
    base = os.path.relpath(ROOT / "bench" / "profiles" / "h200-1x-vm.yaml", cal)
    text = site.read_text()
    site.write_text(re.sub(r"^extends: .*$", f"extends: {base}", text, count=1, flags=re.M))
    for doc_path in sorted(EXAMPLES.rglob("results.json")):
        md = doc_path.with_name("report.md")
        text = report.markdown(json.loads(doc_path.read_text()))
        if not doc_path.with_name("report.html").exists():  # an example whose run is not made again
            text = text.replace(DETAILS, NO_HTML)
        md.write_text(text)
        print(md.relative_to(ROOT))
    return 0


DETAILS = "Details: report.html (plots, methodology, inventory), results.json.\n"
NO_HTML = ("Details: results.json (this example keeps no report.html: its run cannot be made again "
           "here, and the old one was another version's; reports/examples/README.md).\n")


if __name__ == "__main__":
    sys.exit(main())
