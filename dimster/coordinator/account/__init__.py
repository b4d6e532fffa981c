"""The account: reports taken in, aggregated, journaled, and closed into outcomes."""
