"""A report no one can edit unseen (issue 54 item 3): MANIFEST.sha256 of every file of the report
directory, written last, signed with a real ssh-keygen ed25519 key made here (--sign-key), and
`signoff verify DIR` failing on each edit, naming what. The report directories are a recorded
run's files (reports/examples/cluster-4host-slow) and one real run of a few made-up checks
(about a second, as tests/test_exit_codes.py's)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from signoff import InputError, cli, manifest, openmetrics
from signoff.manifest import BAD_SIGNATURE, CHANGED, NAME, NAMESPACE, SIG, UNSIGNED, USAGE, VERIFIED
from signoff.results import load as load_results

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "reports/examples/cluster-4host-slow"


def keypair(tmp_path: Path, name: str = "signer", who: str = "ops@example.com") -> tuple[str, Path]:
    """A fresh ed25519 key without a passphrase, and an allowed_signers file naming `who` for it."""
    key = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", who, "-f", str(key)], check=True)
    allowed = tmp_path / f"{name}.allowed_signers"
    allowed.write_text(f"{who} {(tmp_path / f'{name}.pub').read_text()}")
    return str(key), allowed


def verify(rd: Path, *args: str) -> subprocess.CompletedProcess:
    """`signoff verify RD ARGS` in this process (the run's own, as a command: at the end of
    test_a_signed_run_verifies_untouched_and_fails_each_edit)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["verify", str(rd), *args])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def recorded_dir(tmp_path: Path) -> tuple[Path, dict]:
    rd = tmp_path / "report"
    shutil.copytree(RECORDED, rd)
    return rd, load_results(rd)


@pytest.fixture
def signed(tmp_path):
    rd, doc = recorded_dir(tmp_path)
    key, allowed = keypair(tmp_path)
    said = manifest.write(rd, {**doc["meta"], "verdict": doc["verdict"]}, key)
    assert said.startswith(f"{NAME}: 7 files, signed ({SIG}, key SHA256:"), said
    return rd, key, allowed


def test_an_untouched_signed_report_verifies_and_sha256sum_agrees(signed):
    rd, key, allowed = signed
    text = (rd / NAME).read_text()
    assert "# run: 20261205T182048Z-vm-22593" in text and "# verdict: FAIL" in text
    assert f"# signature: {SIG} (ssh-keygen -Y sign -n {NAMESPACE}, key SHA256:" in text
    listed = [ln.split("  ", 1)[1] for ln in text.splitlines() if not ln.startswith("#")]
    assert len(listed) == 7 and NAME not in listed and SIG not in listed  # never itself
    assert subprocess.run(["sha256sum", "--quiet", "-c", NAME], cwd=rd).returncode == 0
    p = verify(rd, "--allowed-signers", str(allowed))
    assert p.returncode == VERIFIED, p.stdout + p.stderr
    assert p.stdout.startswith(f"{rd}: VERIFIED: 7 files as the manifest lists them\n")
    assert 'good: Good "signoff-report" signature for ops@example.com with ED25519 key' in p.stdout
    p = verify(rd)  # no list of signers: the signature checked, the signer unchecked: not a pass
    assert p.returncode == manifest.SIGNER_UNCHECKED, p.stdout
    assert "the signer was NOT checked against a list" in p.stdout, p.stdout
    assert f"signing key {fingerprint(key)}" in p.stdout, p.stdout


def fingerprint(key: str) -> str:
    return subprocess.run(["ssh-keygen", "-l", "-f", f"{key}.pub"], capture_output=True, text=True,
                          check=True).stdout.split()[1]


def test_a_report_edited_and_re_signed_with_another_key_is_not_verified_without_a_list(signed, tmp_path):
    """Anyone can edit a report and sign its manifest again with a key of their own: without
    --allowed-signers that is no pass (its own exit code, the key's fingerprint said), with the
    list a bad signature; an unsigned manifest verifies, said as integrity only."""
    rd, key, allowed = signed
    other, _ = keypair(tmp_path, "other", "someone@else")
    (rd / "report.md").write_text("# GPU cluster sign-off: PASS\n")
    manifest.write(rd, {"run": "forged", "verdict": "PASS"}, other)
    p = verify(rd)
    assert p.returncode == manifest.SIGNER_UNCHECKED, p.stdout
    assert p.stdout.startswith(f"{rd}: SIGNER NOT CHECKED: 7 files as the manifest lists them\n"), p.stdout
    assert f"signing key {fingerprint(other)}" in p.stdout and fingerprint(key) not in p.stdout, p.stdout
    assert verify(rd, "--allowed-signers", str(allowed)).returncode == BAD_SIGNATURE
    manifest.write(rd, {"run": "forged", "verdict": "PASS"}, None)  # no key at run time: no signature
    p = verify(rd)
    assert p.returncode == VERIFIED, p.stdout
    assert "signature: none (the run named no --sign-key): integrity only, not proof" in p.stdout, p.stdout
    assert verify(rd, "--require-signature").returncode == UNSIGNED


