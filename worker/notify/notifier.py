"""The notifier: a worker thread that turns run events into deliveries and sends them.

Each pass (every ``poll_s``):

1. fan out: every ``run_events`` row still marked ``notify_pending`` becomes one
   delivery row per sink that asked for what it announces, and loses its mark,
   in one transaction (two workers doing it at once write each row once);
2. escalate and remind: a run waiting for approval longer than its profile's
   ``approval.escalate_after_s`` gets one ``approval_escalated`` delivery per
   escalation sink (at most once per wait); one waiting n times its profile's
   ``approval.remind_every_s`` gets its n-th ``approval_reminder`` delivery per
   sink that asked for reminders (each once, whichever worker writes it; a
   notifier that was away writes the latest only, not the ones it missed); one
   within ``approval.warn_before_expiry_s`` of the end of its wait (which denies
   it) gets one ``approval_expiring`` delivery per sink that asked;
3. close (with 2, every ``_ESCALATION_EVERY_S``): a message a Slack bot posted about
   a plan (``slack_messages``) whose plan can no longer be decided (decided
   anywhere, edited, replaced by a new revision, expired, its run ended) is marked
   closed, in one transaction with a ``slack_update`` delivery that replaces it in
   Slack (``chat.update``: the buttons gone, a line saying what happened, who, when);
4. deliver: due deliveries are claimed with a lease, sent, and marked delivered,
   or retried after ``backoff_s * 2^(n-1)`` (at most ``max_backoff_s``), or given up
   after ``max_attempts``. A worker killed mid-send loses its lease when it passes
   and another sends the same delivery again: at least once, same delivery id. A
   bot's post about a waiting plan is kept (channel, ts) as it is marked delivered.

Nothing here is on a run's path: a slow or dead receiver delays only its own
deliveries, and the database being away only pauses the notifier.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from contracts import GatehouseError, NotifyConfig, Sink
from ledger import Conn, Database, db_clock, slack_messages
from ledger.notifications import (
    Delivery,
    WaitingApproval,
    add_delivery,
    claim_due,
    clear_pending,
    mark_delivered,
    mark_failed,
    pending_events,
    waiting_approvals,
)
from policies import catalog
from worker.notify.payload import (
    closing_line,
    decidable,
    event_name,
    payload,
    slack_update,
)
from worker.notify.senders import DeliveryError, Posted, send

__all__ = ["Notifier"]

_log = logging.getLogger("gatehouse.notify")
_ESCALATION_EVERY_S = 2.0

# What a waiting run is owed now: the sinks, the event, which reminder (None: not one).
_Due = tuple[list[Sink], str, int | None]


def _parse(at: str) -> datetime:
    return datetime.fromisoformat(at.replace("Z", "+00:00"))


def _profile_escalation(profile_id: str) -> float | None:
    try:
        return catalog.profile(profile_id).model.approval.escalate_after_s
    except GatehouseError:  # a profile gone since the run started: nothing to go by
        _log.warning("notifier: no profile %s to escalate by", profile_id)
        return None


def _profile_warning(profile_id: str) -> float | None:
    try:
        return catalog.profile(profile_id).model.approval.warn_before_expiry_s
    except GatehouseError:
        _log.warning("notifier: no profile %s to warn of expiry by", profile_id)
        return None


def _profile_reminders(profile_id: str) -> float | None:
    try:
        return catalog.profile(profile_id).model.approval.remind_every_s
    except GatehouseError:
        _log.warning("notifier: no profile %s to remind by", profile_id)
        return None


class Notifier(threading.Thread):
    def __init__(
        self,
        db: Database,
        config: NotifyConfig,
        owner: str,
        *,
        escalate_after: Callable[[str], float | None] | None = None,
        remind_every: Callable[[str], float | None] | None = None,
        warn_before: Callable[[str], float | None] | None = None,
    ) -> None:
        """``escalate_after``, ``remind_every``, ``warn_before``: a profile id's
        escalation time, reminder interval and expiry warning (default: the profile's
        ``approval.escalate_after_s``, ``approval.remind_every_s`` and
        ``approval.warn_before_expiry_s`` from the policy catalog)."""
        super().__init__(name="gatehouse-notifier", daemon=True)
        self.escalate_after = escalate_after or _profile_escalation
        self.remind_every = remind_every or _profile_reminders
        self.warn_before = warn_before or _profile_warning
        self.db = db
        self.config = config
        self.owner = owner
        self.sinks: dict[str, Sink] = {s.id: s for s in config.sinks}
        self.bots = {s.id for s in config.sinks if s.bot}
        self.reminded = [s for s in config.sinks if "approval_reminder" in s.events]
        self.warned = [s for s in config.sinks if "approval_expiring" in s.events]
        self.stop = threading.Event()
        self._escalated_at = 0.0

    def run(self) -> None:
        while not self.stop.wait(self.config.poll_s):
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - a notifier that dies tells nobody
                # the database away, most likely: the next pass tries again
                _log.warning("notifier: a pass failed (%s: %s)", type(exc).__name__, exc)

    def tick(self) -> int:
        """One pass; returns how many deliveries it sent successfully."""
        self.fan_out()
        if time.monotonic() - self._escalated_at >= _ESCALATION_EVERY_S:
            self._escalated_at = time.monotonic()
            self.escalate()
            self.remind()
            self.warn()
            # a scan of the open bot messages: at this cadence, not every pass
            self.close()
        return self.deliver()

    def fan_out(self) -> int:
        added = 0
        with self.db.engine.begin() as conn:
            for event in pending_events(conn):
                name = event_name(event)
                for sink in self.config.sinks if name is not None else []:
                    if name in sink.events:
                        data = payload(self.config, sink, name, event)
                        added += add_delivery(
                            conn, run_id=event.run_id, seq=event.seq, event=name,
                            sink_id=sink.id, payload=data,
                        )  # fmt: skip
                clear_pending(conn, event.run_id, event.seq)
        return added

    def escalate(self) -> int:
        """The escalations now due (once per wait); how many were new."""
        if not self.config.escalation_sinks:
            return 0
        sinks = [self.sinks[sink_id] for sink_id in self.config.escalation_sinks]

        def due(waiting: WaitingApproval, now: datetime) -> _Due | None:
            after = self.escalate_after(waiting.policy_profile)
            waited_s = (now - _parse(waiting.since)).total_seconds()
            return (
                None if after is None or waited_s < after else (sinks, "approval_escalated", None)
            )

        return self._waiting_pass(due)

    def remind(self) -> int:
        """The reminders now due (for each waiting run, its latest); how many were new."""
        if not self.reminded:
            return 0

        def due(waiting: WaitingApproval, now: datetime) -> _Due | None:
            every = self.remind_every(waiting.policy_profile)
            waited_s = (now - _parse(waiting.since)).total_seconds()
            nth = 0 if every is None else int(waited_s // every)
            return None if nth < 1 else (self.reminded, "approval_reminder", nth)

        return self._waiting_pass(due)

    def warn(self) -> int:
        """The warnings now due, once per wait, before its expiry denies the plan."""
        if not self.warned:
            return 0

        def due(waiting: WaitingApproval, now: datetime) -> _Due | None:
            before = self.warn_before(waiting.policy_profile)
            if before is None or waiting.expires_at is None:
                return None
            left_s = (_parse(waiting.expires_at) - now).total_seconds()
            return None if left_s > before else (self.warned, "approval_expiring", None)

        return self._waiting_pass(due)

    def _waiting_pass(self, due: Callable[[WaitingApproval, datetime], _Due | None]) -> int:
        """For each run waiting for a decision, what ``due`` says is owed (given the
        database's time now) written as one delivery per sink; how many were new."""
        added = 0
        with self.db.engine.begin() as conn:
            # One clock for every worker that checks; the wait's start (``since``) is
            # still as the worker that wrote its event stamped it.
            now = db_clock(conn)
            for waiting in waiting_approvals(conn):
                owed = due(waiting, now)
                if owed is None:
                    continue
                sinks, event, nth = owed
                for sink in sinks:
                    data = payload(self.config, sink, event, waiting, nth)
                    added += add_delivery(conn, run_id=waiting.run_id, seq=waiting.seq,
                                          event=event, sink_id=sink.id, payload=data)  # fmt: skip
        return added

    def close(self) -> int:
        """Close the bot's messages whose plan can no longer be decided, each with the
        delivery that updates it in Slack; how many this notifier closed."""
        if not self.bots:
            return 0
        closed = 0
        with self.db.engine.begin() as conn:
            for closing in slack_messages.closings(conn):
                line = closing_line(closing)
                if not slack_messages.close(conn, closing.message, line):
                    continue  # another notifier closed it first
                data = slack_update(closing, line)
                closed += add_delivery(conn, run_id=closing.message.run_id,
                                       seq=closing.message.seq, event=str(data["event"]),
                                       sink_id=closing.message.sink_id, payload=data)  # fmt: skip
        return closed

    @staticmethod
    def _keep(conn: Conn, delivery: Delivery, sink: Sink, posted: Posted | None) -> None:
        """Inside the transaction marking it delivered: a bot's post about a waiting
        plan, kept so that it can be updated once the plan closes."""
        data = delivery.payload
        if posted is None or not decidable(data):
            return
        slack_messages.record_posted(
            conn, sink_id=sink.id, channel=posted.channel, ts=posted.ts,
            run_id=delivery.run_id, plan_digest=str(data["plan_digest"]),
            seq=int(str(data["seq"])), delivery_id=delivery.delivery_id,
            message=posted.message,
        )  # fmt: skip

    def deliver(self) -> int:
        with self.db.engine.begin() as conn:
            claimed = claim_due(conn, self.owner, self.config.lease_s)
        sent = 0
        for delivery in claimed:
            sink = self.sinks.get(delivery.sink_id)
            try:
                if sink is None:
                    raise DeliveryError(f"no sink {delivery.sink_id!r} in the notifications file")
                posted = send(sink, delivery.payload)
            except DeliveryError as exc:
                attempts = delivery.attempts + 1
                wait = min(self.config.backoff_s * 2 ** (attempts - 1), self.config.max_backoff_s)
                give_up = attempts >= self.config.max_attempts or sink is None
                log = _log.error if give_up else _log.warning
                log("notifier: delivery %s to %s failed (attempt %d%s): %s",
                    delivery.delivery_id, delivery.sink_id, attempts,
                    ", given up" if give_up else "", exc)  # fmt: skip
                with self.db.engine.begin() as conn:
                    mark_failed(conn, delivery.delivery_id, self.owner, error=str(exc),
                                retry_in_s=wait,
                                give_up=give_up)  # fmt: skip
                continue
            with self.db.engine.begin() as conn:
                mark_delivered(conn, delivery.delivery_id, self.owner)
                self._keep(conn, delivery, sink, posted)
            sent += 1
        return sent
