"""Running a campaign: its points in order, each a full run (the same `run_workload` as `dimster run`)
whose bundle lands in the campaign's folder, with `campaign.json` rewritten after every change so that
an interrupted campaign can be resumed at its first unfinished point."""

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dimster import yamlcore
from dimster.campaign.environments import Environments, fetch_versions, point_profile
from dimster.campaign.model import Campaign, Point, read_campaign_json
from dimster.coordinator.control.api import ControlServer
from dimster.coordinator.loop.failures import CorrectnessFailed
from dimster.coordinator.loop.one_run import run_workload
from dimster.environment import EnvironmentProfile
from dimster.errors import DimsterError
from dimster.paths import display
from dimster.results.campaign_records import CampaignJson, PointRecord
from dimster.results.redaction import Redactor, redact

FINISHED = ("completed", "forced", "failed")  # a resumed campaign runs every other point again
CAMPAIGN_JSON = "campaign.json"
INTERRUPTED_EXIT = 130


class CampaignFolder:
    """`campaign.json` (the points and where each stands) beside one bundle per point."""

    def __init__(self, path: Path):
        self.path = path
        self.state: dict = {}
        self.redactor = Redactor()  # knows the points' secrets (`learn`): a failure's text may hold one

    @classmethod
    def create(cls, root: Path, campaign: Campaign, environment: str, workers: int | None = None) -> "CampaignFolder":
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = root / f"{stamp}-{campaign.file.name}"
        suffix = 1
        while path.exists():
            suffix += 1
            path = root / f"{stamp}-{campaign.file.name}-{suffix}"
        path.mkdir(parents=True)
        folder = cls(path)
        # for the record only (secrets masked): a resume reads the campaign file again
        (path / "campaign.yaml").write_text(yamlcore.dump(redact(campaign.recorded())))
        state: CampaignJson = {
            "name": campaign.file.name,
            "campaign_file": str(campaign.path),
            "fingerprint": fingerprint(campaign),
            "environment": environment,
            "workers": workers,  # `--workers N`; None: the environment's own
            "created": time.time(),
            "ended": None,
            "mode": campaign.points[0].workload.mode.model_dump(by_alias=True) if campaign.points else {},
            "dimensions": [{"keys": d.names, "values": d.shown_rows()} for d in campaign.file.dimensions],
            "repeat": campaign.file.repeat,
            "thresholds": campaign.base.get("thresholds") or [],  # every point's, judged on its repeats' mean
            "saturatedPhases": campaign.base.get("saturatedPhases", "undecided"),
            "points": [_point_record(p) for p in campaign.points],
        }
        folder.state = dict(state)
        folder.save()
        return folder

    @classmethod
    def open(cls, path: Path) -> "CampaignFolder":
        folder = cls(path)
        folder.state = read_campaign_json(path)
        return folder

    def save(self) -> None:
        tmp = self.path / (CAMPAIGN_JSON + ".tmp")
        tmp.write_text(json.dumps(self.redactor.redact(self.state), indent=2, default=str))
        tmp.replace(self.path / CAMPAIGN_JSON)

    def learn_secrets(self, campaign: Campaign) -> None:
        """Mask the secrets of the campaign's points wherever they show in campaign.json (a failure's text)."""
        for point in campaign.points:
            self.redactor.learn(point.workload.to_yaml_dict())

    def record(self, point: Point) -> dict:
        return next(r for r in self.state["points"] if r["index"] == point.index and r["repeat"] == point.repeat)

    def check_matches(self, campaign: Campaign, environment: str) -> None:
        """A resumed campaign must be the one that started, on the same environment: the same base
        workload, mode and points."""
        if self.state.get("fingerprint") != fingerprint(campaign):
            raise DimsterError(
                f"{campaign.source} is no longer the campaign of {display(self.path)} (its base, mode or points "
                "changed): resume with the campaign file it started from (-c FILE)"
            )
        if self.state["environment"] != environment:
            raise DimsterError(
                f"{display(self.path)} ran on '{self.state['environment']}': resume it there, not on '{environment}'"
            )

    def resumed_workers(self, workers: int | None) -> int | None:
        """A resumed campaign keeps the worker count it started with (`--workers N`)."""
        started = self.state.get("workers")
        if workers is not None and workers != started:
            began = f"--workers {started}" if started else "the environment's workers"
            raise DimsterError(f"{display(self.path)} started with {began}: resume it without --workers {workers}")
        return started


