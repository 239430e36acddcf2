"""The public-family corpus: its readers, the reference yardsticks, the benchmark's smoke run, and
placer against the greedy heuristics.

Aspects: the stored packing instances agree with their published optima (volume bound, items that
fit a bin, triplets that fill their bins exactly); trace instances fill the fixed nodes to the
drawn share and are reproducible from their seed; instances become clusters placer reads back
unchanged; every answer of the plain CP-SAT model and of the greedy heuristics passes the
independent validator, and the model proves a small known optimum; ``--quick`` writes its
report; placer never places fewer pods than the best greedy heuristic on small instances drawn
from two public families (this file's own seed, not the benchmark's).
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest
from support import solve

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `benchmarks/` is not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import reference  # noqa: E402
from benchmarks.corpus import (  # noqa: E402
    FILL,
    PACKING_FAMILIES,
    TRACE_FAMILIES,
    Instance,
    packing_instances,
    trace_instance,
    trace_shapes,
)
from benchmarks.corpus.__main__ import main as corpus_main  # noqa: E402
from placer.validate import validate_placements  # noqa: E402

PROPERTY_SEED = 2029  # this test's own draw of instances
UNIT_SCALE = {"m": 1, "Mi": 2**20, "": 1}
PROPERTY_CONFIG = {"solver": {"workers": 1, "deterministic": True, "timeLimit": 2, "seed": 0}}


def _totals(inst: Instance) -> list[int]:
    return [sum(v[r] * n for v, n in inst.items) for r in range(len(inst.resources))]


@pytest.mark.parametrize("family", PACKING_FAMILIES)
def test_packing_instances_agree_with_their_published_optimum(family: str) -> None:
    instances = packing_instances(family)
    assert len(instances) >= 40
    for inst in instances:
        assert inst.nodes == inst.optimum
        assert all(all(0 <= a <= c for a, c in zip(v, inst.capacity, strict=True)) for v, _ in inst.items)
        # The volume bound: no optimum below the total demand over one bin's capacity, in any resource.
        assert all(math.ceil(t / c) <= inst.nodes for t, c in zip(_totals(inst), inst.capacity, strict=True))


def test_triplets_fill_their_optimal_bins_exactly() -> None:
    for inst in packing_instances("triplets"):
        assert inst.pods == 3 * inst.nodes
        assert _totals(inst) == [c * inst.nodes for c in inst.capacity]


@pytest.mark.parametrize("family", TRACE_FAMILIES)
def test_trace_instances_fill_the_nodes_to_the_drawn_share(family: str) -> None:
    node, shapes = trace_shapes(family)
    largest = [max(v[r] for v, _ in shapes) for r in range(len(node))]
    inst = trace_instance(family, 7, nodes=3)
    assert inst.nodes == 3 and inst.capacity == node
    totals = _totals(inst)
    assert all(t <= c * 3 * FILL[1] for t, c in zip(totals, node, strict=True))
    # It stopped at the first pod that would cross the target: within one pod of FILL[0] somewhere.
    assert any(t + m > c * 3 * FILL[0] for t, m, c in zip(totals, largest, node, strict=True))
    assert trace_instance(family, 7, nodes=3) == inst
    assert trace_instance(family, 8, nodes=3) != inst


def test_an_instance_becomes_the_cluster_placer_reads() -> None:
    inst = packing_instances("panigrahy")[0]
    c = inst.cluster()
    assert len(c.nodes) == inst.optimum and len(c.pods) == inst.pods
    assert all(p.pending and p.scheduler_name == "placer" for p in c.pods)
    scale = [UNIT_SCALE[u] for u in inst.units]  # placer reads memory in bytes, cpu in millicores
    sizes = sorted(tuple(p.requests.get(r, 0) for r in inst.resources) for p in c.pods)
    assert sizes == sorted(tuple(a * k for a, k in zip(v, scale, strict=True)) for v, n in inst.items for _ in range(n))
    assert {tuple(n.allocatable[r] for r in inst.resources) for n in c.nodes} == {
        tuple(a * k for a, k in zip(inst.capacity, scale, strict=True))
    }


def _small() -> list[Instance]:
    out = [i for f in PACKING_FAMILIES for i in packing_instances(f) if i.pods <= 60][::25]
    return out + [trace_instance(f, 1, nodes=2) for f in TRACE_FAMILIES]


@pytest.mark.parametrize("inst", _small(), ids=lambda i: f"{i.family}-{i.name}")
def test_every_reference_answer_passes_the_validator(inst: Instance) -> None:
    c = inst.cluster()
    prob = reference.problem(c)
    answers = [h(prob) for h in reference.HEURISTICS.values()] + [reference.cpsat(prob, 1.0, workers=1)]
    for answer in answers:
        assert validate_placements(c, answer.placements) == []
        assert len(answer.placements) <= inst.pods


def test_the_plain_model_proves_a_small_published_optimum() -> None:
    inst = next(i for i in packing_instances("panigrahy") if i.pods == 20)
    answer = reference.cpsat(reference.problem(inst.cluster()), 10.0, workers=1)
    assert answer.status == "OPTIMAL"
    assert len(answer.placements) == inst.pods  # packed into the published optimal node count


def test_quick_mode_writes_its_report(tmp_path: Path) -> None:
    assert corpus_main(["--seed", "5", "--quick", "--families", "panigrahy,azure-2017", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "corpus.json").read_text(encoding="utf-8"))
    assert {r["family"] for r in report["rows"]} == {"panigrahy", "azure-2017"}
    assert all(not v for r in report["rows"] for v in r["violations"].values())
    assert "| panigrahy | packing | 2 |" in (tmp_path / "corpus.md").read_text(encoding="utf-8")
    assert (tmp_path / "corpus.png").stat().st_size > 0


def _property_cases() -> list[Instance]:
    rng = random.Random(PROPERTY_SEED)
    cases = []
    for family in ("panigrahy", "vectorpack-new"):
        pool = [i for i in packing_instances(family) if i.pods <= 60]
        cases += rng.sample(pool, 4)
    return cases


@pytest.mark.parametrize("inst", _property_cases(), ids=lambda i: f"{i.family}-{i.name}")
def test_placer_never_places_fewer_pods_than_the_best_greedy(inst: Instance) -> None:
    c = inst.cluster()
    outcome = solve(c, **PROPERTY_CONFIG)  # validated inside
    placed = sum(1 for p in outcome.result.placements if p.kind == "pending")
    prob = reference.problem(c)
    best = max(len(h(prob).placements) for h in reference.HEURISTICS.values())
    assert placed >= best


def test_only_runs_the_named_instances_and_says_so(tmp_path: Path) -> None:
    small = next(i for i in packing_instances("panigrahy") if i.pods == 20)
    names = tmp_path / "names.txt"
    names.write_text(f"# a list of misses\n\n{small.family} {small.name} pods={small.pods} short=1\n", encoding="utf-8")
    out = tmp_path / "out"
    assert corpus_main(["--only", str(names), "--time-limit", "1", "--out", str(out)]) == 0
    report = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    assert [(r["family"], r["name"]) for r in report["rows"]] == [(small.family, small.name)]
    assert f"the 1 instances named in `{names}`" in (out / "corpus.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("text", "extra"),
    [("panigrahy no-such-instance\n", []), ("panigrahy\n", []), ("", []), ("panigrahy x\n", ["--seed", "3"])],
)
def test_only_refuses_unknown_names_and_drawing_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, extra: list[str]
) -> None:
    names = tmp_path / "names.txt"
    names.write_text(text, encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        corpus_main(["--only", str(names), *extra])
    assert exit_.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()[-1]) > 0
