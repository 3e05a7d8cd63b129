"""SQL text for spend per day, budget alerts, a run's budgets and the prices calls used.
Executed by :mod:`store.runs.budget_log` and :mod:`store.runs.call_usage`."""

from __future__ import annotations

from store.model.token_lanes import each_lane

_NEXT = ",\n    "

INSERT_SPEND_DAY = """
INSERT INTO spend_days (day, calls, input_tokens, cache_read_tokens, cache_write_tokens,
                        output_tokens, reasoning_tokens, cost_usd, unpriced_calls)"""

SPEND_DAY_VALUES = """:day, :counted, :input_tokens, :cache_read_tokens, :cache_write_tokens,
        :output_tokens, :reasoning_tokens, coalesce(CAST(:cost_usd AS DOUBLE PRECISION), 0),
        :unpriced"""

SPEND_DAY_CONFLICT = f"""
ON CONFLICT (day) DO UPDATE SET
    calls = spend_days.calls + excluded.calls,
    cost_usd = spend_days.cost_usd + excluded.cost_usd,
    unpriced_calls = spend_days.unpriced_calls + excluded.unpriced_calls,
    {each_lane("{c} = spend_days.{c} + excluded.{c}", _NEXT)}
"""

UPSERT_SPEND_DAY = f"""{INSERT_SPEND_DAY}
VALUES ({SPEND_DAY_VALUES}){SPEND_DAY_CONFLICT}"""

SELECT_SPEND_DAY = "SELECT * FROM spend_days WHERE day = ?"

INSERT_ALERT = """
INSERT INTO budget_alerts (budget_key, threshold, run_id, at_ms)
VALUES (:budget_key, :threshold, :run_id, :now)
ON CONFLICT (budget_key, threshold) DO NOTHING
"""

SELECT_ALERTS_OF = "SELECT threshold FROM budget_alerts WHERE budget_key = ? ORDER BY threshold"

SET_RUN_BUDGET = """
UPDATE runs SET budget_json = :budget_json, updated_at_ms = :now WHERE run_id = :run_id
"""

# Runs held to a budget, newest first (``tether budget``): running ones and the latest others.
RUNS_WITH_BUDGETS = """
SELECT * FROM runs WHERE budget_json IS NOT NULL
ORDER BY status = 'running' DESC, created_at_ms DESC LIMIT ?
"""

# What each model's calls cost, for ``tether prices`` (one pass over calls).
PRICES_USED = f"""
SELECT model, count(*) AS calls, sum(CASE WHEN kind = 'model' THEN 1 ELSE 0 END) AS model_calls,
    {each_lane("sum({c}) AS {c}", _NEXT)},
    sum(cost_usd) AS cost_usd,
    sum(CASE WHEN cost_usd IS NULL AND kind != 'retry' THEN 1 ELSE 0 END) AS unpriced_calls,
    sum(simulated) AS simulated_calls
FROM calls GROUP BY model ORDER BY coalesce(sum(cost_usd), -1) DESC, model
"""
