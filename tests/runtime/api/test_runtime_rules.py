"""Rules a mutation audit found untested (issue 12, "Missing today"), through the public
API only: each test names, in a comment, the one-line change to the runtime it catches.

Session data stays in its conversation; a `foreground_required` call on an `app_ready`
session waits for the Host; params are rejected for every format and `pattern` the
validator claims (fast, even for a backtracking trap); a handler timeout fires on time;
`print()` reaches the worker log and `lineup run --verbose`; `uninstall()` empties the
inventory but keeps stored answers. (The queued at-most-once crash test and the Host intent
tests live with the fault suite: tests/faults/test_mutation_audit_faults.py and
tests/faults/test_relay_faults.py.)
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_sdk.context import Snapshot
from tests.cli_kit import run_cli
from tests.runtime.conftest import APPS, build_app, ready


@pytest.fixture()
def rt(store_rt: Runtime) -> Runtime:
    """This module's runtimes (`rt`, `probe`, `pomo`) run on the chosen store engine."""
    return store_rt


@pytest.fixture(scope="session")
def formats_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_app(APPS / "formats", tmp_path_factory.mktemp("formats") / "formats", rt_key)


def stages(rt: Runtime, call_id: str) -> list[str]:
    record = rt.call_record(call_id)
    assert record is not None, call_id
    return [m["stage"] for m in record["messages"]]


# -- a. session data stays in its conversation -------------------------------------------
# Catches, in `Subscriptions.changed` (sessiondata.py), fanning a change out by scope:
#   for sub in [s for k, subs in self._subs.items() if k[0] == key[0] for s in subs.values()]:
@pytest.mark.store
def test_a_replace_in_one_conversation_sends_no_frame_to_another_conversations_subscriber(
    probe: Runtime,
) -> None:
    ready(probe, "c1")
    ready(probe, "c2")
    seen: dict[str, list[tuple[str, Snapshot]]] = {"c1": [], "c2": []}

    def collect(conv: str) -> Callable[[str, Snapshot], None]:
        return lambda kind, snap: seen[conv].append((kind, snap))

    unsubscribe = [probe.surface(conv, "probe").subscribe(collect(conv)) for conv in seen]
    write = {"data": {"n": 1}, "expected_revision": 0}
    assert probe.call("w1", "c1", "probe.write", write)["result"] == 1
    probe.settle()  # every queued frame delivered
    assert seen["c1"] == [
        ("session_data.snapshot", Snapshot(None, 0)),
        ("session_data.changed", Snapshot({"n": 1}, 1)),
    ]
    assert seen["c2"] == [("session_data.snapshot", Snapshot(None, 0))]  # only its own
    assert probe.surface("c2", "probe").get() == Snapshot(None, 0)
    for unsub in unsubscribe:
        unsub()


# -- c. foreground_required on a session an app_ready call made ready ---------------------
# Catches, in `calls.accept_call`, dropping the foreground condition:
#   and (not needs_fg or act.foreground)   ->   and True
@pytest.mark.store
def test_c_foreground_call_on_an_app_ready_session_starts_and_waits_for_the_host(
    probe: Runtime, host: HostSimulator
) -> None:
    assert host.policy == "manual"
    ready(probe)  # probe.echo (app_ready): the worker is up, the session ready
    assert stages(probe, "warmup-conv") == ["accepted", "activation_ready", "result"]
    assert host.intents == []  # app_ready needs no Host
    msg = probe.call("fg1", "conv", "probe.fg", {})
    assert (msg["kind"], msg["stage"], msg.get("activation")) == ("receipt", "accepted", "starting")
    probe.settle()
    assert stages(probe, "fg1") == ["accepted"]  # no result without the Host
    assert [i["conversation"] for i in host.intents] == ["conv"]  # the Host is asked to show
    # an app_ready call meanwhile joins the starting activation's queue, behind it (FIFO)
    queued = probe.call("e2", "conv", "probe.echo", {"text": "after"})
    assert (queued["stage"], queued.get("activation")) == ("accepted", "queued")
    probe.settle()
    assert stages(probe, "fg1") == ["accepted"]
    assert probe.host.event(
        "foreground_confirmed",
        conversation="conv",
        scope="probe",
        instance=host.intents[-1]["instance"],
    )
    probe.settle()
    assert stages(probe, "fg1") == ["accepted", "activation_ready", "result"]
    record = probe.call_record("fg1")
    assert record is not None and record["messages"][-1]["result"] == "foreground"
    assert stages(probe, "e2") == ["accepted", "result"]


