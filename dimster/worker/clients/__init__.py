"""The load clients a worker hosts, one thread each: producers and consumers that pace, simulate
processing, choose acknowledgements and account for every record the same way whichever library
(`clientLibrary`) drives their Kafka client."""

from dimster.worker.clients.consumer import ConsumerClient
from dimster.worker.clients.drivers import client_properties, consumer_properties
from dimster.worker.clients.load_client import LoadClient, distinct
from dimster.worker.clients.producer import ProducerClient

__all__ = ["ConsumerClient", "LoadClient", "ProducerClient", "client_properties", "consumer_properties", "distinct"]
