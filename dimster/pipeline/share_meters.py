"""The brokers' meters of share-group records, from the samples scraped into metrics/brokers/: records
acknowledged per type (RecordAcknowledgementsPerSec{ackType}, broker-wide) and, with dead-letter
queues (KIP-1191, Kafka 4.4), per group the records written to the dead-letter topic and the produce
requests that wrote them or failed to. Per scrape round: each meter's rate since the previous round,
summed over brokers; per group of the run: each dead-letter meter's count over the run and its rate
over the measured phase."""

import pandas as pd

ACKS = "kafka_server_share_record_acknowledgements_total"
# jmx-exporter.yaml's names of the brokers' dead-letter meters, each registered at its first mark
DEAD_LETTER_METERS = {
    "kafka_server_share_dead_letter_records_total": "records",
    "kafka_server_share_dead_letter_produce_requests_total": "produce_requests",
    "kafka_server_share_dead_letter_failed_produce_requests_total": "failed_produce_requests",
}
COLUMNS = ["run_time_s", "phase", "meter", "key", "per_s"]


def share_meters(brokers, groups: list[str]) -> tuple[dict, pd.DataFrame]:
    """(per group of the run: its dead-letter meters' counts and measured rates, the table of every
    meter's rate per scrape round) of the Spark frame of metrics/brokers/. `meter` is `acknowledged`
    (`key`: the ack type) or a DEAD_LETTER_METERS value (`key`: the group)."""
    from pyspark.sql import functions as F

    label = F.col("labels").getItem
    rounds = brokers.groupBy("end_time").agg(F.first("run_time_s").alias("run_time_s"), F.first("phase").alias("phase"))
    rounds = rounds.toPandas().sort_values("end_time").set_index("end_time")
    wanted = (F.col("metric") == ACKS) | (F.col("metric").isin(*DEAD_LETTER_METERS) & label("group").isin(*groups))
    samples = (
        brokers.where(wanted)
        .select(
            "end_time",
            "run_time_s",
            "phase",
            "broker",
            "metric",
            F.coalesce(label("ack_type"), label("group")).alias("key"),
            "value",
        )
        .toPandas()
    )
    if samples.empty or len(rounds) < 2:  # no share-group meters, or a single scrape
        return {}, pd.DataFrame(columns=COLUMNS)
    samples["meter"] = samples.metric.map(DEAD_LETTER_METERS).fillna("acknowledged")
    samples = samples.sort_values("end_time")
    before = samples.groupby(["broker", "meter", "key"]).value.shift()
    # a counter that went down started again (its broker restarted): its value is all increase; the run's
    # groups are its own, so a dead-letter meter's first value is too, an acknowledgement counter's is not
    first = samples.value.where(samples.meter != "acknowledged", 0.0)
    step = (samples.value - before).where(samples.value >= before, samples.value)
    samples["step"] = step.where(before.notna(), first)
    return _dead_letter_totals(samples, rounds), _per_round(samples, rounds)


def _per_round(samples: pd.DataFrame, rounds: pd.DataFrame) -> pd.DataFrame:
    """Each meter's increase since the previous scrape round per second, summed over brokers; 0 in the
    rounds before a dead-letter meter's first mark."""
    later = rounds.index[1:]
    steps = samples.pivot_table(index="end_time", columns=["meter", "key"], values="step", aggfunc="sum")
    steps = steps.reindex(later).fillna(0.0)
    seconds = rounds.index.to_series().diff().loc[later]
    table = steps.div(seconds, axis=0).stack(["meter", "key"], future_stack=True).rename("per_s").reset_index()
    table = table.join(rounds, on="end_time")
    return table.sort_values(["meter", "key", "end_time"])[COLUMNS].reset_index(drop=True)


def _dead_letter_totals(samples: pd.DataFrame, rounds: pd.DataFrame) -> dict:
    """Per group with a dead-letter meter: each meter's count over the run (0 for one never marked, so
    never registered), and its rate over the measured phase (from its first scrape round to its last;
    the whole run when it stopped before)."""
    window = rounds.index[rounds.phase == "measure"]
    window = window if len(window) >= 2 else rounds.index
    seconds = window[-1] - window[0]
    in_window = samples[(samples.end_time > window[0]) & (samples.end_time <= window[-1])]
    found: dict[str, dict] = {}
    for group, rows in samples[samples.meter != "acknowledged"].groupby("key"):
        found[group] = {}
        for meter in DEAD_LETTER_METERS.values():
            increase = in_window[(in_window.key == group) & (in_window.meter == meter)].step.sum()
            found[group][meter] = int(rows[rows.meter == meter].step.sum())
            found[group][f"{meter}_per_s"] = float(increase / seconds) if seconds > 0 else None
    return found
