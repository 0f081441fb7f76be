"""The idle stop, schedule, maximum lifetime, budget and alert e-mails of a compute stack."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from gpu_cluster.components.cost_controls import DAYS, Budget, CostControls, IdleStop, WorkSchedule
from gpu_cluster.infra.meant import clock, in_utc, weekdays, zone_of_city
from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import DEFAULT_GANG_TIMEOUT_MINUTES, MIN_GANG_TIMEOUT_MINUTES, StackSpec
from gpu_cluster.infra.suggest import closest
from gpu_cluster.infra.validation.common import config_moment, key, rfc3339

# Per-stage defaults: the dev box stops after 30 idle minutes; a cluster, whose jobs pause
# longer between phases (data loading, evaluation), after 60. Inference (later) has none.
DEV_IDLE = IdleStop(30, 5.0)
CLUSTER_IDLE = IdleStop(60, 5.0)
CLOCK = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
DAY = "|".join(DAYS)
DAYS_PATTERN = re.compile(rf"^(\*|({DAY})(-({DAY}))?(,({DAY})(-({DAY}))?)*)$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def check_cost_controls(
    spec: StackSpec, single_box: bool, now: datetime | None = None
) -> tuple[CostControls, list[Problem]]:
    problems: list[Problem] = []
    idle = _idle(spec, single_box, problems)
    schedule = _schedule(spec, problems)
    expires = _expiry(spec, problems, now or datetime.now(UTC))
    budget = None
    if spec.budget is not None:
        b = spec.budget
        if b.stop_at_limit and not single_box:
            problems.append(
                Problem(
                    path=key("budget.stopAtLimit"),
                    received=True,
                    problem="a budget action can stop only named instances; a cluster's "
                    "node group replaces its instances",
                    allowed="true on a single on-demand node (the dev box)",
                    fix="pulumi config set --path budget.stopAtLimit false; use idleStop, "
                    "schedule or expiresAt to stop a cluster",
                )
            )
        budget = Budget(b.monthly_usd, b.stop_at_limit, b.activate_cost_allocation_tag)
    for index, email in enumerate(spec.alert_emails):
        if not EMAIL.match(email):
            problems.append(
                Problem(
                    path=key(f"alertEmails[{index}]"),
                    received=email,
                    problem="not an e-mail address",
                    allowed="name@example.com",
                    fix=f"pulumi config set --path alertEmails[{index}] name@example.com",
                )
            )
    controls = CostControls(idle, schedule, expires, budget, tuple(spec.alert_emails))
    gang = _gang_timeout(spec, single_box, problems)
    return replace(controls, prepaid=prepaid(spec), gang_timeout_minutes=gang), problems


def _gang_timeout(spec: StackSpec, single_box: bool, problems: list[Problem]) -> int:
    """All or nothing for a multi-node training group (0: off, and for a dev box or a
    service, which are no gang)."""
    minutes = spec.gang_timeout_minutes
    if 0 < minutes < MIN_GANG_TIMEOUT_MINUTES:
        problems.append(
            Problem(
                path=key("gangTimeoutMinutes"),
                received=minutes,
                problem=f"{minutes} min is shorter than a GPU node's boot and health check: "
                "every cluster would be scaled to 0 before its nodes are up",
                allowed=f"0 (off) or {MIN_GANG_TIMEOUT_MINUTES}-1440 minutes",
                fix=f"pulumi config set gangTimeoutMinutes {DEFAULT_GANG_TIMEOUT_MINUTES}",
            )
        )
    return gang_timeout_minutes(spec, single_box)


def gang_timeout_minutes(spec: StackSpec, single_box: bool = False) -> int:
    """The all-or-nothing timeout the nodes get: off for a dev box or a service (no gang), and
    off on prepaid capacity unless the stack sets gangTimeoutMinutes (as the idle stop)."""
    if single_box or spec.nodes < 2 or spec.role != "cluster":
        return 0
    if prepaid(spec) and "gang_timeout_minutes" not in spec.model_fields_set:
        return 0
    return spec.gang_timeout_minutes


def prepaid(spec: StackSpec) -> bool:
    """Capacity paid for whether nodes run or not: a Capacity Block (paid when bought) and an
    On-Demand Capacity Reservation, created by this stack or only targeted: it is charged at the
    On-Demand rate whether instances run in it or not (EC2 User Guide, "Capacity Reservation
    pricing and billing"; a block: "Capacity Blocks pricing and billing"). Stopping idle nodes
    or scaling a partial gang to 0 saves nothing there and gives up the nodes and their NVMe,
    so the idle stop and the gang timeout are off unless the stack turns them on (then the plan
    says the capacity bills anyway)."""
    return spec.purchase_option in ("capacity-block", "capacity-reservation")


def _idle(spec: StackSpec, single_box: bool, problems: list[Problem]) -> IdleStop | None:
    default = DEV_IDLE if single_box else CLUSTER_IDLE
    settings = spec.idle_stop
    if spec.role == "inference":  # a service waits for requests: idle is its normal state
        if settings is not None and settings.enabled:
            problems.append(
                Problem(
                    path=key("idleStop"),
                    received="enabled",
                    problem="an inference service is idle between requests; scaling sizes it",
                    allowed="unset, or {enabled: false}",
                    fix="pulumi config rm idleStop (the service scales on inference.scaling and "
                    "keeps at least inference.minNodes)",
                )
            )
        return None
    if settings is None:
        return None if prepaid(spec) else default
    if not settings.enabled:
        return None
    minutes = settings.minutes if settings.minutes is not None else default.minutes
    if minutes % 5:
        problems.append(
            Problem(
                path=key("idleStop.minutes"),
                received=minutes,
                problem="the alarm looks at 5-minute periods",
                allowed="a multiple of 5 from 10 to 1440",
                fix=f"pulumi config set --path idleStop.minutes {max(10, minutes // 5 * 5)}",
            )
        )
    below = settings.below_percent if settings.below_percent is not None else default.below_percent
    return IdleStop(minutes, below)


def _schedule(spec: StackSpec, problems: list[Problem]) -> WorkSchedule | None:
    s = spec.schedule
    if s is None:
        return None
    found = []
    for field, value in (("start", s.start), ("stop", s.stop)):
        if not CLOCK.match(value):
            found.append(
                Problem(
                    path=key(f"schedule.{field}"),
                    received=value,
                    problem="not a time of day",
                    allowed="HH:MM, 24-hour clock, e.g. 08:00",
                    fix=f"pulumi config set --path schedule.{field} "
                    + (clock(value) or ("08:00" if field == "start" else "18:00")),
                )
            )
    if not found and s.stop < s.start and s.days.strip() != "*":
        found.append(
            Problem(
                path=key("schedule.days"),
                received=s.days,
                problem=f"the nodes run past midnight ({s.start}-{s.stop}), but the stop fires "
                "only on these days: the last day's run would not stop",
                allowed="days: * for a schedule across midnight, or a stop after the start",
                fix="pulumi config set --path schedule.days '*'",
            )
        )
    if not found and s.start == s.stop:
        found.append(
            Problem(
                path=key("schedule.stop"),
                received=s.stop,
                problem="the nodes would stop the minute they start",
                allowed="a stop time other than the start time",
                fix=f"pulumi config set --path schedule.stop {later_same_day(s.start)}",
            )
        )
    days = s.days.upper().replace(" ", "")
    if not DAYS_PATTERN.match(days):
        found.append(
            Problem(
                path=key("schedule.days"),
                received=s.days,
                problem="not a list or range of weekdays",
                allowed="MON-FRI, MON,WED,FRI, SAT-SUN or * (every day)",
                fix="pulumi config set --path schedule.days "
                + shlex.quote(weekdays(s.days, DAYS) or "MON-FRI"),
            )
        )
    try:
        ZoneInfo(s.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        meant, why = timezone_meant(s.timezone)
        found.append(
            Problem(
                path=key("schedule.timezone"),
                received=s.timezone,
                problem=f"not an IANA time zone{why}",
                allowed="e.g. UTC, Europe/Berlin, America/New_York",
                fix=f"pulumi config set --path schedule.timezone {meant}",
            )
        )
    problems += found
    return None if found else WorkSchedule(days, s.start, s.stop, s.timezone)


def _expiry(spec: StackSpec, problems: list[Problem], now: datetime) -> datetime | None:
    text = spec.expires_at
    if text is None:
        return None
    moment = config_moment(text)
    if moment is None:
        problems.append(
            Problem(
                path=key("expiresAt"),
                received=text,
                problem="not a date and time with a time zone",
                allowed="RFC 3339 in UTC, e.g. 2027-01-31T18:00:00Z",
                fix=f"pulumi config set expiresAt {in_utc(text) or '2027-01-31T18:00:00Z'}",
            )
        )
        return None
    moment = moment.astimezone(UTC).replace(second=0, microsecond=0)
    if moment <= now:
        problems.append(
            Problem(
                path=key("expiresAt"),
                received=text,
                problem="that time has passed: the nodes would never start",
                allowed="a future date and time (UTC)",
                fix=f"pulumi config set expiresAt {rfc3339(now + timedelta(days=7))}, or "
                "pulumi config rm expiresAt",
            )
        )
        return None
    return moment


# Abbreviations name a zone's time, not the zone (CEST is Berlin's and Paris's summer time), so
# they map to a representative zone that observes them, never to a lookalike abbreviation.
ABBREVIATIONS = {
    "CET": "Europe/Berlin",
    "CEST": "Europe/Berlin",
    "WET": "Europe/Lisbon",
    "WEST": "Europe/Lisbon",
    "EET": "Europe/Helsinki",
    "EEST": "Europe/Helsinki",
    "BST": "Europe/London",
    "IST": "Asia/Kolkata",
    "JST": "Asia/Tokyo",
    "KST": "Asia/Seoul",
    "AEST": "Australia/Sydney",
    "AEDT": "Australia/Sydney",
    "EDT": "America/New_York",
    "CDT": "America/Chicago",
    "MDT": "America/Denver",
    "PST": "America/Los_Angeles",
    "PDT": "America/Los_Angeles",
}
UTC_OFFSET = re.compile(r"^(?:UTC|GMT)\s*([+-])\s*(\d{1,2})(?::?00)?$", re.IGNORECASE)


def timezone_meant(text: str) -> tuple[str, str]:
    """(the IANA zone the user most likely meant, why) for an invalid schedule time zone."""
    zone = ABBREVIATIONS.get(text.upper())
    city = zone_of_city(text) if zone is not None and not text.isupper() else None
    if city is not None and city.rsplit("/", 1)[-1].lower() == text.lower().replace(" ", "_"):
        zone = None  # "West" is Australia/West; WEST, typed as abbreviations are, is Lisbon's
    if zone is not None:
        return zone, f" ({text} is an abbreviation; {zone} observes it, with daylight saving)"
    if match := UTC_OFFSET.match(text):
        sign, hours = match.groups()
        posix = f"Etc/GMT{'-' if sign == '+' else '+'}{int(hours)}"
        return (
            posix,
            f" ({posix} is {text}: a fixed offset, no daylight saving; the sign is POSIX's)",
        )
    zones = sorted(available_timezones())
    by_case = {z.lower(): z for z in zones}
    if text.lower() in by_case:
        return by_case[text.lower()], ""
    near = closest(text, [z for z in zones if "/" in z]) if "/" in text else zone_of_city(text)
    return (near, "") if near else ("UTC", "")


def later_same_day(start: str) -> str:
    """A stop after ``start`` on the same day (a schedule that never crosses midnight)."""
    hour, minute = (int(part) for part in start.split(":"))
    return f"{hour + 12:02d}:{minute:02d}" if hour <= 11 else "23:59"
