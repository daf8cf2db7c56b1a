"""The Compare tab: a relaunched run beside its parent without being asked, a run marked with c
added, the faster run's figures marked best, the tab refreshed only while it shows."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import TabbedContent

from ezpz_tui.ui.widgets.compare import CompareView
from runtime.metric_files import metric_files
from tests.fixtures.runs import make_run
from tests.functional.test_app import make_app, settle
from tests.pilots import FIXED, HOST, LOCAL, text_of, until

SIZE = (120, 40)


def local_run(
    outputs: Path, run_id: str, tp: int, hours_ago: int, parent: str | None = None
) -> Path:
    return make_run(
        outputs,
        run_id=run_id,
        state="succeeded",
        exit_code=0,
        sizes={"tp": tp},
        ranks=2,
        steps=20,
        created=FIXED - 3600.0 * hours_ago,
        parent=parent,
        hosts=(HOST,),
        scheduler="none",
        job_id=None,
        machine=LOCAL.machine,
    )


def twice_as_fast(run_dir: Path) -> None:
    """Every record of the run with half the step time and twice the throughput."""
    for path, _rank in metric_files(run_dir):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for record in records:
            metrics = record["metrics"]
            metrics["dt"] = metrics["dt"] / 2
            metrics["tokens_per_s"] = metrics["tokens_per_s"] * 2
        path.write_text("".join(json.dumps(r) + "\n" for r in records))


def table_rows(view: CompareView) -> dict[str, list[str]]:
    table = view.table
    return {
        str(table.get_row_at(i)[0]): [str(c) for c in table.get_row_at(i)[1:]]
        for i in range(table.row_count)
    }


async def test_a_relaunch_is_compared_with_its_parent_and_marked_runs(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    other = local_run(outputs, "20261120-080000-000-tp1pp1cp1", tp=1, hours_ago=30)
    parent = local_run(outputs, "20261122-100000-000-tp1pp1cp1", tp=1, hours_ago=3)
    child = local_run(outputs, "20261122-110000-000-tp2pp1cp1", 2, 2, parent=parent.name)
    twice_as_fast(child)
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await app.main.open_run(child)
        view = app.query_one(CompareView)
        await until(pilot, lambda: view.comparison is not None, "read in the background", 20)
        await pilot.press("J", "t", "t")  # Run -> Metrics -> Compare
        assert app.query_one(TabbedContent).active == "tab-compare"
        rows = table_rows(view)
        assert rows["TP"] == ["2", "1"], "the faster child first, its parent beside it unasked"
        assert rows["tokens/s"] == ["4096*", "2048"]
        assert rows["step ms"] == ["125*", "250"]
        details = text_of(view.query_one("#compare-details"))
        assert f" 1 {child.name}  (parent {parent.name})" in details
        assert "sizes.tp: 1 → 2" in details, "older → newer"

        # c on the oldest run in the runs list adds it (and overlays it on the plots).
        await pilot.press("L", "G", "c")
        await until(pilot, lambda: len(view.comparison.runs) == 3, "three runs compared", 20)
        assert table_rows(view)["TP"] == ["2", "1", "1"]
        assert other.name in text_of(view.query_one("#compare-details"))
