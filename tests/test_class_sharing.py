"""Class-data sharing (dimster/kafka/class_sharing.py): the first broker of a distribution writes the
list of classes it loads, the next start makes an archive of them, and the JVMs after it map Kafka's
classes from that archive on the class path dimster gives them. Real JVMs on the cached Kafka jars,
with the archive in a folder of the test's own."""

import fcntl
import os
import shutil
import subprocess
import time

import pytest

from dimster.kafka import class_sharing
from dimster.kafka.class_sharing import (
    ARCHIVE,
    CLASS_LIST,
    FAILED,
    LOCK,
    QUIET_SECONDS,
    broker_shared_classes,
    shared_classes,
    sharing_folder,
)
from dimster.kafka.distribution import KafkaDistribution, kafka_distribution
from dimster.profile import DEFAULT_KAFKA_VERSION


@pytest.fixture
def distribution(tmp_path) -> KafkaDistribution:
    """The cached Kafka's jars and a copy of dimster's classes, in a home (so with an archive) of the
    test's own."""
    cached = kafka_distribution(DEFAULT_KAFKA_VERSION, fetch=False)
    own = KafkaDistribution(cached.version, cached.libs, tmp_path / "home", cached.helper_key)
    shutil.copytree(cached.helper, own.helper)  # on the class path after the jars, as a broker has it
    return own


def storage_format(distribution: KafkaDistribution, folder, *options: str) -> subprocess.CompletedProcess:
    """Kafka's storage format on the distribution's class path, with `options` (a JVM of Kafka's that
    loads some 3,500 classes and ends by itself)."""
    folder.mkdir(parents=True, exist_ok=True)
    properties = folder / "server.properties"
    properties.write_text(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n"
        "listeners=PLAINTEXT://127.0.0.1:2,CONTROLLER://127.0.0.1:1\ncontroller.listener.names=CONTROLLER\n"
        f"log.dirs={folder / 'data'}\n"
    )
    command = distribution.java(
        "kafka.tools.StorageTool", "format", "-t", "abcdefghijklmnopqrstuv", "-c", str(properties),
        jvm_options=("-Xmx256m", *options),
    )  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.kafka
def test_the_second_start_makes_the_archive_of_the_first_ones_classes_and_later_jvms_map_them(
    distribution, tmp_path, monkeypatch
):
    monkeypatch.setattr(class_sharing, "COMPLETE_LIST_LINES", 2000)  # the format's list, not a broker's
    monkeypatch.setattr(class_sharing, "QUIET_SECONDS", 0.0)  # whole as soon as the format has ended
    folder = sharing_folder(distribution)
    assert shared_classes(distribution) == ()  # nothing yet

    first = broker_shared_classes(distribution)
    assert first == (f"-XX:DumpLoadedClassList={folder / CLASS_LIST}",)
    with monkeypatch.context() as patch:
        patch.setattr(class_sharing, "QUIET_SECONDS", 30.0)
        assert broker_shared_classes(distribution) == ()  # the first one writes the list: no second writer
    ran = storage_format(distribution, tmp_path / "first", *first)
    assert ran.returncode == 0, ran.stderr
    listed = (folder / CLASS_LIST).read_text().splitlines()
    assert len(listed) > 2000 and "org/apache/kafka/common/config/ConfigDef" in listed

    archived = broker_shared_classes(distribution)  # the next start makes the archive, and maps it
    assert archived == (f"-XX:SharedArchiveFile={folder / ARCHIVE}",) == shared_classes(distribution)
    assert sorted(p.name for p in folder.iterdir()) == sorted([ARCHIVE, CLASS_LIST, LOCK])

    # -Xshare:on: a JVM that cannot map the archive fails rather than carry on without it
    mapped = storage_format(distribution, tmp_path / "second", *archived, "-Xshare:on", "-Xlog:class+load=info")
    assert mapped.returncode == 0, mapped.stdout[-2000:] + mapped.stderr
    assert "org.apache.kafka.common.config.ConfigDef source: shared objects file" in mapped.stdout
    from_jars = [line for line in mapped.stdout.splitlines() if "source: file:" in line]
    from_archive = [line for line in mapped.stdout.splitlines() if "source: shared objects file" in line]
    assert len(from_archive) > 10 * len(from_jars), (len(from_archive), len(from_jars))


