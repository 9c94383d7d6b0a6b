"""The retry policy for noisy figures (bandwidth, throughput): a figure that misses its threshold
is measured again, up to the threshold's `attempts` in all; every attempt's figure is kept, the
best is judged, the spread is reported, and a FAIL says how many attempts it had. The attempts
must agree: a spread wider than the threshold's `max_spread` (default 10 %) FAILs as unstable,
naming every attempt, even when the best one clears the threshold, so a flapping link or a
GPU that throttles in one attempt is never retried into a PASS. A criterion opts in with
`"retry": True` in its family's CRITERIA; correctness, health, temperature and version checks
never do, so nothing wrong is ever measured again into a PASS."""

from __future__ import annotations

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
    """`first`, then `again()` while the last attempt's `figure(doc)` misses threshold `t` and
    attempts remain (an unmeasurable figure counts as a miss): every attempt's document."""
    tries = [first]
    while wants_more(tries, figure, t):
        try:
            tries.append(again())
        except Exception as exc:  # the attempt that broke is the result: the earlier ones stay
            raise broke(exc, [figure(d) for d in tries]) from None
    return tries


def broke(exc: Exception, before: list) -> Exception:
    """`exc` (an attempt that broke) carrying the figures the attempts before it measured: its
    ERROR's details and the report keep them (`attempts`, the broken one as none)."""
    if before:
        exc.attempts = [*before, None]
    return exc


def wants_more(tries: list, figure, t) -> bool:
    """Whether these attempts call for another: the last missed and attempts remain. For a
    family that measures many hosts' or pairs' next attempts together, round by round."""
    return len(tries) < count(t) and not _ok(t, figure(tries[-1]))


def best(tries: list, figure, t):
    """(the best attempt's document, every attempt's figure in order)."""
    figures = [figure(d) for d in tries]
    sign = -1 if t.op == "max" else 1
    i = max(range(len(tries)), key=lambda i: sign * figures[i] if _number(figures[i]) else float("-inf"))
    return cotenants.merged(tries[i], tries), figures  # another process beside any attempt: named


def best_of(first, again, figure, t):
    """measured() then best(): (the best document, the first if it passed; every figure)."""
    return best(measured(first, again, figure, t), figure, t)


def kept(doc: dict, figures: list) -> dict:
    """The judged document with every attempt's figure and their spread (none for one attempt)."""
    if len(figures) < 2:
        return doc
    return {**doc, "attempts": figures, "spread_pct": spread_pct(figures)}


def said(doc: dict, unit: str) -> str:
    """', best of 3 attempts (9.1, 9.4, 9.8 GB/s; spread 7.1 %)' for a measured-again figure."""
    tries = doc.get("attempts") or []
    if not tries:
        return ""
    spread = doc.get("spread_pct")
    return f", best of {len(tries)} attempts ({units.readable(tries)} {unit}" + \
        (f"; spread {spread:g} %)" if _number(spread) else ")")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _ok(t, v) -> bool:
    return _number(v) and t.ok(v)
