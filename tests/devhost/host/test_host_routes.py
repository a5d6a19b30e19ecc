"""Route templates match like ASP.NET Core routing in the Functions host."""

import pytest

from devhost.http.routes import RouteTable, RouteTemplate, RouteTemplateError


@pytest.mark.parametrize(
    ("template", "path", "expected"),
    [
        ("hello", "/hello", {}),
        ("hello", "/HELLO/", {}),
        ("hello", "/hello/x", None),
        ("items/{id}", "/items/42", {"id": "42"}),
        ("items/{id}", "/items", None),
        ("items/{id?}", "/items", {}),
        ("items/{id=7}", "/items", {"id": "7"}),
        ("items/{id:int}", "/items/42", {"id": "42"}),
        ("items/{id:int}", "/items/abc", None),
        ("items/{id:int}", "/items/99999999999", None),
        ("items/{id:long}", "/items/99999999999", {"id": "99999999999"}),
        ("items/{id:int?}", "/items", {}),
        ("items/{id:int:range(1,5)}", "/items/5", {"id": "5"}),
        ("items/{id:int:range(1,5)}", "/items/6", None),
        ("items/{id:min(3)}", "/items/2", None),
        ("items/{id:max(3)}", "/items/3", {"id": "3"}),
        ("n/{s:alpha}", "/n/abc", {"s": "abc"}),
        ("n/{s:alpha}", "/n/ab1", None),
        ("n/{s:minlength(3)}", "/n/ab", None),
        ("n/{s:maxlength(3)}", "/n/abc", {"s": "abc"}),
        ("n/{s:length(2,3)}", "/n/abcd", None),
        ("n/{s:length(2)}", "/n/ab", {"s": "ab"}),
        ("n/{b:bool}", "/n/True", {"b": "True"}),
        ("n/{b:bool}", "/n/yes", None),
        ("n/{g:guid}", "/n/8f3e1b5c-0d5e-4a7a-9f1e-2c1d1e0f0a0b", {"g": "8f3e1b5c-0d5e-4a7a-9f1e-2c1d1e0f0a0b"}),
        ("n/{g:guid}", "/n/nope", None),
        ("n/{d:datetime}", "/n/2024-01-02", {"d": "2024-01-02"}),
        ("n/{x:double}", "/n/1.5", {"x": "1.5"}),
        ("n/{x:decimal}", "/n/x", None),
        ("n/{s:regex(^a+$)}", "/n/AAA", {"s": "AAA"}),
        ("n/{s:regex(^a+$)}", "/n/ab", None),
        ("files/{*rest}", "/files/a/b/c.txt", {"rest": "a/b/c.txt"}),
        ("files/{**rest}", "/files", {}),
        ("f/{name}.{ext}", "/f/a.b.txt", {"name": "a.b", "ext": "txt"}),
        ("agents/{agent}/run", "/agents/Joker/run", {"agent": "Joker"}),
        ("agents/{agent}/run", "/agents/Jo%20ker/run", {"agent": "Jo ker"}),
        # Kestrel never decodes %2F (it stays in Request.Path, so in the route value); other escapes that do not
        # form UTF-8 stay as they are. devhost gave 'a/b' and U+FFFD.
        ("agents/{agent}/run", "/agents/a%2Fb/run", {"agent": "a%2Fb"}),
        ("agents/{agent}/run", "/agents/a%2fb%20c/run", {"agent": "a%2fb c"}),
        ("agents/{agent}/run", "/agents/x%C3%28/run", {"agent": "x%C3("}),
        ("files/{*rest}", "/files/a%2Fb/c", {"rest": "a%2Fb/c"}),
        ("a/{x}/{y?}", "/a/1/2", {"x": "1", "y": "2"}),
        ("", "/", {}),
    ],
)
def test_template_matching(template: str, path: str, expected: dict[str, str] | None) -> None:
    assert RouteTemplate(template).match(path) == expected


@pytest.mark.parametrize(
    "template",
    ["a/{x}/{x}", "a/{*rest}/b", "a/{x?}.txt", "a/{x:nope}", "a/{x", "a/{1x}", "a/{x}{y}"],
)
def test_invalid_templates_are_rejected(template: str) -> None:
    with pytest.raises(RouteTemplateError):
        RouteTemplate(template)


def test_table_prefers_literals_then_constraints_then_catch_all() -> None:
    table: RouteTable[str] = RouteTable()
    table.add(RouteTemplate("items/{*rest}"), None, "catch-all")
    table.add(RouteTemplate("items/{name}"), None, "plain")
    table.add(RouteTemplate("items/{id:int}"), None, "int")
    table.add(RouteTemplate("items/special"), None, "literal")
    assert table.resolve("GET", "/items/special") == ("literal", {})
    assert table.resolve("GET", "/items/12") == ("int", {"id": "12"})
    assert table.resolve("GET", "/items/abc") == ("plain", {"name": "abc"})
    assert table.resolve("GET", "/items/a/b") == ("catch-all", {"rest": "a/b"})


def test_table_honours_methods() -> None:
    table: RouteTable[str] = RouteTable()
    table.add(RouteTemplate("thing"), ["post"], "post-only")
    table.add(RouteTemplate("thing"), ["GET"], "get-only")
    assert table.resolve("POST", "/thing") == ("post-only", {})
    assert table.resolve("get", "/thing") == ("get-only", {})
    assert table.resolve("PUT", "/thing") is None