def fingerprint(campaign: Campaign) -> str:
    """What makes a campaign this campaign (secrets masked before hashing: a hash of a secret is no
    record of it; a campaign resumed with other values of a secret is the same campaign)."""
    text = json.dumps(redact(campaign.recorded()), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _point_record(point: Point) -> PointRecord:
    return {
        "index": point.index,
        "repeat": point.repeat,
        "values": point.values,
        "label": point.label,
        "status": "pending",
        "bundle": None,
        "exit_code": None,
        "failure": None,
        "started": None,
        "ended": None,
        "modifications": 0,
        "mode": None,
        "totals": None,
    }


@dataclass
class CampaignOutcome:
    folder: Path
    exit_code: int  # 0, 4 (a point failed), 7 (a correctness verdict failed), 130 (interrupted)
    ran: list[str]  # the points this call ran, as 'point 2', 'point 3 repeat 2'


def run_campaign(
    campaign: Campaign,
    folder: CampaignFolder,
    profile: EnvironmentProfile,
    say: Callable[[str], None] = print,
    progress: Callable[[str], None] = print,
) -> CampaignOutcome:
    """Run every point not finished yet, in order. Ctrl-C (or `dimster stop`) ends the current point
    cleanly, marks it interrupted and ends the campaign; a failed point does not stop the others.

    Points with `cluster.` values run on clusters the campaign brings up: before the first such point
    this call runs, and wherever the values change, the cluster goes down with its data and the point's
    run brings it up fresh (every version's jars are fetched first); at the end the last one goes down
    with its data too, so that the profile's own cluster starts fresh on the next run."""
    total = len(campaign.points)
    ran: list[str] = []
    folder.learn_secrets(campaign)
    pending = [p for p in campaign.points if folder.record(p)["status"] not in FINISHED]
    fetch_versions({str(p.environment["kafkaVersion"]) for p in pending if "kafkaVersion" in p.environment})
    environments = Environments(say, progress)
    try:
        for number, point in enumerate(campaign.points, start=1):
            record = folder.record(point)
            if record["status"] in FINISHED:
                continue
            say(f"== {point.tag} ({number} of {total}): {point.label or 'the base workload'}")
            record.update(status="running", started=time.time(), ended=None, failure=None)
            folder.save()
            ran.append(point.tag)
            where = {"point": number, "points": total, "index": point.index, "repeat": point.repeat}
            context = {
                "campaign": {"name": campaign.file.name, "folder": str(folder.path), **where, "values": point.values}
            }
            try:
                on = point_profile(profile, point.environment, campaign.source)
                outcome = _run_point(point, on, folder.path, context, say, progress, environments)
            except KeyboardInterrupt:  # outside the run's own handling of Ctrl-C: starting, or closing
                _interrupted(folder, record, "interrupted while the run started or closed")
                return CampaignOutcome(folder.path, INTERRUPTED_EXIT, ran)
            except DimsterError as e:  # the run could not start: the next points would not either
                record.update(status="not started", failure=str(e), exit_code=e.exit_code, ended=time.time())
                folder.save()
                raise
            record.update(
                status=outcome.status,
                bundle=outcome.bundle.name,
                exit_code=outcome.exit_code,
                failure=outcome.failure,
                ended=time.time(),
                mode=outcome.mode,
                totals=outcome.totals,
                aborted_by=outcome.aborted_by,
                modifications=_live_modifications(outcome.bundle),
            )
            if outcome.stopped_early:
                _interrupted(folder, record, "stopped during the run")
                say(f"== campaign interrupted in {point.tag}: `dimster campaign ... --resume {folder.path}` goes on")
                return CampaignOutcome(folder.path, INTERRUPTED_EXIT, ran)
            folder.save()
        folder.state["ended"] = time.time()
        folder.save()
        return CampaignOutcome(folder.path, _exit_code(folder.state["points"]), ran)
    finally:
        environments.end()


def _run_point(point: Point, profile, root: Path, context: dict, say, progress, environments: Environments):
    """The point's run; on an environment other than the last, once the campaign holds the
    environment's control channel (no other run goes on there), its cluster goes down with its data."""
    control = ControlServer(profile.name)
    control.start({"run_id": None, "results": None, "workload": point.workload.name, "phase": "starting", **context})
    try:
        if environments.changes(point.environment):
            environments.start(profile, point.environment)
        return run_workload(point.workload, profile, root, control=control, say=say, progress=progress, context=context)
    finally:
        control.close()


def _interrupted(folder: CampaignFolder, record: dict, why: str) -> None:
    record.update(status="interrupted", failure=why, ended=time.time())
    folder.save()


def _live_modifications(bundle: Path) -> int:
    """Changes made by hand (`--modify`) during the point: its numbers are not the point's alone."""
    path = bundle / "modifications.jsonl"
    if not path.exists():
        return 0
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sum(1 for e in entries if e.get("by", "control") == "control")


def _exit_code(records: list[dict]) -> int:
    """0; 7 when only correctness verdicts failed; 4 when a run failed."""
    codes = {r["exit_code"] for r in records} - {0, None}
    return 4 if codes - {CorrectnessFailed.exit_code} else (7 if codes else 0)
