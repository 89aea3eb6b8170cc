"""The fuzz corpus of the HTTP API: malformed request bodies with the status and the words of the
answer they must get, the same from the Lambda function (tests/aws/test_handlers.py) and from
`eragraph serve` (tests/e2e/test_serve.py), plus seeded random mutations of a valid body that
must never get a 5xx. A body given as bytes goes over HTTP as it is and to the Lambda function
base64-encoded (``isBase64Encoded``), as API Gateway sends a body that is not text."""

from __future__ import annotations

import base64
import json
import random

VALID = {"query": "Which telescope observed the comet?", "k": 3, "mode": "collapsed"}


def _q(**fields) -> str:
    return json.dumps({"query": "comet", **fields})


# (name, body, status, words the message must contain); body None: no body at all
CASES: list[tuple[str, str | bytes | None, int, str]] = [
    ("array nested 100,000 deep", "[" * 100_000 + "]" * 100_000, 400, "deeper than 32 levels"),
    ("object nested 100,000 deep", '{"query": ' + '{"a": ' * 100_000 + "1" + "}" * 100_001, 400, "deeper than 32 levels"),
    ("unclosed nesting 100,000 deep", "[" * 100_000, 400, "deeper than 32 levels"),
    ("a list where the object belongs", json.dumps([{"query": "comet"}]), 400, "must be a JSON object, not an array"),
    ("a string where the object belongs", json.dumps("comet"), 400, "must be a JSON object, not a string"),
    ("null body", "null", 400, "must be a JSON object, not null"),
    ("a number body", "42", 400, "must be a JSON object, not a number"),
    ("invalid JSON", "{not json", 400, "not valid JSON"),
    ("truncated JSON", '{"query": "comet"', 400, "not valid JSON"),
    ("only whitespace", "   \n", 400, "not valid JSON"),
    ("NaN", '{"query": "comet", "p": NaN}', 400, "NaN is not a JSON number"),
    ("non-UTF-8 bytes", b'{"query": "caf\xe9"}', 400, "not UTF-8 text (byte 0xe9 at offset 14)"),
    ("binary bytes", b"\x89PNG\r\n\x1a\n\x00\x00", 400, "not UTF-8 text"),
    ("no body", None, 422, "the body is required"),
    ("empty object", "{}", 422, "query is required"),
    ("query a number", json.dumps({"query": 5}), 422, "query must be a string (got 5)"),
    ("query an array", json.dumps({"query": ["comet"]}), 422, "query must be a string (got an array of 1)"),
    ("k a string", _q(k="5"), 422, "k must be an integer (got the string '5')"),
    ("k a boolean", _q(k=True), 422, "k must be an integer (got true)"),
    ("k a fraction", _q(k=2.5), 422, "k must be an integer (got 2.5)"),
    ("k null", _q(k=None), 422, "k must be an integer (got null)"),
    ("answer a string", _q(answer="yes"), 422, "answer must be true or false (got the string 'yes')"),
    ("p a string", _q(p="half"), 422, "p must be a number (got the string 'half')"),
    ("budget an object", _q(budget={"tokens": 5}), 422, "budget must be an integer (got an object)"),
    ("unknown field", _q(colour="red"), 422,
     "colour is not a known field (known: query, mode, k, budget, p, answer, tenant, filter, rerank, explain, conversation, decompose)"),
    ("k of 0", _q(k=0), 422, "k must be at least 1 (got 0)"),
    ("k of 100000", _q(k=100_000), 422, "k must be at most 100 (got 100000)"),
    ("k negative", _q(k=-3), 422, "k must be at least 1 (got -3)"),
    ("budget of 0", _q(budget=0), 422, "budget must be at least 1 (got 0)"),
    ("p above 1", _q(p=1.5), 422, "p must be at most 1 (got 1.5)"),
    ("p overflowing to infinity", '{"query": "comet", "p": 1e400}', 422, "p must be at most 1 (got inf)"),
    ("empty query", json.dumps({"query": ""}), 422, "query must not be empty"),
    ("query too long", json.dumps({"query": "comet " * 700}), 422, "query must be at most 4000 characters long (got 4200)"),
    ("several errors at once", json.dumps({"query": "", "k": 0}), 422, "query must not be empty; k must be at least 1 (got 0)"),
    ("unknown mode", _q(mode="sideways"), 400, "unknown mode"),
    ("filter a string", _q(filter="year>2020"), 422, "filter must be a JSON object"),
    ("filter an unknown operator", _q(filter={"equal": {"key": "year", "value": 2020}}), 400,
     "unknown operator 'equal'"),
    ("filter with two operators", _q(filter={"equals": {"key": "a", "value": 1}, "in": {"key": "a", "value": [1]}}),
     400, "exactly one operator"),
    ("filter a bad key", _q(filter={"equals": {"key": "a.b", "value": 1}}), 400, "filter.equals.key must be"),
    ("filter a range on a string", _q(filter={"greaterThan": {"key": "year", "value": "2020"}}), 400,
     "filter.greaterThan.value must be a finite number (got the string '2020')"),
    ("filter an unknown field in a condition", _q(filter={"equals": {"key": "a", "value": 1, "op": "x"}}), 400,
     "unknown field 'op'"),
    ("filter an empty andAll", _q(filter={"andAll": []}), 400, "filter.andAll"),
    ("filter nested too deep", _q(filter={"andAll": [{"andAll": [{"andAll": [{"andAll": [{"andAll": [{"andAll": [
        {"andAll": [{"equals": {"key": "a", "value": 1}}]}]}]}]}]}]}]}), 400, "deeper than"),
]

