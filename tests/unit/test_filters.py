"""The filter language (domain.filters): Bedrock KB's JSON shape validated into a tree, the CLI's
short form, the reference semantics every adapter is held to, and document metadata checks."""

from __future__ import annotations

import json
import random

import pytest

from eragraph.domain.filters import (All, AnyOf, Cond, FilterError, MetadataError, check_metadata, chunk_attrs,
                                     combine, matches, parse_expression, parse_filter, to_json)

ATTRS = {"year": 2021, "score": 0.5, "lang": "en", "tags": ["a", "b"], "draft": False, "source": "s3://b/x.txt"}


@pytest.mark.parametrize("expr, tree", [
    ("year>=2020", Cond("greaterThanOrEquals", "year", 2020)),
    ("year > 2020.5", Cond("greaterThan", "year", 2020.5)),
    ("year<2020", Cond("lessThan", "year", 2020)),
    ("year<=2020", Cond("lessThanOrEquals", "year", 2020)),
    ("lang=en", Cond("equals", "lang", "en")),
    ("lang==en", Cond("equals", "lang", "en")),
    ("lang!=de", Cond("notEquals", "lang", "de")),
    ('code="2020"', Cond("equals", "code", "2020")),
    ("draft=false", Cond("equals", "draft", False)),
    ("title^=Intro", Cond("startsWith", "title", "Intro")),
    ("source in [a, 'b c']", Cond("in", "source", ("a", "b c"))),
    ("year not in [2019,2020]", Cond("notIn", "year", (2019, 2020))),
    ('{"orAll": [{"equals": {"key": "a", "value": 1}}, {"equals": {"key": "b", "value": "x"}}]}',
     AnyOf((Cond("equals", "a", 1), Cond("equals", "b", "x")))),
])
def test_the_short_form_reads_each_operator(expr, tree):
    assert parse_expression(expr) == tree
    assert parse_filter(to_json(tree)) == tree  # the JSON shape round-trips


@pytest.mark.parametrize("data, words", [
    ({"equal": {"key": "a", "value": 1}}, "unknown operator 'equal'"),
    ({"equals": {"key": "a b", "value": 1}}, "filter.equals.key must be 1-64 letters"),
    ({"equals": {"key": "a", "value": 1, "extra": 2}}, "unknown field 'extra'"),
    ({"equals": {"key": "a"}}, "filter.equals.value is required"),
    ({"equals": {"key": "a", "value": {}}}, "must be a string, a finite number or a boolean"),
    ({"greaterThan": {"key": "a", "value": "2020"}}, "filter.greaterThan.value must be a finite number"),
    ({"greaterThan": {"key": "a", "value": True}}, "must be a finite number"),
    ({"in": {"key": "a", "value": []}}, "must be an array of 1 to 100"),
    ({"startsWith": {"key": "a", "value": 3}}, "must be a non-empty string"),
    ({"equals": {"key": "a", "value": 1}, "notEquals": {"key": "a", "value": 2}}, "exactly one operator"),
    ({"andAll": []}, "filter.andAll"),
    ({"orAll": [{"nope": {}}]}, "unknown operator 'nope'"),
    ([{"equals": {"key": "a", "value": 1}}], "must be a JSON object"),
    ("{not json", "not valid JSON"),
])
def test_a_bad_filter_is_one_readable_line(data, words):
    with pytest.raises(FilterError) as err:
        parse_filter(data)
    assert words in str(err.value)
    assert "\n" not in str(err.value) and "pydantic" not in str(err.value)


def test_nesting_and_size_are_bounded_without_recursing():
    f = {"equals": {"key": "a", "value": 1}}
    for _ in range(7):
        f = {"andAll": [f]}
    with pytest.raises(FilterError, match="nested deeper than 6"):
        parse_filter(f)
    text = '{"andAll": [' * 5000 + "]}" * 5000  # a hostile body: no RecursionError escapes
    with pytest.raises(FilterError):
        parse_filter(text)
    many = {"orAll": [{"equals": {"key": "a", "value": i}} for i in range(65)]}
    with pytest.raises(FilterError):
        parse_filter(many)


def _nested(wraps: int, op: str = "andAll") -> dict:
    f = {"equals": {"key": "a", "value": 1}}
    for _ in range(wraps):
        f = {op: [f]}
    return f


