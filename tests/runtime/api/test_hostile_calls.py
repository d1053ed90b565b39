"""Hostile Agent calls (issue 10, SPEC 5.2 and 12): every one gets a stable code, nothing
is persisted, and validation never runs on the runtime's loop."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.core.messages import AgentMessage, fingerprint
from lineup_runtime_lite.validation.params import (
    MAX_DETAILS,
    MAX_SAFE_INT,
    Envelope,
    canonical_text,
    check_envelope,
)
from lineup_sdk.codes import CODES
from lineup_sdk.errors import LineupError
from tests.faults.profile import hypothesis_profile


def rejected(rt: Runtime, *args: Any) -> AgentMessage:
    """Call, assert the answer is an error and that nothing at all was persisted."""
    before = rt.store_dump()
    msg = rt.call(*args)
    assert msg["kind"] == "error", msg
    assert rt.store_dump() == before, "a rejected call persisted something"
    json.dumps(msg, allow_nan=False).encode("utf-8")  # the answer itself is strict JSON
    return msg


def code(msg: Mapping[str, Any]) -> str:
    return str(msg["error"]["code"])


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


# -- one test per attack of the issue ----------------------------------------------------
def test_params_nested_10000_deep_is_invalid_params(bulk: Runtime) -> None:
    msg = rejected(bulk, "c1", "conv", "bulk.total", {"numbers": nested(10_000)})
    assert code(msg) == "invalid_params"
    assert msg["error"]["details"][0]["message"] == "nested deeper than 64 levels"
    assert msg["error"]["details"][0]["path"].startswith("/numbers/0/0")


def test_nesting_of_64_levels_passes_the_envelope(bulk: Runtime) -> None:
    # 64 levels is the limit itself: the schema (not the envelope) rejects it
    msg = rejected(bulk, "c1", "conv", "bulk.total", {"numbers": nested(63)})
    assert code(msg) == "invalid_params"
    assert "strict JSON" not in msg["error"]["message"]
    deeper = rejected(bulk, "c2", "conv", "bulk.total", {"numbers": nested(64)})
    assert "strict JSON" in deeper["error"]["message"]


@pytest.mark.parametrize(
    ("call_id", "conversation_id", "params"),
    [
        ("c1", "conv", {"text": "a\ud800b"}),
        ("c\udfff", "conv", {"text": "hi"}),
        ("c1", "conv\ud83d", {"text": "hi"}),
        ("c1", "conv", {"te\udc00xt": "hi"}),
    ],
    ids=["in-params", "in-call-id", "in-conversation-id", "in-a-key"],
)
def test_lone_surrogate_is_invalid_params(
    bulk: Runtime, call_id: str, conversation_id: str, params: Any
) -> None:
    msg = rejected(bulk, call_id, conversation_id, "bulk.echo", params)
    assert code(msg) == "invalid_params"


def test_details_show_the_value_safely(bulk: Runtime) -> None:
    msg = rejected(bulk, "c1", "conv", "bulk.total", {"numbers": [10**5000, "a\ud800"]})
    values = [d["value"] for d in msg["error"]["details"]]
    assert values == ["an integer of about 5001 digits", '"a\ufffd"']


@pytest.mark.parametrize(
    ("params", "pointer"),
    [
        ({"text": "x", 1: "y"}, "/1"),
        ({("a", "b"): 1}, "/('a', 'b')"),
        ({"text": b"bytes"}, "/text"),
        ({"text": {1, 2}}, "/text"),
        ({"text": ("a", "b")}, "/text"),
        ({"text": object()}, "/text"),
        (b"raw", ""),
    ],
    ids=["mixed-keys", "tuple-key", "bytes", "set", "tuple", "object", "bytes-params"],
)
def test_non_json_keys_and_types_are_invalid_params(
    bulk: Runtime, params: Any, pointer: str
) -> None:
    msg = rejected(bulk, "c1", "conv", "bulk.echo", params)
    assert code(msg) == "invalid_params"
    assert msg["error"]["details"][0]["path"] == pointer


@pytest.mark.parametrize(
    "number",
    [10**4301, -(10**4301), MAX_SAFE_INT + 1, -MAX_SAFE_INT - 1],
    ids=["4301-digits", "minus-4301-digits", "2^53", "minus-2^53"],
)
def test_integers_outside_i_json_are_invalid_params(bulk: Runtime, number: int) -> None:
    msg = rejected(bulk, "c1", "conv", "bulk.total", {"numbers": [1, number]})
    assert code(msg) == "invalid_params"
    assert msg["error"]["details"][0]["path"] == "/numbers/1"


def test_integers_at_the_i_json_bounds_pass(bulk: Runtime) -> None:
    # accepted (starts the app): the bounds themselves are valid JSON integers
    msg = bulk.call("c1", "conv", "bulk.total", {"numbers": [MAX_SAFE_INT, -MAX_SAFE_INT]})
    assert msg["stage"] == "accepted"
    bulk.settle()


@pytest.mark.parametrize("method", [["bulk.echo"], 7, None, "", "x" * 201, "bulk.\ud800"])
def test_a_method_that_is_not_a_string_is_invalid_params(bulk: Runtime, method: Any) -> None:
    assert code(rejected(bulk, "c1", "conv", method, {"text": "hi"})) == "invalid_params"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_invalid_params(bulk: Runtime, value: float) -> None:
    msg = rejected(bulk, "c1", "conv", "bulk.total", {"numbers": [value]})
    assert code(msg) == "invalid_params"
    assert msg["error"]["details"][0]["path"] == "/numbers/0"


@pytest.mark.parametrize(
    ("call_id", "conversation_id"),
    [
        ("c1", "x" * 5 * 1024 * 1024),
        ("x" * 201, "conv"),
        ("", "conv"),
        ("c1", ""),
        ("c\n1", "conv"),
        ("c1", "conv\x00"),
        ("c1", "conv\x85"),
        (1, "conv"),
        ("c1", None),
        ("c1", ["conv"]),
    ],
    ids=[
        "5-MiB-conversation",
        "201-char-call-id",
        "empty-call-id",
        "empty-conversation",
        "newline",
        "nul",
        "c1-control",
        "int-call-id",
        "none-conversation",
        "list-conversation",
    ],
)
def test_call_and_conversation_ids_are_1_to_200_chars_without_controls(
    bulk: Runtime, call_id: Any, conversation_id: Any
) -> None:
    msg = rejected(bulk, call_id, conversation_id, "bulk.echo", {"text": "hi"})
    assert code(msg) == "invalid_params"
    assert len(json.dumps(msg)) < 2000  # a 5 MiB id is never echoed back


def test_ids_of_200_chars_are_accepted(bulk: Runtime) -> None:
    msg = bulk.call("c" * 200, "v" * 200, "bulk.peek", {})
    assert code(msg) == "app_not_running"  # persisted: the ids were fine


def test_a_50_mb_string_is_params_too_large_and_never_stored(bulk: Runtime) -> None:
    started = time.perf_counter()
    msg = rejected(bulk, "c1", "conv", "bulk.echo", {"text": "x" * 50_000_000})
    assert code(msg) == "params_too_large"
    assert time.perf_counter() - started < 5  # stopped at the limit, not serialized whole
    assert "1048576 bytes" in msg["error"]["message"]


def test_a_1000000_item_array_is_params_too_large_at_once(bulk: Runtime) -> None:
    started = time.perf_counter()
    msg = rejected(bulk, "c1", "conv", "bulk.total", {"numbers": [0] * 1_000_000})
    assert code(msg) == "params_too_large"
    assert time.perf_counter() - started < 2  # sized, never validated


def test_200000_unknown_keys_are_params_too_large_with_a_small_answer(bulk: Runtime) -> None:
    params: dict[str, Any] = {"text": "hi", **{f"k{i}": i for i in range(200_000)}}
    msg = rejected(bulk, "c1", "conv", "bulk.echo", params)
    assert code(msg) == "params_too_large"
    assert len(json.dumps(msg)) < 2000


def test_the_params_limit_is_the_canonical_json_size(
    trust: TrustStore, clock: VirtualClock, host: HostSimulator, bulk_bundle: Path
) -> None:
    with Runtime.open(":memory:", trust=trust, clock=clock, host=host, max_params_bytes=100) as rt:
        rt.install(bulk_bundle)
        fits = {"text": "x" * (100 - len('{"text":""}'))}
        assert code(rt.call("c1", "conv", "bulk.peek", fits)) == "invalid_params"  # schema
        over = {"text": "x" * (101 - len('{"text":""}'))}
        assert code(rejected(rt, "c2", "conv", "bulk.peek", over)) == "params_too_large"
        # multi-byte characters count as their UTF-8 bytes
        wide = {"text": "é" * 50}
        assert code(rejected(rt, "c3", "conv", "bulk.peek", wide)) == "params_too_large"


@pytest.mark.parametrize("bad", [0, -1, 1.5, "1", True])
def test_max_params_bytes_must_be_a_positive_integer(trust: TrustStore, bad: Any) -> None:
    with pytest.raises(LineupError) as exc:
        Runtime.open(":memory:", trust=trust, clock=VirtualClock(), max_params_bytes=bad)
    assert exc.value.code == "usage_invalid"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"path": 3},
        {"path": ""},
        {"trust": 7},
        {"activation_timeout_s": 0},
        {"activation_timeout_s": float("nan")},
        {"activation_timeout_s": True},
    ],
    ids=["int-path", "empty-path", "int-trust", "zero-timeout", "nan-timeout", "bool-timeout"],
)
def test_open_with_unusable_arguments_is_usage_invalid(
    trust: TrustStore, kwargs: dict[str, Any]
) -> None:
    args: dict[str, Any] = {"path": ":memory:", "trust": trust, "clock": VirtualClock()}
    args.update(kwargs)
    path = args.pop("path")
    with pytest.raises(LineupError) as exc:
        Runtime.open(path, **args)
    assert exc.value.code == "usage_invalid"


def test_60000_unknown_keys_give_a_capped_invalid_params(bulk: Runtime) -> None:
    params: dict[str, Any] = {"text": "hi", **{f"k{i}": i for i in range(60_000)}}  # < 1 MiB
    msg = rejected(bulk, "c1", "conv", "bulk.echo", params)
    assert code(msg) == "invalid_params"
    assert len(msg["error"]["details"]) == MAX_DETAILS
    assert "60000 problems; the first 50 are listed" in msg["error"]["message"]
    assert len(json.dumps(msg)) < 50_000


def test_many_non_json_values_are_capped_too(bulk: Runtime) -> None:
    msg = rejected(bulk, "c1", "conv", "bulk.total", {"numbers": [float("nan")] * 1000})
    assert len(msg["error"]["details"]) == MAX_DETAILS
    assert "1000 problems" in msg["error"]["message"]


def test_a_closed_runtime_answers_usage_invalid(
    trust: TrustStore, clock: VirtualClock, bulk_bundle: Path
) -> None:
    rt = Runtime.open(":memory:", trust=trust, clock=clock)
    rt.close()
    for params in ({"text": "hi"}, {"text": float("nan")}):
        with pytest.raises(LineupError) as exc:
            rt.call("c1", "conv", "bulk.echo", params)
        assert exc.value.code == "usage_invalid"


@pytest.mark.parametrize("bad", [None, 3, "", "c\ud800", "x" * 201, ["c"]])
def test_surface_and_im_records_refuse_unusable_ids(bulk: Runtime, bad: Any) -> None:
    for use in (
        lambda: bulk.surface(bad, "bulk").get(),
        lambda: bulk.surface("conv", bad).get(),
        lambda: bulk.im_records(bad),
        lambda: bulk.uninstall(bad),
    ):
        with pytest.raises(LineupError) as exc:
            use()
        assert exc.value.code == "usage_invalid"


@pytest.mark.parametrize("limit", [-1, 0, 1001, 2.0, "5", None, True])
def test_outbox_fetch_limit_is_1_to_1000(bulk: Runtime, limit: Any) -> None:
    bulk.call("c1", "conv", "bulk.peek", {})
    with pytest.raises(LineupError) as exc:
        bulk.outbox.fetch(limit)
    assert exc.value.code == "usage_invalid"
    assert len(bulk.outbox.fetch(1)) == 1
    assert len(bulk.outbox.fetch(1000)) == 1


def test_outbox_ack_takes_a_list_of_ids(bulk: Runtime) -> None:
    for bad in ("c1:error", [1], None):
        with pytest.raises(LineupError) as exc:
            bulk.outbox.ack(bad)  # type: ignore[arg-type]
        assert exc.value.code == "usage_invalid"


# -- the property ------------------------------------------------------------------------
_CHARS = st.sampled_from(["a", "é", "\ud800", "\udfff", "\x00", "\x1f", "/", "~", "😀"])
_TEXT = st.text(alphabet=_CHARS, max_size=6)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**20, max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    _TEXT,
    st.binary(max_size=3),
    st.just(object()),
    st.frozensets(st.integers(), max_size=2),
)
_KEYS = st.one_of(_TEXT, st.integers(), st.tuples(st.integers()), st.none(), st.booleans())
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner),
        st.dictionaries(_KEYS, inner, max_size=4),
        st.sets(st.integers(), max_size=2),
    ),
    max_leaves=12,
)
_IDS = st.one_of(_TEXT, st.integers(), st.none(), st.just("ok-id"), st.just("x" * 201))
_METHODS = st.sampled_from(["bulk.peek", "bulk.total", "nope.call", 3, ["bulk.peek"], None])


@pytest.fixture(scope="module")
def bulk_module(
    trust: TrustStore, bulk_bundle: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Runtime]:
    rt = Runtime.open(":memory:", trust=trust, clock=VirtualClock(), host=HostSimulator("manual"))
    rt.install(bulk_bundle)
    try:
        yield rt
    finally:
        rt.close()


@settings(parent=hypothesis_profile(), max_examples=150, derandomize=True)
@given(
    call_id=_IDS,
    conversation_id=_IDS,
    method=_METHODS,
    params=st.one_of(_VALUES, st.dictionaries(_KEYS, _VALUES, max_size=4)),
)
def test_any_value_is_an_answer_or_a_documented_error(
    bulk_module: Runtime, call_id: Any, conversation_id: Any, method: Any, params: Any
) -> None:
    rt = bulk_module
    if method == "bulk.total":
        params = {"numbers": params}  # valid params would start a worker: keep them invalid
        if isinstance(params["numbers"], list):
            params["numbers"].append("not an int")
    before = rt.store_dump()
    try:
        msg = rt.call(call_id, conversation_id, method, params)
    except LineupError as exc:
        assert exc.code in CODES
        return
    assert msg["kind"] in ("receipt", "result", "error")
    json.dumps(msg, allow_nan=False).encode("utf-8")  # strict JSON, valid Unicode
    if msg["kind"] == "error":
        assert msg["error"]["code"] in CODES
        if msg["error"]["code"] in ("invalid_params", "params_too_large", "unknown_method"):
            assert rt.store_dump() == before


def test_acall_answers_hostile_calls_like_call(bulk: Runtime) -> None:
    async def go() -> list[AgentMessage]:
        return [
            await bulk.acall("c1", "conv", "bulk.echo", {"text": float("nan")}),
            await bulk.acall("c\ud800", "conv", "bulk.echo", {"text": "x"}),
            await bulk.acall("c2", "conv", "bulk.echo", {"text": "x" * 2_000_000}),
            await bulk.acall("c3", "conv", "bulk.total", {"numbers": nested(100)}),
        ]

    before = bulk.store_dump()
    codes = [code(m) for m in asyncio.run(go())]
    assert codes == ["invalid_params", "invalid_params", "params_too_large", "invalid_params"]
    assert bulk.store_dump() == before


def test_acall_checks_off_the_callers_loop(bulk: Runtime) -> None:
    """An asyncio caller's loop keeps running while a huge acall validates."""
    numbers: list[Any] = [i % 10 for i in range(500_000)]
    numbers[-1] = "x"

    async def go() -> tuple[int, AgentMessage]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                await asyncio.sleep(0.001)
                ticks += 1

        task = asyncio.create_task(ticker())
        msg = await bulk.acall("big", "conv", "bulk.total", {"numbers": numbers})
        stop.set()
        await task
        return ticks, msg

    ticks, msg = asyncio.run(go())
    assert code(msg) == "invalid_params"
    assert ticks > 20  # inline, the loop would not have ticked during the validation


