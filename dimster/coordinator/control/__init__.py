"""The run's face: control API, run state, console, status, metrics endpoint and run log."""
