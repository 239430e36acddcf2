"""``placer explain``: pods' whole stories, read off one solve (``explaining``), as data
(``stories``) and as a versioned JSON document (``documents``)."""

from placer.explain.documents import explain_document, explain_schema
from placer.explain.explaining import SHOWN, explain_answer, explain_pods, unknown_pods
from placer.explain.stories import Candidate, DomainTry, Explanation, PodSpec, Rule, Why

__all__ = [
    "SHOWN",
    "Candidate",
    "DomainTry",
    "Explanation",
    "PodSpec",
    "Rule",
    "Why",
    "explain_answer",
    "explain_document",
    "explain_pods",
    "explain_schema",
    "unknown_pods",
]
