"""Several workers' reports of one interval as one report (protocol 20): what an agent sends for the
workers it runs, so that the coordinator takes in a report an agent, not one a worker.

Nothing is summed that the coordinator or the bundle reads per worker or per client: each worker
keeps its line (its end, CPU, memory, wake lag), each client its row and its histograms (the clients
of the second report follow the first's, their histograms' client index moved along). Only the
groups' accounts merge, as a worker merges its own consumers' (accounts.py): a group's ranges are
their union, and a record settled in two of the reports is in the union once and counted in
`duplicates`, so the run's distinct and duplicate settled records come out as from each report alone."""

import numpy as np

from dimster.worker.accounts import GroupAccount, side_by_side, united
from dimster.worker.client_columns import NAMES, ClientColumns
from dimster.worker.histogram_columns import HistogramColumns
from dimster.worker.protocol import IntervalReport


def merged(reports: list[IntervalReport], unite: bool = True) -> IntervalReport:
    """The reports as one, their lines and clients in the reports' order. `unite` False: a group's
    ranges of each key side by side, not united, for a report only the coordinator's aggregate reads
    (it counts a record in two of them itself, as it counts one settled again in a later report)."""
    if len(reports) == 1:
        return reports[0]
    lines = [line for report in reports for line in report.lines]
    offsets = np.cumsum([0, *(len(report.clients) for report in reports)]).tolist()
    clients = concatenated_clients([report.clients for report in reports], offsets)
    histograms = concatenated_histograms([r.histograms for r in reports], offsets)
    return IntervalReport(lines, clients, histograms, merged_groups([r.groups for r in reports], unite))


def concatenated_clients(parts: list[ClientColumns], offsets: list[int]) -> ClientColumns:
    """The parts' clients; part k's are the report's from offsets[k] on (its delivery counts' and
    details' client indices moved along)."""
    deliveries = [part.delivery_rows(offset) for part, offset in zip(parts, offsets, strict=False)]
    columns = ClientColumns(
        counts=np.concatenate([part.counts for part in parts]),
        reals=np.concatenate([part.reals for part in parts]),
        deliveries=np.concatenate(deliveries).reshape(-1),
    )
    for name in NAMES:
        setattr(columns, name, [value for part in parts for value in getattr(part, name)])
    for part, offset in zip(parts, offsets, strict=False):
        columns.details.update({offset + i: details for i, details in part.details.items()})
    return columns


def concatenated_histograms(parts: list[HistogramColumns], offsets: list[int]) -> HistogramColumns:
    """The parts' histograms; part k's clients are the report's from offsets[k] on."""
    moved = [part.client + offset for part, offset in zip(parts, offsets[: len(parts)], strict=True)]
    return HistogramColumns(
        client=np.concatenate(moved),
        metric=[metric for part in parts for metric in part.metric],
        **{
            name: np.concatenate([getattr(part, name) for part in parts])
            for name in ("partition", "total", "low", "high", "size", "bucket", "count")
        },
    )


def merged_groups(parts: list[dict[str, GroupAccount]], unite: bool = True) -> dict[str, GroupAccount]:
    """Each group's accounts of the parts as one: received and duplicates added, ranges united (a
    settled record in two parts counted once more in duplicates), or (`unite` False) side by side."""
    groups: dict[str, GroupAccount] = {}
    for group in dict.fromkeys(group for part in parts for group in part):
        accounts = [part[group] for part in parts if group in part]
        received, duplicates = sum(a.received for a in accounts), sum(a.duplicates for a in accounts)
        one = len(accounts) == 1
        into = GroupAccount(received=received, duplicates=duplicates)
        groups[group] = accounts[0] if one else united(accounts, into) if unite else side_by_side(accounts, into)
    return groups
