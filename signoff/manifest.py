"""A report no one can edit unseen (issue 54 item 3): MANIFEST.sha256, the SHA-256 of every file of
a report directory, written last (after report.html, results.json, junit.xml, signoff.prom, each
family's files), and, where the operator names an SSH key (--sign-key), its signature
MANIFEST.sha256.sig by `ssh-keygen -Y sign -n signoff-report`. `signoff verify DIR` says what
changed since: each file changed, missing or added, and whether the signature holds.

The manifest is `sha256sum`'s own format (`sha256sum -c MANIFEST.sha256` checks it too; its
`# ` lines, which sha256sum skips, say the run, when, the suite version and the signing key), so
a provider needs no signoff to check it: docs/outputs.md shows the commands."""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from signoff import InputError, safefile
from signoff.printable import printable

NAME = "MANIFEST.sha256"
SIG = NAME + ".sig"
NAMESPACE = "signoff-report"  # ssh-keygen -Y's: a signature made for another use never verifies here
SSH_KEYGEN_S = 30  # a signature takes milliseconds; an agent that hangs must not hold the run

# `signoff verify`'s exit codes (README: Exit codes): 4 is the usage error, as every command's;
# 10: a good signature by a key no list was given to check (anyone can re-sign an edited report)
VERIFIED, CHANGED, USAGE, BAD_SIGNATURE, UNSIGNED, SIGNER_UNCHECKED = 0, 1, 4, 8, 9, 10
FINGERPRINT = re.compile(r"\b(SHA256:[A-Za-z0-9+/]{43})\b")

_LINE = re.compile(r"(\\?)([0-9a-f]{64}) [ *](.+)")


def _keygen() -> str:
    found = shutil.which("ssh-keygen")
    if not found:
        raise InputError("ssh-keygen not found on PATH: install OpenSSH's client (openssh-client), "
                         "8.2 or later, to sign or verify a report")
    return found


