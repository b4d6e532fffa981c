"""The cluster backends, by the name an environment's `backend:` gives. A new backend is one module
(its profile model, a subclass of profile.ProfileBase, and its class, offering ClusterBackend,
declared as `PLUG = BackendPlug(Profile, Cluster)`) and one line in BACKENDS."""

import importlib

from dimster.cluster.backend import BackendPlug, ClusterBackend
from dimster.errors import DimsterError
from dimster.profile import ProfileBase

# a backend's name -> its module; imported when a profile names it (docker's needs its library)
BACKENDS = {
    "local": "dimster.cluster.local",
    "docker": "dimster.cluster.docker",
    "external": "dimster.cluster.external",
    "strimzi": "dimster.cluster.strimzi",
}


def plug(backend: str) -> BackendPlug:
    return importlib.import_module(BACKENDS[backend]).PLUG


def profile_model(data: dict) -> type[ProfileBase]:
    """The profile model of the backend `data` names (`local` when it names none)."""
    backend = data.get("backend", "local")
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise DimsterError(f"backend: '{backend}' is not a backend (valid: {', '.join(BACKENDS)})")
    return plug(backend).profile


def profile_models() -> dict[str, type[ProfileBase]]:
    """Every backend's profile model, by name (to say which backends take a key)."""
    return {backend: plug(backend).profile for backend in BACKENDS}


def backend_for(profile: ProfileBase) -> ClusterBackend:
    """The backend of `profile`."""
    return plug(profile.backend).cluster(profile)
