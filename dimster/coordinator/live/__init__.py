"""Live changes: `--modify` applied to workers, groups and brokers; crashes and faults on schedule."""