# -- validation never runs on the runtime's loop -----------------------------------------
def test_a_slow_validation_delays_only_its_own_caller(bulk: Runtime) -> None:
    """While 500,000 integers validate (over a second of jsonschema), a ready session in
    another conversation keeps answering: its calls are not queued behind the validation."""
    assert bulk.call("w", "ready", "bulk.echo", {"text": "up"})["stage"] == "accepted"
    bulk.settle()
    usual = []
    for i in range(5):
        t0 = time.perf_counter()
        assert bulk.call(f"u{i}", "ready", "bulk.echo", {"text": "x"})["result"] == "x"
        usual.append(time.perf_counter() - t0)
    numbers: list[Any] = [i % 10 for i in range(500_000)]  # under 1 MiB of JSON
    numbers[-1] = "not an int"  # rejected at the very end of the validation
    big: dict[str, Any] = {}
    started = threading.Event()

    def slow() -> None:
        started.set()
        t0 = time.perf_counter()
        big["msg"] = bulk.call("big", "other", "bulk.total", {"numbers": numbers})
        big["took"] = time.perf_counter() - t0

    thread = threading.Thread(target=slow)
    thread.start()
    started.wait()
    during: list[float] = []
    while thread.is_alive():
        t0 = time.perf_counter()
        bulk.call(f"d{len(during)}", "ready", "bulk.echo", {"text": "y"})
        during.append(time.perf_counter() - t0)
    thread.join()
    assert big["msg"]["error"]["code"] == "invalid_params"
    assert len(during) >= 3, (big["took"], during)  # answered while the validation ran
    # on the loop, one call would have waited for the whole validation
    assert max(during) < big["took"] / 2, (big["took"], usual, during)


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=20,
)


@settings(parent=hypothesis_profile(), max_examples=200, derandomize=True)
@given(value=_JSON, conversation=st.text(min_size=1, max_size=5))
def test_the_sliced_canonical_json_is_the_canonical_json(value: Any, conversation: str) -> None:
    assert canonical_text(value) == json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    env = check_envelope("c1", "conv", "m.x", value, max_bytes=10**9)
    assert isinstance(env, Envelope)
    assert env.fingerprint == fingerprint("conv", "m.x", value)


def test_long_arrays_are_sliced_the_same_way() -> None:
    value = {"a": list(range(10_000)), "b": [{"x": [1.5, "é"]}] * 5000, "c": ["s"] * 9000}
    assert canonical_text(value) == json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
