"""Pure UI helpers: fixed-range sparklines, sizes, log filter/search/traceback, theme files."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.ui import format as fmt
from console.ui.logsearch import filter_rows, find_matches, find_traceback, level_of
from console.ui.screens.launch import launch_gpus, matching_presets
from console.ui.themes import BUILTIN_DIR, SEMANTIC_DEFAULTS, load_themes, theme_from_toml
from tests.ui.fakes import CRASH_LOG, demo_fleet


def test_sparkline_is_fixed_range_not_min_max() -> None:
    flat_high = fmt.sparkline([99.0] * 5, 5, top=100)
    flat_low = fmt.sparkline([5.0] * 5, 5, top=100)
    assert flat_high == "█████" and flat_low == "▁▁▁▁▁"  # Textual's Sparkline would draw both the same
    assert fmt.sparkline([0, 250, 500], 3) == "▁▅█"  # zero-anchored, round ceiling 500
    assert fmt.sparkline([], 4) == "    " and fmt.sparkline([1, 2], 0) == ""


def test_sparkline_rows_stack() -> None:
    rows = fmt.sparkline_rows([0, 50, 100], 3, 2, top=100)
    assert rows == ["  █", " ██"]


def test_sizes_and_ages() -> None:
    assert fmt.mem_pair(44_210, 49_140) == "43.2/48.0 GiB" and fmt.mem_pair(None, 1024) == "?/1.0 GiB"
    assert (fmt.age(14.2), fmt.age(200), fmt.age(9000)) == ("14 s", "3 min", "2 h")
    assert fmt.duration(8.44) == "8.4 s" and fmt.duration(245) == "4m05s" and fmt.duration(None) == "—"
    assert fmt.bar(0.5, 4) == ("██", "░░") and fmt.bar(None, 2) == ("", "░░") and fmt.bar(7, 2) == ("██", "")
    assert fmt.gpu_span([3, 1, 2]) == "1-3" and fmt.gpu_span([0, 2]) == "0,2"
    assert fmt.short_gpu_name("NVIDIA RTX PRO 6000 Blackwell Workstation Edition") == "RTX PRO 6000 Blackwell WS"
    assert fmt.clean("a\x1b[31mb\x1b[0m\x00c") == "abc" and fmt.clean("abcdef", 4) == "abc…"


def test_log_levels_filter_and_traceback() -> None:
    lines = ["ok", "[x] WARNING: slow", *CRASH_LOG, "after"]
    assert level_of(lines[1]) == "warning" and level_of("fine") is None
    rows = filter_rows(lines)
    assert 1 in rows and lines.index(CRASH_LOG[4]) in rows and lines.index(CRASH_LOG[2]) in rows
    assert 0 not in rows and len(lines) - 1 not in rows
    tb = find_traceback(lines, CRASH_LOG[4])
    assert tb is not None and "Traceback" in lines[tb]
    assert find_traceback(["a", "b"]) is None
    assert find_matches(lines, list(range(len(lines))), "oserror") == [lines.index(CRASH_LOG[4])]


def test_presets_filtered_to_selection() -> None:
    fleet = demo_fleet()
    names, exact = matching_presets(fleet.presets, "blackwell", [3])
    assert names[0] == "small" and exact
    names, exact = matching_presets(fleet.presets, "ct129", [0])
    assert names == ["qwen3-8b"]
    assert matching_presets(fleet.presets, "nohost", [0]) == ([], False)
    p = fleet.presets["small"]
    assert launch_gpus(p, [2]) == [2] and launch_gpus(p, [3]) is None and launch_gpus(p, []) is None


def test_builtin_themes_load_with_semantic_variables() -> None:
    loaded = load_themes([BUILTIN_DIR])
    names = {t.name for t in loaded.themes}
    assert {"dflash-dark", "dflash-light"} <= names and not loaded.problems
    for t in loaded.themes:
        assert set(SEMANTIC_DEFAULTS) <= set(t.variables)


def test_user_theme_folder_and_bad_files(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text('primary = "#112233"\n[variables]\ngpu-hot = "#ff00ff"\n')
    (tmp_path / "broken.toml").write_text("primary = \n")
    (tmp_path / "typo.toml").write_text('primary = "#000000"\nprimry = "#111111"\n')
    loaded = load_themes([tmp_path])
    assert [t.name for t in loaded.themes] == ["mine"]
    assert loaded.themes[0].variables["gpu-hot"] == "#ff00ff"
    assert len(loaded.problems) == 2 and any("primry" in p for p in loaded.problems)
    with pytest.raises(ValueError):
        theme_from_toml('name = "x"\n', "x")


def test_theme_file_nested_too_deep_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    """A user theme with a value nested 2000 deep killed the TUI at start with a RecursionError (issue 17.4)."""
    (tmp_path / "deep.toml").write_text('primary = "#112233"\nx = ' + "[" * 2000 + "]" * 2000 + "\n")
    (tmp_path / "mine.toml").write_text('primary = "#112233"\n')
    loaded = load_themes([tmp_path])
    assert [t.name for t in loaded.themes] == ["mine"]
    assert len(loaded.problems) == 1 and "deep.toml" in loaded.problems[0]
    assert "nested more than" in loaded.problems[0] and "2:" in loaded.problems[0]


async def test_user_theme_selected_by_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from console.config import user_config_dir
    from console.ui.app import DflashApp
    from tests.ui.fakes import NOW, FakeApi

    d = user_config_dir() / "themes"
    d.mkdir(parents=True, exist_ok=True)
    (d / "night.toml").write_text('name = "night"\nprimary = "#223344"\nbackground = "#000000"\n')
    app = DflashApp(FakeApi(), clock=lambda: NOW, theme="night")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "night" and app.theme_variables["phase-ready"] == SEMANTIC_DEFAULTS["phase-ready"]
    app = DflashApp(FakeApi(), clock=lambda: NOW, theme="no-such-theme")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "dflash-dark"


def test_escape_wait_follows_the_parser_not_the_idle_poll() -> None:
    from console.ui.textual_private import POLL_S, next_wait

    assert next_wait(None, 100.0) == POLL_S
    assert next_wait(100.010, 100.0) == pytest.approx(0.010)
    assert next_wait(99.0, 100.0) == 0.0  # overdue: do not sleep at all
    assert next_wait(105.0, 100.0) == POLL_S


def test_the_change_set_names_the_host_of_every_kind_of_event() -> None:
    """The App redraws `changes.hosts`: each kind of event names its host, a removed server's too."""
    from console.fleet.events import GpuSample, HealthResult, LogData, ServerRemoved, ServerSeen
    from console.fleet.state import FleetState
    from tests.ui.fakes import meta

    st = FleetState(["a", "b"])
    m = meta("p", "b", (0,), 30000, pid=1, sid=1)
    assert st.apply(ServerSeen(m, 1.0)).hosts == {"b"}
    assert st.apply(GpuSample("a", 1.0, ())).hosts == {"a"}
    assert st.apply(LogData(m.name, 1.0, "/x.log", 0, b"x\n")).hosts == {"b"}
    assert st.apply(HealthResult(m.name, 1.0, "ok")).hosts == {"b"}
    assert st.apply(ServerRemoved(m.name, 1.0)).hosts == {"b"}  # known before it went
    assert st.apply(ServerRemoved("gone-already", 1.0)).hosts == frozenset()  # nothing of the state changed
