"""The Amazon Bedrock Knowledge Bases ``bedrock-agent`` API over Eragraph: data sources, ingestion
jobs and the documents of a data source (handlers), read from the requests' KnowledgeBaseDocument
shapes (documents)."""