# only the Lambda function can be sent these (the local server builds the event itself)
LAMBDA_ONLY: list[tuple[str, dict, int, str]] = [
    ("bad base64", {"body": "%%% not base64 %%%", "isBase64Encoded": True}, 400,
     "marked base64-encoded (isBase64Encoded) but is not valid base64"),
    ("base64 with bad padding", {"body": "eyJxdWVyeSI6I", "isBase64Encoded": True}, 400, "not valid base64"),
    ("base64 of non-UTF-8 bytes", {"body": base64.b64encode(b"\xff\xfe{}").decode(), "isBase64Encoded": True}, 400,
     "not UTF-8 text (byte 0xff at offset 0)"),
]


def lambda_event(template: dict, body: str | bytes | None) -> dict:
    """The POST /query event of ``template`` carrying ``body``."""
    request = json.loads(json.dumps(template))
    request.pop("body", None)
    request["isBase64Encoded"] = False
    if isinstance(body, bytes):
        request["body"], request["isBase64Encoded"] = base64.b64encode(body).decode("ascii"), True
    elif body is not None:
        request["body"] = body
    return request


_VALUES = [0, -1, 1, 50, 101, 10**30, 2.5, -0.0, 1e308, "", "x", "5", "\u00e9\u20ac", "\ud800", True, False, None,
           [], [1], {}, {"a": 1}, "comet " * 900]
_CHARS = ['"', "\\", "{", "}", "[", "]", ",", ":", " ", "\u00e9", "\x00", "\n", "0", "e", "-", "n", "t"]


def mutations(seed: int, count: int) -> list[str | bytes]:
    """``count`` seeded random mutations of the VALID body: fields given other values or added,
    characters inserted, deleted or cut, bytes made invalid, wrapped in arrays."""
    rng = random.Random(seed)
    text = json.dumps(VALID)
    out: list[str | bytes] = []
    for _ in range(count):
        kind = rng.randrange(7)
        if kind == 0:
            body = dict(VALID)
            body[rng.choice(["query", "k", "mode", "budget", "p", "answer", "extra"])] = rng.choice(_VALUES)
            out.append(json.dumps(body))
        elif kind == 1:
            at = rng.randrange(len(text) + 1)
            out.append(text[:at] + rng.choice(_CHARS) + text[at:])
        elif kind == 2:
            at = rng.randrange(len(text))
            out.append(text[:at] + text[at + 1:])
        elif kind == 3:
            out.append(text[:rng.randrange(len(text))])
        elif kind == 4:
            raw = bytearray(text.encode())
            raw[rng.randrange(len(raw))] = rng.choice([0x80, 0xC3, 0xE9, 0xFF, 0xFE])
            out.append(bytes(raw))
        elif kind == 5:
            depth = rng.choice([1, 2, 15, 16, 17, 1000])
            out.append("[" * depth + text + "]" * depth)
        else:
            out.append(json.dumps({**VALID, "query": rng.choice(["", " ", "comet" * rng.randrange(1, 1000)])}))
    return out


