"""Who runs where: the run's workers, which clients each hosts, and what becomes of a lost worker's
clients. The one owner of placement; its verbs return what happened for the run loop to record."""

from collections.abc import Callable
from dataclasses import dataclass, field

from dimster.coordinator.workers.seam import WorkerLost, Workers
from dimster.coordinator.workers.topology import (
    Topology,
    client_id,
    clients_by_worker,
    least_loaded,
    place,
    pools,
    replace_clients,
    resize,
    worker_versions,
)
from dimster.worker.protocol import (
    AddClients,
    Assignment,
    Closed,
    ConsumerSpec,
    Message,
    ProducerSpec,
    ProducersStopped,
    Ready,
    RemoveClients,
)


@dataclass
class WorkerState:
    """What the coordinator knows of one worker, from its messages."""

    ready: bool = False
    producers_stopped: bool = False
    closed: bool = False
    lost: bool = False

    @property
    def gone(self) -> bool:
        return self.closed or self.lost


@dataclass
class Placed:
    """Clients given a home: where each went (by client id), and why some could not be placed."""

    moved: dict[str, int] = field(default_factory=dict)
    failure: str | None = None
    consumers_added: bool = False


@dataclass
class Loss:
    """A lost worker: its clients, and either why the run must fail or those that go on (`replaced`:
    in the drain, only consumers) and where."""

    clients: list[str]
    groups: dict[str, str] = field(default_factory=dict)  # its consumers' groups, by client id
    failure: str | None = None
    replaced: list[str] = field(default_factory=list)
    placed: Placed = field(default_factory=Placed)


