"""Query-string parsing with the .NET rules the extension's HttpApiHandler relies on."""

from datetime import UTC, datetime

from multidict import MultiDict

from devhost.http.query import QueryArgs


def args(*pairs: tuple[str, str]) -> QueryArgs:
    return QueryArgs(MultiDict(pairs))


def test_names_are_case_insensitive_and_repeats_join() -> None:
    query = args(("TaskHub", "a"), ("taskhub", "b"))
    assert query.get("taskHub") == "a,b"
    assert query.get("missing") is None


def test_booleans_parse_like_bool_tryparse() -> None:
    assert args(("showHistory", "True")).get_bool("showHistory") is True
    assert args(("showHistory", " false ")).get_bool("showHistory") is False
    assert args(("showHistory", "1")).get_bool("showHistory") is None


def test_numbers() -> None:
    assert args(("top", "5")).get_int("top") == 5
    assert args(("top", "five")).get_int("top") is None
    assert args(("timeout", "0.5")).get_float("timeout") == 0.5


def test_datetimes_from_the_python_client() -> None:
    parsed = args(("createdTimeFrom", "2024-05-06T07:08:09.123456Z")).get_datetime("createdTimeFrom")
    assert parsed == datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    # strftime drops leading zeros of years < 1000 on Linux; the extension pads them back.
    assert args(("createdTimeFrom", "1-01-01T00:00:00.000000Z")).get_datetime("createdTimeFrom") == datetime(
        1, 1, 1, tzinfo=UTC
    )
    assert args(("createdTimeFrom", "yesterday")).get_datetime("createdTimeFrom") is None


def test_runtime_status_list_parses_like_enum_tryparse() -> None:
    """Names are case-sensitive; numbers are enum values, even ones the enum does not name (Int32 range)."""
    members = {"Unknown": -1, "Running": 0, "Completed": 1}
    query = args(("runtimeStatus", "Running,Bogus,Completed"))
    assert query.get_enum_list("runtimeStatus", members) == [0, 1]
    assert args(("runtimeStatus", "running")).get_enum_list("runtimeStatus", members) is None
    assert args(("runtimeStatus", " 1 ,+0,-1,42,1x,0x1")).get_enum_list("runtimeStatus", members) == [1, 0, -1, 42]
    assert args(("runtimeStatus", "2147483648")).get_enum_list("runtimeStatus", members) is None
