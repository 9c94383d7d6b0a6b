"""The docs' inventory and CI recipes (docs/hosts.md, docs/ci.md: the README's reference pages
since issue 45) are files of the repository (examples/), quoted verbatim, and they work: the
inventory loads with signoff's own loader, and each CI step passes only inputs its action
declares, under the permissions it needs, with no pip install into a runner's system Python,
in the README or any page of docs/ (issue 31 items 1 and 8). tests/test_docs.py runs every
other command they show."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from signoff.inventory import HOST_KEYS, TOP_KEYS, Host, load
from signoff.transport import SSHTransport

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
INVENTORY = "examples/cluster.yaml"
GITHUB = "examples/ci/github-actions.yml"
GITLAB = "examples/ci/gitlab-ci.yml"
QUOTED_IN = {INVENTORY: "docs/hosts.md", GITHUB: "docs/ci.md", GITLAB: "docs/ci.md"}  # the page quoting each

# Each action's `inputs:` in its action.yml at the major tag the recipe pins, read from the
# action's repository (commit the tag pointed to when read):
ACTION_INPUTS = {
    # actions/checkout action.yml @ v4 (11d5960a326750d5838078e36cf38b85af677262)
    "actions/checkout@v4": {
        "allow-unsafe-pr-checkout", "clean", "fetch-depth", "fetch-tags", "filter",
        "github-server-url", "lfs", "path", "persist-credentials", "ref", "repository",
        "set-safe-directory", "show-progress", "sparse-checkout", "sparse-checkout-cone-mode",
        "ssh-key", "ssh-known-hosts", "ssh-strict", "ssh-user", "submodules", "token"},
    # actions/upload-artifact action.yml @ v4 (ea165f8d65b6e75b540449e92b4886f43607fa02)
    "actions/upload-artifact@v4": {
        "compression-level", "if-no-files-found", "include-hidden-files", "name", "overwrite",
        "path", "retention-days"},
    # dawidd6/action-download-artifact action.yml @ v6 (bf251b5aa9c2f7eeb574a96ee720e24f801b7c11)
    "dawidd6/action-download-artifact@v6": {
        "allow_forks", "branch", "check_artifacts", "commit", "dry_run", "event", "github_token",
        "if_no_artifact_found", "name", "name_is_regexp", "path", "pr", "repo", "run_id",
        "run_number", "search_artifacts", "skip_unpack", "workflow", "workflow_conclusion",
        "workflow_search"},
    # mikepenz/action-junit-report action.yml @ v4 (db71d41eb79864e25ab0337e395c352e84523afe)
    "mikepenz/action-junit-report@v4": {
        "annotate_notice", "annotate_only", "annotations_limit", "check_annotations",
        "check_name", "check_retries", "check_title_template", "commit", "detailed_summary",
        "exclude_sources", "fail_on_failure", "follow_symlink", "github_token",
        "include_passed", "job_name", "job_summary", "report_paths", "require_passed_tests",
        "require_tests", "suite_regex", "summary", "test_files_prefix", "token",
        "transformers", "truncate_stack_traces", "update_check"},
}
# The GITHUB_TOKEN permissions each action needs, from its README at the same tag: a job
# that sets `permissions:` gets none it does not name.
ACTION_PERMISSIONS = {
    # actions/checkout README.md @ v4, "Recommended permissions"
    "actions/checkout": {"contents": "read"},
    # dawidd6/action-download-artifact README.md @ v6: another run's artifact needs "the
    # permissions `action` scope set to `read`"
    "dawidd6/action-download-artifact": {"actions": "read"},
    # mikepenz/action-junit-report README.md @ v4, "PR run permissions": checks: write
    "mikepenz/action-junit-report": {"checks": "write"},
}
LEVEL = {"none": 0, "read": 1, "write": 2}


def quoted_block(path: str) -> str:
    """The first fenced block after the first mention of `path` on the page that quotes it."""
    page = (ROOT / QUOTED_IN[path]).read_text()
    at = page.index(f"`{path}`")
    m = re.compile(r"^```[a-z]*\n(.*?)^```$", re.S | re.M).search(page, at)
    assert m, f"{QUOTED_IN[path]}: no code block after `{path}`"
    return m.group(1)


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```$", text, re.S | re.M)


@pytest.mark.parametrize("path", [INVENTORY, GITHUB, GITLAB])
def test_docs_quote_the_file(path):
    assert quoted_block(path) == (ROOT / path).read_text()


def test_example_inventory_loads_with_every_key():
    inv = load(ROOT / INVENTORY)
    assert len(inv.hosts) > 1
    for h in inv.hosts:  # without them every network check ERRORs, storage reads the temp dir
        assert h.data_iface and h.storage_path and h.python != "python3", h
    text = (ROOT / INVENTORY).read_text()
    doc = yaml.safe_load(text)
    used = set(doc["defaults"]).union(*doc["hosts"])
    assert used == HOST_KEYS, f"unshown: {HOST_KEYS - used}"  # a new key belongs in the example
    # known_hosts and intent commented out: the files they name must exist (~/.ssh/known_hosts
    # serves; a run without an intent file judges parity by majority)
    assert set(doc) | {"known_hosts", "intent"} == TOP_KEYS and re.search(r"^# known_hosts: ", text, re.M)
    assert re.search(r"^# intent: \./intent\.yaml ", text, re.M) and (ROOT / "examples/intent.yaml").is_file()


@pytest.mark.skipif(not shutil.which("ssh-keygen"), reason="no ssh-keygen (openssh-client)")
def test_hashed_known_hosts_are_found(tmp_path):
    """README's recipe (ssh-keyscan -H) writes hashed names, and [address]:port for a port
    other than 22: the host-key loading SSHTransport does finds both."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                   check=True)
    key = (tmp_path / "k.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"gpu001 {' '.join(key)}\n[10.0.1.16]:2222 {' '.join(key)}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    assert "gpu001" not in known.read_text()  # hashed, as ssh-keyscan -H writes
    for host, name in [(Host(name="gpu001"), "gpu001"),
                       (Host(name="gpu016", address="10.0.1.16", port=2222), "[10.0.1.16]:2222")]:
        t = SSHTransport(host, known_hosts=str(known))
        assert t.conn.client.get_host_keys().lookup(name), name


def github_recipe() -> dict:
    doc = yaml.safe_load((ROOT / GITHUB).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads a bare `on` as true
    return doc


def test_github_recipe_inputs_and_permissions():
    doc = github_recipe()
    assert doc["on"] and doc["jobs"]
    for name, job in doc["jobs"].items():
        perms = {**doc.get("permissions", {}), **job.get("permissions", {})}
        uses = [s for s in job["steps"] if "uses" in s]
        assert uses
        for step in uses:
            action = step["uses"]
            assert action in ACTION_INPUTS, f"{action}: read its action.yml into ACTION_INPUTS"
            extra = set(step.get("with", {})) - ACTION_INPUTS[action]
            assert not extra, f"{name}: {action} has no input {sorted(extra)}"
            for scope, level in ACTION_PERMISSIONS.get(action.split("@")[0], {}).items():
                assert LEVEL[perms.get(scope, "none")] >= LEVEL[level], \
                    f"{name}: {action} needs permissions {scope}: {level}"


def commands(text: str) -> list[str]:
    """Every shell line of a recipe or code block, comments dropped."""
    return [ln.split(" #")[0] for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


BARE_PIP = re.compile(r"(?:^|[\s;&|(-])(?:pip3?|python3? -m pip) install")


def test_no_pip_install_into_a_system_python():
    """PEP 668: Debian's and Ubuntu's python3 refuse `pip install` (externally managed); a
    venv's own pip (`.venv/bin/pip`) is the way, in the recipes, the README and every docs page."""
    blocks = [b for page in PAGES for b in code_blocks(page.read_text())]
    assert len(blocks) > 10
    for text in [(ROOT / GITHUB).read_text(), (ROOT / GITLAB).read_text(), *blocks]:
        for line in commands(text):
            assert not BARE_PIP.search(line), line
    steps = github_recipe()["jobs"]["signoff"]["steps"]
    gitlab = yaml.safe_load((ROOT / GITLAB).read_text())["signoff"]["script"]
    for run in [s["run"] for s in steps if "run" in s] + gitlab:
        if "signoff run" in run:
            assert ".venv/bin/signoff run" in run  # the venv's script: no activate in CI
    assert BARE_PIP.search("- run: pip install .") and not BARE_PIP.search(".venv/bin/pip install .")