# -- d. formats and patterns ---------------------------------------------------------------
TRAP = "a" * 28 + "!"  # Python `re` needs ~2^28 steps for ^(a+)+$ (seconds); linear: µs

# (method, the schema keyword and value it declares, a rejected value, an accepted value).
# Each row catches deleting its own line in `_build_validator_class` (validation.py):
#   checker.checks("date-time", raises=ValueError)(_dt)   (and "date", "time", "uuid",
#   "email"); the `pattern` rows catch  `if isinstance(instance, str) and not _pattern_...`
#   -> `if False and ...`, and the trap row dropping the linear engine:
#   {"pattern": pattern, ...} -> {...} without "pattern" (jsonschema's stock `re.search`).
FORMATS = [
    ("formats.date_time", ("format", "date-time"), "2024-13-01T00:00:00Z", "2024-05-06T07:08:09Z"),
    ("formats.date_time", ("format", "date-time"), "tomorrow", "2024-05-06T07:08:09+02:00"),
    ("formats.date", ("format", "date"), "2023-02-29", "2024-02-29"),
    ("formats.time", ("format", "time"), "25:00:00", "07:08:09"),
    ("formats.uuid", ("format", "uuid"), "not-a-uuid", "12345678-1234-5678-1234-567812345678"),
    ("formats.email", ("format", "email"), "no-at-sign.example", "ada@example.org"),
    ("formats.code", ("pattern", r"^[A-Z]{3}-\d{2}$"), "abc-12", "ABC-12"),
    ("formats.trap", ("pattern", "^(a+)+$"), TRAP, "aaaa"),
]
IDS = ["date-time", "date-time-text", "date", "time", "uuid", "email", "pattern", "trap"]


@pytest.fixture()
def formats(rt: Runtime, formats_bundle: Path) -> Runtime:
    rt.install(formats_bundle)
    up = rt.call("up", "conv", "formats.code", {"value": "UPP-00"})
    assert (up["stage"], up.get("activation")) == ("accepted", "starting")
    rt.settle()
    assert stages(rt, "up") == ["accepted", "activation_ready", "result"]
    return rt


@pytest.mark.store
@pytest.mark.parametrize(("method", "declared", "bad", "good"), FORMATS, ids=IDS)
def test_d_the_runtime_rejects_each_format_and_pattern_it_claims(
    formats: Runtime, method: str, declared: tuple[str, str], bad: str, good: str
) -> None:
    rt = formats
    tool = next(t for t in rt.inventory() if t["method"] == method)
    keyword, value = declared
    assert tool["input_schema"]["properties"]["value"][keyword] == value  # what is claimed
    before = rt.store_dump()
    t0 = time.perf_counter()
    msg = rt.call("bad", "conv", method, {"value": bad})
    took = time.perf_counter() - t0
    assert msg["kind"] == "error" and msg["error"]["code"] == "invalid_params", msg
    # the runtime's own rejection: nothing persisted (a worker-side rejection would be)
    assert rt.call_record("bad") is None
    assert rt.store_dump() == before
    (problem,) = msg["error"]["details"]
    assert problem["path"] == "/value"
    assert problem["expected"].startswith(keyword)
    assert bad[:100] in problem["value"]
    assert took < 2.0, f"{method} took {took:.2f} s to reject {bad[:40]!r}"
    ok = rt.call("good", "conv", method, {"value": good})
    assert ok["kind"] == "result", ok


