"""OpenSearch's API specification (a bundle of the opensearch-api-specification project's
schemas, README.md) and the k-NN plugin's limits, which the OpenSearch fakes hold requests to."""