class Ensemble:
    def __init__(self, workers: Workers, topology: Topology, capacity: int, java_versions: dict, kafka_version: str):
        self.workers = workers
        self.topology = topology
        # each worker's JVM runs one kafka-clients version: a run with several needs a worker per version
        wanted = max(len(topology.producers) + len(topology.consumers), len(set(java_versions.values())))
        self.worker_count = max(1, min(capacity, wanted))
        self.worker_versions = worker_versions(java_versions, self.worker_count, kafka_version)
        self.pool_of = pools(java_versions, self.worker_versions)
        self.states: list[WorkerState] = []
        self.placement: dict[str, int] = {}  # client id -> worker index

    def start(self, assignment: Callable[[int, list, list], Assignment]) -> list[dict]:
        """Place the clients, start every worker with its `assignment(index, producers, consumers)`;
        returns where each worker runs (`Workers.describe`)."""
        self.placement = place(self.topology, self.worker_count, self.pool_of)
        placed = clients_by_worker(self.topology, self.placement, self.worker_count)
        assignments = [assignment(i, *clients) for i, clients in enumerate(placed)]
        self.states = [WorkerState() for _ in assignments]
        self.workers.start(assignments)
        return self.workers.describe()

    def client_counts(self) -> list[dict[str, int]]:
        """Each worker's producers and consumers, counted."""
        placed = clients_by_worker(self.topology, self.placement, self.worker_count)
        return [{"producers": len(producers), "consumers": len(consumers)} for producers, consumers in placed]

    def note(self, index: int, message: Message) -> None:
        """A worker's lifecycle message: ready, producers stopped, closed."""
        state = self.states[index]
        if isinstance(message, Ready):
            state.ready = True
        elif isinstance(message, ProducersStopped):
            state.producers_stopped = True
        elif isinstance(message, Closed):
            state.closed = True

    def all_ready(self) -> bool:
        return all(s.ready or s.gone for s in self.states)

    def producers_stopped(self) -> bool:
        return all(s.producers_stopped or s.gone for s in self.states)

    def all_gone(self) -> bool:
        return all(s.gone for s in self.states)

    def is_gone(self, index: int) -> bool:
        return self.states[index].gone

    def live_workers(self) -> list[int]:
        return [i for i, state in enumerate(self.states) if not state.gone]

    def live_consumers(self) -> list[str]:
        return [c for c in map(client_id, self.topology.consumers) if not self.states[self.placement[c]].gone]

    def described(self) -> list[dict]:
        return [{**w, "alive": not self.states[w["index"]].gone} for w in self.workers.describe()]

    def send(self, index: int, message: Message) -> None:
        if not self.states[index].gone:
            self.workers.send(index, message)

    def send_all(self, message: Message) -> None:
        for index in self.live_workers():
            self.send(index, message)

    def send_to_hosts(self, client_ids: list[str], message: Callable[[list[str]], Message]) -> None:
        """Send each worker `message` of the clients of `client_ids` it hosts."""
        by_worker: dict[int, list[str]] = {}
        for one in client_ids:
            by_worker.setdefault(self.placement[one], []).append(one)
        for index, hosted in by_worker.items():
            self.send(index, message(hosted))

    def lose(self, index: int, lost: WorkerLost, phase: str, on_worker_loss: str) -> Loss:
        """A worker is gone. By onWorkerLoss: the run fails (keeping what was measured), or its clients
        go on under fresh ids on the live workers."""
        loss = self.lose_all([index])[index]
        clients = loss.clients
        if on_worker_loss != "continue" or not self.live_workers() or phase in ("closing", "done"):
            loss.failure = f"{lost.reason} (onWorkerLoss: {on_worker_loss})"
            return loss
        for c in clients:
            del self.placement[c]
        if phase == "drain":  # producers have stopped: only consumers need a new home
            clients = [c for c in clients if c.startswith("c")]
            gone_producers = {p for p in self.topology.producers if self.placement.get(client_id(p)) is None}
            self.topology.producers = [p for p in self.topology.producers if p not in gone_producers]
        loss.replaced = clients
        loss.placed = self.add(*replace_clients(self.topology, clients))
        return loss

    def lose_all(self, indices: list[int]) -> dict[int, Loss]:
        """Workers gone, each with its clients (and its consumers' groups): one pass over the clients
        for them all (a run's end may give up thousands of workers at once)."""
        held: dict[int, list[str]] = {index: [] for index in indices}
        for client, worker in self.placement.items():
            if worker in held:
                held[worker].append(client)
        group_of = {client_id(c): c.group for c in self.topology.consumers}
        for index in indices:
            self.states[index].lost = True
        return {i: Loss(sorted(held[i]), {c: group_of[c] for c in held[i] if c in group_of}) for i in indices}

    def add(self, producers: list[ProducerSpec], consumers: list[ConsumerSpec]) -> Placed:
        """Place new clients on the least loaded live workers and start them there."""
        live = self.live_workers()
        plan: dict[int, AddClients] = {}
        homeless: dict[str, str] = {}  # client id -> the kafka-clients version no live worker runs
        specs: list[ProducerSpec | ConsumerSpec] = [*producers, *consumers]
        for spec in specs:
            allowed = self.pool_of(spec)
            pool = [w for w in live if w in allowed]
            if not pool:
                homeless[client_id(spec)] = self.worker_versions[allowed[0]]
                continue
            target = least_loaded(self.placement, pool, spec)
            self.placement[client_id(spec)] = target
            add = plan.setdefault(target, AddClients([], []))
            if isinstance(spec, ProducerSpec):
                add.producers.append(spec)
            else:
                add.consumers.append(spec)
        placed = Placed()
        if homeless:  # out of the run, so that nothing looks for them on a worker
            self.topology.producers = [p for p in self.topology.producers if client_id(p) not in homeless]
            self.topology.consumers = [c for c in self.topology.consumers if client_id(c) not in homeless]
            versions = ", ".join(sorted(set(homeless.values())))
            placed.failure = f"no live worker runs kafka-clients {versions} for {', '.join(homeless)}"
        for target, add in plan.items():
            self.send(target, add)
        placed.consumers_added = any(add.consumers for add in plan.values())
        placed.moved = {
            client_id(spec): self.placement[client_id(spec)] for spec in specs if client_id(spec) not in homeless
        }
        return placed

    def resize(self, producers_per_topic: int, consumers_per_group: int, kind: str) -> Placed:
        """The run's client counts, live: the newest clients go first, new ones go where there is room."""
        producers, consumers, removed = resize(self.topology, producers_per_topic, consumers_per_group, kind)
        self.send_to_hosts(removed, RemoveClients)
        for gone in removed:
            del self.placement[gone]
        return self.add(producers, consumers)