# -- e. handler timeout -----------------------------------------------------------------
# Catches, in `DeliveryDriver._send` (drivers/delivery.py), a timer armed late (or early):
#   call_later(tool.timeout_s, _expire, fut) -> call_later(tool.timeout_s * 10, _expire, fut)
@pytest.mark.store
def test_e_a_handler_timeout_fires_close_to_its_timeout_s(probe: Runtime) -> None:
    # real (monotonic) time is the behaviour under test: the runtime's clock is virtual
    # and never moves here, so only the real-time timer can end the call
    ready(probe)
    timeout_s = next(t for t in probe.inventory() if t["method"] == "probe.hang")
    assert "timeout_s" not in timeout_s  # the inventory hides delivery internals
    limit = 0.5  # probe.hang declares timeout_s=0.5
    for n in range(2):  # twice: a timed-out handler does not make the next one slower
        t0 = time.monotonic()
        msg = probe.call(f"h{n}", "conv", "probe.hang", {})
        took = time.monotonic() - t0
        assert msg["error"]["code"] == "handler_timeout", msg
        assert limit <= took < limit + 1.0, took
    assert probe.call("e", "conv", "probe.echo", {"text": "alive"})["result"] == "alive"


# -- f. print() in a handler --------------------------------------------------------------
MARK = "print-marker-4711"


# Catches, in `Worker._spawn` (worker_process.py), losing the handler's stdout:
#   stdout=log_w  ->  stdout=subprocess.DEVNULL
def test_f_print_in_a_handler_reaches_the_worker_log_not_the_agent(
    tmp_path: Path, trust: TrustStore, probe_bundle: Path
) -> None:
    apps = tmp_path / "apps"
    rt = Runtime.open(
        tmp_path / "rt.db",
        trust=trust,
        clock=VirtualClock(),
        host=HostSimulator("manual"),
        apps_dir=apps,
    )
    try:
        rt.install(probe_bundle)
        ready(rt)
        msg = rt.call("p1", "conv", "probe.echo", {"text": MARK})
        assert msg["result"] == MARK
        assert all(MARK not in str(m) or m["call_id"] == "p1" for m in rt.outbox.all())
    finally:
        rt.close()  # the worker exits: its output is flushed and the log closed
    logs = {p: p.read_text("utf-8", "replace") for p in apps.rglob("*.log")}
    assert [p.name for p, text in logs.items() if f"noise on stdout {MARK}" in text], logs


def _probe_project(tmp_path: Path, text: str) -> tuple[Path, Path]:
    project = tmp_path / "probe"
    shutil.copytree(APPS / "probe", project)
    scenario = tmp_path / "print.toml"
    scenario.write_text(
        "[[step]]\n"
        f'call = {{ id = "p1", conversation = "c1", method = "probe.echo", params = {{ text = "{text}" }} }}\n'
        'expect = [{ stage = "accepted" }, { stage = "activation_ready" }, { stage = "result" }]\n'
    )
    return project, scenario


# Catches, in `lineup run` (lineup_build/cli/run.py), not showing the worker log:
#   if verbose:   ->   if False:
def test_f_print_in_a_handler_reaches_lineup_run_verbose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project, scenario = _probe_project(tmp_path, MARK)
    code, out, err = run_cli(
        ["run", str(project), "--scenario", str(scenario), "--verbose"], capsys
    )
    assert code == 0, (out, err)
    assert f"noise on stdout {MARK}" in out + err
    code, out, err = run_cli(["run", str(project), "--scenario", str(scenario)], capsys)
    assert code == 0, (out, err)
    assert f"noise on stdout {MARK}" not in out + err  # the log only with --verbose


# STYLE 27 (render outside text literally): `lineup run --verbose` printed the worker log
# through rich markup, so "[/] [bold]not bold[/bold]" showed as " not bold". Catches, in
# lineup_build/cli/run.py: `_render.literal_block(log)` -> `_render.line(log)`.
def test_f_verbose_shows_the_worker_log_literally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "[/] [bold]not bold[/bold]"
    project, scenario = _probe_project(tmp_path, text)
    code, out, err = run_cli(
        ["run", str(project), "--scenario", str(scenario), "--verbose"], capsys
    )
    assert code == 0, (out, err)
    assert f"noise on stdout {text}" in out + err