@pytest.mark.parametrize("op", ["andAll", "orAll"])
def test_depth_six_is_allowed_and_seven_refused(op):
    # a condition is depth 1; each combinator adds one: MAX_DEPTH (6) exactly passes
    tree = parse_filter(_nested(5, op))
    inner = tree
    for _ in range(5):
        assert isinstance(inner, All if op == "andAll" else AnyOf) and len(inner.items) == 1
        inner = inner.items[0]
    assert inner == Cond("equals", "a", 1)
    assert parse_filter(json.dumps(_nested(5, op))) == tree
    for too_deep in (_nested(6, op), json.dumps(_nested(6, op))):
        with pytest.raises(FilterError, match="nested deeper than 6 levels"):
            parse_filter(too_deep)


def test_depth_is_checked_on_a_validated_model_too():
    from eragraph.domain.filters import FilterModel

    assert parse_filter(FilterModel.model_validate(_nested(5))) == parse_filter(_nested(5))
    with pytest.raises(FilterError, match="nested deeper than 6 levels"):
        parse_filter(FilterModel.model_validate(_nested(6)))


def test_sixty_four_conditions_are_allowed_and_sixty_five_refused():
    def spread(n: int) -> dict:  # n conditions over two levels, each list within its own bound
        half = n // 2
        return {"andAll": [{"orAll": [{"equals": {"key": "a", "value": i}} for i in range(half)]},
                           {"orAll": [{"equals": {"key": "b", "value": i}} for i in range(n - half)]}]}

    assert len(parse_filter(spread(64)).items[1].items) == 32
    with pytest.raises(FilterError, match="more than 64 conditions"):
        parse_filter(spread(65))


@pytest.mark.parametrize("expr", ["year", "year >", "lang in a,b", "x ~ 3", "in [a]", "{}"])
def test_a_bad_short_form_says_how_to_write_one(expr):
    with pytest.raises(FilterError):
        parse_expression(expr)


@pytest.mark.parametrize("expr, expected", [
    ("year=2021", True), ("year=2021.0", True), ('year="2021"', False),   # strict types
    ("year>2020", True), ("year>=2021", True), ("year<2021", False), ("lang>1", False),  # ranges: numbers only
    ("draft=false", True), ("draft=0", False), ("score<=0.5", True),
    ("tags=a", True), ("tags=c", False), ("tags in [c, b]", True), ("tags not in [a]", False),  # lists: any element
    ("tags!=c", True), ("tags^=b", True),
    ("missing!=1", True), ("missing not in [1]", True), ("missing=1", False), ("missing<1", False),  # absent keys
    ("lang^=e", True), ("lang^=n", False), ("source^=s3://b/", True), ("lang in [de, en]", True),
])
def test_reference_semantics(expr, expected):
    assert matches(parse_expression(expr), ATTRS) is expected


def test_combinators_and_combine():
    a, b = parse_expression("lang=en"), parse_expression("year<2000")
    assert matches(All((a, b)), ATTRS) is False
    assert matches(AnyOf((a, b)), ATTRS) is True
    assert combine([]) is None and combine([a]) == a and combine([a, b]) == All((a, b))
    assert matches(None, ATTRS) is True


def test_negations_are_exact_complements():
    rng = random.Random(3)
    for _ in range(300):
        attrs = {k: rng.choice([1, 2, "1", "x", ["x", "y"], True]) for k in "ab" if rng.random() < 0.7}
        value = rng.choice([1, 2, "1", "x", True])
        for pos, neg in (("equals", "notEquals"), ("in", "notIn")):
            v = (value,) if pos == "in" else value
            assert matches(Cond(pos, "a", v), attrs) != matches(Cond(neg, "a", v), attrs)


def test_metadata_is_checked_and_the_built_ins_are_reserved():
    ok = check_metadata({"year": 2020, "tags": ("a", "b"), "flag": True, "name": "x"})
    assert ok == {"year": 2020, "tags": ["a", "b"], "flag": True, "name": "x"}
    assert check_metadata(None) == {}
    for bad, words in [({"source": "x"}, "reserved"), ({"a b": 1}, "key 'a b'"), ({"x": {"y": 1}}, "values are"),
                       ({"x": [1, 2]}, "list must hold"), ({"x": float("nan")}, "finite"), ([1], "JSON object"),
                       ({f"k{i}": i for i in range(51)}, "at most 50")]:
        with pytest.raises(MetadataError, match=words):
            check_metadata(bad)
    attrs = chunk_attrs({"year": 1}, "s3://b/k", "d1", "T")
    # readers: who may read it (domain.access): "*" for a document without an access list
    assert attrs == {"year": 1, "source": "s3://b/k", "doc_id": "d1", "title": "T", "readers": ["*"]}
    assert chunk_attrs({"access": ["user:b", "group:a"]}, "k", "d1")["readers"] == ["group:a", "user:b"]
    with pytest.raises(MetadataError, match="reserved"):
        check_metadata({"readers": ["*"]})
    assert json.dumps(attrs)