# --------------------------------------------------------------------------- the doors of issue 45
# Bad input on the chat, document and bedrock-agent routes: (name, method, path, body, status, the
# modelled error type (x-amzn-errortype) or None, words the message must contain). ``{kb}`` is the
# caller's knowledge base id, ``{ds}`` a CUSTOM data source, ``{s3ds}`` an S3 one and ``{job}`` a
# stopped ingestion job of it (the runner makes them, door_setup).
def _chat(**fields) -> dict:
    return {"model": "eragraph-dense", "messages": [{"role": "user", "content": "comet"}], **fields}


def inline_doc(doc_id: str, text: str, metadata: dict | None = None) -> dict:
    """A CUSTOM data source's inline text document, as IngestKnowledgeBaseDocuments takes it."""
    doc = {"content": {"dataSourceType": "CUSTOM", "custom": {
        "customDocumentIdentifier": {"id": doc_id}, "sourceType": "IN_LINE",
        "inlineContent": {"type": "TEXT", "textContent": {"data": text}}}}}
    if metadata is not None:
        doc["metadata"] = metadata
    return doc


def _attrs(*pairs) -> dict:
    return {"type": "IN_LINE_ATTRIBUTE", "inlineAttributes": [{"key": k, "value": v} for k, v in pairs]}


MIB = 1 << 20
_DS = "/knowledgebases/{kb}/datasources/{ds}"
_S3DS = "/knowledgebases/{kb}/datasources/{s3ds}"
def _byte_doc(ident: str, mime: str) -> dict:
    """A CUSTOM document of inline bytes (a short text) declared as ``mime``."""
    return {"content": {"dataSourceType": "CUSTOM", "custom": {
        "customDocumentIdentifier": {"id": ident}, "sourceType": "IN_LINE",
        "inlineContent": {"type": "BYTE", "byteContent": {"mimeType": mime, "data": "VGhlIGZlcnJ5IGxvZy4="}}}}}


