"""LogView.pull() reads only the new lines of a full, rotating 20k-line buffer, and shows what a full re-read would."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence

from textual.app import App, ComposeResult

from console.ui.logsearch import filter_rows, find_matches
from console.ui.widgets.log_view import LogView

CAP = 20_000


class CountingLines(Sequence[str]):
    """A LogModel-like deque that counts every line handed out, so a test can see what a pull read."""

    def __init__(self) -> None:
        self.d: deque[str] = deque(maxlen=CAP)
        self.count = 0
        self.read = 0

    def add(self, lines: list[str]) -> None:
        self.d.extend(lines)
        self.count += len(lines)

    def __len__(self) -> int:
        return len(self.d)

    def __getitem__(self, i):  # type: ignore[no-untyped-def, override]
        self.read += 1
        return self.d[i]

    def __iter__(self) -> Iterator[str]:
        for x in self.d:
            self.read += 1
            yield x

    def __reversed__(self) -> Iterator[str]:
        for x in reversed(self.d):
            self.read += 1
            yield x


def batch(start: int, n: int) -> list[str]:
    """SGLang-shaped lines; every 7th a WARNING, every 11th mentions 'oom'."""
    out = []
    for i in range(start, start + n):
        if i % 7 == 0:
            out.append(f"[2025-06-01 10:00:00] WARNING scheduler: slow step {i}")
        elif i % 11 == 0:
            out.append(f"[2025-06-01 10:00:00] Decode batch. #running-req: 3, near oom {i}")
        else:
            out.append(
                f"[2025-06-01 10:00:00] Decode batch. #running-req: 3, #token: {i}, gen throughput (token/s): 90.1"
            )
    return out


class One(App[None]):
    def __init__(self, src: CountingLines) -> None:
        super().__init__()
        self.src = src

    def compose(self) -> ComposeResult:
        yield LogView(lambda: (self.src, self.src.count))


def expected_rows(view: LogView, lines: list[str]) -> list[int]:
    return filter_rows(lines) if view.filtered else list(range(len(lines)))


async def test_pull_reads_only_new_lines_and_matches_a_full_reread() -> None:
    src = CountingLines()
    src.add(batch(0, CAP + 500))  # full and already rotating
    app = One(src)
    async with app.run_test(size=(120, 30)) as pilot:
        view = app.query_one(LogView)
        view.pull(force=True)
        view.search("oom")
        n = CAP + 500
        for step in range(40):
            src.read = 0
            src.add(batch(n, 30 + step))
            n += 30 + step
            assert view.pull()
            assert src.read <= 30 + step  # before: the whole buffer was copied on every pull
            lines = list(src.d)
            assert list(view.lines) == lines and len(view.lines) == CAP
            assert list(view.rows) == expected_rows(view, lines)
            assert view.matches == find_matches(lines, expected_rows(view, lines), "oom")
            if step == 10:
                view.filtered = True
                await pilot.pause()
        assert view.follow and view.filtered
        await pilot.pause()
        last = n - CAP + view.rows[-1] + 1  # the gutter numbers lines over the log's life
        assert view.render_line(view.scrollable_content_region.height - 1).text.split()[0] == str(last)


async def test_the_cursor_stays_on_its_line_while_the_full_buffer_rotates() -> None:
    src = CountingLines()
    src.add(batch(0, CAP))
    app = One(src)
    async with app.run_test(size=(120, 30)):
        view = app.query_one(LogView)
        view.pull(force=True)
        view.show_line(CAP - 100)
        target = view.lines[CAP - 100]
        src.add(batch(CAP, 40))
        view.pull()
        # before: every pull of a full buffer dropped the cursor (the buffer did not "only grow")
        assert view.cursor_row is not None and view.lines[view.rows[view.cursor_row]] == target
        src.add(batch(CAP + 40, CAP))  # the line itself scrolls out of memory: no cursor on another line
        view.pull()
        assert view.cursor_row is None


async def test_scrollbars_are_there_from_the_first_layout_and_lines_fit_beside_them(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The view's scrollbars are always shown (overflow: scroll) and already at its first layout, so that layout
    does not ask for a second whole-screen one when they appear; wrap hides the horizontal one. Copy and wrap
    count only the rows and columns a line is visible in, not the ones under the scrollbars."""
    from textual._compositor import Compositor

    src = CountingLines()
    src.add([f"{i:>4} " + "x" * 200 for i in range(100)])
    app = One(src)
    at_first: list[tuple[bool, bool]] = []
    real = Compositor.reflow

    def reflow(self, parent, size):  # type: ignore[no-untyped-def]
        views = list(parent.query(LogView)) if not at_first else []
        if views:
            at_first.append((views[0].vertical_scrollbar.display, views[0].horizontal_scrollbar.display))
        return real(self, parent, size)

    monkeypatch.setattr(Compositor, "reflow", reflow)
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(LogView)
        view.pull(force=True)
        await pilot.pause()
        await pilot.pause()
        assert at_first == [(True, True)]
        assert view.vertical_scrollbar.display and view.horizontal_scrollbar.display
        seen = view.scrollable_content_region
        assert (seen.width, seen.height) == (79, 19)
        assert view.visible_lines()[-1].startswith("  99 ") and len(view.visible_lines()) == 19
        view.wrap = True
        await pilot.pause()
        await pilot.pause()
        assert view.has_class("-wrap") and not view.horizontal_scrollbar.display
        assert view.scrollable_content_region.height == 20
        row = view.render_line(view.scrollable_content_region.height - 1).text
        assert len(row.rstrip()) <= 79  # a wrapped row ends before the vertical scrollbar


class StyledHost(App[None]):
    CSS = "LogView { height: 1fr; }"

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def compose(self) -> ComposeResult:
        yield LogView(lambda: (self.lines, len(self.lines)), id="log")


async def test_bare_view_draws_what_textuals_line_styling_draws() -> None:
    """The bare view's rows go to the frame without Textual's per-line box styling: cell for cell the same strips,
    with the app's line filters (monochrome here) and a crop that starts inside a row, as through Textual's path."""
    from rich.segment import Segment
    from textual.filter import Monochrome
    from textual.geometry import Region
    from textual.widget import Widget

    lines = [f"[2026-12-01 14:10:{i % 60:02d} TP0] Decode batch, #running-req: {i}" for i in range(300)]
    lines[150] = "[2026-12-01 14:10:00] ERROR: CUDA out of memory " + "x" * 200
    lines[151] = "[2026-12-01 14:10:00] WARNING: slow " + "\x1b[31mred\x1b[0m"
    app = StyledHost(lines)
    async with app.run_test(size=(90, 30)) as pilot:
        view = app.query_one(LogView)
        view.pull()
        view.search("batch")
        view.show_row(150)
        await pilot.pause()

        def cells(strips: list) -> list[list[tuple[str, object]]]:  # type: ignore[type-arg]
            return [[(s.text, s.style) for s in Segment.simplify(list(strip)) if s.text] for strip in strips]

        def textuals(crop: Region) -> list:  # type: ignore[type-arg]
            view._frame = view._new_frame()
            try:
                return Widget.render_lines(view, crop)
            finally:
                view._frame = None

        assert view._bare()
        for filters in ([], [Monochrome()]):
            view.get_line_filters = lambda f=filters: f  # type: ignore[method-assign]
            for crop in (Region(0, 0, 90, 30), Region(7, 3, 40, 10)):
                assert cells(view.render_lines(crop)) == cells(textuals(crop)), (filters, crop)
