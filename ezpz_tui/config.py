"""The user's settings file: where it lives, reading it without ever failing, saving one setting.

`config.toml` in the user config directory (platformdirs, app name `ezpz-tui`; the environment
variable EZPZ_TUI_CONFIG_DIR points elsewhere, which tests and site-wide setups use):

    [ui]
    theme = "ezpz-nord"
    launch_more = false       # the launch form's rarely used fields shown (za keeps it)

    [keys]
    launch = "r"
    center = "z z"

    [monitor]
    stall_after = 60   # seconds a rank may be silent while others progress
    slow_factor = 1.5  # a rank whose recent steps take this many times the median is "slow"

    [telemetry]
    interval = 2       # seconds between each rank's CPU/memory/accelerator samples; 0 = off

    [follow]
    stats_per_second = 200    # filesystem calls a second the followers may make on a live run
    slowest = 60              # seconds: every file of a live run is looked at least this often

    [collectives]
    flight_recorder = true    # torch's Flight Recorder in every rank, its entries in flight/

    [launch]
    kill_on_bad_exit = true   # a rank's failure stops the rest of the job (fail fast)
    raised_grace_s = 10       # how long a rank that raised may linger before the job is stopped
    retries = 0               # TUI: relaunch without the bad node after a node fault, N times

    [checkpoint]
    before_walltime = 300     # seconds of walltime left when the ranks are asked to checkpoint
    max_age = 1800            # seconds of training without a newer checkpoint before a warning
    relaunch_save_s = 120     # how long a relaunch waits for the run it replaces to save now

    [efficiency]
    peak_tflops = 989.4       # every device's peak, instead of the table's or the CPU probe's
    dtype = "bf16"            # the dtype whose peak MFU divides by: bf16, fp16, tf32 or fp32

Anything else in the file (a misspelt key or section, a theme that does not exist) gets one
warning naming the file and the key, with the closest valid name. The warnings go wherever the
caller shows problems: stderr for the CLI, a notification in the TUI.

The file belongs to the user. Reading never raises and never writes: a broken file is reported
and the defaults are used. Only saving a setting (e.g. picking a theme) writes, atomically, and
whatever the write would lose is kept next to it first: a file that does not parse is moved to
`config.toml.broken`, a file whose comments or layout a rewrite would drop is copied to
`config.toml.bak`. Plain data and logic: no textual import.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.telemetry.record import DEFAULT_INTERVAL_S

APP_NAME = "ezpz-tui"
ENV_CONFIG_DIR = "EZPZ_TUI_CONFIG_DIR"

TomlValue = str | int | float | bool | list[str]


def config_dir() -> Path:
    """The directory holding config.toml and the user's themes/ (EZPZ_TUI_CONFIG_DIR wins)."""
    override = os.environ.get(ENV_CONFIG_DIR)
    if override:
        return Path(override).expanduser()
    import platformdirs  # here: a launch told where its config is (EZPZ_TUI_CONFIG_DIR) skips it

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def config_path() -> Path:
    """The settings file."""
    return config_dir() / "config.toml"


def user_themes_dir() -> Path:
    """Where the user drops extra theme files (*.toml), loaded after the built-in ones."""
    return config_dir() / "themes"


