"""Approvers are told, not left to poll: a worker's notifier.

``config`` reads the notifications file, ``payload`` says what a notification
is (JSON for webhooks, a Slack message, an email) and signs it, ``senders``
sends one, ``notifier`` is the thread that fans events out into durable
deliveries and sends them, at least once, with retries, never in a run's way.
"""

from worker.notify.config import load_config
from worker.notify.notifier import Notifier

__all__ = ["Notifier", "load_config"]
