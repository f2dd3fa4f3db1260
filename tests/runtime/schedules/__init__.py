"""Unit tests of perdure.runtime.schedules on a ManualClock; cron, one-shot: API topics."""
