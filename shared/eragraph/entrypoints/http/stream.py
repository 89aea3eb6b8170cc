"""POST /retrieveAndGenerateStream: Bedrock Knowledge Bases' RetrieveAndGenerateStream
(eragraph.entrypoints.bedrock_kb.runtime) as an ASGI response, each event-stream frame sent as
the generator yields it (a chunked response, no content-length).

Served by the ASGI app (eragraph.entrypoints.http.server.ApiApp) through the stream primitive
(streaming.serve_stream): under ``eragraph serve``, and on AWS in the stream function (a function
URL in RESPONSE_STREAM mode, the Lambda Web Adapter running that app: Python Lambda has no native
response streaming, and the API Gateway function answers whole responses only). An error before
the first frame is the service's modelled JSON error (errors.kb_error); one after it is the
stream's own exception event (the runtime's generator writes it)."""

from __future__ import annotations

from ..bedrock_kb import runtime as bedrock_kb
from .context import answer_budget
from .streaming import Encoder, Prepared

ENCODER = Encoder("application/vnd.amazon.eventstream", lambda frame: frame, headers=(), modelled=True)


def prepare(app, request, hold) -> Prepared:
    """The caller's tenant (an IAM tag lookup, a rate-bucket write), the request and the tenant's
    engine, then the tenant's stream slot; the frames, their model calls handed to the app's
    ``on_model_calls``."""
    caller = app.admission.caller(request.headers)  # first: a caller without a tenant gets no work done
    asking = app.asking(request.headers)  # who is asking inside the tenant (a 403 without principals when required)
    body = request.json_body or {}
    bedrock_kb.validate("RetrieveAndGenerateStream", body)
    kb_id = bedrock_kb.knowledge_base_config(body)["knowledgeBaseId"]
    engine = app.engines(caller)
    bedrock_kb.resolve_tenant(kb_id, caller, salt=engine.settings.kb_id_salt)  # the caller's, or a 404
    budget = answer_budget(app.limits, engine)
    session = bedrock_kb.open_session(engine, body, asking)  # the caller's live session, or a ValidationException
    hold(caller)  # last: a refused request holds no slot
    frames = bedrock_kb.retrieve_and_generate_stream(engine, body, budget, session, caller=asking)
    return Prepared(tracked(frames, app.on_model_calls), headers={"x-amzn-bedrock-knowledge-base-session-id": session[0]})


def tracked(frames, on_model_calls):
    """``frames``, with the model calls made while they are produced handed to
    ``on_model_calls`` at the end (also when an error or the client cut them short)."""
    if on_model_calls is None:
        yield from frames
        return
    from ...services import cost

    with cost.track() as calls:
        try:
            yield from frames
        finally:
            on_model_calls(list(calls))
