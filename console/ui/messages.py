"""Cross-screen messages: the fleet changed, an action finished. Screen-local messages live with their widget."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


class FleetChanged(Message):
    """A batch of events was applied; coalesced so a log firehose repaints once per frame."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FleetChanged)


@dataclass
class ActionDone(Message):
    """A launch/stop/relaunch/probe/reconnect finished (ok or not); tests and toasts read this."""

    action: str
    target: str
    ok: bool
    message: str
