"""The retry policy for noisy figures (bandwidth, throughput): a figure that misses its threshold
is measured again, up to the threshold's `attempts` in all; every attempt's figure is kept, the
best is judged, the spread is reported, and a FAIL says how many attempts it had. The attempts
must agree: a spread wider than the threshold's `max_spread` (default 10 %) FAILs as unstable,
naming every attempt, even when the best one clears the threshold, so a flapping link or a
GPU that throttles in one attempt is never retried into a PASS. A criterion opts in with
`"retry": True` in its family's CRITERIA; correctness, health, temperature and version checks
never do, so nothing wrong is ever measured again into a PASS."""

from __future__ import annotations

import contextvars

from signoff import InputError, cotenants, families, units

# A neighbour's job or a clock ramp costs one attempt, not the sign-off: best of 3 in all,
# bounded so that a truly slow host costs 3 measurements, never more than 5.
ATTEMPTS, MAX_ATTEMPTS = 3, 5
# A disturbed attempt is a few percent off; a part whose figure moves by more than a tenth
# between attempts minutes apart is not stable enough to sign off (signoff rule, README).
MAX_SPREAD = 0.10
KEYS = ("attempts", "max_spread")  # a retry criterion's own profile keys


def count(t) -> int:
    return t.extra.get("attempts", ATTEMPTS)


def check(extra: dict, where: str) -> None:
    n = extra.get("attempts", ATTEMPTS)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_ATTEMPTS:
        raise InputError(f"{where}.attempts: {n!r}: expected 1-{MAX_ATTEMPTS} (1: never measured again)")
    if "max_spread" in extra:
        try:
            v = units.parse_fraction(extra["max_spread"])
        except ValueError as exc:
            raise InputError(f"{where}.max_spread: {exc}") from None
        if v <= 0:
            raise InputError(f"{where}.max_spread: {extra['max_spread']!r}: expected above 0 (0 would fail "
                             f"any two attempts)")


def max_spread(t) -> float:
    """The widest spread of attempts still judged stable, in percent."""
    return 100 * (units.parse_fraction(t.extra["max_spread"]) if "max_spread" in t.extra else MAX_SPREAD)


def unstable(doc: dict, t, unit: str) -> str | None:
    """Why a measured-again figure is not stable (its attempts' spread above max_spread), else None."""
    spread, tries = doc.get("spread_pct"), doc.get("attempts") or []
    if not families.criteria()[t.criterion].get("retry") or len(tries) < 2 or not _number(spread) \
            or spread <= max_spread(t):
        return None
    return (f"unstable: {len(tries)} attempts gave {units.readable(tries)} {unit}, a spread of "
            f"{spread:g} % > max_spread {max_spread(t):g} % ({t.profile}): a flapping link, a GPU that "
            f"throttles in one attempt or a neighbour's load, never signed off on its best attempt")


def spread_pct(figures: list) -> float | None:
    vals = [f for f in figures if isinstance(f, (int, float))]
    top = max(vals, default=0)
    return round(100 * (top - min(vals)) / top, 1) if top else None


def measured(first, again, figure, t) -> list:
    """`first`, then `again()` while the attempts so far call for another (wants_more): every
    attempt's document. While `again()` runs, attempt() says which attempt it is and why."""
    tries = [first]
    while wants_more(tries, figure, t):
        token = _attempt.set(weigh([figure(d) for d in tries], t)[1])
        try:
            tries.append(again())
        except Exception as exc:  # the attempt that broke is the result: the earlier ones stay
            raise broke(exc, [figure(d) for d in tries]) from None
        finally:
            _attempt.reset(token)
    return tries


# The attempt being measured and why ("attempt 2 of 3: attempt 1 read ..."), for the progress
# line of the measurement that runs it (network/run.py Sweep); None at a first attempt.
_attempt: contextvars.ContextVar[str | None] = contextvars.ContextVar("attempt", default=None)


def attempt() -> str | None:
    return _attempt.get()


