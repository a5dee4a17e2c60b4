"""The one session of a process: the only module-level state flor keeps.

``flor.it``, ``SkipBlock`` and ``flor.log`` ask ``current()``; without a session
every call is a no-op. The session is built above (``flor.launch.start``)
and installed here, so the runtime never reaches up for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flor.errors import FlorError

if TYPE_CHECKING:
    from flor.runtime.loop.session import Session

session: Session | None = None  # the active one; SkipBlock reads it directly (a call less)


def current() -> Session | None:
    """The active session, or ``None`` when flor is off."""
    return session


def install(new: Session) -> Session:
    """Make ``new`` the process's session (at most one per process)."""
    global session
    if session is not None:
        raise FlorError("two-sessions", "a flor run is already active in this process")
    session = new
    return new


def report_where() -> None:
    """After the user's traceback: one line saying where the session was (replay knows)."""
    where = session.where() if session is not None else None
    if where is not None and session is not None:
        session.reporter.say(f"the error above happened {where}")
