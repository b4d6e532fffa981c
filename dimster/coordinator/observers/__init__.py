"""What the run watches beside its workers: the brokers, their lag and metrics, the dead-letter topic."""
