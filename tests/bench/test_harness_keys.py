"""The latency benchmarks type through tmux's control client: every key reaches the terminal as typed."""

from __future__ import annotations

import shutil
import time

import pytest

from benchmarks.harness import TmuxConsole, _tmux_word

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is installed by .ci/run")


def test_tmux_words_keep_every_character() -> None:
    assert [_tmux_word(w) for w in ("i", "Escape", "C-c", "?", "'", 'a"b$c\\d', "a'b\"c$\\")] == [
        "i",
        "Escape",
        "C-c",
        "'?'",
        '"\'"',
        "'a\"b$c\\d'",
        '"a\'b\\"c\\$\\\\"',
    ]


def test_keys_typed_through_the_control_client_arrive_as_typed(tmp_path) -> None:
    con = TmuxConsole(tmp_path / "unused.toml", size=(80, 24))
    r = con.tmux("new-session", "-d", "-s", "c", "-x", "80", "-y", "24", "stty -echo; echo ready; cat -v")
    assert r.returncode == 0, r.stderr
    try:
        deadline = time.monotonic() + 10
        while "ready" not in con.screen() and time.monotonic() < deadline:  # echo off before the first key
            time.sleep(0.05)
        for k in ("i", "?", "'", 'a"b$c\\d', "a'b\"c$\\", "Escape", "Enter"):
            con.keys(k)
        assert con._control is not None  # not the `tmux send-keys` process per press
        deadline = time.monotonic() + 10
        while "^[" not in con.screen() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert con.screen().splitlines()[1] == "i?'a\"b$c\\da'b\"c$\\^["
    finally:
        _close(con)


def _close(con: TmuxConsole) -> None:
    con.close_clients()
    con.tmux("kill-server")


def test_a_wait_between_looks_sleeps_until_the_terminal_prints(tmp_path) -> None:
    """`wait_output` ends when the program in the pane prints after the last look (a key echoed back here) and not
    before: with nothing printed it runs out its time and says so; the next look shows what was printed."""
    con = TmuxConsole(tmp_path / "unused.toml", size=(80, 24))
    r = con.tmux("new-session", "-d", "-s", "c", "-x", "80", "-y", "24", "stty -echo; echo ready; cat -v")
    assert r.returncode == 0, r.stderr
    try:
        deadline = time.monotonic() + 10
        while "ready" not in con.screen() and time.monotonic() < deadline:
            time.sleep(0.05)
        con.wait_output(0.01)  # opens the watch
        assert con.sleep_between_looks and con._watch is not None
        con.screen()
        t0 = time.monotonic()
        assert con.wait_output(0.3) is False  # nothing printed since the look: the whole 0.3 s, then False
        assert time.monotonic() - t0 >= 0.29
        con.keys("x", "Enter")  # cat prints x back
        assert con.wait_output(10.0) is True
        deadline = time.monotonic() + 10
        while con.screen().splitlines()[1] != "x" and time.monotonic() < deadline:
            con.wait_output(0.05)
        assert con.screen().splitlines()[1] == "x"
    finally:
        _close(con)


def test_a_console_nobody_looks_at_keeps_printing(tmp_path) -> None:
    """The watch counts tmux's notices on a thread of its own, while no one waits or looks through it, and a pane
    printing ~5 MB with the watch as its only attached client gets all of it through."""
    con = TmuxConsole(tmp_path / "unused.toml", size=(80, 24))
    script = "sleep 0.5; seq -f '%0120g' 1 40000; echo flood-done; sleep 30"
    r = con.tmux("new-session", "-d", "-s", "c", "-x", "80", "-y", "24", script)
    assert r.returncode == 0, r.stderr
    try:
        con.wait_output(0.01)  # the watch is open before the flood has gone through
        assert con._watch is not None

        def look() -> str:  # a `tmux capture-pane` process, not the command client: the watch is the only one attached
            return con.tmux("capture-pane", "-p", "-t", "c").stdout

        deadline = time.monotonic() + 60
        while "flood-done" not in look() and time.monotonic() < deadline:
            time.sleep(1.0)  # looks seldom: the watch alone keeps up with ~5 MB of output
        assert "flood-done" in look()
        assert con._watch.printed > 0 and con._control is None
    finally:
        _close(con)


def test_settle_waits_while_the_cpu_still_falls() -> None:
    from benchmarks.harness import settled

    assert not settled([52.7])
    assert not settled([47.0, 40.0])  # still falling: the window run L's 64-host figure came from
    assert not settled([5.0, 2.7])
    assert settled([8.0, 7.6]) and settled([2.7, 1.0]) and settled([3.0, 9.0])
