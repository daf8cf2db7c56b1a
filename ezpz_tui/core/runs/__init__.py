"""What every reader of a run knows about it, whoever launched it.

Watching, comparing and launching all ask how a run and its ranks ended, whether it is still
alive, what its ``run.toml`` says and how ezpz laid it out; those answers live here, below all
three, so a reader never imports the code that starts and stops runs. Nothing here writes a
run, except :func:`.ending.finalise`, which the supervisor calls so that the words it records
and the words readers derive (:func:`.ending.derived_state`) come from one table.
"""