@pytest.mark.kafka
def test_other_jars_or_another_java_have_an_archive_of_their_own(distribution, tmp_path, monkeypatch):
    (sharing_folder(distribution)).mkdir(parents=True)
    (sharing_folder(distribution) / ARCHIVE).write_bytes(b"an archive")
    assert shared_classes(distribution) != ()

    fewer = tmp_path / "libs"
    fewer.mkdir()
    jars = sorted(os.listdir(distribution.libs))
    for jar in jars[1:]:  # the same jars, one less
        (fewer / jar).symlink_to(distribution.libs / jar)
    other_jars = KafkaDistribution(distribution.version, fewer, distribution.home, distribution.helper_key)
    assert sharing_folder(other_jars) != sharing_folder(distribution) and shared_classes(other_jars) == ()

    java, libjvm = tmp_path / "jdk" / "bin" / "java", tmp_path / "jdk" / "lib" / "server" / "libjvm.so"
    for path in (java, libjvm):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"a JDK")
    monkeypatch.setattr(class_sharing, "java_executable", lambda: str(java))
    assert shared_classes(distribution) == ()  # another Java
    another = sharing_folder(distribution)
    os.utime(libjvm, (1, 1))  # the same Java, its JVM built again in place
    assert sharing_folder(distribution) != another


@pytest.mark.kafka
def test_a_list_a_failed_start_left_short_is_written_again_once_it_is_quiet(distribution):
    folder = sharing_folder(distribution)
    folder.mkdir(parents=True)
    short = folder / CLASS_LIST
    short.write_text("java/lang/Object\n" * 10)
    assert broker_shared_classes(distribution) == ()  # a start may be writing it now
    quiet = time.time() - QUIET_SECONDS - 1
    os.utime(short, (quiet, quiet))
    assert broker_shared_classes(distribution) == (f"-XX:DumpLoadedClassList={short}",)
    assert short.read_text() == ""  # claimed anew, for this start to write


@pytest.mark.kafka
def test_a_start_while_another_claims_the_list_or_makes_the_archive_goes_on_without_waiting(distribution):
    folder = sharing_folder(distribution)
    folder.mkdir(parents=True)
    with open(folder / LOCK, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert broker_shared_classes(distribution) == ()
    assert not (folder / CLASS_LIST).exists()


@pytest.mark.kafka
def test_a_heap_of_32_gb_or_no_compressed_pointers_is_given_no_archive(distribution):
    folder = sharing_folder(distribution)
    folder.mkdir(parents=True)
    (folder / ARCHIVE).write_bytes(b"an archive")
    assert shared_classes(distribution, ("-Xmx1g",)) != ()
    assert shared_classes(distribution, ("-Xmx1g", "-Xmx32g")) == ()  # the last -Xmx is the JVM's
    assert shared_classes(distribution, ("-XX:-UseCompressedOops",)) == ()
    assert broker_shared_classes(distribution, ("-Xmx48G",)) == ()


@pytest.mark.kafka
def test_a_java_that_cannot_make_the_archive_is_noted_and_not_asked_again(distribution, monkeypatch):
    folder = sharing_folder(distribution)
    folder.mkdir(parents=True)
    (folder / CLASS_LIST).write_text("no/such/Class\n" * 7000)
    quiet = time.time() - QUIET_SECONDS - 1
    os.utime(folder / CLASS_LIST, (quiet, quiet))
    calls = []

    def failing(command, **kwargs):
        calls.append(command)
        raise subprocess.CalledProcessError(1, command, "", "Error: could not dump the archive")

    monkeypatch.setattr(class_sharing, "sharing_folder", lambda d: folder)
    monkeypatch.setattr(subprocess, "run", failing)
    assert broker_shared_classes(distribution) == ()
    assert sorted(p.name for p in folder.iterdir()) == sorted([CLASS_LIST, LOCK, FAILED])
    assert (folder / FAILED).read_text().splitlines()[-1] == "Error: could not dump the archive"
    assert broker_shared_classes(distribution) == () and len(calls) == 1  # not tried again