# -- g. uninstall ---------------------------------------------------------------------------
# Catches, in `AsyncRuntime.uninstall` (async_runtime.py), a registry left stale:
#   await (the engine).refresh_registry()   ->   pass
# and, in `Engine.call` (engine.py, its step), routing before idempotency:
#   if existing is not None:   ->   if existing is not None and tool is not None:
@pytest.mark.store
def test_g_uninstall_empties_the_inventory_and_keeps_stored_answers(probe: Runtime) -> None:
    ready(probe)
    done = probe.call("e1", "conv", "probe.echo", {"text": "kept"})
    assert done["result"] == "kept"
    accepted = probe.call_record("warmup-conv")
    assert accepted is not None
    assert any(t["method"].startswith("probe.") for t in probe.inventory())
    probe.uninstall("probe")
    assert [t["method"] for t in probe.inventory() if t["method"].startswith("probe.")] == []
    assert [a["scope"] for a in probe.apps()] == []
    gone = probe.call("e2", "conv", "probe.echo", {"text": "x"})
    assert gone["kind"] == "error" and gone["error"]["code"] == "unknown_method"
    assert probe.call_record("e2") is None  # nothing persisted for it
    # a repeated call_id returns its stored answer, not unknown_method
    assert probe.call("e1", "conv", "probe.echo", {"text": "kept"}) == done
    assert (
        probe.call("warmup-conv", "conv", "probe.echo", {"text": "hi"})
        == (accepted["messages"][-1])
    )
    # and a conflicting repeat is still a conflict
    clash = probe.call("e1", "conv", "probe.echo", {"text": "other"})
    assert clash["error"]["code"] == "call_id_conflict"


@pytest.mark.store
def test_g_an_uninstalled_app_can_be_installed_again(probe: Runtime, probe_bundle: Path) -> None:
    ready(probe)
    probe.uninstall("probe")
    assert probe.call("x", "conv", "probe.echo", {"text": "x"})["error"]["code"] == (
        "unknown_method"
    )
    probe.install(probe_bundle)
    back = probe.call("y", "conv", "probe.echo", {"text": "y"})
    assert back.get("result") == "y" or back["stage"] == "accepted", back


# -- h. NaN and ±Infinity (issue 20) --------------------------------------------------------
MEASURE_SOURCE = '''
from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="measure")


@tools.tool("measure.scale", activation="app_ready")
async def scale(ctx: ToolContext, factor: float, values: list[float], label: str) -> float:
    """Scale the values."""
    return factor * sum(values)
'''


@pytest.fixture(scope="module")
def measure_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    from tests.runtime.conftest import build_source_app

    return build_source_app(tmp_path_factory.mktemp("measure"), "measure", MEASURE_SOURCE, rt_key)


# Catches, in `strict_json_problems` (params.py), dropping the float check:
#   if value != value or value in (float("inf"), float("-inf")):  ->  if False:
# and, in `_scalar_list_size`, dropping the fast path's finiteness check:
#   if not all(map(math.isfinite, floats)):  ->  if False:
# (the input schema would refuse the value too, later and with other words: the test tells
# the two apart by asking for a call that the schema would also fault for a missing field)
@pytest.mark.store
@pytest.mark.parametrize("where", ["number", "array-of-numbers"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_h_nan_or_infinity_for_a_number_is_invalid_params_before_any_schema_check(
    rt: Runtime, measure_bundle: Path, where: str, value: float
) -> None:
    rt.install(measure_bundle)
    params: dict[str, object] = {"factor": 2.0, "values": [1.5, 2.5]}  # `label` is missing
    if where == "number":
        params["factor"] = value
        pointer = "/factor"
    else:
        params["values"] = [1.5, value, 2.5]
        pointer = "/values/1"
    msg = rt.call("n1", "conv", "measure.scale", params)
    assert msg["kind"] == "error" and msg["error"]["code"] == "invalid_params", msg
    assert "not strict JSON" in msg["error"]["message"], msg
    # only the JSON problem: no schema ran (it would also report the missing `label`)
    assert [d["path"] for d in msg["error"]["details"]] == [pointer], msg
    assert msg["error"]["details"][0]["expected"] == "a finite number", msg
    assert rt.call_record("n1") is None  # nothing stored
    # the control: a finite number with every field passes both checks
    ok = rt.call("n2", "conv", "measure.scale", {"factor": 2.0, "values": [1.5], "label": "x"})
    assert ok["stage"] == "accepted", ok
    rt.settle()
