"""Imported by dimster's worker server only, first of all (worker/process.py, WORKER_PRELOAD): ties
its life to its starter's (lifeline.tie_worker_server)."""

from dimster.worker.lifeline import tie_worker_server

tie_worker_server()
