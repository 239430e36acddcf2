"""Kubernetes label matching, as a table, run against both matchers: the engine's vectorised
``NodeLabels`` and the independent validator's. Each row is the truth from the Kubernetes docs
(nodeSelector, required node affinity, matchFields) and ``strconv.ParseInt`` for Gt/Lt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from placer import validate
from placer.engine import NodeLabels
from placer.models import Node, NodeSelectorRequirement, NodeSelectorTerm

Terms = tuple[NodeSelectorTerm, ...] | None


def req(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key=key, operator=operator, values=values)  # type: ignore[arg-type]


def name_req(operator: str, *names: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key="metadata.name", operator=operator, values=names)  # type: ignore[arg-type]


def term(*exprs: NodeSelectorRequirement, fields: Sequence[NodeSelectorRequirement] = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=exprs, match_fields=tuple(fields))


def terms(*ts: NodeSelectorTerm) -> Terms:
    return ts


@dataclass(frozen=True)
class Case:
    sentence: str
    labels: dict[str, str]
    selector: dict[str, str]
    required: Terms
    expected: bool
    engine_bug: str | None = None  # the engine disagrees with Kubernetes (strict xfail)
    node_name: str = "node-a"


ZONE_A = {"zone": "a", "disk": "ssd", "cores": "10"}

CASES = [
    # nodeSelector: the node's labels are a superset of the selector.
    Case("no selector and no affinity match every node", ZONE_A, {}, None, True),
    Case("nodeSelector matches when node labels are a superset", ZONE_A, {"zone": "a", "disk": "ssd"}, None, True),
    Case("nodeSelector fails when one pair is missing", ZONE_A, {"zone": "a", "gpu": "yes"}, None, False),
    Case("nodeSelector fails when a value differs", ZONE_A, {"zone": "b"}, None, False),
    Case("nodeSelector with an empty value needs the key with an empty value", {"x": ""}, {"x": ""}, None, True),
    Case("nodeSelector with an empty value fails on a node without the key", {}, {"x": ""}, None, False),
    Case(
        "nodeSelector and affinity are ANDed: selector fails though affinity matches",
        ZONE_A,
        {"zone": "b"},
        terms(term(req("disk", "Exists"))),
        False,
    ),
    # Empty terms.
    Case("an empty term matches nothing", ZONE_A, {}, terms(term()), False),
    Case("an empty list of terms matches nothing", ZONE_A, {}, terms(), False),
    Case(
        "an empty term ORed with a matching term matches", ZONE_A, {}, terms(term(), term(req("zone", "In", "a"))), True
    ),
    # In / NotIn / Exists / DoesNotExist.
    Case("In matches one of several values", ZONE_A, {}, terms(term(req("zone", "In", "b", "a", "c"))), True),
    Case("In fails when no value is the label's", ZONE_A, {}, terms(term(req("zone", "In", "b", "c"))), False),
    Case("In fails when the key is absent", {}, {}, terms(term(req("zone", "In", "a"))), False),
    Case("NotIn holds when the key is absent", {}, {}, terms(term(req("zone", "NotIn", "a"))), True),
    Case("NotIn fails when the label is listed", ZONE_A, {}, terms(term(req("zone", "NotIn", "b", "a"))), False),
    Case("NotIn holds when the label is not listed", ZONE_A, {}, terms(term(req("zone", "NotIn", "b"))), True),
    Case("Exists holds for a present key", ZONE_A, {}, terms(term(req("disk", "Exists"))), True),
    Case(
        "Exists holds for a present key with an empty value", {"disk": ""}, {}, terms(term(req("disk", "Exists"))), True
    ),
    Case("Exists fails for an absent key", {}, {}, terms(term(req("disk", "Exists"))), False),
    Case("DoesNotExist holds when the key is absent", ZONE_A, {}, terms(term(req("gpu", "DoesNotExist"))), True),
    Case("DoesNotExist fails when the key is present", ZONE_A, {}, terms(term(req("disk", "DoesNotExist"))), False),
    # Gt / Lt: integers only (strconv.ParseInt base 10, int64).
    Case('"10" Gt "9" compares integers, not strings', {"cores": "10"}, {}, terms(term(req("cores", "Gt", "9"))), True),
    Case('"9" Lt "10" compares integers, not strings', {"cores": "9"}, {}, terms(term(req("cores", "Lt", "10"))), True),
    Case("Gt is strict: equal is false", {"cores": "10"}, {}, terms(term(req("cores", "Gt", "10"))), False),
    Case("Lt is strict: equal is false", {"cores": "10"}, {}, terms(term(req("cores", "Lt", "10"))), False),
    Case('"abc" never matches Gt', {"cores": "abc"}, {}, terms(term(req("cores", "Gt", "1"))), False),
    Case('"abc" never matches Lt', {"cores": "abc"}, {}, terms(term(req("cores", "Lt", "1"))), False),
    Case('"1.5" never matches Gt', {"cores": "1.5"}, {}, terms(term(req("cores", "Gt", "1"))), False),
    Case('"1.5" never matches Lt', {"cores": "1.5"}, {}, terms(term(req("cores", "Lt", "2"))), False),
    Case("a non-integer bound never matches", {"cores": "10"}, {}, terms(term(req("cores", "Gt", "1.5"))), False),
    Case("Gt fails when the key is absent", {}, {}, terms(term(req("cores", "Gt", "-100"))), False),
    Case("Lt fails when the key is absent", {}, {}, terms(term(req("cores", "Lt", "100"))), False),
    Case('negative numbers: "-1" Gt "-2"', {"t": "-1"}, {}, terms(term(req("t", "Gt", "-2"))), True),
    Case('negative numbers: "-5" Lt "-2"', {"t": "-5"}, {}, terms(term(req("t", "Lt", "-2"))), True),
    Case('negative numbers: "-10" Gt "-9" is false', {"t": "-10"}, {}, terms(term(req("t", "Gt", "-9"))), False),
    Case('leading zeros: "010" Gt "9"', {"t": "010"}, {}, terms(term(req("t", "Gt", "9"))), True),
    Case('an explicit plus sign: "+5" Gt "4"', {"t": "+5"}, {}, terms(term(req("t", "Gt", "4"))), True),
    Case("a label beyond int64 never matches", {"t": str(2**64)}, {}, terms(term(req("t", "Gt", "1"))), False),
    Case(
        'an underscore is not an integer: "1_0" never matches Gt',
        {"t": "1_0"},
        {},
        terms(term(req("t", "Gt", "9"))),
        False,
    ),
    Case(
        'an underscore bound is not an integer: Gt "1_0" never matches',
        {"t": "50"},
        {},
        terms(term(req("t", "Gt", "1_0"))),
        False,
    ),
    Case(
        "a bound beyond int64 never matches",
        {"t": "5"},
        {},
        terms(term(req("t", "Lt", str(2**64)))),
        False,
    ),
    Case(
        'a trailing newline is not an integer: "50\\n" never matches Gt',
        {"t": "50\n"},
        {},
        terms(term(req("t", "Gt", "5"))),
        False,
    ),
    Case(
        'a bound with a trailing newline is not an integer: Gt "5\\n" never matches',
        {"t": "50"},
        {},
        terms(term(req("t", "Gt", "5\n"))),
        False,
    ),
    # Terms ORed, expressions ANDed.
    Case(
        "terms are ORed: the second term matches",
        ZONE_A,
        {},
        terms(term(req("zone", "In", "b")), term(req("disk", "In", "ssd"))),
        True,
    ),
    Case(
        "terms are ORed: no term matches",
        ZONE_A,
        {},
        terms(term(req("zone", "In", "b")), term(req("disk", "In", "hdd"))),
        False,
    ),
    Case(
        "expressions are ANDed: all hold",
        ZONE_A,
        {},
        terms(term(req("zone", "In", "a"), req("cores", "Gt", "8"), req("gpu", "DoesNotExist"))),
        True,
    ),
    Case(
        "expressions are ANDed: one fails",
        ZONE_A,
        {},
        terms(term(req("zone", "In", "a"), req("cores", "Gt", "10"))),
        False,
    ),
    # matchFields on metadata.name.
    Case("matchFields metadata.name In the node's name", {}, {}, terms(term(fields=[name_req("In", "node-a")])), True),
    Case("matchFields metadata.name In another name", {}, {}, terms(term(fields=[name_req("In", "node-b")])), False),
    Case(
        "matchFields metadata.name NotIn another name", {}, {}, terms(term(fields=[name_req("NotIn", "node-b")])), True
    ),
    Case(
        "matchFields metadata.name NotIn the node's name",
        {},
        {},
        terms(term(fields=[name_req("NotIn", "node-a")])),
        False,
    ),
    Case(
        "matchFields and matchExpressions in one term are ANDed",
        ZONE_A,
        {},
        terms(term(req("zone", "In", "b"), fields=[name_req("In", "node-a")])),
        False,
    ),
    Case(
        "matchFields in one term ORed with expressions in another",
        ZONE_A,
        {},
        terms(term(req("zone", "In", "b")), term(fields=[name_req("In", "node-a")])),
        True,
    ),
]

Matcher = Callable[[Node, dict[str, str], Terms], bool]


def engine_selector(node: Node, selector: dict[str, str], required: Terms) -> bool:
    return bool(NodeLabels([node]).selector(selector, required)[0])


def validator_selector(node: Node, selector: dict[str, str], required: Terms) -> bool:
    return validate.selector_matches(selector, required, node)


def engine_terms(node: Node, _: dict[str, str], required: Terms) -> bool:
    labels = NodeLabels([node])
    return any(bool(labels.term(t)[0]) for t in required or ())


def validator_terms(node: Node, _: dict[str, str], required: Terms) -> bool:
    return any(validate.term_matches(t, node) for t in required or ())


def _params(matchers: dict[str, tuple[Matcher, bool]], cases: Sequence[Case]) -> list[pytest.ParameterSet]:
    out = []
    for case in cases:
        for who, (matcher, is_engine) in matchers.items():
            marks = [pytest.mark.xfail(strict=True, reason=case.engine_bug)] if is_engine and case.engine_bug else []
            out.append(pytest.param(matcher, case, id=f"{who}: {case.sentence}", marks=marks))
    return out


@pytest.mark.parametrize(
    ("matcher", "case"),
    _params({"engine": (engine_selector, True), "validator": (validator_selector, False)}, CASES),
)
def test_selector_matching(matcher: Matcher, case: Case) -> None:
    node = Node(name=case.node_name, labels=case.labels)
    assert matcher(node, case.selector, case.required) is case.expected


TERM_CASES = [c for c in CASES if not c.selector and c.required is not None]


@pytest.mark.parametrize(
    ("matcher", "case"),
    _params({"engine term": (engine_terms, True), "validator term": (validator_terms, False)}, TERM_CASES),
)
def test_term_matching(matcher: Matcher, case: Case) -> None:
    node = Node(name=case.node_name, labels=case.labels)
    assert matcher(node, case.selector, case.required) is case.expected


def test_engine_matches_many_nodes_at_once_like_the_validator() -> None:
    """The vectorised matcher over several nodes agrees row by row with the validator."""
    nodes = [
        Node(name="n1", labels={"zone": "a", "cores": "4"}),
        Node(name="n2", labels={"zone": "b", "cores": "16"}),
        Node(name="n3", labels={"cores": "x"}),
        Node(name="n4", labels={}),
    ]
    required = terms(term(req("zone", "NotIn", "a"), req("cores", "Gt", "8")), term(fields=[name_req("In", "n4")]))
    got = NodeLabels(nodes).selector({}, required).tolist()
    assert got == [validate.selector_matches({}, required, n) for n in nodes] == [False, True, False, True]
