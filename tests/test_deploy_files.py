"""The agent's deployment recipes (systemd, container, Kubernetes as `dimster k8s render` writes it) start
`dimster worker serve` with options it has, and the Kubernetes objects fit together. Building the image
needs a container engine and a base image: not part of this suite."""

import re

import pytest
import yaml

from dimster.cluster.external import ExternalProfile
from dimster.kubernetes.deployment import JobInput, KubernetesDeploy, agents, coordinator
from tests.conftest import REPO, dimster

pytestmark = pytest.mark.unit

DEPLOY = REPO / "deploy"
PROFILE = ExternalProfile.model_validate({"name": "ext", "backend": "external", "bootstrapServers": "kafka:9092"})


def serve_options() -> set[str]:
    help_text = dimster("worker", "serve", "--help").stdout
    return set(re.findall(r"--[a-z][a-z-]+", help_text))


def test_every_recipe_uses_options_serve_has():
    known = serve_options()
    assert {"--listen", "--token-file"} <= known
    [exec_start] = re.findall(r"^ExecStart=(.*)$", (DEPLOY / "systemd" / "dimster-agent.service").read_text(), re.M)
    assert "dimster worker serve" in exec_start
    dockerfile = (DEPLOY / "agent" / "Dockerfile").read_text()
    entry = " ".join(re.findall(r"^(?:ENTRYPOINT|CMD) (.*)$", dockerfile, re.M))
    assert '"worker", "serve"' in entry
    [_, stateful_set, _] = agents(PROFILE, KubernetesDeploy())
    [container] = stateful_set["spec"]["template"]["spec"]["containers"]
    for command in (exec_start, entry, " ".join(container["args"])):
        used = set(re.findall(r"--[a-z][a-z-]+", command))
        assert used and used <= known, (command, used - known)


def test_the_kubernetes_service_selects_the_agents_on_their_port():
    service, stateful_set, budget = agents(PROFILE, KubernetesDeploy(agents=3))
    assert service["spec"]["clusterIP"] == "None" and stateful_set["spec"]["serviceName"] == service["metadata"]["name"]
    labels = stateful_set["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    [container] = stateful_set["spec"]["template"]["spec"]["containers"]
    assert container["ports"][0]["containerPort"] == service["spec"]["ports"][0]["targetPort"]
    assert "0.0.0.0:7700" in container["args"]
    [mount] = container["volumeMounts"]
    token = container["args"][container["args"].index("--token-file") + 1]
    assert token.startswith(mount["mountPath"] + "/")  # the Secret's file, where serve reads it
    # the coordinator's profile names each agent by the Service's DNS name, on the agents' port
    [config_map, *_] = coordinator(PROFILE, KubernetesDeploy(agents=3), "ext", JobInput("workload", "name: w\n"), "")
    workers = yaml.safe_load(config_map["data"]["environment.yaml"])["workers"]
    name, ns = service["metadata"]["name"], service["metadata"]["namespace"]
    port = container["ports"][0]["containerPort"]
    assert workers == [{"address": f"{stateful_set['metadata']['name']}-{i}.{name}.{ns}.svc:{port}"} for i in range(3)]
