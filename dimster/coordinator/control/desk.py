"""The control API's side of the run loop: its queued requests answered on the loop's thread, and the
status snapshots that the API's HTTP threads answer `GET /status` with."""

import queue
import time
from collections.abc import Callable

from dimster.coordinator.control.api import ControlRequest, ControlServer
from dimster.coordinator.control.run_log import RunLog
from dimster.errors import DimsterError

STATUS_EVERY = 0.25  # seconds between status snapshots for the control API's `GET /status`


class ControlDesk:
    def __init__(self, control: ControlServer | None, status: Callable[[], dict], log: RunLog):
        self.control = control
        self.status = status
        self.log = log
        self.published = 0.0  # when the last snapshot was

    @property
    def doorbell(self) -> int | None:
        """What the run loop waits on beside its workers: readable when a request waits (api.Doorbell)."""
        return self.control.doorbell.fd if self.control else None

    def publish(self) -> None:
        """A fresh status for `GET /status`: a status asked for from now on shows what the run did."""
        if self.control:
            self.control.publish_status(self.status())
            self.published = time.time()

    def serve(self, modify: Callable[[list, str], dict], stop: Callable[[], dict]) -> None:
        """Every request waiting: each answered once a fresh snapshot is published (so the caller's next
        `GET /status` shows its change), or a status asked before the first snapshot. Then a snapshot
        when one is due. `modify` and `stop` are the run loop's."""
        if not self.control:
            return
        self.control.doorbell.answer()
        while True:
            try:
                request = self.control.requests.get_nowait()
            except queue.Empty:
                break
            try:
                reply, code = self._answer(request, modify, stop), 200
            except DimsterError as e:
                reply, code = {"error": str(e)}, 400
            except Exception as e:  # a bug: never leave a caller hanging; the run goes on, the traceback kept  # noqa: BLE001
                reply, code = {"error": self.log.bundle.internal_error(f"control request {request.action}", e)}, 500
            try:
                if request.action != "status":
                    self.publish()
            finally:
                request.reply(reply, code)
        if time.time() - self.published >= STATUS_EVERY:
            self.publish()

    def _answer(self, request: ControlRequest, modify: Callable[[list, str], dict], stop: Callable[[], dict]) -> dict:
        if request.action == "modify":
            return modify(request.body["sets"], request.body.get("by", "control"))
        if request.action == "stop":
            return stop()
        if request.action == "event":  # from another command of the user's, e.g. a fault they caused
            details = {k: v for k, v in request.body.items() if k != "event"}
            line = f"-- {request.body.get('message') or request.body['event']}"
            self.log.tell(request.body["event"], line, **details)
            return {"recorded": True}
        return self.status()

    def phase(self, phase: str) -> None:
        """The phase that `dimster run --detach` and `dimster status` read from the run's state file."""
        if self.control:
            self.control.update(phase=phase)
