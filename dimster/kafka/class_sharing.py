"""Class-data sharing for the JVMs dimster starts on a Kafka distribution (brokers, their storage
format, dimster's Java helper): an archive of the classes a broker loads, which a JVM maps parsed and
verified instead of reading each from its jar. Measured (docs/benchmarks.md, JDK 17, Kafka 4.4.0): a
broker's start 2.6 CPU-s with it against 3.7 (C1 only; 5.2 against 6.1 with C2), healthy 0.8 s sooner;
the storage format 0.9 against 1.5.

The archive is made from the list of classes the first broker started on a distribution loaded (a
JVM writes that list as it loads them, -XX:DumpLoadedClassList) by the next broker start that finds
the list (`java -Xshare:dump`: some 9 s of CPU, once per distribution and Java); every JVM after that
maps it. A JVM given an archive it cannot use (another Java, a jar changed since) ignores it
(-Xshare:auto, Java's default): nothing is refused for it. Archives are kept per Java and per the
jars' names, sizes and times, beside the distribution's other caches."""

import contextlib
import fcntl
import hashlib
import os
import subprocess
import time
from pathlib import Path

from dimster.kafka.distribution import KafkaDistribution, java_executable, java_version_line

ARCHIVE = "classes.jsa"
CLASS_LIST = "classes.lst"
# A broker loads some 8,500 classes before it serves; a list shorter than this is of a start that failed
# or is still under way, and is not made into an archive.
COMPLETE_LIST_LINES = 4000
STALE_LIST_SECONDS = 3600  # a short list this old is of a start that failed: another start writes it anew
DUMP_SECONDS = 300


def sharing_folder(distribution: KafkaDistribution) -> Path:
    """This distribution's archive and class list for the Java dimster runs."""
    java = java_executable()
    key = hashlib.sha256(f"{os.path.realpath(java)}\n{java_version_line(java)}\n".encode())
    for jar in sorted(os.scandir(distribution.libs), key=lambda entry: entry.name):
        stat = jar.stat()
        key.update(f"{jar.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return distribution.home / "class-sharing" / key.hexdigest()[:16]


def shared_classes(distribution: KafkaDistribution) -> tuple[str, ...]:
    """The JVM option that maps the distribution's archive, or none while there is none."""
    archive = sharing_folder(distribution) / ARCHIVE
    return (f"-XX:SharedArchiveFile={archive}",) if archive.exists() else ()


def broker_shared_classes(distribution: KafkaDistribution) -> tuple[str, ...]:
    """For a broker's JVM: the archive's option; without an archive, the archive made from the class
    list an earlier broker wrote; without a list, the option that has this broker write it."""
    folder = sharing_folder(distribution)
    archive, class_list = folder / ARCHIVE, folder / CLASS_LIST
    if archive.exists():
        return (f"-XX:SharedArchiveFile={archive}",)
    folder.mkdir(parents=True, exist_ok=True)
    if _claim(class_list):
        return (f"-XX:DumpLoadedClassList={class_list}",)
    if _lines(class_list) >= COMPLETE_LIST_LINES and _dump(distribution, class_list, archive):
        return (f"-XX:SharedArchiveFile={archive}",)
    return ()


def _claim(class_list: Path) -> bool:
    """Whether this start is the one to write the class list (none yet, or a failed start's, old)."""
    with contextlib.suppress(FileNotFoundError):
        if _lines(class_list) < COMPLETE_LIST_LINES and time.time() - class_list.stat().st_mtime > STALE_LIST_SECONDS:
            class_list.unlink()
    try:
        with open(class_list, "x"):
            return True
    except FileExistsError:
        return False


def _lines(path: Path) -> int:
    try:
        with open(path, "rb") as file:
            return sum(1 for _ in file)
    except OSError:
        return 0


def _dump(distribution: KafkaDistribution, class_list: Path, archive: Path) -> bool:
    """Make the archive from the class list (one process at a time; the others wait and use it).
    Whether it exists after: a Java that cannot make one leaves the JVMs as they were."""
    with open(archive.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            return True
        partial, lines = archive.with_suffix(f".{os.getpid()}.partial"), archive.with_suffix(f".{os.getpid()}.lst")
        # the list of a broker that still runs, to its last whole line
        written = class_list.read_bytes()
        lines.write_bytes(written[: written.rfind(b"\n") + 1])
        # the classes are those of the distribution's jars: a JVM whose class path starts with the same
        # jars (distribution.classpath) maps them
        command = [
            java_executable(),
            "-Xshare:dump",
            f"-XX:SharedClassListFile={lines}",
            f"-XX:SharedArchiveFile={partial}",
            "-cp",
            str(distribution.libs / "*"),
        ]
        try:
            subprocess.run(command, capture_output=True, timeout=DUMP_SECONDS, check=True)
            os.replace(partial, archive)
        except (OSError, subprocess.SubprocessError):
            partial.unlink(missing_ok=True)
        finally:
            lines.unlink(missing_ok=True)
    return archive.exists()
