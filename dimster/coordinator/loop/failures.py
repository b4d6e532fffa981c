"""How a run that ends badly ends: the exit codes of a failed run and of a failed correctness verdict."""

from dimster.errors import DimsterError


class RunFailed(DimsterError):
    exit_code = 4


class CorrectnessFailed(RunFailed):
    """The run completed, and its records were not all delivered intact, in order, once."""

    exit_code = 7
