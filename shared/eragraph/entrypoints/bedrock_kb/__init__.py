"""Amazon Bedrock Knowledge Bases' runtime API (``runtime``: Retrieve, RetrieveAndGenerate and its stream) and the AWS event-stream framing it streams in (``eventstream``)."""
