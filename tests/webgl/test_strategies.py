"""Every row of every kernel strategy table has a browser case (strategy_cases.py), so
each strategy runs on SwiftShader and on Mesa in test_browser.py against the numpy
executor (which also checks that each case's export holds a kernel of its row). No
browser needed: a row added without a case fails here wherever the tests run."""
from __future__ import annotations

from tests.webgl.strategy_cases import ROW_CASES, strategy_tables

ROWS = [s.name for table in strategy_tables().values() for s in table]


def test_every_row_of_every_strategy_table_has_a_browser_case():
    assert {"conv", "matmul", "reduce"} <= set(strategy_tables())
    missing = [row for row in ROWS if row not in ROW_CASES]
    assert not missing, (f"strategies without a browser case in tests/webgl/"
                         f"strategy_cases.py ROW_CASES: {', '.join(missing)}")
    assert sorted(ROW_CASES) == sorted(ROWS), "ROW_CASES names a strategy no table has"
