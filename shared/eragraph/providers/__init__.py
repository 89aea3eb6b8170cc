"""Models behind ports: embedders, tokenizers, summarizers, generators, NER."""