DOOR_CASES: list[tuple[str, str, str, dict, int, str | None, str]] = [
    # POST /v1/chat/completions (OpenAI's error body; its message is the API's message too)
    ("chat: no model", "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "comet"}]}, 400, None,
     "model is required"),
    ("chat: a model that is no mode", "POST", "/v1/chat/completions", _chat(model="gpt-4o"), 404, None,
     "the model 'gpt-4o' does not exist: choose one of eragraph-"),
    ("chat: no user message", "POST", "/v1/chat/completions", _chat(messages=[{"role": "system", "content": "x"}]), 400,
     None, "must end with a user message"),
    ("chat: k out of range", "POST", "/v1/chat/completions", _chat(k=0), 400, None, "k must be an integer within 1..100"),
    ("chat: two answers", "POST", "/v1/chat/completions", _chat(n=2), 400, None, "n must be 1"),
    ("chat: a bad filter", "POST", "/v1/chat/completions", _chat(filter={"equal": {"key": "a", "value": 1}}), 400, None,
     "unknown operator 'equal'"),
    ("chat: an unknown field", "POST", "/v1/chat/completions", _chat(colour="red"), 400, None, "unknown field 'colour'"),
    ("chat: temperature over 2", "POST", "/v1/chat/completions", _chat(temperature=5), 400, None,
     "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 5 instead."),
    ("chat: temperature a string", "POST", "/v1/chat/completions", _chat(temperature="hot"), 400, None,
     "Invalid type for 'temperature': expected a decimal, but got a string instead."),
    ("chat: top_p over 1", "POST", "/v1/chat/completions", _chat(top_p=7), 400, None,
     "Invalid 'top_p': decimal above maximum value. Expected a value <= 1, but got 7 instead."),
    ("chat: max_tokens below 1", "POST", "/v1/chat/completions", _chat(max_tokens=-1), 400, None,
     "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got -1 instead."),
    ("chat: max_tokens a decimal", "POST", "/v1/chat/completions", _chat(max_tokens=2.5), 400, None,
     "Invalid type for 'max_tokens': expected an integer, but got a decimal instead."),
    # POST /documents
    ("documents: too many", "POST", "/documents",
     {"documents": [{"source": f"n/{i}.txt", "text": "x"} for i in range(26)]}, 422, None,
     "documents must have at most 25 items (got 26)"),
    ("documents: too large", "POST", "/documents", {"documents": [{"source": "big.txt", "text": "x" * (6 * MIB)}]},
     413, None, "request body too large (at most 6291456 bytes)"),
    ("documents: a bad metadata key", "POST", "/documents",
     {"documents": [{"source": "a.txt", "text": "x", "metadata": {"a.b": 1}}]}, 400, None, "key 'a.b' must be"),
    ("documents: metadata not an object", "POST", "/documents",
     {"documents": [{"source": "a.txt", "text": "x", "metadata": "x"}]}, 422, None, "metadata must be a JSON object"),
    # IngestKnowledgeBaseDocuments
    ("kb ingest: too many", "PUT", _DS + "/documents",
     {"documents": [inline_doc(f"d{i}", "x") for i in range(11)]}, 400, "ValidationException",
     "documents must have at most 10 items (got 11)"),
    ("kb ingest: an inline document over 5 MiB", "PUT", _DS + "/documents",
     {"documents": [inline_doc("big", "x" * (5 * MIB + 1))]}, 400, "ValidationException",
     "textContent.data must have at most 5242880 characters (got 5242881)"),
    ("kb ingest: documents over 6 MiB together", "PUT", _DS + "/documents",
     {"documents": [inline_doc("a", "x" * (3 * MIB)), inline_doc("b", "x" * (3 * MIB))]}, 400, "ValidationException",
     "request body too large"),
    ("kb ingest: a bad metadata key", "PUT", _DS + "/documents",
     {"documents": [inline_doc("m", "x", _attrs(("a.b", {"type": "STRING", "stringValue": "v"})))]}, 400,
     "ValidationException", "key 'a.b' must be"),
    ("kb ingest: a metadata value of no type", "PUT", _DS + "/documents",
     {"documents": [inline_doc("m", "x", _attrs(("year", {"type": "DATE", "stringValue": "2020"})))]}, 400,
     "ValidationException", "DATE"),
    ("kb ingest: an access control list", "PUT", _DS + "/documents",
     {"documents": [inline_doc("m", "x", {"type": "IN_LINE_ATTRIBUTE", "inlineAttributes": [
         {"key": "year", "value": {"type": "NUMBER", "numberValue": 2020}}],
                                          "accessControlList": [{"x": 1}]})]}, 400, "ValidationException",
     "accessControlList"),
    ("kb ingest: an S3 document in a CUSTOM data source", "PUT", _DS + "/documents",
     {"documents": [{"content": {"dataSourceType": "S3", "s3": {"s3Location": {"uri": "s3://notes/docs/a.txt"}}}}]},
     400, "ValidationException", "is of type CUSTOM, not S3"),
    ("kb ingest: an unknown data source", "PUT", "/knowledgebases/{kb}/datasources/ABCDEFGHIJ/documents",
     {"documents": [inline_doc("m", "x")]}, 404, "ResourceNotFoundException", "no data source ABCDEFGHIJ"),
    ("kb ingest: a data source id of bad form", "PUT", "/knowledgebases/{kb}/datasources/not-an-id/documents",
     {"documents": [inline_doc("m", "x")]}, 400, "ValidationException", "dataSourceId"),
    ("kb ingest: a 16 KB mimeType", "PUT", _DS + "/documents",
     {"documents": [_byte_doc("m", "a" * 16_000 + "text/plain" + "b" * 16)]}, 400, "ValidationException",
     "mimeType must have at most 1024 characters (got 16026)"),
    ("kb ingest: a mimeType of a type not read", "PUT", _DS + "/documents",
     {"documents": [_byte_doc("m", "image/png")]}, 400, "ValidationException",
     "mimeType 'image/png' is not a type this service reads"),
    ("kb ingest: a mimeType that merely contains a type", "PUT", _DS + "/documents",
     {"documents": [_byte_doc("m", "x text/plain")]}, 400, "ValidationException",
     "mimeType 'x text/plain' is not a type this service reads"),
    ("data source: a name that merely contains a valid one", "PUT", "/knowledgebases/{kb}/datasources/",
     {"name": "ok name!", "dataSourceConfiguration": {"type": "CUSTOM"}}, 400, "ValidationException",
     "name must match the pattern"),
    ("kb get: too many identifiers", "POST", _DS + "/documents/getDocuments",
     {"documentIdentifiers": [{"dataSourceType": "CUSTOM", "custom": {"id": f"d{i}"}} for i in range(11)]}, 400,
     "ValidationException", "at most 10"),
    ("kb list: an unknown data source", "POST", "/knowledgebases/{kb}/datasources/ABCDEFGHIJ/documents", {}, 404,
     "ResourceNotFoundException", "no data source ABCDEFGHIJ"),
    # data sources and ingestion jobs
    ("data source: a bucket this deployment may not read", "PUT", "/knowledgebases/{kb}/datasources/",
     {"name": "elsewhere", "dataSourceConfiguration": {"type": "S3", "s3Configuration": {
         "bucketArn": "arn:aws:s3:::no-such-bucket-here"}}}, 400, "ValidationException", "no-such-bucket-here"),
    ("data source: a name taken", "PUT", "/knowledgebases/{kb}/datasources/",
     {"name": "custom", "dataSourceConfiguration": {"type": "CUSTOM"}}, 409, "ConflictException",
     "a data source named 'custom' already"),
    ("job: of an unknown data source", "PUT", "/knowledgebases/{kb}/datasources/ABCDEFGHIJ/ingestionjobs/", {}, 404,
     "ResourceNotFoundException", "no data source ABCDEFGHIJ"),
    ("job: of a CUSTOM data source", "PUT", _DS + "/ingestionjobs/", {}, 400, "ValidationException",
     "its documents are ingested directly"),
    ("job: stop a stopped job", "POST", _S3DS + "/ingestionjobs/{job}/stop", {}, 409, "ConflictException",
     "is STOPPED: only a running job can be stopped"),
    ("job: an unknown job", "GET", _S3DS + "/ingestionjobs/ABCDEFGHIJ", {}, 404, "ResourceNotFoundException",
     "no ingestion job ABCDEFGHIJ"),
]


