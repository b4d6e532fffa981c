"""The brokers' JMX exporter reads only the MBeans its rules keep (dimster/kafka/jmx-exporter.yaml):
what `includeObjectNames` leaves out or `excludeObjectNames` takes away is matched by no rule, and
what a rule keeps is read. A rule added for an MBean the lists leave out would serve nothing, silently;
one left out of the lists would cost the broker a read of every attribute of every such MBean at each
scrape. The rules' patterns are Java regular expressions simple enough for Python's `re`."""

import re
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

CONFIG = yaml.safe_load((Path(__file__).parent.parent / "dimster" / "kafka" / "jmx-exporter.yaml").read_text())
PATTERNS = [re.compile(rule["pattern"]) for rule in CONFIG["rules"]]
ATTRIBUTES = ("Count", "Value", "Mean:", "Max:", "99thPercentile", "OneMinuteRate")
APIS = ("Produce", "ShareFetch", "Metadata")


def kept(bean: str) -> bool:
    """A rule keeps some attribute of the MBean (as the exporter writes it: domain<keys><>attribute)."""
    return any(pattern.search(f"{bean}<>{attribute}") for pattern in PATTERNS for attribute in ATTRIBUTES)


def listed(object_names: list[str], domain: str, keys: dict[str, str]) -> bool:
    """The MBean matches one of the ObjectName patterns (`*` in a value; a trailing `,*` for any other key)."""
    for name in object_names:
        name_domain, _, properties = name.partition(":")
        wanted = dict(p.split("=", 1) for p in properties.split(",") if p != "*")
        if name_domain != domain or (not properties.endswith(",*") and set(wanted) != set(keys)):
            continue
        if all(k in keys and re.fullmatch(v.replace("*", ".*"), keys[k]) for k, v in wanted.items()):
            return True
    return False


def read(domain: str, keys: dict[str, str]) -> bool:
    include, exclude = CONFIG["includeObjectNames"], CONFIG.get("excludeObjectNames", [])
    return listed(include, domain, keys) and not listed(exclude, domain, keys)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "name",
    ["RequestsPerSec", "TotalTimeMs", "RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseSendTimeMs",
     "ThrottleTimeMs", "ResponseQueueTimeMs", "MessageConversionsTimeMs", "TemporaryMemoryBytes", "RequestBytes",
     "ErrorsPerSec", "DeprecatedRequestsPerSec"],
)  # fmt: skip
def test_an_apis_request_metrics_are_read_exactly_when_a_rule_keeps_them(api, name):
    keys = {"type": "RequestMetrics", "name": name, "request": api}
    bean = f"kafka.network<type=RequestMetrics, name={name}, request={api}"
    bean += ", version=9>" if name == "RequestsPerSec" else ">"
    assert read("kafka.network", keys) == kept(bean)


TOPIC_METERS = [
    "BytesInPerSec", "BytesOutPerSec", "MessagesInPerSec", "TotalProduceRequestsPerSec", "FailedFetchRequestsPerSec",
]  # fmt: skip


@pytest.mark.parametrize("name", TOPIC_METERS)
def test_a_topics_meters_are_read_exactly_when_a_rule_keeps_them_and_the_totals_always(name):
    per_topic = {"type": "BrokerTopicMetrics", "name": name, "topic": "orders"}
    assert read("kafka.server", per_topic) == kept(f"kafka.server<type=BrokerTopicMetrics, name={name}, topic=orders>")
    total = {"type": "BrokerTopicMetrics", "name": name}
    assert read("kafka.server", total) and kept(f"kafka.server<type=BrokerTopicMetrics, name={name}>")
