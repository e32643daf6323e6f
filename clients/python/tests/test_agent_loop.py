"""Agent loops against the real gateway: the shipped Python example, and a
scripted model that keeps drifting until the gateway stops it."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO, Served
from toolgate import Gateway


def test_the_python_example_ends_with_the_final_answer() -> None:
    shipped = Served(["--pack", "courier"], REPO)
    try:
        run = subprocess.run(
            [sys.executable, str(REPO / "examples" / "python_agent.py")],
            env={**os.environ, "TOOLGATE_ADDR": shipped.addr},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        shipped.stop()
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[-1] == "assistant: Done: parcel PK-1001 now arrives on Sunday."
    assert any("must be between 1 and 7, got 8" in line for line in lines), run.stdout
    assert len((REPO / "examples" / "python_agent.py").read_text().splitlines()) < 60


def test_a_model_that_keeps_drifting_is_stopped_by_its_retry_budget(addr: str) -> None:
    gw = Gateway(addr)
    kinds = []
    for attempt in range(10):
        # The model never fixes its tracking code.
        call = {"id": f"call_{attempt}", "type": "function",
                "function": {"name": "track_parcel", "arguments": '{"code": "parcel one"}'}}
        outcome = gw.execute("track_parcel", call["function"]["arguments"], session_id="drifting-session")
        kinds.append(outcome.error.kind if outcome.error else "OK")
        if outcome.error and outcome.error.kind == "RETRY_BUDGET_EXHAUSTED":
            assert not outcome.error.retryable
            break
    assert kinds == ["INVALID_ARGUMENTS"] * 3 + ["RETRY_BUDGET_EXHAUSTED"], kinds
    gw.close()
