"""AWS adapters behind the same ports as the local ones: S3 blob store, DynamoDB graph store,
SQS FIFO message queue and OpenSearch k-NN vector index. Imported only by bootstrap.aws."""