def weigh(figures: list, t) -> tuple[bool, str | None]:
    """Whether these attempts' figures (in order, the last one judged) call for another attempt,
    and why, in words: (True, 'attempt 2 of 3: attempt 1 read 9.6 GB/s, within 4 % of the floor
    10 GB/s') or (False, 'not measured again: ...'); (False, None) when the last one passed.

    A miss is measured again only where noise could explain it. Final: a figure farther from the
    floor than max_spread (the attempts must agree within it, so no later attempt could make a
    stable PASS of it: a slow link read again only costs its time), or two attempts or more whose
    spread is narrower than the best one's distance from the floor (the noise they show cannot
    bridge the miss). An unmeasurable figure counts as a miss that may be noise."""
    last, n, k = figures[-1], count(t), len(figures)
    if _ok(t, last):
        return False, None
    read = f"attempt {k}" if k == 1 else f"attempts 1-{k}"
    read += f" read {units.readable(figures)} {t.unit}"
    nums = [f for f in figures if _number(f)]
    bound = "floor" if t.op == "min" else "ceiling"
    limit = f"the {bound} {units.readable(t.value)} {t.unit}"
    if not _number(last):
        why = f"attempt {k} gave no figure to judge"
    else:
        worst = min(nums) if t.op == "min" else max(nums)
        best = max(nums) if t.op == "min" else min(nums)
        far, gap = distance(worst, t), distance(best, t)
        spread = spread_pct(nums)
        side = "below" if t.op == "min" else "above"
        if far is not None and far > max_spread(t):
            return False, (f"not measured again: {read}, {far:g} % {side} {limit}, beyond max_spread "
                           f"{max_spread(t):g} %: no attempt that agrees with it could pass")
        if len(nums) > 1 and spread is not None and gap is not None and spread < gap:
            return False, (f"not measured again: {read}, a spread of {spread:g} %, narrower than the best's "
                           f"{gap:g} % {side} {limit}: the miss is no noise")
        why = (f"{read}, within {gap:g} % of {limit}" if len(nums) == 1 else
               f"{read}, a spread of {spread:g} %, as wide as the best's {gap:g} % {side} {limit}: noise")
    if k >= n:
        return False, f"not measured again: {read}; its {n} attempt{'s' * (n > 1)} used"
    return True, f"attempt {k + 1} of {n}: {why}"


def distance(v, t) -> float | None:
    """How far figure v misses t's limit, in percent of the larger of the two (as spread_pct)."""
    if not _number(v) or not _number(t.value):
        return None
    top = max(abs(v), abs(t.value))
    return round(100 * abs(v - t.value) / top, 1) if top else None


def why(figures: list, t) -> list[str]:
    """Each decision of the retry policy over these attempts, in order: why each later attempt
    was measured, and why the last miss was not measured again (a record's details.retry)."""
    out = [weigh(figures[:i], t)[1] for i in range(1, len(figures))]
    final = weigh(figures, t)[1]
    return [*out, *([final] if final and final.startswith("not measured again") else [])]


def broke(exc: Exception, before: list) -> Exception:
    """`exc` (an attempt that broke) carrying the figures the attempts before it measured: its
    ERROR's details and the report keep them (`attempts`, the broken one as none)."""
    if before:
        exc.attempts = [*before, None]
    return exc


def wants_more(tries: list, figure, t) -> bool:
    """Whether these attempts call for another: the last missed, attempts remain and its miss
    may be noise (weigh()). For a family that measures many hosts' or pairs' next attempts
    together, round by round."""
    return weigh([figure(d) for d in tries], t)[0]


def best(tries: list, figure, t):
    """(the best attempt's document, every attempt's figure in order)."""
    figures = [figure(d) for d in tries]
    sign = -1 if t.op == "max" else 1
    i = max(range(len(tries)), key=lambda i: sign * figures[i] if _number(figures[i]) else float("-inf"))
    doc = cotenants.merged(tries[i], tries)  # another process beside any attempt: named
    said = why(figures, t)  # which attempts were measured again, and why; why not, after a miss
    return ({**doc, "retry": said} if said and isinstance(doc, dict) else doc), figures


def best_of(first, again, figure, t):
    """measured() then best(): (the best document, the first if it passed; every figure)."""
    return best(measured(first, again, figure, t), figure, t)


def kept(doc: dict, figures: list) -> dict:
    """The judged document with every attempt's figure and their spread (none for one attempt)."""
    if len(figures) < 2:
        return doc
    return {**doc, "attempts": figures, "spread_pct": spread_pct(figures)}


def said(doc: dict, unit: str) -> str:
    """', best of 3 attempts (9.1, 9.4, 9.8 GB/s; spread 7.1 %)' for a measured-again figure;
    for a miss not measured again (any more), why not: ', measured once: not measured again:
    attempt 1 read 0.8 GB/s, 92 % below ...'."""
    tries = doc.get("attempts") or []
    last = (doc.get("retry") or [""])[-1]
    stop = ""
    if isinstance(last, str) and last.startswith("not measured again: ") and not last.endswith(" used"):
        # the figures are said beside it: only why ('90 % below the floor 10 GB/s, beyond ...')
        stop = last.split(f" {unit}, ", 1)[-1]
    if not tries:
        return f", measured once: {stop}" if stop else ""
    spread = doc.get("spread_pct")
    return f", best of {len(tries)} attempts ({units.readable(tries)} {unit}" + \
        (f"; spread {spread:g} %)" if _number(spread) else ")") + \
        (f"; not measured again: {stop}" if stop else "")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _ok(t, v) -> bool:
    return _number(v) and t.ok(v)
