"""A campaign of OpenMessaging Benchmark files (`dimster campaign ENV --omb W... --driver D...`): its
campaign file, written beside the campaign folders so that --resume reads it again, and each point's
omb-result.json under OMB's own name, for OMB's create_charts.py."""

import shutil
import time
from pathlib import Path

from dimster import yamlcore


def write_omb_campaign(workloads: list[str], drivers: list[str], sets: list[str], root: Path) -> Path:
    """The campaign file of OMB workload and driver files (absolute paths) and `--set` pairs."""
    spec = {
        "workloads": [str(Path(w).resolve()) for w in workloads],
        "drivers": [str(Path(d).resolve()) for d in drivers],
        "sets": sets,
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"omb-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.yaml"
    path.write_text(yamlcore.dump({"name": "omb", "omb": spec}))
    return path


def copy_omb_results(folder: Path, points: list[dict]) -> int:
    """Each point's omb-result.json under OMB's own name, <workload>-<driver>-<time>.json, in
    campaign/omb/: OMB's create_charts.py reads them all."""
    target = folder / "campaign" / "omb"
    copied = 0
    for point in points:
        source = folder / str(point.get("bundle")) / "omb-result.json"
        if not point.get("bundle") or not source.is_file():
            continue
        values = point.get("values") or {}
        stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(point.get("ended") or 0))
        target.mkdir(parents=True, exist_ok=True)
        name = f"{values.get('workload', 'workload')}-{values.get('driver', 'Kafka')}-{stamp}"
        path = target / f"{name}.json"
        if path.exists():
            path = target / f"{name}-{point.get('index')}.json"
        shutil.copyfile(source, path)
        copied += 1
    return copied
