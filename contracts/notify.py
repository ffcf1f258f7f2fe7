"""Who is told what: the notifications file (``GATEHOUSE_NOTIFICATIONS``, YAML or JSON).

Example::

    dashboard_url: https://gatehouse.example.com   # links in every notification
    sinks:
      - id: ops
        kind: webhook                 # JSON, signed: Gatehouse-Signature v1=HMAC-SHA256
        url: https://hooks.example.com/gatehouse    # (signing: standard-webhooks for the
                                                    # Standard Webhooks headers, CloudEvents)
        secret_env: GATEHOUSE_WEBHOOK_SECRET
        events: [waiting_approval, needs_operator, failed, security_event]
      - id: chat
        kind: slack                   # Slack-compatible incoming-webhook payload
        url: https://hooks.slack.com/services/...
        events: [waiting_approval]
        buttons: true                 # Approve / Reject in the message (GATEHOUSE_SLACK)
      - id: desk
        kind: slack                   # posted with Slack's Web API by a bot, instead of a
        bot_token_env: GATEHOUSE_SLACK_BOT_TOKEN   # webhook: the message is then updated
        channel: C0123ABCD                         # when its plan is decided, expires, ...
        events: [waiting_approval]
        buttons: true
      - id: approvers
        kind: email
        smtp: {host: smtp.example.com, port: 587, starttls: true,
               username_env: SMTP_USER, password_env: SMTP_PASSWORD}
        sender: gatehouse@example.com
        to: [approvers@example.com]
        events: [waiting_approval]
    escalation_sinks: [oncall]        # told when an approval waits past the profile's
                                      # approval.escalate_after_s

Secrets are never in the file: a sink names the environment variable that holds them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from contracts._base import Closed, Identifier

__all__ = ["NotifyConfig", "NotifyEvent", "Sink", "SmtpServer"]

NotifyEvent = Literal[
    "waiting_approval", "needs_operator", "finished", "failed", "security_event",
    "approval_escalated", "approval_reminder", "approval_expiring",
]  # fmt: skip


def _env_name() -> str | None:
    """The name of an environment variable holding a secret (optional)."""
    found: str | None = Field(default=None, pattern=r"^[A-Z_][A-Z0-9_]{0,127}$")
    return found


class SmtpServer(Closed):
    host: str = Field(min_length=1, max_length=255)
    port: int = Field(default=25, ge=1, le=65535)
    starttls: bool = False
    username_env: str | None = _env_name()
    password_env: str | None = _env_name()
    timeout_s: float = Field(default=10, gt=0, le=120)


class Sink(Closed):
    id: Identifier
    kind: Literal["webhook", "slack", "email"]
    events: list[NotifyEvent] = Field(min_length=1)
    url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$", max_length=2000)
    # HMAC-SHA256 key for the Gatehouse-Signature header (webhook; slack optional)
    secret_env: str | None = _env_name()
    smtp: SmtpServer | None = None
    sender: str | None = Field(default=None, max_length=320)
    to: list[str] = Field(default_factory=list, max_length=100)
    timeout_s: float = Field(default=10, gt=0, le=120)
    # webhook: how the request is signed (Gatehouse's own headers, or the Standard
    # Webhooks ones with CloudEvents attributes; the secret is then a whsec_ key).
    signing: Literal["gatehouse", "standard-webhooks"] = "gatehouse"
    # slack: a waiting plan's message carries Approve and Reject buttons, answered
    # by the shim's Slack route (the Slack file, GATEHOUSE_SLACK).
    buttons: bool = False
    # slack, posted by a bot with the Web API (chat.postMessage) rather than through an
    # incoming webhook (url): the bot token's variable and the channel. Such a sink's
    # messages about a plan are updated (chat.update) once the plan is decided, expires,
    # is replaced or its run ends. ``api_url``: Slack's Web API (another only in tests).
    bot_token_env: str | None = _env_name()
    channel: str | None = Field(default=None, pattern=r"^[A-Za-z0-9#._-]{1,80}$")
    api_url: str = Field(
        default="https://slack.com/api/", pattern=r"^https?://[^\s]+/$", max_length=2000
    )

    @property
    def bot(self) -> bool:
        """A Slack sink that posts with the Web API and can update what it posted."""
        return self.bot_token_env is not None

    @model_validator(mode="after")
    def _complete(self) -> Sink:
        if self.kind == "webhook" and self.url is None:
            raise ValueError(f"sink {self.id}: a webhook sink needs a url")
        if self.kind == "slack" and (self.url is None) == (self.bot_token_env is None):
            raise ValueError(
                f"sink {self.id}: a slack sink needs either a url (an incoming webhook)"
                " or bot_token_env and channel (the Web API), not both"
            )
        if (self.bot_token_env is None) != (self.channel is None):
            raise ValueError(f"sink {self.id}: bot_token_env and channel go together")
        if self.bot_token_env is not None and self.kind != "slack":
            raise ValueError(f"sink {self.id}: only a slack sink takes bot_token_env")
        if self.kind == "webhook" and self.secret_env is None:
            raise ValueError(f"sink {self.id}: a webhook sink needs secret_env (it is signed)")
        if self.kind == "email" and (self.smtp is None or self.sender is None or not self.to):
            raise ValueError(f"sink {self.id}: an email sink needs smtp, sender and to")
        if self.buttons and self.kind != "slack":
            raise ValueError(f"sink {self.id}: only a slack sink has buttons")
        if self.signing != "gatehouse" and self.kind != "webhook":
            raise ValueError(f"sink {self.id}: only a webhook sink takes signing")
        return self


class NotifyConfig(Closed):
    dashboard_url: str = Field(
        default="http://127.0.0.1:8000", pattern=r"^https?://[^\s]+$", max_length=2000
    )
    sinks: list[Sink] = Field(min_length=1)
    escalation_sinks: list[Identifier] = Field(default_factory=list)
    # Retries: after attempt n the next waits min(backoff_s * 2^(n-1), max_backoff_s).
    max_attempts: int = Field(default=10, ge=1, le=100)
    backoff_s: float = Field(default=1.0, gt=0, le=3600)
    max_backoff_s: float = Field(default=300, gt=0, le=86400)
    # How long a worker holds a delivery it is sending before another may take it.
    lease_s: float = Field(default=60, gt=0, le=3600)
    poll_s: float = Field(default=0.5, gt=0, le=60)

    @model_validator(mode="after")
    def _known_sinks(self) -> NotifyConfig:
        ids = [s.id for s in self.sinks]
        if len(set(ids)) != len(ids):
            raise ValueError("two sinks share an id")
        unknown = sorted(set(self.escalation_sinks) - set(ids))
        if unknown:
            raise ValueError(f"escalation_sinks names unknown sinks: {', '.join(unknown)}")
        return self
