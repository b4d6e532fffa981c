"""The real Apache Kafka: published jars fetched from Maven Central with `mvn`, cached per version,
or an official binary distribution named by $KAFKA_HOME."""

import contextlib
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from dimster.errors import DimsterError
from dimster.paths import cache_dir
from dimster.workload.clients import OLDEST_SHARE_CLIENT, version_tuple

HELPER_CLASS = "DimsterKafkaTool"
JAVA_HINT = "install a JDK 17+ (Debian: apt-get install openjdk-17-jdk-headless)"
MVN_HINT = "install Maven (Debian: apt-get install maven)"


@dataclass(frozen=True)
class KafkaDistribution:
    version: str
    libs: Path  # folder of jars: broker, clients, log4j2 runtime and (if published) the perf tools
    home: Path  # cache folder of this version: helper classes, config defs
    helper_key: str = ""  # names the version of dimster's Java sources its classes are compiled from

    @property
    def helper(self) -> Path:
        """dimster's Java classes compiled against this version: a folder per version of their sources,
        so that two dimster versions on one host never replace the classes under each other's JVMs."""
        return self.home / "helper" / self.helper_key if self.helper_key else self.home / "helper"

    @property
    def class_path_entries(self) -> list[str]:
        """The jars first: a JVM maps the classes of class_sharing.py's archive only on the class path
        it was made for, or one that starts with it."""
        return [str(self.libs / "*"), str(self.helper)]

    @property
    def classpath(self) -> str:
        return os.pathsep.join(self.class_path_entries)

    @property
    def has_perf_tools(self) -> bool:
        return any(self.libs.glob("kafka-tools-*.jar"))

    def java(self, main_class: str, *args: str, jvm_options: tuple[str, ...] = ()) -> list[str]:
        """The command line that runs `main_class` of this distribution."""
        return [java_executable(), *jvm_options, "-cp", self.classpath, main_class, *args]


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    java = str(candidate) if candidate and candidate.exists() else shutil.which("java")
    if not java:
        raise DimsterError(f"java not found: {JAVA_HINT}")
    return java


@functools.cache
def java_version_line(java: str) -> str:
    """The line of `java -version` that names it, e.g. 'openjdk version "17.0.15" 2025-04-15'."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except subprocess.TimeoutExpired:
        raise DimsterError(f"'{java} -version' did not answer within 60 s") from None
    return next((line for line in out.splitlines() if " version " in line), "")


def java_major_version(java: str) -> int:
    match = re.search(r'version "(\d+)(?:\.(\d+))?', java_version_line(java))
    if not match:
        raise DimsterError(f"could not read the Java version from '{java} -version': {JAVA_HINT}")
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 else major


def require_java() -> None:
    major = java_major_version(java_executable())
    if major < 17:
        raise DimsterError(f"Kafka 4 needs Java 17 or newer, found Java {major}: {JAVA_HINT}")


def version_home(version: str) -> Path:
    return cache_dir() / "kafka" / version


def kafka_distribution(version: str, *, fetch: bool = True) -> KafkaDistribution:
    """The distribution for `version`: $KAFKA_HOME when set, else the cache, fetched if missing."""
    if kafka_home := os.environ.get("KAFKA_HOME"):
        return _from_kafka_home(Path(kafka_home))
    home = version_home(version)
    libs = home / "libs"
    jar = libs / f"kafka_2.13-{version}.jar"
    if not jar.exists():
        if not fetch:
            raise DimsterError(f"Kafka {version} is not fetched yet: run `dimster kafka fetch --version {version}`")
        with _fetching(home):
            if not jar.exists():
                _fetch_with_maven(version, libs)
    distribution = KafkaDistribution(version, libs, home, helper_key())
    _compile_helper(distribution)
    return distribution


@contextlib.contextmanager
def _fetching(home: Path):
    """Held while one process fetches into `home`: others that need the same version (the workers of
    one host) wait for it, then find it there."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _from_kafka_home(kafka_home: Path) -> KafkaDistribution:
    libs = kafka_home / "libs"
    jars = sorted(libs.glob("kafka_2.13-*.jar"))
    if not jars:
        raise DimsterError(f"KAFKA_HOME={kafka_home} is not a Kafka binary distribution (no libs/kafka_2.13-*.jar)")
    version = jars[0].name.removeprefix("kafka_2.13-").removesuffix(".jar")
    version = re.sub(r"-(sources|javadoc|test)$", "", version)
    distribution = KafkaDistribution(version, libs, version_home(f"kafka-home-{version}"), helper_key())
    _compile_helper(distribution)
    return distribution