@pytest.mark.parametrize("edit, said", [
    (lambda rd: (rd / "report.md").write_text("# GPU cluster sign-off: PASS\n"),
     "changed: report.md (its SHA-256 is not the manifest's)"),
    (lambda rd: (rd / "junit.xml").unlink(), "missing: junit.xml"),
    (lambda rd: (rd / "hosts").mkdir() or (rd / "hosts" / "lab9.json").write_text("{}"),
     "added: hosts/lab9.json"),
    (lambda rd: (rd / "drain.sh").unlink() or (rd / "drain.sh").symlink_to("/etc/passwd"),
     "changed: drain.sh (now a symbolic link)"),
], ids=["edited", "deleted", "added", "replaced-by-a-link"])
def test_each_edit_fails_verify_naming_the_file(signed, edit, said):
    rd, key, allowed = signed
    edit(rd)
    p = verify(rd, "--allowed-signers", str(allowed))
    assert p.returncode == CHANGED, p.stdout + p.stderr
    assert p.stdout.startswith(f"{rd}: CHANGED: 1 difference(s) from the manifest\n")
    assert f"\n  {said}\n" in p.stdout
    assert "signature: good" in p.stdout  # the manifest itself is the run's
    assert subprocess.run(["sha256sum", "--quiet", "-c", NAME], cwd=rd, capture_output=True).returncode != 0 \
        or said.startswith("added")  # sha256sum sees no added file: signoff verify does


def test_a_manifest_rehashed_but_not_re_signed_is_a_bad_signature(signed):
    rd, key, allowed = signed
    (rd / "report.md").write_text("# GPU cluster sign-off: PASS\n")
    lines = (rd / NAME).read_text().splitlines()
    fixed = [f"{manifest.digest(rd / 'report.md')}  report.md" if ln.endswith("  report.md") else ln
             for ln in lines]
    (rd / NAME).write_text("\n".join(fixed) + "\n")  # every file matches again: only the signature tells
    p = verify(rd, "--allowed-signers", str(allowed))
    assert p.returncode == BAD_SIGNATURE, p.stdout + p.stderr
    assert p.stdout.startswith(f"{rd}: BAD SIGNATURE: 7 files as the manifest lists them\n")
    assert f"signature: BAD: not a good signature of {NAME} by ops@example.com" in p.stdout
    assert verify(rd).returncode == BAD_SIGNATURE  # without a list of signers too


def test_a_signature_by_another_key_or_none_where_one_is_asked_for_fails(signed, tmp_path):
    rd, key, allowed = signed
    _, other = keypair(tmp_path, "other", "someone@else")
    p = verify(rd, "--allowed-signers", str(other))
    assert p.returncode == BAD_SIGNATURE and "does not list" in p.stdout, p.stdout
    (rd / SIG).unlink()  # the manifest says the run signed it
    p = verify(rd)
    assert p.returncode == UNSIGNED, p.stdout
    assert f"MISSING: no {SIG}, and the manifest says the run signed it" in p.stdout
    (rd / NAME).unlink()
    p = verify(rd)
    assert p.returncode == UNSIGNED and f"NO MANIFEST: {NAME} is missing" in p.stdout, p.stdout


def test_hostile_added_names_are_said_inert(tmp_path):
    rd, doc = recorded_dir(tmp_path)
    manifest.write(rd, doc["meta"])
    (rd / "evil\n\x1b[2Kverdict: PASS\u202e.txt").write_text("x")
    p = verify(rd)
    assert p.returncode == CHANGED
    assert "added: evil\\x0a\\x1b[2Kverdict: PASS\\u202e.txt" in p.stdout and "\x1b" not in p.stdout, p.stdout
    assert "signature: none (the run named no --sign-key)" in p.stdout
    assert verify(rd, "--require-signature").returncode == UNSIGNED
    # a name sha256sum escapes is written as it does: its -c still reads the manifest
    manifest.write(rd, doc["meta"])
    assert subprocess.run(["sha256sum", "--quiet", "-c", NAME], cwd=rd).returncode == 0
    assert verify(rd).returncode == VERIFIED