@dataclass(frozen=True)
class Config:
    """The settings the UI reads at start. `keys` is the raw `[keys]` table; the keymap module
    validates it (`keymap.apply_overrides`), so every key problem is worded in one place."""

    theme: str | None = None
    launch_more: bool = False
    """`[ui] launch_more`: the launch form opens with its rarely used fields shown; ``za``
    in the form sets it (the fold as the person left it)."""
    keys: Mapping[str, object] = field(default_factory=dict)
    stall_after: float = 60.0
    slow_factor: float = 1.5
    """`[monitor] slow_factor`: a running rank whose recent step time is more than this many
    times the median rank's is shown ``slow`` (a straggler), distinct from ``stalled``."""
    telemetry_s: float = DEFAULT_INTERVAL_S
    """`[telemetry] interval`: seconds between the samples every rank's capture wrapper writes
    to ``telemetry/``; 0 turns the sampler off."""
    flight_recorder: bool = True
    """`[collectives] flight_recorder`: keep torch's Flight Recorder on in every rank the
    product launches and write its newest entries to the run's ``flight/``, which name the rank
    missing from a hung collective and the rank everyone waits for; false sets
    ``EZPZ_FLIGHT_RECORDER=0`` in the ranks' environment, which empties torch's own ring too."""
    kill_on_bad_exit: bool = True
    """`[launch] kill_on_bad_exit`: when a rank ends with a non-zero exit or a signal, stop the
    rest of the job within seconds (as `srun --kill-on-bad-exit` and torchrun do), so healthy
    ranks do not wait in their next collective until the backend's timeout. False keeps every
    other rank running, for jobs that tolerate a lost rank."""
    raised_grace_s: float = 10.0
    """`[launch] raised_grace_s`: seconds a rank whose log ends in an uncaught Python traceback
    may go on living (its MPI finalisation waiting for a peer) before the job is stopped as
    failed with that exception as its cause; only with `kill_on_bad_exit`."""
    stats_per_second: float = 200.0
    """`[follow] stats_per_second`: the metadata calls (stat, open, listing) a second that
    following a live run may cost; on Lustre each is a round trip every user of the machine
    waits behind. The files of the rank on screen come first."""
    slowest: float = 60.0
    """`[follow] slowest`: every file of a live run is looked at within this many seconds,
    even when that needs more than `stats_per_second` (a run with very many ranks)."""
    retries: int = 0
    """`[launch] retries`: in the TUI, how many times a run that failed with a node fault is
    relaunched without that node, unattended (as `ezpz-tui launch --retries N`)."""
    before_walltime_s: float = 300.0
    """`[checkpoint] before_walltime`: when the job's walltime left falls below this, the
    supervisor asks the run's ranks to checkpoint now (``runtime.checkpoint`` watches for
    it), so the end of the job loses nothing; 0 never asks."""
    checkpoint_max_age_s: float = 1800.0
    """`[checkpoint] max_age`: the summary bar and `top` warn when a crash now would redo
    more than this many seconds of training (no complete checkpoint is newer); 0 never warns."""
    relaunch_save_s: float = 120.0
    """`[checkpoint] relaunch_save_s`: how long a relaunch (`R`, `ezpz-tui relaunch`) waits for
    the live run it replaces to save at the step it is at; after it, the run is stopped and the
    new one continues from its newest complete checkpoint, which the progress line names."""
    peak_tflops: float | None = None
    """`[efficiency] peak_tflops`: the peak dense TFLOPS of one device that MFU divides by, for
    every run, instead of the sourced table's figure for its device (or the CPU probe's); for
    a device the table does not hold, or a clock the site sets lower."""
    peak_dtype: str = "bf16"
    """`[efficiency] dtype`: which of the table's peaks MFU divides by (bf16 by default, as
    torchtitan and Megatron report it); the CPU probe measures fp32 whatever this says."""


SCHEMA: Mapping[str, frozenset[str] | None] = {
    "ui": frozenset({"theme", "launch_more"}),
    "keys": None,  # any action name: the keymap checks them (`keymap.apply_overrides`)
    "monitor": frozenset({"stall_after", "slow_factor"}),
    "telemetry": frozenset({"interval"}),
    "collectives": frozenset({"flight_recorder"}),
    "launch": frozenset({"kill_on_bad_exit", "raised_grace_s", "retries"}),
    "follow": frozenset({"stats_per_second", "slowest"}),
    "checkpoint": frozenset({"before_walltime", "max_age", "relaunch_save_s"}),
    "efficiency": frozenset({"peak_tflops", "dtype"}),
}
"""Every section of config.toml and the keys each may hold."""


