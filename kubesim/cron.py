"""Cron schedules (the five-field format CronJobs use, plus the @-macros)."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_NAMES = {
    3: {
        m: i + 1
        for i, m in enumerate(
            ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
        )
    },
    4: {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))},
}


def _field(text: str, index: int) -> set[int]:
    low, high = _RANGES[index]
    names = _NAMES.get(index, {})
    out: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if base in ("*", "?"):
            start, end = low, high
        elif "-" in base:
            a, b = base.split("-", 1)
            start, end = int(names.get(a.lower(), a)), int(names.get(b.lower(), b))
        else:
            start = int(names.get(base.lower(), base))
            end = high if step_text else start
        out.update(range(start, end + 1, step))
    if index == 4 and 7 in out:
        out.add(0)
    return out


def next_run(schedule: str, after: datetime, time_zone: str | None = None) -> datetime | None:
    """The first scheduled minute strictly after `after`, within four years (else None)."""
    expr = _MACROS.get(schedule.strip(), schedule.strip())
    parts = expr.split()
    if len(parts) != 5:
        raise ValueError(f"expected exactly 5 fields, found {len(parts)}: {schedule}")
    minutes, hours, days, months, weekdays = (_field(p, i) for i, p in enumerate(parts))
    day_restricted, weekday_restricted = parts[2] not in ("*", "?"), parts[4] not in ("*", "?")
    zone = ZoneInfo(time_zone) if time_zone else None
    local = after.astimezone(zone) if zone else after
    t = local.replace(second=0, microsecond=0) + timedelta(minutes=1)
    limit = t + timedelta(days=4 * 366)
    while t < limit:
        if t.month not in months:
            t = (t.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            continue
        day_ok = t.day in days
        weekday_ok = (t.isoweekday() % 7) in weekdays
        # Standard cron: when both day fields are restricted, either one may match.
        matches_day = (
            (day_ok or weekday_ok)
            if day_restricted and weekday_restricted
            else (day_ok and weekday_ok)
        )
        if not matches_day:
            t = t.replace(hour=0, minute=0) + timedelta(days=1)
            continue
        if t.hour not in hours:
            t = t.replace(minute=0) + timedelta(hours=1)
            continue
        if t.minute not in minutes:
            t += timedelta(minutes=1)
            continue
        return t.astimezone(after.tzinfo) if zone else t
    return None
