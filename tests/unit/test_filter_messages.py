"""What a user reads when a filter or document metadata is wrong, word for word, and the bounds
of metadata at the exact limit (the last size allowed, the first refused). The CLI short form's
quoting and scalar typing. Mutation testing (docs/testing/mutation.md) found these unchecked: a message that
names the wrong place or the wrong operator is a bug a user meets first."""

from __future__ import annotations

import pytest

from eragraph.domain.filters import (MAX_KEYS, MAX_LIST, MAX_STRING, Cond, FilterError, MetadataError, check_metadata,
                                     chunk_attrs, matches, parse_expression, parse_filter)

OPERATORS = ("equals, notEquals, greaterThan, greaterThanOrEquals, lessThan, lessThanOrEquals, in, notIn, "
             "startsWith, andAll, orAll")


def message(fn, *args, **kwargs) -> str:
    with pytest.raises((FilterError, MetadataError)) as raised:
        fn(*args, **kwargs)
    return str(raised.value)


@pytest.mark.parametrize("data, text", [
    ({"andAll": [{"equals": {"key": "a", "value": 1, "extra": 2}}]},
     "filter.andAll[0].equals: unknown field 'extra' (a condition has key and value)"),
    ({"andAll": [{"equal": {"key": "a", "value": 1}}]},
     f"filter.andAll[0]: unknown operator 'equal' (operators: {OPERATORS})"),
    ({"in": {"key": "a", "value": "x"}},
     "filter.in.value must be an array of 1 to 100 strings, numbers or booleans (got the string 'x')"),
    ({"orAll": [{"equals": {"key": "a", "value": 1}}, {"in": {"key": "b", "value": []}}]},
     "filter.orAll[1].in.value must be an array of 1 to 100 strings, numbers or booleans (got an array of 0)"),
    ({"equals": {"key": "1a", "value": 1}},
     "filter.equals.key must be 1-64 letters, digits, '_' or '-', starting with a letter or '_'"),
    ({"equals": {"key": "a"}}, "filter.equals.value is required"),
])
def test_a_bad_json_filter_names_the_place_and_the_fix(data, text):
    assert message(parse_filter, data) == text


@pytest.mark.parametrize("expr, text", [
    ("{}", "filter: an empty JSON object filters nothing; leave the flag out"),
    ("x ~ 3", "cannot read filter 'x ~ 3': write KEY OP VALUE with OP one of = != > >= < <= ^= 'in [a,b]' "
              "'not in [a,b]', or a JSON filter"),
    ("lang in a,b", "filter 'lang in a,b': 'in' takes a list, e.g. [a, b]"),
    ("lang not in a,b", "filter 'lang not in a,b': 'not in' takes a list, e.g. [a, b]"),
    ("lang in [a,b", "filter 'lang in [a,b': 'in' takes a list, e.g. [a, b]"),
    ("lang in a,b]", "filter 'lang in a,b]': 'in' takes a list, e.g. [a, b]"),
    ("lang =", "filter 'lang =' has no value"),
])
def test_a_bad_short_form_says_what_to_write(expr, text):
    assert message(parse_expression, expr) == text


@pytest.mark.parametrize("expr, cond", [
    ("title^=2020", Cond("startsWith", "title", "2020")),  # a prefix is text, even when it looks like a number
    ('title^="2020"', Cond("startsWith", "title", "2020")),
    ("source in [a, 'b, c', \"d\"]", Cond("in", "source", ("a", "b, c", "d"))),
    ("year in [2020, +3, 2.5, true, TRUE, '']", Cond("in", "year", (2020, 3, 2.5, True, "TRUE", ""))),
    ("x = '", Cond("equals", "x", "'")),
    ("x = ''", Cond("equals", "x", "")),
    ("x = \"'\"", Cond("equals", "x", "'")),
    ("x = true", Cond("equals", "x", True)),
    ("x = false", Cond("equals", "x", False)),
    ("x = TRUE", Cond("equals", "x", "TRUE")),
    ("x = 2020", Cond("equals", "x", 2020)),
    ("x = 2020.0", Cond("equals", "x", 2020.0)),
])
def test_the_short_form_types_its_values(expr, cond):
    got = parse_expression(expr)
    assert got == cond and type(got.value) is type(cond.value)
    if isinstance(cond.value, tuple):
        assert [type(v) for v in got.value] == [type(v) for v in cond.value]


def test_metadata_sizes_at_their_limits():
    assert len(check_metadata({f"k{i}": 1 for i in range(MAX_KEYS)})) == MAX_KEYS
    assert message(check_metadata, {f"k{i}": 1 for i in range(MAX_KEYS + 1)}) == "metadata has 51 keys; at most 50"
    assert check_metadata({"a": "x" * MAX_STRING}) == {"a": "x" * MAX_STRING}
    assert message(check_metadata, {"a": "x" * (MAX_STRING + 1)}) == "metadata.a: a string of at most 1024 characters"
    assert check_metadata({"a": ["x" * MAX_STRING] * MAX_LIST}) == {"a": ["x" * MAX_STRING] * MAX_LIST}
    listed = "metadata.a: a list must hold at most 100 strings of at most 1024 characters"
    assert message(check_metadata, {"a": ["x"] * (MAX_LIST + 1)}) == listed
    assert message(check_metadata, {"a": ["x" * (MAX_STRING + 1)]}) == listed