def _hint(name: str, choices: list[str], show: str = "{}") -> str:
    import difflib  # here: only a config with a mistake pays for it

    close = difflib.get_close_matches(name, choices, n=1)
    return f" (did you mean {show.format(close[0])}?)" if close else ""


def unknown_names(data: Mapping[str, object], path: Path) -> list[str]:
    """One warning per key or section of ``data`` that the schema does not know."""
    problems = []
    keyed = {key: section for section, keys in SCHEMA.items() for key in keys or ()}
    for name, value in data.items():
        if name in SCHEMA:
            keys = SCHEMA[name]
            if keys is None or not isinstance(value, dict):
                continue  # a wrong type is reported with the setting itself
            for key in value:
                if key not in keys:
                    hint = _hint(key, sorted(keys))
                    problems.append(f"{path}: unknown key [{name}] {key}{hint}")
        elif isinstance(value, dict):
            hint = _hint(name, list(SCHEMA), "[{}]")
            problems.append(f"{path}: unknown section [{name}]{hint}")
        else:
            import difflib

            close = difflib.get_close_matches(name, sorted(keyed), n=1)
            hint = f" (did you mean [{keyed[close[0]]}] {close[0]}?)" if close else ""
            problems.append(f"{path}: unknown key {name}{hint}")
    return problems


def unknown_theme(theme: str, known: list[str], path: Path | None = None) -> str:
    """The warning for a `[ui] theme` no loaded theme has, with the closest name."""
    path = config_path() if path is None else path
    hint = _hint(theme, sorted(known))
    return f"{path}: unknown theme [ui] theme = {theme!r}{hint}; using the default theme."


