"""A worker process: hosts the clients of its assignment and reports every second.

It ignores SIGINT (Ctrl-C in the terminal reaches the whole process group): the coordinator decides
how a run stops and tells its workers.
"""

import logging
import signal
import time
from multiprocessing.connection import Connection

from dimster.worker.clients import ConsumerClient, ProducerClient
from dimster.worker.protocol import Assignment, IntervalReport
from dimster.workload.model import Workload

REPORT_EVERY = 1.0


def worker_main(connection: Connection, assignment: Assignment) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(
        filename=assignment.log_file, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    try:
        Worker(connection, assignment).serve()
    except Exception as e:
        logging.getLogger("dimster.worker").exception("worker failed")
        connection.send(("failed", f"worker {assignment.worker_index}: {type(e).__name__}: {e}"))


class Worker:
    def __init__(self, connection: Connection, assignment: Assignment):
        self.connection = connection
        self.assignment = assignment
        workload = Workload.model_validate(assignment.workload)
        bootstrap = assignment.bootstrap_servers
        self.producers = [
            ProducerClient(spec, workload, bootstrap, assignment.total_producers) for spec in assignment.producers
        ]
        self.consumers = [
            ConsumerClient(spec, workload, bootstrap, assignment.delivery_count_limit) for spec in assignment.consumers
        ]

    @property
    def clients(self):
        return [*self.producers, *self.consumers]

    def report(self) -> None:
        clients = [client.take_interval() for client in self.clients]
        self.connection.send(("report", IntervalReport(self.assignment.worker_index, time.time(), clients)))
        failed = [c.error for c in self.clients if c.error]
        if failed:
            self.connection.send(("failed", failed[0]))

    def serve(self) -> None:
        for consumer in self.consumers:
            consumer.start()
        for producer in self.producers:
            producer.start()
        for consumer in self.consumers:
            consumer.subscribed.wait(30)
        self.connection.send(("ready",))
        next_report = time.time() + REPORT_EVERY
        while True:
            if self.connection.poll(max(0.0, next_report - time.time())):
                command = self.connection.recv()
                if command[0] == "start_load":
                    for producer in self.producers:
                        producer.load_started = command[1]
                elif command[0] == "stop_producers":
                    self._stop(self.producers)
                    self.report()
                    self.connection.send(("producers_stopped",))
                elif command[0] == "close":
                    self._stop(self.clients)
                    self.report()
                    self.connection.send(("closed",))
                    return
            if time.time() >= next_report:
                self.report()
                next_report += REPORT_EVERY
                if next_report < time.time():  # fell behind (a long pause): do not burst
                    next_report = time.time() + REPORT_EVERY

    @staticmethod
    def _stop(clients) -> None:
        for client in clients:
            client.stopping.set()
        for client in clients:
            if client.thread.is_alive():
                client.thread.join(60)
