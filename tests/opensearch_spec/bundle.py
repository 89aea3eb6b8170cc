"""Makes bundle.json from the opensearch-api-specification source (its spec/ folder): for each
operation the OpenSearch adapters call, its routes (method and path), its path and query
parameters and its request body, with every schema they reach through ``$ref`` (across the
spec's files) copied into one ``$defs`` and the references rewritten to point there.

    python tests/opensearch_spec/bundle.py <opensearch-api-specification checkout>/spec [commit]

Nothing else is changed: the schemas are the upstream text (descriptions dropped to keep the
file small). tests/opensearch_spec/check.py validates requests against it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
# the x-operation-group of every request the adapters make (vector_opensearch, lexical_opensearch)
OPERATIONS = ["search", "msearch", "bulk", "mget", "count", "delete_by_query", "indices.create",
              "indices.exists", "indices.get_mapping", "indices.put_mapping", "indices.refresh"]
# the NDJSON lines, checked by their place in the body as OpenSearch reads them
LINES = {"msearch.header": "_core.msearch.yaml#/components/schemas/MultisearchHeader",
         "msearch.body": "_core.msearch.yaml#/components/schemas/MultisearchBody",
         "bulk.action": "_core.bulk.yaml#/components/schemas/OperationContainer",
         "bulk.update": "_core.bulk.yaml#/components/schemas/UpdateAction"}
DROP = {"description", "externalDocs", "examples", "example"}


class Bundler:
    def __init__(self, spec: Path) -> None:
        self.spec = spec
        self.files: dict[Path, dict] = {}
        self.defs: dict[str, object] = {}

    def load(self, path: Path) -> dict:
        path = path.resolve()
        if path not in self.files:
            self.files[path] = yaml.safe_load(path.read_text())
        return self.files[path]

    def target(self, ref: str, base: Path) -> tuple[Path, str]:
        file, _, pointer = ref.partition("#")
        return ((base.parent / file).resolve() if file else base.resolve()), pointer

    def node(self, path: Path, pointer: str) -> object:
        node: object = self.load(path)
        for part in pointer.strip("/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]  # type: ignore[index]
        return node

    def schema(self, node: object, base: Path) -> object:
        """``node`` with its references pointing into ``$defs`` (the targets copied there)."""
        if isinstance(node, list):
            return [self.schema(x, base) for x in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key in DROP and not isinstance(value, dict | list) or key == "externalDocs":
                continue
            if key == "$ref":
                out[key] = "#/$defs/" + self.define(*self.target(value, base))
            elif key in ("properties", "patternProperties", "$defs"):
                out[key] = {k: self.schema(v, base) for k, v in value.items()}
            else:
                out[key] = self.schema(value, base)
        return out

    def define(self, path: Path, pointer: str) -> str:
        name = f"{path.name}:{pointer.rsplit('/', 1)[-1]}"
        if name not in self.defs:
            self.defs[name] = None  # a cycle stops here
            self.defs[name] = self.schema(self.node(path, pointer), path)
        return name

    def resolve(self, node: dict, base: Path) -> tuple[dict, Path]:
        """A parameter or request body, following its references."""
        while "$ref" in node:
            base, pointer = self.target(node["$ref"], base)
            node = self.node(base, pointer)  # type: ignore[assignment]
        return node, base

    def operations(self) -> dict:
        ops: dict[str, dict] = {name: {"routes": [], "path": {}, "query": {}, "body": None} for name in OPERATIONS}
        for file in sorted((self.spec / "namespaces").glob("*.yaml")):
            for route, methods in (self.load(file).get("paths") or {}).items():
                for method, op in methods.items():
                    group = op.get("x-operation-group") if isinstance(op, dict) else None
                    if group not in ops:
                        continue
                    entry = ops[group]
                    entry["routes"].append([method.upper(), route])
                    for ref in op.get("parameters", []):
                        param, base = self.resolve(ref, file)
                        where = "path" if param["in"] == "path" else "query" if param["in"] == "query" else None
                        if where:
                            entry[where][param["name"]] = self.schema(param.get("schema", {}), base)
                    if "requestBody" in op and entry["body"] is None:
                        body, base = self.resolve(op["requestBody"], file)
                        (kind, content), = body["content"].items()
                        entry["body"] = {"content_type": kind, "required": bool(body.get("required")),
                                         "schema": self.schema(content["schema"], base)}
        for name, entry in ops.items():
            entry["routes"].sort()
            if not entry["routes"]:
                raise SystemExit(f"no route of operation {name} in {self.spec}")
        return ops


def main(spec_dir: str, commit: str = "") -> None:
    bundler = Bundler(Path(spec_dir))
    operations = bundler.operations()
    lines = {name: {"$ref": "#/$defs/" + bundler.define(*bundler.target(ref, bundler.spec / "schemas" / "x"))}
             for name, ref in LINES.items()}
    bundle = {"upstream": {"project": "opensearch-project/opensearch-api-specification", "commit": commit},
              "operations": operations, "lines": lines, "$defs": dict(sorted(bundler.defs.items()))}
    (HERE / "bundle.json").write_text(json.dumps(bundle, indent=None, sort_keys=False, separators=(",", ":")) + "\n")
    print(f"{len(bundler.defs)} schemas, {len(operations)} operations -> {HERE / 'bundle.json'}")


if __name__ == "__main__":
    main(*sys.argv[1:])
