"""The one exception type the CLI turns into a single error line and a non-zero exit."""


class DimsterError(Exception):
    """A problem the user can fix: its message is one line naming what is wrong and what is valid."""

    exit_code = 2

    def __init__(self, message: str, *, detail: str = "", exit_code: int | None = None):
        super().__init__(message)
        self.detail = detail  # optional extra lines (e.g. a broker's last log lines), printed dimmed
        if exit_code is not None:
            self.exit_code = exit_code


class ClusterError(DimsterError):
    """The cluster could not be brought to the asked state."""

    exit_code = 3


class ThresholdsBreached(DimsterError):
    """A run (or a campaign's point) completed, and a threshold of its workload did not hold."""

    exit_code = 8


class RegressionFound(DimsterError):
    """`compare --verdict`: a candidate's figure is worse than the baseline's beyond its tolerance, and
    the difference is significant."""

    exit_code = 9
