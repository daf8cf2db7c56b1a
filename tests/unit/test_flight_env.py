"""What the capture wrapper puts in a rank's environment for the Flight Recorder
(:func:`runtime.flight.add_env`): on, a 512-entry ring and where to write; off, an empty ring,
since torch keeps one of 2,000 entries when ``TORCH_FR_BUFFER_SIZE`` is unset; the user's
values win either way."""

from __future__ import annotations

from runtime import flight


def added(**env: str) -> dict[str, str]:
    out = dict(env)
    flight.add_env(out, "/run/flight/rank-00000.json", "/run/flight/rank-00000.fifo", "/run/nccl")
    return out


def test_on_by_default_with_the_ring_and_the_files() -> None:
    env = added()
    assert env[flight.BUFFER_VAR] == str(flight.DEFAULT_BUFFER)
    assert env[flight.FILE_VAR] == "/run/flight/rank-00000.json"
    assert env[flight.FIFO_VAR] == "/run/flight/rank-00000.fifo"


def test_off_empties_torch_s_own_ring_too() -> None:
    env = added(**{flight.ENABLE_VAR: "0"})
    assert env[flight.BUFFER_VAR] == "0"
    assert flight.FILE_VAR not in env and flight.FIFO_VAR not in env


def test_the_user_s_ring_wins_on_and_off() -> None:
    assert added(**{flight.ENABLE_VAR: "off", flight.BUFFER_VAR: "64"})[flight.BUFFER_VAR] == "64"
    assert added(**{flight.BUFFER_VAR: "0"})[flight.BUFFER_VAR] == "0"