def test_metadata_keys_types_and_the_reserved_ones():
    assert message(check_metadata, {"a": {"b": 1}}) == (
        "metadata.a: values are strings, numbers, booleans or lists of strings (got dict)")
    assert message(check_metadata, {"source": "x"}) == (
        "metadata: key 'source' is reserved (built-in: source, doc_id, title, tenant, readers)")
    assert message(check_metadata, {"1bad": 1}) == (
        "metadata: key '1bad' must be 1-64 letters, digits, '_' or '-', starting with a letter or '_'")
    # the tenant attribute routes a document: checked as a tenant id, then kept with the rest
    assert check_metadata({"tenant": "t-a", "z": 1, "y": 2}) == {"tenant": "t-a", "z": 1, "y": 2}
    assert message(check_metadata, {"tenant": "Bad!"}) == (
        "metadata.tenant: tenant id 'Bad!' is not valid: 1-63 characters of a-z, 0-9, '_' and '-', "
        "starting with a letter or digit")
    assert check_metadata({"tenant": "t-a", "title": "x"}, allow_reserved=True) == {"tenant": "t-a", "title": "x"}


def test_chunk_attributes_carry_the_built_ins():
    assert chunk_attrs(None, "s", "d") == {"source": "s", "doc_id": "d", "readers": ["*"]}
    assert chunk_attrs({"a": 1}, "s", "d", "T", "t1") == {"a": 1, "source": "s", "doc_id": "d", "title": "T",
                                                            "tenant": "t1", "readers": ["*"]}


@pytest.mark.parametrize("attr, value, equal", [
    (True, True, True), (True, 1, False), (1, True, False), (False, 0, False),
    (1, 1.0, True), (1, "1", False), ("1", 1, False), ("a", "a", True), (["a", "b"], "a", True),
    (["a", "b"], 1, False), (2.5, 2.5, True), (None, None, False),
])
def test_equality_is_strictly_typed(attr, value, equal):
    attrs = {} if attr is None else {"k": attr}
    assert matches(Cond("equals", "k", value), attrs) is equal
    assert matches(Cond("in", "k", (value,)), attrs) is equal


def test_one_operator_per_object():
    two = message(parse_filter, {"equals": {"key": "a", "value": 1}, "in": {"key": "b", "value": [1]}})
    head = f"filter must have exactly one operator (one of {OPERATORS}); got "
    assert two.startswith(head) and sorted(two[len(head):].split(", ")) == ["equals", "in"]  # in either order
    assert message(parse_filter, {"andAll": [{}]}) == (
        f"filter.andAll[0] must have exactly one operator (one of {OPERATORS}); got none")
    assert message(parse_filter, [1]) == 'filter must be a JSON object such as {"equals": {"key": "k", "value": "v"}}'


def test_several_errors_are_joined_and_capped_at_five():
    bad = {"orAll": [{"equals": {"key": "a", "value": 1, f"x{i}": 1}} for i in range(7)]}
    lines = message(parse_filter, bad).split("; ")
    assert lines == [f"filter.orAll[{i}].equals: unknown field 'x{i}' (a condition has key and value)" for i in range(5)]
    mixed = message(parse_filter, {"orAll": [{"bogus": 1}, {"equals": {"key": "a", "value": 1, "zz": 2}},
                                             {"equals": {"key": "1"}}]}).split("; ")
    assert mixed[:3] == [f"filter.orAll[0]: unknown operator 'bogus' (operators: {OPERATORS})",
                         "filter.orAll[1].equals: unknown field 'zz' (a condition has key and value)",
                         "filter.orAll[2].equals.key must be 1-64 letters, digits, '_' or '-', starting with a letter "
                         "or '_'"]
    assert len(mixed) == 4 and mixed[3].endswith("equals.value is required")


@pytest.mark.parametrize("data, text", [
    ({"startsWith": {"key": "a", "value": 3}},
     "filter.startsWith.value must be a non-empty string of at most 1024 characters (got 3)"),
    ({"startsWith": {"key": "a", "value": "x" * 1025}},
     "filter.startsWith.value must be a non-empty string of at most 1024 characters (got the string "
     "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...')"),
    ({"greaterThan": {"key": "a", "value": "x"}}, "filter.greaterThan.value must be a finite number (got the string 'x')"),
    ({"equals": {"key": "a", "value": [1]}},
     "filter.equals.value must be a string, a finite number or a boolean (got an array of 1)"),
    ({"in": {"key": "a", "value": ["x"] * 101}},
     "filter.in.value must be an array of 1 to 100 strings, numbers or booleans (got an array of 101)"),
])
def test_bad_values_are_shown(data, text):
    assert message(parse_filter, data) == text


def test_filter_values_at_their_limits():
    assert parse_filter({"startsWith": {"key": "a", "value": "x" * 1024}}).value == "x" * 1024
    assert len(parse_filter({"in": {"key": "a", "value": ["x"] * 100}}).value) == 100
    assert parse_filter({"in": {"key": "a", "value": ["x" * 1024]}}).value == ("x" * 1024,)


def test_cache_keys_are_compact_sorted_json_and_empty_without_a_filter():
    from eragraph.domain.filters import All, cache_key, depth

    f = parse_filter({"andAll": [{"equals": {"key": "b", "value": 1}}, {"in": {"key": "a", "value": ["y", "x"]}}]})
    assert cache_key(None) == ""
    assert cache_key(f) == '{"andAll":[{"equals":{"key":"b","value":1}},{"in":{"key":"a","value":["y","x"]}}]}'
    assert depth(All(())) == 1 and depth(All((All(()),))) == 2


def test_an_unknown_operator_in_a_built_tree_is_named():
    assert message(matches, Cond("bogus", "a", 1), {"a": 1}) == "unknown operator 'bogus'"
