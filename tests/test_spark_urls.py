"""Where a summary runs, from its master (pipeline/spark.py), and a Connect URL's token kept out of
what dimster says: no Spark is started here."""

import pytest

from dimster.errors import DimsterError
from dimster.pipeline.spark import _connect_address, own_driver, shown
from dimster.pipeline.spark_service import EMBEDDED

pytestmark = pytest.mark.unit


def test_only_local_and_standalone_masters_start_a_driver_of_their_own():
    assert [own_driver(m) for m in (EMBEDDED, "sc://h:15002/;token=t", "local[2]", "spark://h:7077")] == [
        False,
        False,
        True,
        True,
    ]


def test_a_connect_urls_token_is_never_said():
    assert shown("sc://spark.example:443/;token=s3cret;use_ssl=true") == "sc://spark.example:443"
    with pytest.raises(DimsterError) as bad:
        _connect_address("sc://:no-port/;token=s3cret")
    assert "s3cret" not in str(bad.value) and "sc://:no-port" in str(bad.value)
