"""AWS adapters behind the same ports as the local ones, named ``<port>_<backend>``: blob_s3,
graph_dynamodb (combining meta_dynamodb, documents_dynamodb, status_dynamodb, nodes_dynamodb;
dynamodb_table holds what they share), entity_dynamodb, tenants_dynamodb, rate_limit_dynamodb,
queue_sqs (FIFO), vector_opensearch (k-NN) and lexical_opensearch. Imported only by
bootstrap.aws."""
