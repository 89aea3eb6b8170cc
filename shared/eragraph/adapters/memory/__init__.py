"""In-memory adapters: the reference behaviour of every port, used by unit tests and the memory
profile. One module per port, named ``<port>_memory`` like the other profiles' adapters:
blob_memory, graph_memory, lexical_memory, vector_memory, queue_memory, entity_memory."""
