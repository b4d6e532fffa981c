"""The run loop: a run from start to end, its phases, drain and what it records as it goes."""
