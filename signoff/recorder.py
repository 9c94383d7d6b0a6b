"""Every check's status (PASS, FAIL, ERROR, N.A., UNSEEN, NOT RUN) and the run's outputs: results.json,
junit.xml, report.md, the HTML report's sections, the terminal's signoff section and the exit code."""

from __future__ import annotations

import contextlib
import json
import shlex
from collections import Counter
from pathlib import Path

import pytest

from signoff import baseline, junit, pytest_adapter, report, rerun, retry, safefile, sheet, unseen
from signoff.check import NA_PREFIX
from signoff.fixtures import parametrized
from signoff.printable import printable
from signoff.render import render
from signoff.report import FOLDED
from signoff.report import status_class as report_status_class
from signoff.results import STATUSES, not_reported, split_nodeid, verdict_text, worse
from signoff.state import OUR_ERRORS, ROOT, STATE, State
from signoff.terminal import ROW


def _status(rep, call, unseen_error: bool = False) -> tuple[str, str]:
    if rep.passed:
        return "PASS", ""
    if rep.skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason.removeprefix("Skipped: ")
        exc = call.excinfo.value if call.excinfo is not None else None
        if isinstance(exc, unseen.CannotShow):  # ours: its ask and why, never a skip's text alone
            return ("ERROR", unseen.error_message(exc.ask, exc.why)) if unseen_error \
                else (unseen.STATUS, reason)
        return ("N.A." if reason.startswith(NA_PREFIX) else "NOT RUN"), reason
    exc = call.excinfo
    # an explicit judgement (assert / pytest.fail), also from a fixture, is a FAIL
    if exc.errisinstance((AssertionError, pytest.fail.Exception)):
        return "FAIL", str(exc.value)
    return "ERROR", str(exc.value) if exc.errisinstance(OUR_ERRORS) else unexpected(exc)