def _read(path: Path) -> tuple[dict[str, object] | None, str]:
    """The parsed file (None when missing) or a sentence saying why it cannot be used."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, ""
    except (OSError, UnicodeDecodeError) as err:
        return None, f"Cannot read {path} ({err}); using the default settings."
    tomllib = _tomllib()  # imported once there is a file: most launches have none
    try:
        return tomllib.loads(text), ""
    except tomllib.TOMLDecodeError as err:
        return None, f"{path} is not valid TOML ({err}); using the default settings."


def load_config(path: Path | None = None) -> tuple[Config, list[str]]:
    """The user's settings (defaults where missing or wrong) and a sentence for every problem.

    Never raises and never writes, whatever is in the file.
    """
    path = config_path() if path is None else path
    data, problem = _read(path)
    if data is None:
        return Config(), [problem] if problem else []
    problems: list[str] = []
    ui = data.get("ui", {})
    if not isinstance(ui, dict):
        problems.append(f"{path}: [ui] should be a table; ignored.")
        ui = {}
    theme = ui.get("theme")
    if theme is not None and not (isinstance(theme, str) and theme.strip()):
        problems.append(f'{path}: [ui] theme should be a theme name such as "ezpz-nord"; ignored.')
        theme = None
    launch_more = ui.get("launch_more", False)
    if not isinstance(launch_more, bool):
        problems.append(f"{path}: [ui] launch_more should be true or false; using false.")
        launch_more = False
    keys = data.get("keys", {})
    if not isinstance(keys, dict):
        problems.append(f'{path}: [keys] should be a table of action = "keys"; ignored.')
        keys = {}
    monitor = data.get("monitor", {})
    stall = monitor.get("stall_after", Config.stall_after) if isinstance(monitor, dict) else None
    if isinstance(stall, bool) or not isinstance(stall, (int, float)) or not 1 <= stall <= 86400:
        problems.append(
            f"{path}: [monitor] stall_after should be seconds between 1 and 86400; using "
            f"{Config.stall_after:g}."
        )
        stall = Config.stall_after
    slow, more = _number_in(monitor, "monitor slow_factor", Config.slow_factor, (1.05, 100), path)
    table = data.get("telemetry", {})
    if not isinstance(table, dict):
        more.append(f"{path}: [telemetry] should be a table; ignored.")
    telemetry, wrong = _number_in(table, "telemetry interval", Config.telemetry_s, (0, 3600), path)
    if telemetry and telemetry < 0.1:
        wrong.append(f"{path}: [telemetry] interval below 0.1 s; using 0.1.")
        telemetry = 0.1
    problems += more + wrong
    follow = data.get("follow", {})
    if not isinstance(follow, dict):
        problems.append(f"{path}: [follow] should be a table; ignored.")
    rate, more = _number_in(
        follow, "follow stats_per_second", Config.stats_per_second, (1, 1_000_000), path
    )
    slowest, wrong = _number_in(follow, "follow slowest", Config.slowest, (1, 86400), path)
    problems += more + wrong
    kill, grace, retries, more = _launch_settings(data.get("launch", {}), path)
    problems += more
    table = data.get("checkpoint", {})
    if not isinstance(table, dict):
        problems.append(f"{path}: [checkpoint] should be a table; ignored.")
    before, more = _number_in(
        table, "checkpoint before_walltime", Config.before_walltime_s, (0, 86400), path
    )
    max_age, wrong = _number_in(
        table, "checkpoint max_age", Config.checkpoint_max_age_s, (0, 604800), path
    )
    problems += more + wrong
    save_s, wrong = _number_in(
        table, "checkpoint relaunch_save_s", Config.relaunch_save_s, (1, 86400), path
    )
    problems += wrong
    peak, dtype, more = _efficiency_settings(data.get("efficiency", {}), path)
    flight, wrong = _flight_recorder(data.get("collectives", {}), path)
    problems += more + wrong + unknown_names(data, path)
    settings = Config(
        theme=theme,
        launch_more=launch_more,
        keys=keys,
        stall_after=float(stall),
        slow_factor=slow,
        telemetry_s=telemetry,
        flight_recorder=flight,
        kill_on_bad_exit=kill,
        raised_grace_s=grace,
        retries=retries,
        before_walltime_s=before,
        checkpoint_max_age_s=max_age,
        relaunch_save_s=save_s,
        stats_per_second=rate,
        slowest=slowest,
        peak_tflops=peak,
        peak_dtype=dtype,
    )
    return settings, problems


def _efficiency_settings(table: object, path: Path) -> tuple[float | None, str, list[str]]:
    """`[efficiency] peak_tflops` and `dtype`, defaults where missing or wrong."""
    if not isinstance(table, dict):
        return None, Config.peak_dtype, [f"{path}: [efficiency] should be a table; ignored."]
    problems = []
    peak = table.get("peak_tflops")
    if peak is not None and (
        isinstance(peak, bool) or not isinstance(peak, (int, float)) or not 0 < peak <= 1e6
    ):
        problems.append(
            f"{path}: [efficiency] peak_tflops should be a number of TFLOPS above 0; using the "
            "peak table."
        )
        peak = None
    from runtime.efficiency.peaks import DTYPES, dtype_name  # a file with [efficiency] only

    dtype = table.get("dtype", Config.peak_dtype)
    name = dtype_name(dtype) if isinstance(dtype, str) else None
    if name is None:
        known = ", ".join(sorted(set(DTYPES.values())))
        problems.append(
            f"{path}: [efficiency] dtype should be one of {known}; using {Config.peak_dtype}."
        )
        name = Config.peak_dtype
    return (None if peak is None else float(peak)), name, problems


def _number_in(
    table: object, name: str, default: float, bounds: tuple[float, float], path: Path
) -> tuple[float, list[str]]:
    """``name`` (``section key``) of ``table`` as a number within ``bounds``; the default,
    and a sentence saying so, when it is anything else (a table that is not one is reported
    by the caller)."""
    section, key = name.split()
    value = table.get(key, default) if isinstance(table, dict) else default
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        return default, [
            f"{path}: [{section}] {key} should be a number from {low:g} to {high:g}; using "
            f"{default:g}."
        ]
    return float(value), []


def _flight_recorder(table: object, path: Path) -> tuple[bool, list[str]]:
    """`[collectives] flight_recorder`, true where missing or wrong."""
    if not isinstance(table, dict):
        return True, [f"{path}: [collectives] should be a table; ignored."]
    value = table.get("flight_recorder", True)
    if isinstance(value, bool):
        return value, []
    return True, [f"{path}: [collectives] flight_recorder should be true or false; using true."]


def _launch_settings(launch: object, path: Path) -> tuple[bool, float, int, list[str]]:
    """`[launch] kill_on_bad_exit`, `raised_grace_s` and `retries`, defaults where missing or
    wrong."""
    kill, grace, retries = Config.kill_on_bad_exit, Config.raised_grace_s, Config.retries
    if not isinstance(launch, dict):
        return kill, grace, retries, [f"{path}: [launch] should be a table; ignored."]
    problems = []
    value = launch.get("kill_on_bad_exit", kill)
    if isinstance(value, bool):
        kill = value
    else:
        problems.append(f"{path}: [launch] kill_on_bad_exit should be true or false; using true.")
    value = launch.get("raised_grace_s", grace)
    if not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value <= 3600:
        grace = float(value)
    else:
        problems.append(
            f"{path}: [launch] raised_grace_s should be seconds between 0 and 3600; using "
            f"{Config.raised_grace_s:g}."
        )
    value = launch.get("retries", retries)
    if not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= 100:
        retries = value
    else:
        problems.append(f"{path}: [launch] retries should be a count from 0 to 100; using 0.")
    return kill, grace, retries, problems


def save_setting(section: str, name: str, value: TomlValue, path: Path | None = None) -> list[str]:
    """Set `[section] name = value` in the settings file, keeping everything else in it.

    Returns sentences for the user: what was kept aside, or why nothing was saved (a full disk,
    a read-only home). Empty when the setting was saved quietly.
    """
    import shutil  # the writing side's modules: reading the settings (every start) needs none

    import tomli_w

    path = config_path() if path is None else path
    notes: list[str] = []
    data, problem = _read(path)
    keep_as: Path | None = None
    if problem:
        keep_as = _unused_name(path.with_name(path.name + ".broken"))
        notes.append(
            f"{path} could not be read, so it was kept as {keep_as.name} and a new one was "
            "written; copy anything you need from it."
        )
    data = {} if data is None else data
    table = data.setdefault(section, {})
    if not isinstance(table, dict):
        return [f"Not saved: [{section}] in {path} is not a table; fix the file first."]
    table[name] = value
    text = tomli_w.dumps(data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if keep_as is None and path.exists() and not _round_trips(path):
            shutil.copy2(path, path.with_name(path.name + ".bak"))
            notes.append(
                f"{path} was rewritten; its previous version (with comments) is {path.name}.bak."
            )
        _atomic_write(path, text, keep_as)
    except OSError as err:
        return [f"Could not save {name} to {path}: {err}."]
    return notes


def save_theme(theme: str, path: Path | None = None) -> list[str]:
    """Remember the theme picked in the UI (see `save_setting` for the returned sentences)."""
    return save_setting("ui", "theme", theme, path)


def _round_trips(path: Path) -> bool:
    """Whether rewriting the file would reproduce it exactly (no comments or layout to lose)."""
    import tomli_w

    text = path.read_text(encoding="utf-8")
    return tomli_w.dumps(_tomllib().loads(text)) == text


def _tomllib() -> Any:
    """The TOML reader, imported when a file is read."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    return tomllib


def _unused_name(path: Path) -> Path:
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


def _atomic_write(path: Path, text: str, keep_old_as: Path | None) -> None:
    """Write beside the target, then rename over it: a crash leaves the old or the new file,
    never half of one. `keep_old_as` moves the old file aside first instead of replacing it."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        if keep_old_as is not None:
            os.replace(path, keep_old_as)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