class FetchProgress:
    """What a user sees while mvn fetches: a live line on a terminal, plain lines otherwise; always
    on stderr, so that a command's --json output stays clean. mvn's own output goes to a log file."""

    PLAIN_EVERY = 15.0  # seconds between plain progress lines

    def __init__(self, what: str):
        self.what = what  # "Apache Kafka 4.3.1", "kafka-clients 2.4.0"
        self.console = Console(stderr=True, highlight=False, soft_wrap=True)
        self.downloads = 0
        self.started = self.last_line = time.monotonic()
        self.live: Progress | None = None

    def __enter__(self) -> "FetchProgress":
        what = f"fetching {self.what} from Maven Central"
        if self.console.is_terminal:
            self.live = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=self.console
            )
            self.live.start()
            self.task = self.live.add_task(what, total=None)
        else:
            self.console.print(f"{what} (a minute or two on a fresh machine) ...", markup=False)
        return self

    def mvn_line(self, line: str) -> None:
        if "Downloaded from" not in line:
            return
        self.downloads += 1
        text = f"fetching {self.what}: {self.downloads} file(s) downloaded"
        if self.live is not None:
            self.live.update(self.task, description=text)
        elif time.monotonic() - self.last_line >= self.PLAIN_EVERY:
            self.last_line = time.monotonic()
            self.console.print(f"{text} ...", markup=False)

    def note(self, line: str) -> None:
        self.console.print(line, markup=False)

    def __exit__(self, exc_type, *_exc) -> None:
        if self.live is not None:
            self.live.stop()
        if exc_type is None:
            files = f", {self.downloads} file(s) downloaded" if self.downloads else ""
            self.note(f"fetched {self.what} in {time.monotonic() - self.started:.0f} s{files}")


