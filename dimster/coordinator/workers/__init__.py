"""The worker transports: local processes, agents, containers, and how clients are placed on them."""