def _ssh_keygen(args: list[str], data: bytes) -> subprocess.CompletedProcess:
    """ssh-keygen with `data` on its stdin, in a session of its own: it has no terminal to ask a
    passphrase on (a key with one is used through ssh-agent), so a run never stops at a prompt."""
    try:
        return subprocess.run([_keygen(), *args], input=data, capture_output=True, timeout=SSH_KEYGEN_S,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        said = f"ssh-keygen: no answer in {SSH_KEYGEN_S} s".encode()
        return subprocess.CompletedProcess(args, 124, b"", said)


def _said(p: subprocess.CompletedProcess) -> str:
    """ssh-keygen's own words, one line, inert (a signature file is anyone's bytes)."""
    text = (p.stderr or b"").decode("utf-8", "replace") + (p.stdout or b"").decode("utf-8", "replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("Signing data")]
    return printable("; ".join(lines)[:500]) or f"exit {p.returncode}"


def sign(data: bytes, key: str) -> bytes:
    """The SSH signature of `data` (ssh-keygen -Y sign on stdin: it writes no file itself)."""
    p = _ssh_keygen(["-Y", "sign", "-f", os.path.expanduser(key), "-n", NAMESPACE], data)
    if p.returncode != 0 or b"BEGIN SSH SIGNATURE" not in p.stdout:
        raise InputError(f"--sign-key {key}: ssh-keygen could not sign with it: {_said(p)} (a key with "
                         f"a passphrase: add it to ssh-agent first, ssh-add {key})")
    return p.stdout


def fingerprint(key: str) -> str:
    p = _ssh_keygen(["-l", "-f", os.path.expanduser(key)], b"")
    words = p.stdout.decode("utf-8", "replace").split()
    return printable(words[1]) if p.returncode == 0 and len(words) > 1 else "unknown"


def check_key(key: str) -> str:
    """--sign-key judged before anything runs (exit 4): a readable file ssh-keygen signs with.
    Returns its fingerprint."""
    if not key.strip():
        raise InputError("--sign-key is empty (an unset variable?): name an SSH private key or leave "
                         "--sign-key out")
    path = Path(os.path.expanduser(key))
    if not path.is_file():
        raise InputError(f"--sign-key {key}: no such file" if not path.exists() else
                         f"--sign-key {key}: not a file")
    if not os.access(path, os.R_OK):
        raise InputError(f"--sign-key {key}: not readable by this user")
    sign(b"signoff: --sign-key check\n", str(path))  # the run's own signing, on a line of ours
    return fingerprint(str(path))


def _escaped(rel: str) -> tuple[str, str]:
    """sha256sum's escape of a name: a backslash, line feed or carriage return in it make the
    line start with a backslash, each written as \\\\, \\n, \\r."""
    if not any(c in rel for c in "\\\n\r"):
        return "", rel
    return "\\", rel.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def _unescaped(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), text)


def _walk(rd: Path, top: Path | None = None) -> dict[str, str]:
    """Every entry of the report directory but directories: relative path -> 'file', or what
    else it is (a symbolic link, a FIFO: never followed, never read). The manifest and its
    signature at the top are not their own contents."""
    top = top or rd
    out = {}
    with os.scandir(rd) as it:
        for e in it:
            rel = Path(e.path).relative_to(top).as_posix()
            if e.is_dir(follow_symlinks=False):
                out.update(_walk(Path(e.path), top))
            elif rel not in (NAME, SIG):
                out[rel] = "file" if e.is_file(follow_symlinks=False) else _kind(e.path)
    return out


def _kind(path: str) -> str:
    mode = os.lstat(path).st_mode
    return ("a symbolic link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def digest(path: Path) -> str:
    """SHA-256 of a regular file, read without following a link at its name."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _readable_digest(path: Path) -> str:
    """digest(path), or why it cannot be read (gone under the reader, no permission)."""
    try:
        return digest(path)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"


def _header(key: str, value) -> str:
    return f"# {key}: {printable(value)}"  # one line whatever a value holds (printable escapes \n)


def text(rd: Path, meta: dict, signed_by: str | None = None) -> str:
    """The manifest of `rd` as it is now: the header, then one `sha256sum` line per file."""
    files = sorted(rel for rel, kind in _walk(rd).items() if kind == "file")
    lines = [f"# signoff report manifest: sha256sum -c {NAME}, or signoff verify DIR",
             *(_header(k, meta[k]) for k in ("run", "verdict", "profile", "suite_version", "finished")
               if meta.get(k) is not None),
             _header("written", _now()),
             _header("files", len(files)),
             _header("signature", f"{SIG} (ssh-keygen -Y sign -n {NAMESPACE}, key {signed_by})"
                     if signed_by else "none (no --sign-key)")]
    for rel in files:
        mark, name = _escaped(rel)
        lines.append(f"{mark}{digest(rd / rel)}  {name}")
    return "\n".join(lines) + "\n"


def _now() -> str:
    from signoff.results import now
    return now()


def write(rd: Path, meta: dict, key: str | None = None) -> str:
    """MANIFEST.sha256 of `rd` (and with `key` its signature, MANIFEST.sha256.sig), each a new file
    renamed over its name (safefile). A signature of an earlier manifest (a rebuild without
    --sign-key) is removed: it no longer signs what is there. Returns the line to say."""
    rd = Path(rd)
    signed_by = fingerprint(key) if key else None
    body = text(rd, meta, signed_by).encode("utf-8")
    sig = sign(body, key) if key else None  # before the manifest lands: a failure leaves no half
    safefile.write(rd / NAME, body)
    count = sum(1 for ln in body.splitlines() if not ln.startswith(b"#"))
    if sig is not None:
        safefile.write(rd / SIG, sig)
        return f"{NAME}: {count} files, signed ({SIG}, key {signed_by})"
    if os.path.lexists(rd / SIG):
        os.unlink(rd / SIG)
        return f"{NAME}: {count} files; the earlier {SIG} removed (it signed other contents): unsigned"
    return f"{NAME}: {count} files"


def _read(rd: Path) -> tuple[dict, dict, list[str]]:
    """(header, path -> sha256, malformed lines) of rd's manifest."""
    header, files, bad = {}, {}, []
    raw = safefile.read_text(rd / NAME)
    for i, line in enumerate(raw.splitlines(), 1):
        if line.startswith("#"):
            k, sep, v = line[1:].strip().partition(": ")
            if sep:
                header.setdefault(k, v)
            continue
        if not line.strip():
            continue
        m = _LINE.fullmatch(line)
        rel = (_unescaped(m.group(3)) if m.group(1) else m.group(3)) if m else ""
        parts = rel.split("/")
        if not m or rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or rel in files:
            bad.append(f"line {i}: {line[:120]}")
            continue
        files[rel] = m.group(2)
    return header, files, bad


def verify(rd: Path, allowed_signers: str | None = None, identity: str | None = None,
           require_signature: bool = False) -> tuple[int, list[str]]:
    """(exit code, lines to print): what changed in `rd` since its manifest was written, and
    whether its signature holds. Every name in the lines is inert text (a file's name is
    anyone's bytes)."""
    rd = Path(rd)
    if not os.path.lexists(rd / NAME):
        return UNSIGNED, [f"{printable(rd)}: NO MANIFEST: {NAME} is missing: nothing to verify the files "
                          f"against (removed, or a report written before signoff wrote one)"]
    try:
        header, listed, bad = _read(rd)
    except (OSError, UnicodeDecodeError) as exc:
        return CHANGED, [f"{printable(rd)}: CHANGED: {NAME} cannot be read: {printable(exc)}"]
    now = _walk(rd)
    changed, lines = [], []
    for rel, want in listed.items():
        kind = now.get(rel)
        if kind is None:
            changed.append(f"missing: {rel}")
        elif kind != "file":
            changed.append(f"changed: {rel} (now {kind})")
        elif (got := _readable_digest(rd / rel)) != want:
            why = got if got.startswith("cannot") else "its SHA-256 is not the manifest's"
            changed.append(f"changed: {rel} ({why})")
    changed += [f"added: {rel}" + ("" if kind == "file" else f" ({kind})")
                for rel, kind in sorted(now.items()) if rel not in listed]
    changed += [f"{NAME} malformed: {b}" for b in bad]
    code, said = _signature(rd, header, allowed_signers, identity, require_signature)
    if code in (VERIFIED, SIGNER_UNCHECKED) and changed:
        code = CHANGED
    word = {VERIFIED: "VERIFIED", CHANGED: "CHANGED", BAD_SIGNATURE: "BAD SIGNATURE",
            UNSIGNED: "NOT SIGNED", SIGNER_UNCHECKED: "SIGNER NOT CHECKED"}[code]
    lines.append(f"{rd}: {word}" + (f": {len(listed)} files as the manifest lists them" if not changed
                                    else f": {len(changed)} difference(s) from the manifest"))
    lines += [f"  {c}" for c in changed]
    lines.append("  manifest: " + ", ".join(f"{k} {header[k]}" for k in ("run", "verdict", "written")
                                            if k in header) + f" ({NAME})")
    lines.append(f"  signature: {said}")
    return code, [printable(ln) for ln in lines]


def _signature(rd: Path, header: dict, allowed: str | None, identity: str | None,
               required: bool) -> tuple[int, str]:
    """(VERIFIED, SIGNER_UNCHECKED, BAD_SIGNATURE or UNSIGNED, what to say) of the manifest's
    signature: VERIFIED for a signature only with --allowed-signers verifying it."""
    asked = header.get("signature", "none").split(" ")[0] == SIG
    if not os.path.lexists(rd / SIG):
        if asked or allowed or required:
            why = "the manifest says the run signed it" if asked else \
                "--allowed-signers was given" if allowed else "--require-signature was given"
            return UNSIGNED, f"MISSING: no {SIG}, and {why}"
        return VERIFIED, ("none (the run named no --sign-key): integrity only, not proof: the manifest "
                          "shows changes made without rewriting it, not someone who rewrote it too")
    try:
        sig = Path(rd / SIG).read_bytes() if not (rd / SIG).is_symlink() else None
        data = (rd / NAME).read_bytes()
    except OSError as exc:
        return BAD_SIGNATURE, f"BAD: {SIG} cannot be read: {exc.strerror or exc}"
    if sig is None:
        return BAD_SIGNATURE, f"BAD: {SIG} is a symbolic link"
    with tempfile.TemporaryDirectory(prefix="signoff-verify-") as tmp:
        sigfile = Path(tmp) / "sig"
        sigfile.write_bytes(sig)
        if allowed:
            who = identity or _principal(allowed, sigfile)
            if who is None:
                return BAD_SIGNATURE, f"BAD: signed by a key that --allowed-signers {allowed} does not list"
            p = _ssh_keygen(["-Y", "verify", "-f", allowed, "-I", who, "-n", NAMESPACE, "-s", str(sigfile)],
                            data)
            if p.returncode != 0:
                return BAD_SIGNATURE, (f"BAD: not a good signature of {NAME} by {who} per --allowed-signers "
                                       f"{allowed}: {_said(p)}")
            return VERIFIED, f"good: {_said(p)} (--allowed-signers {allowed})"
        p = _ssh_keygen(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(sigfile)], data)
        if p.returncode != 0:
            return BAD_SIGNATURE, f"BAD: not a good signature of {NAME}: {_said(p)}"
        key = FINGERPRINT.search(_said(p))
        return SIGNER_UNCHECKED, (f"valid, but the signer was NOT checked against a list: signing key "
                                  f"{key.group(1) if key else 'unknown'} ({_said(p)}); anyone can sign an "
                                  f"edited report with a key of their own: compare that fingerprint with "
                                  f"the operator's, or pass --allowed-signers FILE")


def _principal(allowed: str, sigfile: Path) -> str | None:
    p = _ssh_keygen(["-Y", "find-principals", "-s", str(sigfile), "-f", allowed], b"")
    found = p.stdout.decode("utf-8", "replace").split()
    return found[0] if p.returncode == 0 and found else None


VERIFY_HELP = ("whether a report directory changed since its run: every file against "
               f"{NAME} (changed, missing, added) and its signature")


def add_arguments(ap: argparse.ArgumentParser) -> argparse.ArgumentParser:
    ap.add_argument("report_dir", metavar="REPORT_DIR", help="a run's report directory")
    ap.add_argument("--allowed-signers", metavar="FILE",
                    help="check the signer too: ssh-keygen's allowed_signers file (principal, then the "
                         "public key); requires a signature")
    ap.add_argument("--identity", metavar="PRINCIPAL",
                    help="with --allowed-signers: the signer expected (default: the principal the file "
                         "gives the signing key)")
    ap.add_argument("--require-signature", action="store_true",
                    help=f"an unsigned report fails (exit {UNSIGNED}), as with --allowed-signers")
    return ap


def run(args) -> int:
    """The exit code of `signoff verify` (docs/outputs.md): 0 untouched and its signature verified
    against --allowed-signers where there is one, 1 a file changed, missing or added, 8 a bad
    signature, 9 no manifest or no signature where one is asked for, 10 a good signature whose
    signer no list checked, 4 an option refused."""
    rd = Path(args.report_dir)
    if not rd.is_dir():
        raise InputError(f"signoff verify {args.report_dir}: not a directory")
    if args.identity and not args.allowed_signers:
        raise InputError("--identity without --allowed-signers: the principal is looked up in that file")
    if args.allowed_signers:
        f = Path(args.allowed_signers)
        if not f.is_file() or not os.access(f, os.R_OK):
            raise InputError(f"--allowed-signers {args.allowed_signers}: "
                             + ("not a readable file" if f.exists() else "no such file"))
    if os.path.lexists(rd / SIG):
        _keygen()  # said as an input error before any check
    try:
        code, lines = verify(rd, args.allowed_signers, args.identity, args.require_signature)
    except OSError as exc:  # a directory of it this user cannot list
        raise InputError(f"signoff verify {args.report_dir}: cannot read {exc.filename}: "
                         f"{exc.strerror or exc}") from None
    print("\n".join(lines))
    return code
