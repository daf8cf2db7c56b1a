"""config.toml: found where expected, read without ever failing, saved without losing anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from ezpz_tui import config
from ezpz_tui.config import Config, load_config, save_setting, save_theme


@pytest.fixture
def cfg_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cfg"
    monkeypatch.setenv(config.ENV_CONFIG_DIR, str(directory))
    return directory


def test_env_var_moves_the_config_dir(cfg_dir: Path) -> None:
    assert config.config_dir() == cfg_dir
    assert config.config_path() == cfg_dir / "config.toml"
    assert config.user_themes_dir() == cfg_dir / "themes"


def test_default_dir_comes_from_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.ENV_CONFIG_DIR, raising=False)
    assert config.config_dir().name == "ezpz-tui"


def test_missing_file_gives_defaults_quietly(cfg_dir: Path) -> None:
    assert load_config() == (Config(), [])
    assert not cfg_dir.exists(), "reading never creates anything"


def test_reads_theme_and_keys(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    (cfg_dir / "config.toml").write_text(
        '[ui]\ntheme = "ezpz-nord"\n\n[keys]\nlaunch = "e"\n\n'
        "[launch]\nkill_on_bad_exit = false\nraised_grace_s = 2.5\n"
    )
    settings, problems = load_config()
    assert problems == []
    assert settings.theme == "ezpz-nord"
    assert settings.keys == {"launch": "e"}
    assert (settings.kill_on_bad_exit, settings.raised_grace_s) == (False, 2.5)


def test_launch_defaults_fail_fast_with_a_ten_second_grace(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    (cfg_dir / "config.toml").write_text("[launch]\n")
    settings, problems = load_config()
    assert problems == []
    assert (settings.kill_on_bad_exit, settings.raised_grace_s) == (True, 10.0)


def test_a_relaunch_waits_120_s_for_the_save_unless_told(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    (cfg_dir / "config.toml").write_text("[checkpoint]\nrelaunch_save_s = 30\n")
    settings, problems = load_config()
    assert problems == [] and settings.relaunch_save_s == 30.0
    (cfg_dir / "config.toml").write_text("[checkpoint]\nrelaunch_save_s = 0\n")
    settings, problems = load_config()
    assert settings.relaunch_save_s == 120.0
    assert problems == [
        f"{cfg_dir / 'config.toml'}: [checkpoint] relaunch_save_s should be a number from 1 to "
        "86400; using 120."
    ]


def test_follow_budget_defaults_and_a_bad_value(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    (cfg_dir / "config.toml").write_text("[follow]\nslowest = 30\n")
    settings, problems = load_config()
    assert problems == [] and (settings.stats_per_second, settings.slowest) == (200.0, 30.0)
    (cfg_dir / "config.toml").write_text('[follow]\nstats_per_second = "many"\n')
    settings, problems = load_config()
    assert settings.stats_per_second == 200.0
    assert problems == [
        f"{cfg_dir / 'config.toml'}: [follow] stats_per_second should be a number from 1 to "
        "1e+06; using 200."
    ]


def test_checkpoint_max_age_is_half_an_hour_by_default_and_a_bad_value(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    (cfg_dir / "config.toml").write_text("[checkpoint]\nbefore_walltime = 60\n")
    settings, problems = load_config()
    assert problems == [] and settings.checkpoint_max_age_s == 1800.0
    (cfg_dir / "config.toml").write_text("[checkpoint]\nmax_age = 0.5\n")
    settings, problems = load_config()
    assert problems == [] and settings.checkpoint_max_age_s == 0.5
    (cfg_dir / "config.toml").write_text("[checkpoint]\nmax_age = -1\n")
    settings, problems = load_config()
    assert settings.checkpoint_max_age_s == 1800.0
    assert problems == [
        f"{cfg_dir / 'config.toml'}: [checkpoint] max_age should be a number from 0 to 604800; "
        "using 1800."
    ]


def test_flight_recorder_on_by_default_off_by_config_and_a_bad_value(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    assert load_config()[0].flight_recorder is True
    (cfg_dir / "config.toml").write_text("[collectives]\nflight_recorder = false\n")
    assert load_config() == (Config(flight_recorder=False), [])
    (cfg_dir / "config.toml").write_text('[collectives]\nflight_recorder = "off"\n')
    settings, problems = load_config()
    assert settings.flight_recorder is True
    assert problems == [
        f"{cfg_dir / 'config.toml'}: [collectives] flight_recorder should be true or false; "
        "using true."
    ]


def test_corrupt_file_is_reported_and_left_alone(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    path = cfg_dir / "config.toml"
    original = b'[ui]\ntheme = "ezpz-nord\n'
    path.write_bytes(original)
    settings, problems = load_config()
    assert settings == Config()
    assert len(problems) == 1
    assert str(path) in problems[0] and "not valid TOML" in problems[0]
    assert path.read_bytes() == original
    assert sorted(p.name for p in cfg_dir.iterdir()) == ["config.toml"]


def test_undecodable_file_is_a_problem_not_a_crash(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    (cfg_dir / "config.toml").write_bytes(b"theme = '\xff\xfe'\n")
    settings, problems = load_config()
    assert settings == Config() and len(problems) == 1


def test_unreadable_path_is_a_problem_not_a_crash(cfg_dir: Path) -> None:
    (cfg_dir / "config.toml").mkdir(parents=True)
    settings, problems = load_config()
    assert settings == Config() and "Cannot read" in problems[0]


@pytest.mark.parametrize(
    ("text", "expected_problem"),
    [
        ('ui = "dark"\n', "[ui] should be a table"),
        ("[ui]\ntheme = 3\n", "theme should be a theme name"),
        ('[ui]\ntheme = "  "\n', "theme should be a theme name"),
        ('keys = "j"\n', "[keys] should be a table"),
        ("launch = 1\n", "[launch] should be a table"),
        ('[launch]\nkill_on_bad_exit = "yes"\n', "kill_on_bad_exit should be true or false"),
        ("[launch]\nkill_on_bad_exit = 1\n", "kill_on_bad_exit should be true or false"),
        ("[launch]\nraised_grace_s = -1\n", "raised_grace_s should be seconds"),
        ("[launch]\nraised_grace_s = true\n", "raised_grace_s should be seconds"),
        ('[launch]\nraised_grace_s = "10"\n', "raised_grace_s should be seconds"),
    ],
)
def test_wrong_types_fall_back_per_setting(cfg_dir: Path, text: str, expected_problem: str) -> None:
    cfg_dir.mkdir()
    (cfg_dir / "config.toml").write_text(text)
    settings, problems = load_config()
    assert settings == Config()
    assert len(problems) == 1 and expected_problem in problems[0]


UNKNOWN = """\
stall_afer = 3
[ui]
thme = "ezpz-nord"
[lanch]
ppn = 4
[launch]
ppm = 4
kill_on_bad_exti = false
[monitor]
stall_after = 5
[keys]
launch = "e"
"""


def test_every_unknown_name_gets_one_warning_with_the_closest_valid_name(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    path = cfg_dir / "config.toml"
    path.write_text(UNKNOWN)
    settings, problems = load_config()
    assert sorted(problems) == sorted(
        [
            f"{path}: unknown key stall_afer (did you mean [monitor] stall_after?)",
            f"{path}: unknown key [ui] thme (did you mean theme?)",
            f"{path}: unknown section [lanch] (did you mean [launch]?)",
            f"{path}: unknown key [launch] ppm",
            f"{path}: unknown key [launch] kill_on_bad_exti (did you mean kill_on_bad_exit?)",
        ]
    )
    # What is known is still used; what is not changes nothing.
    assert settings == Config(keys={"launch": "e"}, stall_after=5.0)


def test_a_setting_written_outside_its_section_points_at_the_section(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    (cfg_dir / "config.toml").write_text('theme = "ezpz-nord"\n')
    settings, problems = load_config()
    assert settings.theme is None
    assert problems == [f"{cfg_dir / 'config.toml'}: unknown key theme (did you mean [ui] theme?)"]


def test_unknown_theme_names_the_file_and_the_closest_theme(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    known = ["textual-dark", "ezpz-nord", "ezpz-gruvbox"]
    assert config.unknown_theme("ezpz-nrod", known, path) == (
        f"{path}: unknown theme [ui] theme = 'ezpz-nrod' (did you mean ezpz-nord?); "
        "using the default theme."
    )
    assert "did you mean" not in config.unknown_theme("zzzzzz", known, path)


def test_save_theme_creates_the_file(cfg_dir: Path) -> None:
    assert save_theme("ezpz-gruvbox") == []
    assert load_config() == (Config(theme="ezpz-gruvbox"), [])
    assert sorted(p.name for p in cfg_dir.iterdir()) == ["config.toml"], "no temp file left"


def test_save_keeps_every_other_setting(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    path = cfg_dir / "config.toml"
    path.write_text('[keys]\nlaunch = "e"\n\n[launch]\nnodes = 2\n')
    save_theme("ezpz-nord")
    save_theme("ezpz-vitesse")
    settings, _ = load_config()
    assert settings == Config(theme="ezpz-vitesse", keys={"launch": "e"})
    assert "nodes = 2" in path.read_text()


def test_save_keeps_a_commented_file_as_bak(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    path = cfg_dir / "config.toml"
    original = '# my keys\n[keys]\nlaunch = "e"   # e for execute\n'
    path.write_text(original)
    notes = save_theme("ezpz-nord")
    assert len(notes) == 1 and "config.toml.bak" in notes[0]
    assert (cfg_dir / "config.toml.bak").read_text() == original
    assert load_config()[0] == Config(theme="ezpz-nord", keys={"launch": "e"})
    assert save_theme("ezpz-everforest") == [], "a file we wrote ourselves needs no backup"


def test_save_over_a_corrupt_file_keeps_it_aside(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    path = cfg_dir / "config.toml"
    path.write_bytes(b"[keys\nlaunch = 'e'\n")
    notes = save_theme("ezpz-nord")
    assert len(notes) == 1 and "config.toml.broken" in notes[0]
    assert (cfg_dir / "config.toml.broken").read_bytes() == b"[keys\nlaunch = 'e'\n"
    assert load_config() == (Config(theme="ezpz-nord"), [])
    path.write_text("still [ broken")
    notes = save_theme("ezpz-gruvbox")
    assert "config.toml.broken.2" in notes[0], "an earlier copy is never overwritten"
    assert (cfg_dir / "config.toml.broken").exists()


def test_save_refuses_to_clobber_a_non_table(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    path = cfg_dir / "config.toml"
    path.write_text('ui = "mine"\n')
    problems = save_theme("ezpz-nord")
    assert problems and "Not saved" in problems[0]
    assert path.read_text() == 'ui = "mine"\n'


def test_save_failure_is_a_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    problems = save_setting("ui", "theme", "x", blocker / "config.toml")
    assert len(problems) == 1 and problems[0].startswith("Could not save theme")


def test_save_keeps_the_file_mode(cfg_dir: Path) -> None:
    cfg_dir.mkdir()
    path = cfg_dir / "config.toml"
    path.write_text('[ui]\ntheme = "a"\n')
    path.chmod(0o600)
    save_theme("b")
    assert path.stat().st_mode & 0o777 == 0o600
