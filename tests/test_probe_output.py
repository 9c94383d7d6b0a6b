"""parse_probe_output: a probe's own JSON error is the message, stderr stays in details."""

import json

import pytest

from signoff.fleet import ProbeError, parse_probe_output
from signoff.transport import CommandResult


def result(rc, stdout, stderr="", timeout=60):
    return CommandResult("python3 allreduce.py", rc, stdout, stderr, timeout)


def test_probe_json_error_is_the_message_and_stderr_is_kept():
    doc = {"probe": "allreduce", "error": "OSError: Cannot assign requested address"}
    r = result(1, json.dumps(doc) + "\n", "signoff-event started node 0\n")
    with pytest.raises(ProbeError) as e:
        parse_probe_output("lab2", "allreduce", r)
    assert str(e.value) == ("lab2: probe allreduce failed (exit 1): "
                            "OSError: Cannot assign requested address")
    assert e.value.stderr == "signoff-event started node 0"


def test_probe_without_a_document_shows_stderr_tail():
    r = result(2, "", "Traceback (most recent call last):\n  x\n  ...\nSyntaxError: bad\n")
    with pytest.raises(ProbeError) as e:
        parse_probe_output("lab1", "netinfo", r)
    assert str(e.value) == "lab1: probe netinfo failed (exit 2):   x |   ... | SyntaxError: bad"
    assert e.value.stderr.endswith("SyntaxError: bad")


def test_probe_timeout_keeps_stderr():
    with pytest.raises(ProbeError) as e:
        parse_probe_output("lab1", "soak", result(124, "", "sample 1\nsample 2\n", timeout=30))
    assert "overran its 30 s timeout" in str(e.value) and e.value.stderr == "sample 1\nsample 2"


def test_probe_ok_returns_its_document():
    assert parse_probe_output("lab1", "netinfo", result(0, 'noise\n{"probe": "netinfo"}\n')) == {
        "probe": "netinfo"}
