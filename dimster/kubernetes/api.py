"""What dimster asks of a Kubernetes API server, as one seam (`KubeApi`): Strimzi's custom resources
by kind and name, the pods and volume claims of a cluster, a pod's log. `ClusterApi` answers it with
the official client (the `kubernetes` package): the kubeconfig's context, or the pod's own service
account when dimster runs in the cluster. Tests answer it from recorded objects."""

from collections.abc import Iterator
from typing import Any, Protocol

from dimster.errors import ClusterError

GROUP, VERSION = "kafka.strimzi.io", "v1"
PLURALS = {"Kafka": "kafkas", "KafkaNodePool": "kafkanodepools"}
CLUSTER_LABEL = "strimzi.io/cluster"


class KubeApi(Protocol):
    def get(self, kind: str, name: str) -> dict[str, Any] | None: ...  # None: there is none
    def create(self, obj: dict[str, Any]) -> None: ...
    def patch(self, kind: str, name: str, patch: dict[str, Any]) -> None: ...  # a JSON merge patch
    def delete(self, kind: str, name: str) -> None: ...  # none there: nothing to do
    def pods(self, cluster: str) -> list[dict[str, Any]]: ...  # the cluster's pods, as the API gives them
    def delete_pod(self, name: str) -> None: ...
    def claims(self, cluster: str) -> list[str]: ...  # its persistent volume claims' names
    def delete_claim(self, name: str) -> None: ...
    def pod_log(self, name: str, lines: int | None = None) -> str: ...
    def follow_log(self, name: str) -> Iterator[str]: ...


class ClusterApi:
    """KubeApi through the `kubernetes` client, in one namespace."""

    def __init__(self, namespace: str, context: str | None = None):
        from kubernetes import client, config  # imported when a profile names the backend

        try:
            config.load_kube_config(context=context)
        except (config.ConfigException, OSError) as e:  # no kubeconfig, or not this context
            try:
                config.load_incluster_config()
            except config.ConfigException:
                where = f"context '{context}'" if context else "the current context"
                raise ClusterError(f"no Kubernetes API to talk to: kubeconfig ({where}): {e}") from None
        self.namespace = namespace
        self.custom = client.CustomObjectsApi()
        self.core = client.CoreV1Api()
        self.ApiException = client.ApiException

    def _custom(self, kind: str) -> tuple[str, str, str, str]:
        return GROUP, VERSION, self.namespace, PLURALS[kind]

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        try:
            found = self.custom.get_namespaced_custom_object(*self._custom(kind), name)
        except self.ApiException as e:
            if e.status == 404:
                return None
            raise
        return found if isinstance(found, dict) else None

    def create(self, obj: dict[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(*self._custom(obj["kind"]), obj, field_manager="dimster")

    def patch(self, kind: str, name: str, patch: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(*self._custom(kind), name, patch, field_manager="dimster")

    def delete(self, kind: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(*self._custom(kind), name)
        except self.ApiException as e:
            if e.status != 404:
                raise

    def pods(self, cluster: str) -> list[dict[str, Any]]:
        found = self.core.list_namespaced_pod(self.namespace, label_selector=f"{CLUSTER_LABEL}={cluster}")
        return [self.core.api_client.sanitize_for_serialization(pod) for pod in found.items]

    def delete_pod(self, name: str) -> None:
        self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)

    def claims(self, cluster: str) -> list[str]:
        found = self.core.list_namespaced_persistent_volume_claim(
            self.namespace, label_selector=f"{CLUSTER_LABEL}={cluster}"
        )
        return [claim.metadata.name for claim in found.items if claim.metadata and claim.metadata.name]

    def delete_claim(self, name: str) -> None:
        self.core.delete_namespaced_persistent_volume_claim(name, self.namespace)

    def pod_log(self, name: str, lines: int | None = None) -> str:
        return self.core.read_namespaced_pod_log(name, self.namespace, tail_lines=lines)

    def follow_log(self, name: str) -> Iterator[str]:
        """The pod's log lines from now on, until the pod or the connection ends."""
        from urllib3.exceptions import HTTPError

        try:
            stream: Any = self.core.read_namespaced_pod_log(  # a streamed response, not text
                name, self.namespace, follow=True, tail_lines=0, _preload_content=False
            )
            for line in stream:  # urllib3's response, line by line
                yield line.decode(errors="replace").rstrip("\n")
        except (self.ApiException, HTTPError):
            return  # the pod went (a roll replaces it): its log ends here
