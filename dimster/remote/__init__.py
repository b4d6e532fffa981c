"""Workers on other hosts: `dimster worker serve` agents and the coordinator's side of them, over
ZeroMQ with CURVE encryption and authentication derived from a shared token."""
