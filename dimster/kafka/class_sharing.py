"""Class-data sharing for the JVMs dimster starts on a Kafka distribution (brokers, their storage
format, dimster's Java helper, the Java clients): an archive of the classes a broker loads, which a
JVM maps parsed and verified instead of reading each from its jar. Measured (docs/benchmarks.md, JDK
17, Kafka 4.4.0): a broker's start 2.6 CPU-s with it against 3.7 (C1 only; 5.2 against 6.1 with C2),
healthy 0.8 s sooner; the storage format 0.9 against 1.5.

The archive is made from the list of classes the first broker started on a distribution loaded (a
JVM writes that list as it loads them, -XX:DumpLoadedClassList) by a later broker start that finds the
list whole (`java -Xshare:dump`: some 9 s of CPU, once per distribution and Java), then checked once
by a JVM that must map it; every JVM after that maps it. A Java that cannot make or map it leaves a
note (classes.failed) and the JVMs as they were. Whatever goes wrong here, a JVM starts without the
archive: nothing is refused for it. Kept per Java build (its libjvm), and per the jars' folder,
names, sizes and times, beside the distribution's other caches."""

import fcntl
import hashlib
import os
import re
import subprocess
import time
from pathlib import Path

from dimster.kafka.distribution import KafkaDistribution, java_executable

ARCHIVE = "classes.jsa"
CLASS_LIST = "classes.lst"
FAILED = "classes.failed"  # why the archive could not be made: not tried again for this Java and these jars
LOCK = "classes.lock"
# A broker loads some 8,500 classes before it serves: a list is whole once it has this many and has
# not grown for QUIET_SECONDS. A shorter list that quiet is of a start that failed: the next start
# writes it again.
COMPLETE_LIST_LINES = 6000
QUIET_SECONDS = 30.0
DUMP_SECONDS = 300
# A heap this large runs without compressed object pointers, and such a JVM cannot map an archive made
# with them: it would run without any archive, the JDK's own included.
LARGE_HEAP_BYTES = 32 << 30


def sharing_folder(distribution: KafkaDistribution) -> Path:
    """This distribution's archive and class list for the Java dimster runs."""
    java = Path(os.path.realpath(java_executable()))
    key = hashlib.sha256(f"{java}\n{os.path.realpath(distribution.libs)}\n".encode())
    libjvm = java.parents[1] / "lib" / "server" / "libjvm.so"  # the JVM's build: an archive is its own
    if libjvm.exists():
        built = libjvm.stat()
        key.update(f"{built.st_size} {built.st_mtime_ns}\n".encode())
    for jar in sorted(os.scandir(distribution.libs), key=lambda entry: entry.name):
        stat = jar.stat()
        key.update(f"{jar.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return distribution.home / "class-sharing" / key.hexdigest()[:16]


def shared_classes(distribution: KafkaDistribution, jvm_options: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The JVM option that maps the distribution's archive, or none while there is none (or the JVM's
    `jvm_options` could not map it)."""
    try:
        archive = sharing_folder(distribution) / ARCHIVE
        return _mapping(archive) if archive.exists() and _can_map(jvm_options) else ()
    except OSError:
        return ()


def broker_shared_classes(distribution: KafkaDistribution, jvm_options: tuple[str, ...] = ()) -> tuple[str, ...]:
    """For a broker's JVM (with `jvm_options`): the archive's option; without an archive, the archive
    made from a whole class list an earlier broker wrote; without a list, the option that has this
    broker write it; none while another start writes the list or makes the archive."""
    if not _can_map(jvm_options):
        return ()
    try:
        folder = sharing_folder(distribution)
        archive, class_list = folder / ARCHIVE, folder / CLASS_LIST
        if archive.exists():
            return _mapping(archive)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / LOCK, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another start claims the list or makes the archive: not waited for
                return ()
            if archive.exists() or (folder / FAILED).exists():  # made meanwhile, or never to be
                return _mapping(archive) if archive.exists() else ()
            lines, quiet = _lines(class_list), _quiet(class_list)
            if lines >= COMPLETE_LIST_LINES and quiet:
                return _mapping(archive) if _dump(distribution, class_list, archive) else ()
            if not class_list.exists() or (lines < COMPLETE_LIST_LINES and quiet):
                class_list.write_bytes(b"")  # this start writes it (anew, after a start that failed)
                return (f"-XX:DumpLoadedClassList={class_list}",)
            return ()  # a broker that runs still writes it
    except OSError:
        return ()


def _mapping(archive: Path) -> tuple[str, ...]:
    return (f"-XX:SharedArchiveFile={archive}",)


def _can_map(jvm_options: tuple[str, ...]) -> bool:
    """Whether a JVM with these options keeps compressed object pointers, as the archive was made with."""
    if "-XX:-UseCompressedOops" in jvm_options:
        return False
    heaps = [option[4:] for option in jvm_options if option.startswith("-Xmx")]
    return not heaps or _bytes(heaps[-1]) < LARGE_HEAP_BYTES


def _bytes(size: str) -> int:
    match = re.fullmatch(r"(\d+)([kKmMgGtT]?)", size)
    if not match:
        return 0
    return int(match.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[match.group(2).lower()]


def _lines(path: Path) -> int:
    try:
        with open(path, "rb") as file:
            return sum(1 for _ in file)
    except OSError:
        return 0


def _quiet(path: Path) -> bool:
    """Whether the file exists and has not changed for QUIET_SECONDS."""
    try:
        return time.time() - path.stat().st_mtime >= QUIET_SECONDS
    except OSError:
        return False


def _dump(distribution: KafkaDistribution, class_list: Path, archive: Path) -> bool:
    """Make the archive from the class list, and have a JVM map it once; whether it exists after. A
    failure is noted in FAILED (the last line Java said), and not tried again."""
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    # the classes of the distribution's jars: a JVM whose class path starts with the same jars
    # (distribution.classpath) maps them
    java, on_jars = java_executable(), ("-cp", str(distribution.libs / "*"))
    dump = [java, "-Xshare:dump", f"-XX:SharedClassListFile={class_list}", f"-XX:SharedArchiveFile={partial}", *on_jars]
    check = [java, "-Xshare:on", f"-XX:SharedArchiveFile={partial}", *on_jars, "-version"]  # fails unless mapped
    try:
        for command, seconds in ((dump, DUMP_SECONDS), (check, 60)):
            subprocess.run(command, capture_output=True, text=True, timeout=seconds, check=True)
        os.replace(partial, archive)
    except subprocess.CalledProcessError as failed:
        said = (failed.stdout + failed.stderr).strip().splitlines()[-1:] or [f"exit code {failed.returncode}"]
        (archive.parent / FAILED).write_text(f"{' '.join(map(str, failed.cmd))}\n{said[0]}\n")
    except subprocess.TimeoutExpired:
        pass  # a host too busy this once: a later start tries again
    finally:
        partial.unlink(missing_ok=True)
    return archive.exists()
