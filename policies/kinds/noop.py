"""noop: a note in the ledger. It changes nothing and calls nothing."""

from __future__ import annotations

from typing import ClassVar

from contracts import Connector, DriverKind, JsonObject
from policies.kinds._base import KindRules, Said, short

__all__ = ["Noop"]


class Noop(KindRules):
    kind: ClassVar[DriverKind] = DriverKind.NOOP
    outside_data: ClassVar[bool] = False

    def said(self, given: JsonObject, connector_id: str) -> Said:
        note = given.get("text", given.get("note"))
        return Said("Records a note" + (f": {short(note)}" if note is not None else ""))

    def read_only(self, step_input: JsonObject | None, connector: Connector | None) -> bool:
        return True

    def may_resend(self, connector: Connector, step_input: JsonObject) -> bool:
        return connector.idempotency == "key"
