"""The API server's time formats, written the one way every kerf service writes them.

Kubernetes has two: `metav1.Time` (RFC 3339 in UTC to the second: creation times,
conditions, kerf's own status fields and recommendation rows) and `metav1.MicroTime`
(the same with microseconds: a Lease's renewTime and acquireTime, an Event's eventTime).
"""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(at: datetime) -> str:
    """A Kubernetes Time: RFC 3339 in UTC, to the second."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(at: datetime) -> str:
    """A Kubernetes MicroTime: RFC 3339 in UTC with microseconds."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339_as_kept(at: datetime) -> str:
    """RFC 3339 of `at` as it is (its offset, its fractions of a second), UTC written `Z`:
    the form kerf keeps its own times in (annotations, rollback state), read back exactly."""
    return at.isoformat().replace("+00:00", "Z")


def unix_rfc3339(unix: float) -> str:
    """`rfc3339` of a Unix time."""
    return rfc3339(datetime.fromtimestamp(unix, UTC))
