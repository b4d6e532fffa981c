"""The cluster backends, by the name an environment's `backend:` gives. A new backend is its module
(a class that takes its profile and offers `ClusterBackend`) and one line below."""

from dimster.cluster.backend import ClusterBackend
from dimster.environment import EnvironmentProfile


def backend_for(profile: EnvironmentProfile) -> ClusterBackend:
    """The backend of `profile`; the backends are imported only when one is asked for (docker's
    needs its library)."""
    from dimster.cluster.docker import DockerCluster
    from dimster.cluster.external import ExternalCluster
    from dimster.cluster.local import LocalCluster

    backends = {"local": LocalCluster, "docker": DockerCluster, "external": ExternalCluster}
    return backends[profile.backend](profile)