def test_a_bad_key_or_signers_file_is_refused_naming_the_option_and_file(tmp_path):
    with pytest.raises(InputError, match=r"^--sign-key /nonexistent/key: no such file$"):
        manifest.check_key("/nonexistent/key")
    junk = tmp_path / "junk"
    junk.write_text("not a key\n")
    with pytest.raises(InputError, match=rf"^--sign-key {junk}: ssh-keygen could not sign with it: "):
        manifest.check_key(str(junk))
    locked = tmp_path / "locked"  # a passphrase and no agent: refused now, never a prompt at the end
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret", "-f", str(locked)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    code = f"from signoff import manifest; manifest.check_key({str(locked)!r})"
    p = subprocess.run([sys.executable, "-c", code],
                       capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode != 0 and f"ssh-add {locked}" in p.stderr, p.stderr
    p = verify(tmp_path, "--allowed-signers", str(tmp_path / "nope"))
    assert p.returncode == USAGE and f"--allowed-signers {tmp_path / 'nope'}: no such file" in p.stderr


CHECKS = '''
import pytest

def test_bad(check):
    check.record(1.5, ">= 10 GB/s", "GB/s", "a made-up limit")
    assert False, "busbw 1.5 GB/s, expected >= 10"

@pytest.mark.parametrize("i", range(3))
def test_figure(check, i):
    check.record(50 + i, ">= 10 GB/s", "GB/s", "a made-up limit")
'''


def test_a_signed_run_verifies_untouched_and_fails_each_edit(tmp_path):
    """One real run (pytest-html on): signoff.prom and MANIFEST.sha256 written after every other
    file, signed; the docs' commands (sha256sum -c, ssh-keygen -Y verify, signoff verify) pass on
    it; then a bad --sign-key is refused before anything runs, and a rebuild re-writes the
    manifest unsigned. The commands of docs/outputs.md, run here."""
    key, allowed = keypair(tmp_path)
    (tmp_path / "test_made_up.py").write_text(CHECKS)
    rd, textfile = tmp_path / "r", tmp_path / "textfile"
    textfile.mkdir()
    base = [sys.executable, "-m", "pytest", str(tmp_path / "test_made_up.py"), "-p", "signoff.plugin",
            "-p", "no:cacheprovider", "--profile", "local", "--report-dir", str(rd)]
    p = subprocess.run([*base, "--sign-key", key, "--metrics-file", str(textfile / "signoff.prom")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr  # the FAIL's code: signing changes no verdict
    assert f"signoff: {rd}/{NAME}: " in p.stdout, p.stdout[-2000:]
    assert f"signed ({SIG}, key SHA256:" in p.stdout
    listed = {ln.split("  ", 1)[1] for ln in (rd / NAME).read_text().splitlines() if not ln.startswith("#")}
    assert {"report.html", "results.json", "results.jsonl", "junit.xml", "report.md", "exclude.hostlist",
            "drain.sh", openmetrics.FILE} <= listed and NAME not in listed and SIG not in listed, listed
    last = (rd / NAME).stat().st_mtime_ns  # the manifest is the last file written
    assert all((rd / f).stat().st_mtime_ns <= last for f in listed)
    assert (textfile / "signoff.prom").read_text() == (rd / openmetrics.FILE).read_text()
    assert "signoff_measured{" in (rd / openmetrics.FILE).read_text()
    assert os.listdir(textfile) == ["signoff.prom"]  # no temp file left where the collector reads
    # the commands docs/outputs.md shows
    assert subprocess.run(["sha256sum", "-c", NAME], cwd=rd, capture_output=True).returncode == 0
    with open(rd / NAME, "rb") as f:
        sv = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "ops@example.com", "-n",
                             NAMESPACE, "-s", SIG], cwd=rd, stdin=f, capture_output=True, text=True)
    assert sv.returncode == 0 and "Good \"signoff-report\" signature for ops@example.com" in sv.stdout
    v = subprocess.run([sys.executable, "-m", "signoff", "verify", str(rd), "--allowed-signers",
                        str(allowed)], capture_output=True, text=True, timeout=60)
    assert v.returncode == VERIFIED and v.stdout.startswith(f"{rd}: VERIFIED: "), v.stdout + v.stderr
    # rebuild writes results.json again: its manifest too, unsigned (the earlier signature removed)
    rb = subprocess.run([sys.executable, "-m", "signoff", "rebuild", str(rd)], capture_output=True, text=True)
    assert rb.returncode == 0, rb.stdout + rb.stderr
    assert "MANIFEST.sha256 written again, unsigned" in rb.stdout
    assert not (rd / SIG).exists() and verify(rd).returncode == VERIFIED
    assert verify(rd, "--allowed-signers", str(allowed)).returncode == UNSIGNED
    # a key that cannot sign: exit 4 before anything runs, naming the option and the file
    bad = subprocess.run([*base, "--sign-key", str(tmp_path / "no-such-key")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 4 and f"--sign-key {tmp_path / 'no-such-key'}: no such file" in bad.stderr, \
        bad.stdout + bad.stderr
    assert verify(rd).returncode == VERIFIED  # the refused run touched nothing
