"""The complexity router's scorer and thresholds (EA-GraphRAG §3.3-3.4, Algorithm 1), as plain
numpy over weights loaded from JSON: no torch at query time.

    z = (phi(q) - mean) / std
    logistic:  s(q) = sigmoid(w . z + b)
    mlp:       a = softmax(W_a z + b_a)            (feature attention)
               h = relu(W_1 (a * z * d) + b_1)      (d = number of features)
               s(q) = sigmoid(w_2 . h + b_2)
    route:     s < tau_low -> low route (dense or hybrid); s >= tau_high -> graph; else fusion

phi(q) is one of two input sets (``inputs``):
    "text+vector"  lexical cues of the question's text (domain.question_features.lexical_features)
                   followed by the question's embedding projected on the leading principal
                   directions of the training questions (``projection``, ``projection_mean``):
                   no model runs for it, the embedding is the one every route computes anyway
    "text"         the lexical cues alone: a head that reads no embedding, for a query embedded
                   by another embedder than the one the text+vector head was trained with
    "parse"        the syntactic features of a spaCy parse (question_features.features), the
                   router's earlier inputs; kept so that weights trained on them still load
    "text+vector+agreement"
                   text+vector's, followed by what the retrieval itself says
                   (domain.retrieval_features: the agreement of the dense side's and the graph's
                   lists, the dense scores' confidence): ``auto`` then runs both lists first, as
                   ``fusion`` does, and answers from one of them (``reads_lists``)

Two heads (``text_head``): a text+vector model may carry a text-only model trained by the same
procedure. Each head records the identity of the embedder it was trained with (``embedder``,
e.g. ``sentence-transformers/all-MiniLM-L6-v2#weights-sha256:...``). ``head_for`` picks the
text+vector head only for a query vector of that very embedder (not merely of the same
dimension: a Titan at 384 dimensions is not MiniLM), else the text-only head, and says why. A
file with one head (written before heads were recorded) keeps its behaviour: its vector part
reads any vector of its dimension, and another dimension scores the text alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

ROUTES = ("dense", "hybrid", "fusion", "tri_graph")
INPUTS = ("parse", "text+vector", "text", "text+vector+agreement")
VECTOR_INPUTS = ("text+vector", "text+vector+agreement")  # the inputs that project the embedding


def sigmoid(x: np.ndarray | float) -> np.ndarray | float:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -50, 50)))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def project(vectors: np.ndarray, mean: np.ndarray, projection: np.ndarray) -> np.ndarray:
    """The embedding part of text+vector phi(q): one vector (d,) or a batch (n, d), centred on the
    training mean and projected on the principal directions (rows of ``projection``)."""
    return (vectors - mean) @ projection.T


@dataclass(frozen=True)
class RouterModel:
    feature_names: tuple[str, ...]
    mean: np.ndarray
    std: np.ndarray
    kind: str                                  # logistic | mlp
    params: dict[str, np.ndarray]
    tau_low: float
    tau_high: float
    low_route: str = "hybrid"                  # dense | hybrid
    fusion_dense: str = "hybrid"               # the dense-side list fusion fuses with the graph's
    info: dict[str, Any] = field(default_factory=dict)
    inputs: str = "parse"                      # parse | text+vector
    projection: np.ndarray | None = None       # (m, dim): text+vector's embedding directions
    projection_mean: np.ndarray | None = None  # (dim,): the training questions' mean embedding
    embedder: str = ""                         # identity of the embedder it was trained with ("" unknown)
    text_head: RouterModel | None = None       # the text-only head, for another embedder's vectors

    def __post_init__(self) -> None:
        if not 0.0 <= self.tau_low <= self.tau_high <= 1.0:
            raise ValueError("thresholds must satisfy 0 <= tau_low <= tau_high <= 1")
        if self.low_route not in ("dense", "hybrid") or self.fusion_dense not in ("dense", "hybrid"):
            raise ValueError("the dense side is dense or hybrid")
        if self.kind not in ("logistic", "mlp"):
            raise ValueError(f"unknown scorer kind {self.kind!r}")
        if len(self.mean) != len(self.feature_names) or len(self.std) != len(self.feature_names):
            raise ValueError("mean/std must have one entry per feature")
        if self.inputs not in INPUTS:
            raise ValueError(f"unknown router inputs {self.inputs!r} (choose {', '.join(INPUTS)})")
        if self.inputs in VECTOR_INPUTS and (self.projection is None or self.projection_mean is None):
            raise ValueError("text+vector inputs need a projection and its mean")
        if self.reads_lists:
            from .retrieval_features import AGREEMENT_FEATURE_NAMES

            if self.feature_names[-len(AGREEMENT_FEATURE_NAMES):] != AGREEMENT_FEATURE_NAMES:
                raise ValueError("text+vector+agreement features end with the agreement features, in their order")
        if self.text_head is not None and (self.text_head.inputs != "text" or self.text_head.text_head is not None):
            raise ValueError("a text head reads the text alone (inputs 'text') and has no head of its own")

    def head_for(self, embedder_id: str | None, vector: np.ndarray | None) -> tuple[RouterModel, str]:
        """(the head that scores this query, a note when it is not the text+vector one). The
        text+vector head needs a vector of the embedder it was trained with (when it recorded
        one) and of its dimension; otherwise the text head, if there is one, scores the text."""
        if self.inputs not in VECTOR_INPUTS or self.text_head is None:
            return self, ""
        dim = self.projection_mean.shape[0]
        v = None if vector is None else np.asarray(vector).ravel()
        if v is None:
            why = "no query embedding"
        elif self.embedder and embedder_id != self.embedder:
            why = f"the query was embedded by {embedder_id or 'an unnamed embedder'}, not {self.embedder}"
        elif v.shape[0] != dim:
            why = f"a {v.shape[0]}-dimensional embedding, not {dim}"
        else:
            return self, ""
        return self.text_head, f"router's text+vector head was trained on other vectors ({why}): s(q) from the text-only head"

    def phi(self, text: str, vector: np.ndarray | None, embedder_id: str | None = None,
            agreement: np.ndarray | None = None) -> tuple[np.ndarray, str]:
        """(phi(q), note) for the parse-free inputs (text, text+vector, text+vector+agreement:
        ``agreement`` is domain.retrieval_features.agreement_features of the query's lists)."""
        from .question_features import lexical_features

        if self.inputs == "text":
            return lexical_features(text), ""
        if self.embedder and vector is not None and embedder_id != self.embedder:
            phi, note = self.phi_text_vector(text, None, f"the query was embedded by {embedder_id or 'an unnamed embedder'}, "
                                                          f"not {self.embedder}")
        else:
            phi, note = self.phi_text_vector(text, vector)
        if not self.reads_lists:
            return phi, note
        return self.with_agreement(phi, agreement, note)

    @property
    def reads_lists(self) -> bool:
        """The inputs read the retrieval's lists: the query runs the dense side and the graph first."""
        return self.inputs == "text+vector+agreement"

    def with_agreement(self, phi: np.ndarray, agreement: np.ndarray | None, note: str) -> tuple[np.ndarray, str]:
        """phi followed by the agreement part; without lists (None) that part is the training
        mean (z = 0), and the note says so."""
        from .retrieval_features import AGREEMENT_FEATURE_NAMES

        m = len(AGREEMENT_FEATURE_NAMES)
        if agreement is None:
            part = self.mean[-m:]
            note = "; ".join(n for n in (note, "no retrieval lists: the agreement part of s(q) at its training mean") if n)
        else:
            part = np.asarray(agreement, dtype=np.float64).ravel()
            if part.shape != (m,):
                raise ValueError(f"the agreement part has {m} features, given {part.shape[0]}")
        return np.concatenate([phi, part]), note

    @property
    def needs_parse(self) -> bool:
        return self.inputs == "parse"

    def phi_text_vector(self, text: str, vector: np.ndarray | None, why: str = "") -> tuple[np.ndarray, str]:
        """(phi(q), note) for text+vector inputs: the lexical cues, then the projected embedding.
        An embedding of another dimension than the training one (another embedder) cannot be
        projected: its part is the training mean (zeros), and the note says so."""
        from .question_features import lexical_features

        lex = lexical_features(text)
        m = self.projection.shape[0]
        v = None if vector is None else np.asarray(vector, dtype=np.float64).ravel()
        if v is None or v.shape != self.projection_mean.shape:
            got = why or ("no embedding" if v is None else f"a {v.shape[0]}-dimensional embedding")
            return (np.concatenate([lex, np.zeros(m)]),
                    f"router trained on {self.projection_mean.shape[0]}-dimensional embeddings, given {got}: "
                    "s(q) from the question's text only")
        return np.concatenate([lex, project(v, self.projection_mean, self.projection)]), ""

    def z(self, phi: np.ndarray) -> np.ndarray:
        return (np.asarray(phi, dtype=np.float64) - self.mean) / self.std

    def score_z(self, z: np.ndarray) -> np.ndarray:
        """s for a batch (n, d) or one (d,) of z-scored features."""
        p = self.params
        if self.kind == "logistic":
            return sigmoid(z @ p["w"] + p["b"])
        a = softmax(z @ p["Wa"].T + p["ba"])
        h = np.maximum((a * z * z.shape[-1]) @ p["W1"].T + p["b1"], 0.0)
        return sigmoid(h @ p["w2"] + p["b2"])

    def score(self, phi: np.ndarray) -> float:
        return float(self.score_z(self.z(phi)))

    def route(self, s: float) -> str:
        if s < self.tau_low:
            return self.low_route
        if s >= self.tau_high:
            return "tri_graph"
        return "fusion"

    def to_dict(self) -> dict[str, Any]:
        return {"feature_names": list(self.feature_names), "mean": self.mean.tolist(), "std": self.std.tolist(),
                "kind": self.kind, "params": {k: np.asarray(v).tolist() for k, v in self.params.items()},
                "tau_low": self.tau_low, "tau_high": self.tau_high, "low_route": self.low_route,
                "fusion_dense": self.fusion_dense, "info": self.info, "inputs": self.inputs,
                **({} if self.projection is None else {"projection": self.projection.tolist(),
                                                       "projection_mean": self.projection_mean.tolist()}),
                **({"embedder": self.embedder} if self.embedder else {}),
                **({} if self.text_head is None else {"text_head": self.text_head.to_dict()})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RouterModel:
        std = np.asarray(d["std"], dtype=np.float64)
        return cls(feature_names=tuple(d["feature_names"]), mean=np.asarray(d["mean"], dtype=np.float64),
                   std=np.where(std > 0, std, 1.0), kind=d["kind"],
                   params={k: np.asarray(v, dtype=np.float64) for k, v in d["params"].items()},
                   tau_low=float(d["tau_low"]), tau_high=float(d["tau_high"]),
                   low_route=d.get("low_route", "hybrid"), fusion_dense=d.get("fusion_dense", "hybrid"),
                   info=dict(d.get("info", {})), inputs=d.get("inputs", "parse"),
                   projection=None if d.get("projection") is None else np.asarray(d["projection"], dtype=np.float64),
                   projection_mean=(None if d.get("projection_mean") is None
                                    else np.asarray(d["projection_mean"], dtype=np.float64)),
                   embedder=str(d.get("embedder", "")),
                   text_head=None if d.get("text_head") is None else cls.from_dict(d["text_head"]))