def door_setup(call, kb: str, bucket: str) -> dict[str, str]:
    """The ids DOOR_CASES' paths name, made through ``call(method, path, body) -> (status, body)``
    on a store whose data source buckets include ``bucket`` (holding at least one document): a
    CUSTOM data source, an S3 one and a stopped ingestion job of it."""
    base = f"/knowledgebases/{kb}/datasources/"
    status, out = call("PUT", base, {"name": "custom", "dataSourceConfiguration": {"type": "CUSTOM"}})
    assert status == 200, out
    ids = {"kb": kb, "ds": out["dataSource"]["dataSourceId"]}
    status, out = call("PUT", base, {"name": "synced", "dataSourceConfiguration": {
        "type": "S3", "s3Configuration": {"bucketArn": f"arn:aws:s3:::{bucket}"}}})
    assert status == 200, out
    ids["s3ds"] = out["dataSource"]["dataSourceId"]
    status, out = call("PUT", f"{base}{ids['s3ds']}/ingestionjobs/", {})
    assert status == 202, out
    ids["job"] = out["ingestionJob"]["ingestionJobId"]
    status, out = call("POST", f"{base}{ids['s3ds']}/ingestionjobs/{ids['job']}/stop", {})
    assert status == 202 and out["ingestionJob"]["status"] == "STOPPED", out
    return ids
