"""The storage family's options and its measuring fixture."""

from __future__ import annotations

import pytest

from signoff.storage import report
from signoff.storage.run import StorageRun, min_free


def pytest_addoption(parser):
    g = parser.getgroup("signoff")
    g.addoption("--storage-path", default=None,
                help="directory the storage checks read; test files go into .signoff-<run>-<host>/ "
                     "there and are removed at the end (default: the inventory's storage_path, "
                     "else the host's temp dir)")
    g.addoption("--storage-readonly", action="store_true", default=False,
                help="measure the files already in the storage path, writing nothing (the write "
                     "checks N.A.)")
    g.addoption("--storage-tool", choices=("auto", "fio", "builtin"), default="auto",
                help="storage reader and writer: fio where installed (auto), or the built-in one "
                     "(default auto)")
    g.addoption("--storage-min-free", default="10%",
                help="refuse to write test files that would leave less free on the filesystem "
                     "(percent or size, default 10%%)")


@pytest.hookimpl
def pytest_signoff_check_options(config, inventory, profile):
    min_free(config.getoption("storage_min_free"))  # one message before any host, not one per check


@pytest.fixture(scope="module")
def store(pytestconfig, fleet, profile):
    """The storage measurements of the module that asks (every host at once); its files are
    removed when that module ends, before the next family loads the hosts."""
    fleet.settle()  # no other family's probes beside the reads
    run = StorageRun(fleet, profile, pytestconfig.getoption("storage_path"),
                     pytestconfig.getoption("storage_readonly"), pytestconfig.getoption("storage_tool"),
                     pytestconfig.getoption("storage_min_free"))
    yield run
    run.close()


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    return report.storage_section(doc["results"], profile)


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    return report.methodology(doc, profile)