def _mvn(version: str, libs: Path, log: Path, progress: FetchProgress, *profiles: str, pom="pom.xml") -> int:
    """Run mvn's copy of the pom's dependencies into `libs`; its output is appended to `log`."""
    pom = resources.files("dimster.kafka") / pom
    command = [
        "mvn",
        "-B",
        "-f",
        str(pom),
        f"-Dkafka.version={version}",
        "dependency:copy-dependencies",
        f"-DoutputDirectory={libs}",
        *profiles,
    ]
    with open(log, "a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as mvn:
            assert mvn.stdout is not None  # stdout=PIPE
            for line in mvn.stdout:
                out.write(line)
                progress.mvn_line(line)
        return mvn.returncode


def _fetch_with_maven(version: str, libs: Path) -> None:
    def broker_alone(progress: FetchProgress, partial: Path, log: Path) -> bool:
        # Some releases publish the broker before the perf tools: fetch the broker alone then.
        if _mvn(version, partial, log, progress, "-P", "!perf-tools") != 0:
            return False
        progress.note(
            f"note: org.apache.kafka:kafka-tools:{version} is not published; perf-tool benchmarks need another version"
        )
        return True

    _maven_fetch(f"Apache Kafka {version}", version, libs, "pom.xml", broker_alone)


def _maven_fetch(what: str, version: str, libs: Path, pom: str, fallback=None) -> None:
    """Copy `pom`'s dependencies for `version` into `libs` (whole or not at all); when mvn fails,
    `fallback(progress, folder, log)` may fetch into the folder instead. A failure is one error line."""
    require_java()
    if not shutil.which("mvn"):
        raise DimsterError(f"mvn not found, needed to fetch {what} from Maven Central: {MVN_HINT}")
    partial = libs.with_name("libs.partial")
    shutil.rmtree(partial, ignore_errors=True)
    log = libs.with_name("fetch.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    with FetchProgress(what) as progress:
        if _mvn(version, partial, log, progress, pom=pom) != 0:
            shutil.rmtree(partial, ignore_errors=True)
            if fallback is None or not fallback(progress, partial, log):
                output = log.read_text(errors="replace")
                raise DimsterError(
                    f"could not fetch {what} from Maven Central: {last_error_line(output)} (log: {log})",
                    detail="\n".join(output.splitlines()[-15:]),
                )
    shutil.rmtree(libs, ignore_errors=True)
    partial.rename(libs)


def last_error_line(output: str) -> str:
    errors = [line.removeprefix("[ERROR] ").strip() for line in output.splitlines() if "ERROR" in line]
    return errors[0] if errors else (output.strip().splitlines() or ["mvn failed"])[-1]


def java_clients(version: str) -> KafkaDistribution:
    """Kafka's Java clients of `version` alone (clientVersion), from the cache or fetched: kafka-clients,
    its dependencies and a log4j2 runtime, with dimster's client drivers compiled against them (the
    share consumer's only from 4.3, whose share consumer API it uses)."""
    home = cache_dir() / "kafka-clients" / version
    libs = home / "libs"
    jar = libs / f"kafka-clients-{version}.jar"
    if not jar.exists():
        with _fetching(home):
            if not jar.exists():
                _maven_fetch(f"kafka-clients {version}", version, libs, "clients-pom.xml")
    drivers = {"DimsterProducer", "DimsterConsumer", "DimsterGroupConsumer", "DimsterClientSupport"}
    if version_tuple(version) >= OLDEST_SHARE_CLIENT:
        drivers |= {"DimsterShareConsumer", "DimsterFetchAhead"}
    distribution = KafkaDistribution(version, libs, home, helper_key(drivers))
    _compile_helper(distribution, drivers)
    return distribution


def _helper_sources(classes: set[str] | None = None) -> dict[str, str]:
    """dimster's Java sources (or those of `classes`): file name -> text, in name order."""
    found = sorted(resources.files("dimster.kafka").joinpath("java").iterdir(), key=lambda f: f.name)
    return {
        f.name: f.read_text() for f in found if f.name.endswith(".java") and (classes is None or f.name[:-5] in classes)
    }


def _key(sources: dict[str, str]) -> str:
    return hashlib.sha1("".join(sources.values()).encode()).hexdigest()[:16]


def helper_key(classes: set[str] | None = None) -> str:
    """The key of the sources' text: their classes' folder under a distribution's `helper/` (read once
    a process: every kafka_distribution() asks)."""
    return _sources_key(None if classes is None else frozenset(classes))


@functools.cache
def _sources_key(classes: frozenset[str] | None) -> str:
    return _key(_helper_sources(set(classes) if classes is not None else None))


def _compile_helper(distribution: KafkaDistribution, classes: set[str] | None = None) -> None:
    """Compile dimster's Java classes (the tool, the client drivers; or only `classes`) against this
    version's jars, once for each version of the sources (their folder, distribution.helper, is never
    replaced: a JVM may be running from it). The sources are read once and compiled as read, so the
    folder of a key holds the classes of that key's text."""
    helper_dir = distribution.helper
    if (helper_dir / "sources.java").exists():
        return
    sources = _helper_sources(classes)
    if _key(sources) != distribution.helper_key:
        raise DimsterError(
            "dimster's Java sources changed while this command started (a checkout being updated?): run it again"
        )
    javac = Path(java_executable()).with_name("javac")
    if not javac.exists():
        raise DimsterError(f"javac not found beside {java_executable()}: {JAVA_HINT}")
    # Compiled aside and moved in whole: several processes may compile at once.
    helper_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix="partial.", dir=helper_dir.parent))
    with tempfile.TemporaryDirectory(prefix="dimster-java.") as folder:
        for name, text in sources.items():
            (Path(folder) / name).write_text(text)
        files = [str(Path(folder) / name) for name in sources]
        result = subprocess.run(
            [str(javac), "-nowarn", "-d", str(partial), "-cp", str(distribution.libs / "*"), *files],
            capture_output=True,
            text=True,
        )
    if result.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise DimsterError(
            f"could not compile dimster's Java classes against Kafka {distribution.version}: "
            f"{last_error_line(result.stderr) or result.stderr.strip()}"
        )
    (partial / "sources.java").write_text("".join(sources.values()))  # written last: the stamp
    try:
        partial.rename(helper_dir)
    except OSError:  # another process moved its build of the same sources in first
        shutil.rmtree(partial, ignore_errors=True)
