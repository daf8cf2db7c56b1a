"""Per-rank telemetry: what a rank's process tree and its accelerator are doing, sampled by the
capture wrapper into ``telemetry/rank-NNNNN.jsonl`` (:mod:`runtime.telemetry.record` is the
record; the sampler and its sources live beside it)."""
