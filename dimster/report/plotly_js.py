"""The plotly.js that a report embeds: plotly's cartesian bundle (scatter and bar, all the reports draw),
a third of the full bundle the plotly package carries (1.5 MB against 4.8 MB). It is the npm
package of the same plotly.js version as the installed plotly, fetched once with npm into the cache
and checked against the integrity pinned here. Without npm, network or a pin for the version, a report
embeds the full bundle: still one file that works offline, only heavier."""

import base64
import hashlib
import logging
import shutil
import subprocess
import tarfile
import tempfile
from functools import cache
from pathlib import Path

from plotly.offline import get_plotlyjs, get_plotlyjs_version

from dimster.paths import cache_dir

log = logging.getLogger(__name__)

PACKAGE = "plotly.js-cartesian-dist-min"
MEMBER = "package/plotly-cartesian.min.js"
# plotly.js version -> the npm registry's integrity of that version's tarball (npm view PACKAGE@V dist.integrity)
INTEGRITY = {
    "4.1.1": "sha512-o8GrFeusncwBIxbBynRJpY4pkgVB6caM+JLpwrLYbbsO7dZ8FJ+SVN2Fr+L7kiG/Z6w4P5O0Jus/Qr5EefHVeg==",
}
FETCH_SECONDS = 120


def cartesian_path(version: str) -> Path:
    return cache_dir() / "plotly-js" / version / "plotly-cartesian.min.js"


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def fetch_cartesian(version: str) -> Path:
    """The cartesian bundle of `version` in the cache, fetched with npm when missing; raises OSError or
    ValueError when it cannot be had (no npm, no network, no pin, a tarball that is not the pinned one)."""
    path = cartesian_path(version)
    if path.exists():
        return path
    if version not in INTEGRITY:
        raise ValueError(f"no integrity pinned for {PACKAGE}@{version}")
    npm = shutil.which("npm")
    if npm is None:
        raise OSError("npm not found")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        command = [npm, "pack", "--silent", "--pack-destination", scratch, f"{PACKAGE}@{version}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=FETCH_SECONDS, cwd=scratch)
        tarballs = list(Path(scratch).glob("*.tgz"))
        if done.returncode != 0 or len(tarballs) != 1:
            raise OSError(f"npm pack {PACKAGE}@{version} failed: {done.stderr.strip()[-300:]}")
        data = tarballs[0].read_bytes()
        if _integrity(data) != INTEGRITY[version]:
            raise ValueError(f"{PACKAGE}@{version} is not the tarball pinned in dimster")
        with tarfile.open(tarballs[0]) as tar:
            member = tar.extractfile(MEMBER)
            if member is None:
                raise ValueError(f"{PACKAGE}@{version} holds no {MEMBER}")
            partial = Path(scratch) / "partial.js"
            partial.write_bytes(member.read())
        partial.replace(path)  # atomic: a concurrent report reads the whole file or none
    return path


@cache
def plotly_js() -> str:
    """The plotly.js a report embeds: the cartesian bundle where it can be had, else the full one."""
    version = get_plotlyjs_version()
    try:
        return fetch_cartesian(version).read_text()
    except (OSError, ValueError, subprocess.SubprocessError, tarfile.TarError) as e:
        log.info("report embeds the full plotly.js (%s)", e)
        return get_plotlyjs()


def script_tags() -> str:
    """What plotly's own `include_plotlyjs=True` puts before a figure, with the bundle of plotly_js()."""
    return (
        "<script type=\"text/javascript\">window.PlotlyConfig = {MathJaxConfig: 'local'};</script>\n"
        f'<script type="text/javascript">{plotly_js()}</script>\n'
    )
