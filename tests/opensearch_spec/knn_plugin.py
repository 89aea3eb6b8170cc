"""The k-NN plugin's limits, which the API specification does not state: k at most 10,000 in a
query, and per engine the methods, space types and method parameters a ``knn_vector`` mapping
may name, as the plugin of the domain's engine version (template.yaml: OpenSearch_2.13) accepts
them (k-NN docs, "Methods and engines"). A breach raises check.Refused with the plugin's error:
``illegal_argument_exception`` for a query, ``mapper_parsing_exception`` for a mapping."""

from __future__ import annotations

from typing import Any

from .check import Refused

K_MAX = 10_000
# engine -> method -> (space types, parameters: name -> (lowest, highest) for integers, or None)
ENGINES: dict[str, dict[str, tuple[set[str], dict[str, tuple[int, int] | None]]]] = {
    "faiss": {"hnsw": ({"l2", "innerproduct"},
                       {"m": (1, 2**31 - 1), "ef_construction": (1, 2**31 - 1), "ef_search": (1, 2**31 - 1),
                        "encoder": None}),
              "ivf": ({"l2", "innerproduct"}, {"nlist": (1, 2**31 - 1), "nprobes": (1, 2**31 - 1), "encoder": None})},
    "lucene": {"hnsw": ({"l2", "cosinesimil", "innerproduct"}, {"m": (1, 512), "ef_construction": (1, 3200)})},
    "nmslib": {"hnsw": ({"l2", "innerproduct", "cosinesimil", "l1", "linf"},
                        {"m": (1, 2**31 - 1), "ef_construction": (1, 2**31 - 1)})},
}
TRAINED = {("faiss", "ivf")}  # needs a model (the train API): not creatable from a mapping alone


def check_k(k: Any) -> None:
    if isinstance(k, int) and not isinstance(k, bool) and not 0 < k <= K_MAX:
        raise Refused(400, "illegal_argument_exception", f"[knn] requires k to be in the range (0, {K_MAX}]")


def _refuse(field: str, why: str) -> Refused:
    return Refused(400, "mapper_parsing_exception",
                   f"Failed to parse mapping [_doc]: Validation Failed: 1: {why} (field [{field}]);")


def check_method(field: str, spec: dict) -> None:
    """A ``knn_vector`` field's mapping: its ``method`` fits its engine."""
    method = spec.get("method")
    if method is None:
        return  # the plugin's default method
    engine = method.get("engine", "nmslib")  # the 2.x default engine
    if engine not in ENGINES:
        raise _refuse(field, f"Invalid engine type: {engine}")
    methods = ENGINES[engine]
    name = method.get("name")
    if name not in methods:
        raise _refuse(field, f"Invalid method name: {name} for engine {engine}")
    if (engine, name) in TRAINED:
        raise _refuse(field, f"Method {name} of {engine} requires training (a model_id), not a method")
    spaces, params = methods[name]
    space = method.get("space_type", spec.get("space_type", "l2"))
    if space not in spaces:
        raise _refuse(field, f"Validation Failed: space type [{space}] is not supported by {engine} {name}")
    for key, value in (method.get("parameters") or {}).items():
        if key not in params:
            raise _refuse(field, f"Invalid parameter for method [{name}]: [{key}]")
        bounds = params[key]
        if bounds is not None and not (isinstance(value, int) and not isinstance(value, bool)
                                       and bounds[0] <= value <= bounds[1]):
            raise _refuse(field, f"parameter validation failed for MethodComponentContext parameter [{key}]: "
                                 f"{value!r} is not an integer in [{bounds[0]}, {bounds[1]}]")