def unexpected(exc) -> str:
    """An exception signoff did not raise on purpose: where in signoff it came from, and the two
    things it can be (a host's document of a shape no probe of ours prints, e.g. a hostile host's;
    or a bug of ours), so the reader knows whom to ask."""
    tops = (Path(__file__).resolve().parent.parent, ROOT)  # signoff/ and the sheet's acceptance/
    where = next((f"{p.relative_to(top)}:{e.lineno + 1}" for e in reversed(exc.traceback)
                  for top in tops for p in [Path(str(e.path))]
                  if p.is_relative_to(top / "signoff") or p.is_relative_to(top / "acceptance")), "")
    return (f"{exc.exconly()}{f' (at {where})' if where else ''}: signoff could not judge this host's "
            f"documents (a shape its probes never print, or a bug in signoff: report it with results.json)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """A check of a host that did not answer at fleet start ERRORs with that host's own cause
    (DNS, refused, auth, its lock), whatever fixture failed first: pytest sets the session's
    fixtures up before the check's `host`, so a profile that --profile auto could not pick
    from the hosts that answered would otherwise speak for an unreachable host."""
    try:
        return (yield)
    except pytest.exit.Exception:  # an Exception too: the run stopping (no host answered)
        raise
    except Exception as exc:
        own = _own_cause(item)
        if own is None or own is exc:
            raise
        raise own from None


def _own_cause(item) -> Exception | None:
    """What the fleet's start raised for this check's host (None: it answered, or no host)."""
    state = item.config.stash.get(STATE, None)
    spec = getattr(item, "callspec", None)
    name = spec.params.get("host") if spec else None
    if state is None or state.fleet is None or name not in state.fleet.sessions:
        return None
    got = state.fleet.all_facts().get(name)
    return got if isinstance(got, Exception) else None


PHASES = pytest.StashKey[tuple]()
UNSEEN = pytest.StashKey[dict]()  # a check's cannot_show(): its ask and why


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    rep = (yield).get_result()
    status, said = _status(rep, call, bool(item.config.getoption("unseen_error", False)))
    if call.excinfo is not None and isinstance(call.excinfo.value, unseen.CannotShow):
        # what to ask the provider for, kept in the record (results.json: ask, why)
        exc = call.excinfo.value
        item.stash[UNSEEN] = {"ask": printable(exc.ask), "why": printable(exc.why)}
    # where a host's text (a probe's stderr, a process name) enters the check's message: every
    # output (terminal, report.md, report.html, junit, results.json) says its controls as escapes
    # (a line break too, where a line is written: signoff's terminal section, report.md)
    message = printable(said, lines=True)
    exc = call.excinfo.value if call.excinfo is not None else None
    tries, stderr = getattr(exc, "attempts", None), getattr(exc, "stderr", None)
    if (tries or stderr) and not any(k == "signoff" for k, _ in item.user_properties):
        # what broke keeps the figures measured before it and its probe's own last words
        kept = ("signoff", {"measured": None, "expected": "", "unit": "", "source": "", "details": {
            **({"attempts": tries, "spread_pct": retry.spread_pct(tries)} if tries else {}),
            **({"stderr": stderr[-4000:]} if stderr else {})}})
        item.user_properties.append(kept)
        rep.user_properties.append(kept)
    if call.excinfo is not None and (call.excinfo.errisinstance(OUR_ERRORS)
                                     or (rep.failed and message != said)):
        rep.longrepr = printable(said)  # the cause, not a traceback through our plumbing (or a host's bytes)
    elif rep.skipped and isinstance(rep.longrepr, tuple):  # (path, line, reason): -rs and report.html
        rep.longrepr = (*rep.longrepr[:2], printable(rep.longrepr[2]))
    # The worst phase is the check's status, stated once, on the teardown report: a status
    # per phase let JUnit consumers read the (passing) teardown's as the check's.
    prev = item.stash.get(PHASES, None)
    if prev is None or worse(prev[0], status) != prev[0]:
        if prev and prev[0] != "PASS":  # e.g. a FAIL, then a teardown ERROR: keep both reasons
            message = f"{message} (before that, {prev[0]}: {prev[1]})"
        item.stash[PHASES] = (status, message)
    if rep.when == "teardown":
        rep.user_properties.append(("signoff_status", list(item.stash[PHASES])))
        if UNSEEN in item.stash:
            rep.user_properties.append(("signoff_unseen", item.stash[UNSEEN]))
        rep.signoff_status = item.stash[PHASES][0]  # pytest's letter, word and count (Recorder)


def html_duration(seconds: float) -> str:
    """pytest-html's own duration text (its _format_duration): 350 ms, 00:01:05."""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    s = int(seconds)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Recorder:
    """Controller-side: turns reports into results.json records and report sections.
    Registered only on the controller (never on xdist workers) of an acceptance run."""

    def __init__(self, state: State, config):
        self.state, self.config = state, config
        self.selected: list[str] = []
        self.deselected = 0
        self.final: dict[str, str] = {}  # nodeid -> status, for the HTML rows
        self.unseen: dict[str, dict] = {}  # nodeid -> a cannot_show()'s ask and why
        self.took: dict[str, float] = {}  # nodeid -> seconds of all its phases, for the HTML rows
        self.local = {h.name: h.local for h in state.inventory.hosts}
        self.outcomes: dict[str, list] = {}  # pytest's own categories of the reports: see _lend
        self.summing = False  # pytest's closing sections are being written (pytest_report_teststatus)
        self.report_failed: list[str] = []  # what of the reports could not be written (failed())
        self.finished = False  # our sessionfinish wrote results.json and set the exit code
        self.html_written = True  # pytest-html wrote report.html (pytest_sessionfinish_said)

    def launcher(self, host: str) -> str:
        """What ran this check's host commands (the report's methodology says it per check)."""
        if self.state.job:
            return "srun"
        return "local" if self.local.get(host, all(self.local.values())) else "ssh"

    def pytest_report_header(self, config):
        meta = self.state.results.doc["meta"]
        return [f"signoff: {report.probe_env_text(meta)}"] if meta.get("probe_env") else []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        """A check that raised our own error (a host's cause, a profile's gap) is reported with
        that message alone: pytest's traceback of it would show our plumbing, and costs a parse
        of the source per check (~50 ms: minutes on 1,000 hosts that ERROR alike)."""
        if call.excinfo is None or not call.excinfo.errisinstance(OUR_ERRORS):
            return None
        rep = pytest.TestReport.from_item_and_call(item, pytest.CallInfo.from_call(lambda: None, call.when))
        rep.outcome, rep.longrepr = "failed", str(call.excinfo.value)
        rep.duration, rep.start, rep.stop = call.duration, call.start, call.stop
        return rep

    # pytest's progress letter, -v word and closing count of a check, in signoff's statuses
    LETTERS = {"PASS": (".", "green"), "FAIL": ("F", "red"), "ERROR": ("E", "red"),
               "N.A.": ("-", "yellow"), "UNSEEN": ("u", "yellow"), "NOT RUN": ("n", "yellow")}

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report, config):
        """A check is counted once, on its teardown report, with its status (the worst phase's):
        pytest counts phases by its own outcomes, so an ERROR read "failed" (or "error" plus
        "passed"), N.A. and NOT RUN "skipped". Its -r lines (self.summing) name the status too."""
        if not isinstance(report, pytest.TestReport):
            return None
        if self.summing:
            status = self.final.get(report.nodeid)
            if status is None:  # a check cut short before its teardown: pytest's own word
                return None
        elif (status := getattr(report, "signoff_status", None)) is None:
            return "", "", ""  # setup and call: the teardown report speaks for the check
        letter, colour = self.LETTERS[status]
        return status, letter, (status, {colour: True})

    def pytest_deselected(self, items):
        self.deselected += len(items)

    def pytest_collection_finish(self, session):
        self.selected = [i.nodeid for i in session.items]
        self.state.results.select(self.selected)  # a rebuild after SIGKILL marks the rest NOT RUN

    def stopped(self, messages: dict[str, str]) -> None:
        """Checks that will not run because the run stops before them (no host answered):
        each recorded ERROR with why, its host's own cause, never NOT RUN without one."""
        for nid, message in messages.items():
            criterion, host = split_nodeid(nid)
            self.state.results.add({"test": nid, "criterion": criterion, "host": host, "status": "ERROR",
                                    "launcher": self.launcher(host), "message": printable(message),
                                    "duration_s": 0.0})

    def partial(self, records: list[dict]) -> str | None:
        """Why this run is not the whole sign-off sheet, if it is not: every check of
        acceptance/ for every host it applies to must have been judged, whatever the flags."""
        cols = {f: [i for _, i in cases] for f, cases in parametrized(self.config).items()}
        judged = {(r["criterion"], r["host"]) for r in records}
        missing = [e for e in sheet.expected(ROOT / "acceptance", cols) if e not in judged]
        if not missing:
            return None
        self.state.results.set_meta(not_judged=[f"{c}[{h}]" for c, h in missing])
        if not self.selected and self.deselected:  # not 49 checks named: what left them all out
            return f"{self.selection()} matched no check of the sign-off sheet ({self.deselected} deselected)"
        checks = list(dict.fromkeys(c for c, _ in missing))
        return (f"{len(missing)} checks of the sign-off sheet not judged ("
                + ", ".join(checks[:8]) + (f" and {len(checks) - 8} more" if len(checks) > 8 else "")
                + ")" + (f"; {self.deselected} deselected" if self.deselected else ""))

    def carry(self) -> None:
        """A rerun's verdict is the whole sheet's (signoff/rerun.py carry()): the earlier run's
        records of this run's hosts that it did not measure again, and their hosts' facts."""
        st = self.state
        ids = {i for cases in parametrized(self.config).values() for _, i in cases}
        kept, facts, said = rerun.carry(st.rerun, st.results.doc, ids)
        for name, f in facts.items():
            st.results.set_host(name, f)
        for r in kept:
            st.results.add(r)
        st.results.set_meta(rerun={**rerun.meta(st.rerun), "carried": len(kept), "merge": said})

    def selection(self) -> str:
        """The options that deselect checks, as given: -k 'nosuch', -m 'slow'."""
        given = [f"{flag} {shlex.quote(v)}" for flag, v in (("-k", self.config.option.keyword),
                                                             ("-m", self.config.option.markexpr),
                                                             ("--rerun", (self.state.rerun or {}).get("dir")))
                 if v]
        return " and ".join(given) or "the selection"

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report):
        row = self.config.stash.get(ROW, None)
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if row is not None and tr is not None and tr.verbosity <= 0:
            # our lines (a measuring phase's progress) broke pytest's row of letters: its file's
            # name again, so the next "." is not an orphan line (lines said together stay so)
            del self.config.stash[ROW]
            pytest_adapter.resume_row(tr, row)
        st, nid = self.state, report.nodeid
        kind = (("error" if report.failed else "skipped" if report.skipped else "")
                if report.when in ("setup", "teardown") else report.outcome)  # as _pytest.runner's
        if kind:
            self.outcomes.setdefault(kind, []).append(report)
        st.duration[nid] = st.duration.get(nid, 0.0) + (report.duration or 0.0)
        for key, val in report.user_properties:
            if key == "signoff_status":
                st.status[nid], st.messages[nid] = val
            elif key == "signoff":
                st.measured[nid] = val
            elif key == "signoff_unseen":
                self.unseen[nid] = val
        if report.when == "teardown":
            criterion, host = split_nodeid(nid)
            self.final[nid] = st.status.pop(nid, "NOT RUN")
            self.took[nid] = round(st.duration[nid], 3)  # as results.json says it
            st.results.add({"test": nid, "criterion": criterion, "host": host,
                            "status": self.final[nid], "launcher": self.launcher(host),
                            "message": st.messages.pop(nid, ""),
                            "duration_s": round(st.duration.pop(nid), 3),
                            **st.measured.pop(nid, {}),
                            **self.unseen.pop(nid, {}),  # UNSEEN's ask and why (docs/outputs.md)
                            # a rerun's records beside the earlier run's: each says whose it is
                            **({"run": st.run_id} if st.rerun else {})})

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        st = self.state
        for f in sorted((st.report_dir / "hosts").glob("*.json")):  # facts from xdist workers
            if f.stem not in st.results.doc["hosts"]:
                st.results.set_host(f.stem, json.loads(f.read_text()))
        if st.slurm:  # on Ctrl-C before the fleet's teardown: the steps so far
            st.results.set_meta(launcher=st.slurm.meta())
        # a crashed worker or a second Ctrl-C: never silently absent
        for rec in not_reported(st.results.doc["results"], self.selected,
                                "the check did not report a result"):
            st.results.add({**rec, "run": st.run_id} if st.rerun else rec)
        if st.rerun:  # the whole sheet: the earlier run's results where this one measured none
            self.carry()
        if st.base is not None:
            where = report.shown_path(Path(self.config.getoption("baseline")).resolve().parent)
            name = f"run {(st.base.get('meta') or {}).get('run')} ({where})"
            tol = baseline.tolerances(st.tolerance, st.profile)
            st.results.set_meta(baseline=baseline.compare(st.results.doc, st.base, tol, name))
        # a crash (pytest's internal error) is no more a sign-off than a Ctrl-C
        cut = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        st.results.finish(interrupted=cut or st.interrupts > 0,
                          partial=self.partial(st.results.doc["results"]),
                          allow_partial=self.config.getoption("partial"),
                          fail_on_regression=self.config.getoption("fail_on_regression"),
                          usage_error=exitstatus == pytest.ExitCode.USAGE_ERROR)  # e.g. a bad -k
        doc, rd = st.results.doc, st.report_dir
        for name, write in (("junit.xml", lambda: junit.write(rd / "junit.xml", doc)),
                            ("report.md", lambda: safefile.write(rd / "report.md", report.markdown(doc))),
                            # the hosts to exclude or drain
                            (f"{report.EXCLUDE_FILE} and {report.DRAIN_FILE}",
                             lambda: report.write_exclude(rd, doc))):
            try:
                write()
            except Exception as exc:  # one writer's failure costs neither the verdict nor the other files
                self.failed(f"{name} could not be written: {type(exc).__name__}: {exc}")
        # the exit code is the verdict's (README: Exit codes), the one results.json and junit.xml
        # state: pytest's own says 1 for an ERROR, 0 for a run of N.A. checks, 2 for a Ctrl-C
        session.exitstatus = st.results.doc["meta"]["exit_code"]
        self.finished = True

    @pytest.hookimpl(wrapper=True, trylast=True, specname="pytest_sessionfinish")
    def pytest_sessionfinish_said(self, session, exitstatus):
        """pytest-html writes report.html in its own sessionfinish, after ours: where that fails (a
        path it cannot write, a part that raised), the failure is said (the terminal, results.json)
        and the verdict, its exit code and the terminal's summary stand (its traceback used to end
        the run before them, exit 1 whatever results.json said)."""
        try:
            return (yield)
        except pytest.exit.Exception:
            raise
        except Exception as exc:
            if not self.finished:  # our own sessionfinish broke: no verdict to keep, nothing to hide
                raise
            self.failed(f"report.html could not be written: {type(exc).__name__}: {exc}")
            self.html_written = False
            for plugin in self.config.pluginmanager.get_plugins():  # its "Generated html report" line
                if type(plugin).__module__.startswith("pytest_html.") and hasattr(plugin, "_generate_report"):
                    self.config.pluginmanager.unregister(plugin)
            session.exitstatus = self.state.results.doc["meta"]["exit_code"]
            return None

    def failed(self, line: str) -> None:
        """A report file, or a part of report.html, that could not be written: said on the terminal
        (section()) and in results.json (meta.report_failed); the verdict and the exit code stand."""
        self.report_failed.append(printable(line))
        self.state.results.set_meta(report_failed=list(self.report_failed))
        try:
            self.state.results.write()
        except OSError:  # results.json's own failure: the terminal still says this one
            pass

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        # --junitxml PATH: ours replaces pytest's (written before), so both files agree.
        if config.option.xmlpath:
            junit.write(Path(config.option.xmlpath), self.state.results.doc)

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells):
        cells.insert(1, _cell(None, "Status"))
        if cells and "Links" in str(cells[-1]):  # no check attaches a link: an empty column
            cells.pop()

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report, cells):
        # Our status (ERROR, N.A., NOT RUN) in a column of its own: pytest-html's result column
        # (hidden, report.HIDE_PYTEST) must keep pytest's outcome, which its row filter reads: a
        # row whose outcome it does not know is never shown.
        status = self.final.get(report.nodeid, "")
        if status in FOLDED and self.folded():  # in the summary's counts and distributions
            del cells[:]  # pytest-html leaves out a row without cells
        elif cells:
            # pytest-html names a check that ended in its setup "<id>::setup" and times that row by
            # the setup alone: one check is one row, named by its id and timed by all its phases
            # (its setup holds the measurement)
            for i, cell in enumerate(cells):
                if 'class="col-testId"' in cell:
                    cells[i] = _cell("col-testId", report.nodeid)
                elif 'class="col-duration"' in cell and report.nodeid in self.took:
                    cells[i] = _cell("col-duration", html_duration(self.took[report.nodeid]))
            cells.insert(1, _cell(f"col-signoff {report_status_class(status)}", status))
            if "col-links" in str(cells[-1]):
                cells.pop()

    def folded(self) -> bool:
        """Whether PASS and N.A. rows are left out of the HTML table: a run of more hosts than
        the report's host matrix shows (each row ~0.7 KB: 1,000 hosts x the sheet ~34 MB)."""
        return len(self.state.inventory.hosts) > report.MATRIX_MAX_HOSTS

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_html(self, report, data):
        # A skip's log is pytest's (path, line, reason) tuple: the reason is what a reader needs.
        if report.skipped and isinstance(report.longrepr, tuple):
            data[:] = [str(render("templates/text.jinja2",
                                  text=report.longrepr[2].removeprefix("Skipped: ")))]

    @pytest.hookimpl(optionalhook=True)
    def pytest_metadata(self, metadata, config):
        metadata.clear()  # pytest-html's environment table: the controller's plugins, no one's business

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix, summary, postfix, session):
        """report.html's parts, each drawn on its own: a part that fails (a family's section, a
        figure of a host's strings) is that part's note on the page, said on the terminal and in
        results.json; the cover's verdict stands whatever failed."""
        doc, prof = self.state.results.doc, self.state.profile
        verdict = doc["verdict"] or "INCOMPLETE"
        badge = report_status_class(verdict if verdict in ("PASS", "ERROR") else "FAIL")
        prefix.append(self.part("the cover", lambda: report.cover(verdict, doc),
                                lambda err: render("templates/cover_failed.jinja2", verdict=verdict,
                                                   cls=badge, error=err)))
        prefix.append(str(report.HIDE_PYTEST))
        prefix.append(self.part("the summary", lambda: report.summary_table(doc["results"])))
        if self.folded():
            prefix.append(self.part("the note on folded rows", lambda: report.folded_note(doc["results"])))
        prefix.append(self.part("the notes on the hosts", lambda: report.notes_section(doc)))
        prefix.append(self.part("the figures measured again", lambda: report.retried_section(doc["results"])))
        # each family's own, in the families' order (pluggy keeps its implementations as registered)
        hook = self.config.hook
        for impl in hook.pytest_signoff_report_sections.get_hookimpls():
            prefix.append(self.part(f"the {_family(impl)} section", lambda i=impl: _section(i, doc, prof)))
        methods = []
        for impl in hook.pytest_signoff_methodology.get_hookimpls():
            got = self.part(f"the {_family(impl)} methodology",
                            lambda i=impl: _call(i, doc=doc, profile=prof), lambda err: None)
            if got is not None:
                methods.append(got)
        prefix.append(self.part("the methodology", lambda: report.methodology(doc, prof, methods)))
        prefix.append(self.part("the hardware inventory", lambda: report.inventory_section(doc)))

    def part(self, what: str, draw, instead=None):
        """draw() (a fragment, or a family's methodology rows); if it raises: the failure said,
        and instead(error) (by default the page's note of it) in its place."""
        try:
            got = draw()
        except Exception as exc:  # one part's failure costs neither the page nor the verdict
            err = f"{type(exc).__name__}: {exc}"
            self.failed(f"report.html: {what} could not be drawn: {err}")
            got = instead(err) if instead else render("templates/failed.jinja2",
                                                      what=what[:1].upper() + what[1:], error=err)
        return str(got) if isinstance(got, str) else got  # pytest-html's list: plain str (Markup is ours)

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_report_title(self, report):
        report.title = "GPU cluster sign-off"

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        with self._lend(terminalreporter):
            res = yield  # pytest's --tb sections and -r lines, other plugins' summaries
        self.section(terminalreporter)  # last: right above pytest's closing counts
        return res

    @contextlib.contextmanager
    def _lend(self, tr):
        """pytest's --tb sections and -r lines read its own categories (failed, error, skipped,
        passed), left empty by pytest_report_teststatus: lent to them while they are written, so
        --tb and -r given on the command line still work; the closing counts are signoff's."""
        saved = {k: tr.stats.get(k) for k in self.outcomes}
        for k, reps in self.outcomes.items():
            tr.stats[k] = [*(saved[k] or []), *reps]
        self.summing = True
        try:
            yield
        finally:
            self.summing = False
            for k, was in saved.items():
                if was is None:
                    tr.stats.pop(k, None)
                else:
                    tr.stats[k] = was
            for s in STATUSES:  # the closing counts in this order, not in the order first seen
                if s in tr.stats:
                    tr.stats[s] = tr.stats.pop(s)

    def section(self, tr) -> None:
        tr = _Printable(tr)  # hosts' text in any line (notes, process names, versions) as escapes
        doc = self.state.results.doc
        meta = doc["meta"]
        tr.section("signoff")
        counts = Counter(r["status"] for r in doc["results"])
        tr.write_line(f"verdict: {verdict_text(doc['verdict'])}{unseen.verdict_suffix(doc)}  "
                      f"(profile {doc['meta'].get('profile')}; "
                      + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no check judged") + ")")
        if meta.get("profile_pick"):
            tr.write_line(f"  profile {meta['profile_pick']}")
        if meta.get("rerun"):
            tr.write_line(f"  {report.rerun_text(meta)}")
        if doc["meta"].get("probe_env"):
            tr.write_line(f"  {report.probe_env_text(doc['meta'])}", yellow=True)
        if meta.get("partial"):
            tr.write_line(f"  {report.partial_text(meta)}", yellow=True)
        if meta.get("excluded"):  # hosts of the inventory or allocation this verdict says nothing of
            n = len(meta["excluded"])
            tr.write_line(f"  not checked: {n} host{'s' * (n != 1)}, the verdict is of the others only:",
                          yellow=True)
            for line in report.excluded_lines(meta):
                tr.write_line(f"    {line}", yellow=True)
        # one line per status, checks and cause, hosts folded: as the cover (a fault on 300
        # hosts is one line, not 300); the rest in report.md
        groups = report.problem_groups(doc["results"])
        for g in groups[:report.COVER_LINES]:
            who, what, cause = report.problem_line(g)
            tr.write_line(f"  {g['status']:5} {g['criterion']} on {who}: {what}"
                          + (f"; likely cause: {cause}" if cause else ""))
        if len(groups) > report.COVER_LINES:
            tr.write_line(f"  and {len(groups) - report.COVER_LINES} more: {self.state.report_dir}/report.md")
        for line in unseen.lines(doc):  # what to ask the provider for (signoff/unseen.py)
            tr.write_line(f"  {line}", yellow=True)
        self.regressions(tr, doc)
        for line in report.host_notes(doc):
            tr.write_line(f"  {line}", yellow=True)
        for line in report.note_lines(doc["results"]):  # what a verdict stands on (Check.note)
            tr.write_line(f"  note: {line}")
        tr.write_line(f"exit code {meta.get('exit_code')}: {meta.get('exit_reason')}",
                      **({"green": True} if meta.get("exit_code") == 0 else {"red": True}))
        for line in self.report_failed:  # the verdict above stands; what of the reports did not
            tr.write_line(f"  {line}", red=True)
        html = getattr(self.config.option, "htmlpath", None)  # none: pytest-html not loaded
        tr.write_line((f"report: {html}  " if html and self.html_written else "")
                      + f"results: {self.state.report_dir}/results.json")

    def regressions(self, tr, doc: dict) -> None:
        """--baseline in the terminal: the regressions, worst first (the rest in report.md), the
        baseline's warnings (another class, profile, suite version, an incomplete run), the hosts
        that came or went, and whether they fail the run (--fail-on-regression)."""
        base = doc["meta"].get("baseline")
        if not base:
            return
        regs = base.get("regressions") or []
        tr.write_line(f"compared with {base.get('name')} ({report.tolerance_text(base)}): "
                      + (f"{len(regs)} regression{'s' * (len(regs) != 1)}" if regs else "no regression"))
        for x in regs[:report.COVER_LINES]:
            tr.write_line(f"  REGRESSED {x['criterion']} on {x['host']}: {report.regression_text(x)}")
        if len(regs) > report.COVER_LINES:
            tr.write_line(f"  and {len(regs) - report.COVER_LINES} more: {self.state.report_dir}/report.md")
        for line in report.baseline_notes(base):
            tr.write_line(f"  {line}", yellow=True)
        for kind in ("appeared", "vanished"):
            if base.get(kind):
                tr.write_line(f"  hosts {kind} since the baseline: {report.hosts_text(base[kind])}")
        if report.failed_on_regression(doc):
            tr.write_line(f"  {report.failed_on_regression(doc)}", red=True)


def _cell(cls: str | None, text: str) -> str:
    """A cell of pytest-html's results table (a header cell where cls is None)."""
    return str(render("templates/cell.jinja2", cls=cls, text=text))


def _family(impl) -> str:
    """A family's name from its plugin's ('signoff.network.plugin': network), else the plugin's."""
    return impl.plugin_name.removeprefix("signoff.").removesuffix(".plugin")


def _call(impl, **kw):
    """One plugin's implementation of a hook, alone (pluggy calls all at once: one raising would
    cost every family's part)."""
    return impl.function(*(kw[a] for a in impl.argnames))


def _section(impl, doc: dict, profile):
    """A family's section, in its page frame (.so-section); '' where it has none."""
    body = _call(impl, doc=doc, profile=profile)
    return render("templates/section.jinja2", body=body) if body else ""


class _Printable:
    """The terminal as the signoff section writes to it: every line printable (signoff.printable),
    so no host's bytes move the cursor, erase a line or colour a verdict there."""

    def __init__(self, tr):
        self.tr = tr

    def section(self, *args, **kw) -> None:
        self.tr.section(*args, **kw)

    def write_line(self, line: str, **markup) -> None:
        self.tr.write_line(printable(line), **markup)
