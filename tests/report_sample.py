"""A realistic report dict (the CONTRACT of issue 16), shaped like the demo's: 20,000 records, QIs
age/sex/race/zip, 57 released groups.  The HTML tests render it without evaluating anything, so
they run in milliseconds and pin the page to the contract, not to whatever the builder returns today."""

from __future__ import annotations

import copy
import math
from typing import Any

ZIPS = [f"372{d:02d}" for d in range(1, 41)]
RACES = ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]


def _age_shares() -> list[dict[str, Any]]:
    weights = [math.exp(-((a - 45) / 22) ** 2) + 0.05 for a in range(121)]
    total = sum(weights)
    return [{"label": str(a), "share": w / total} for a, w in enumerate(weights)]


def _binned(before: list[dict[str, Any]], width: int) -> list[dict[str, Any]]:
    out: dict[str, float] = {}
    for item in before:
        a = int(item["label"])
        lo = a // width * width
        label = f"[{lo}-{min(lo + width - 1, 120)}]"
        out[label] = out.get(label, 0.0) + item["share"]
    return [{"label": k, "share": v} for k, v in out.items()]


def sample_report() -> dict[str, Any]:
    """The report of the demo's recommended policy, no frontier run given."""
    ages = _age_shares()
    zip_before = [{"label": z, "share": (i + 3) / sum(j + 3 for j in range(len(ZIPS)))} for i, z in enumerate(ZIPS)]
    return {
        "format": "deid-sql-report",
        "version": 1,
        "created_at": "2026-11-24T16:20:00Z",
        "software": {"name": "deid-sql", "version": "0.1.0"},
        "summary": {
            "verdict": "passed",
            "headline": ["expected re-identifications 0.61 among 20,000 records",
                         "no record's risk above 1/20",
                         "every released group holds at least 11 records"],
            "cautions": [],
            "spec": "deid-sql-demo/demo.toml",
            "policy": "age: 10-year bands; sex: kept; race: kept; zip: first three digits",
            "released": "deid-sql-demo/release.parquet",
            "operator": "custodian on records-host",
        },
        "data": {
            "source": {"path": "deid-sql-demo/cohort.parquet", "rows": 20000, "columns": 8,
                       "sha256": "9f2c41d3a8e6b07c55e1d2f4a3b6c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f"},
            "population": {"path": "deid-sql-demo/population.parquet", "rows": 9680, "people": 6910000,
                           "sha256": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"},
            "columns": [
                {"name": "patient_id", "type": "BIGINT", "role": "dropped"},
                {"name": "age", "type": "INTEGER", "role": "QI"},
                {"name": "sex", "type": "VARCHAR", "role": "QI"},
                {"name": "race", "type": "VARCHAR", "role": "QI"},
                {"name": "zip", "type": "VARCHAR", "role": "QI"},
                {"name": "admitted", "type": "DATE", "role": "dropped"},
                {"name": "diagnosis", "type": "VARCHAR", "role": "sensitive"},
                {"name": "systolic_bp", "type": "INTEGER", "role": "kept"},
            ],
            "qis": [
                {"name": "age", "column": "age", "kind": "integer", "domain": "0 … 120", "size": 121},
                {"name": "sex", "column": "sex", "kind": "category", "domain": ["Female", "Male"], "size": 2},
                {"name": "race", "column": "race", "kind": "category", "domain": RACES, "size": 5},
                {"name": "zip", "column": "zip", "kind": "zip", "domain": ZIPS, "size": len(ZIPS)},
            ],
        },
        "policy": {
            "text": "age:0000000001000000000100000000010000000001000000000100000000010000000001000000000100000000010000"
                    "00000100000000010000000001;sex:1;race:1111;zip:000000000000000000000000000000000000000",
            "levels": None,
            "readable": "age: [0-9] [10-19] … [120]; zip: [372**]",
            "sha256": "c0ffee00d1ce5eed0123456789abcdef0123456789abcdef0123456789abcdef",
            "kind": "policy text", "named": "age:every=10|zip:digits=3",
            "arguments": "--policy 'age:every=10|zip:digits=3'",
            "rules": [
                {"qi": "age", "words": "ages in 10-year bands from 0 (the last band is 120)",
                 "labels": [{"label": x["label"], "values": x["label"].strip("[]").replace("-", " to "),
                             "records": round(x["share"] * 20000)} for x in _binned(ages, 10)]},
                {"qi": "sex", "words": "kept as is",
                 "labels": [{"label": "Female", "values": ["Female"], "records": 10130},
                            {"label": "Male", "values": ["Male"], "records": 9870}]},
                {"qi": "race", "words": "kept as is",
                 "labels": [{"label": r, "values": [r], "records": n}
                            for r, n in zip(RACES, [15300, 3100, 900, 300, 400])]},
                {"qi": "zip", "words": "the first three digits",
                 "labels": [{"label": "372**", "values": ZIPS, "records": 20000}]},
            ],
            "suppression": {"suppressed_records": 0, "suppressed_rows": 0, "suppressed_groups": 0, "share": 0.0,
                            "rule": None, "below": None, "groups": None},
            "sample": {"source": "synthetic", "columns": ["age", "sex", "race", "zip", "diagnosis", "systolic_bp"],
                       "rows": [["[40-49]", "Female", "White", "372**", "asthma", 128],
                                ["[60-69]", "Male", "Black", "372**", "diabetes", 141],
                                ["[20-29]", "Female", "Asian-Pac-Islander", "372**", "none", 117],
                                ["[30-39]", "Male", "White", "372**", "hypertension", 150],
                                ["[50-59]", "Female", "Other", "372**", "none", 122]]},
        },
        "risk": {
            "figures": {"records": 20000, "groups": 57, "expected_reidentifications": 0.6112,
                        "mean_record_risk": 3.056e-05, "max_record_risk": 0.05, "k": 11, "sample_uniques": 0,
                        "suppressed": 0, "risk": 0.000232},
            "before_suppression": None,
            "at_risk": {"threshold": 0.5, "records": 0},
            "record_risk_histogram": {"edges": [0.0, 1e-05, 0.0001, 0.001, 0.01, 0.1, 0.5, 1.0],
                                      "counts": [16200, 3100, 640, 52, 8, 0, 0]},
            "group_sizes": {"edges": [1, 2, 5, 10, 100, 1000, 10000, 100000, 1000000],
                            "sample": [0, 0, 0, 12, 25, 20, 0, 0],
                            "population": [0, 0, 0, 0, 3, 9, 25, 20]},
            "no_census": None,
            "model": {"key": "population", "name": "population-based record risk (1/g)^γ, g counted in the census "
                      "table", "gamma": 1.0, "population": "deid-sql-demo/population.parquet",
                      "population_source": "census", "group_sizes": "population (census people)",
                      "group_sizes_note": "each group's records in the sample and its people in the population "
                                          "(census table)",
                      "record_risk": "(1/g)^γ with γ = 1, g = max(census people, sample records)",
                      "expected_reidentifications": "Σ m/g over the released groups",
                      "estimate": None,
                      "papers": [{"authors": "Kathleen Benitez, Grigorios Loukides, Bradley Malin",
                                  "title": "Beyond Safe Harbor", "venue": "ACM IHI", "year": 2010,
                                  "used_for": "the population-based record risk (1/g)^γ (eq. 1)"}],
                      "assumptions": ["the attacker knows every QI of the target and that the target is in the data",
                                      "a released group of g people in the population re-identifies with "
                                      "probability 1/g",
                                      "the census counts every person of the state once"],
                      "adversary": None},
            "comparison": [
                {"name": "this policy", "expected_reidentifications": 0.6112, "max_record_risk": 0.05, "k": 11,
                 "sample_uniques": 0, "risk": 0.000232, "loss": 0.3121},
                {"name": "HIPAA Safe Harbor", "expected_reidentifications": 41.7, "max_record_risk": 1.0, "k": 1,
                 "sample_uniques": 212, "risk": 0.0158, "loss": 0.2034},
                {"name": "original data", "expected_reidentifications": 2640.3, "max_record_risk": 1.0, "k": 1,
                 "sample_uniques": 6950, "risk": 1.0, "loss": 0.0},
            ],
            "gate": {"criteria": {"max_record_risk": 0.05, "k": 5},
                     "checks": [{"figure": "max_record_risk", "value": 0.05, "limit": 0.05, "at_most": True,
                                 "passed": True},
                                {"figure": "k", "value": 11, "limit": 5, "at_most": False, "passed": True}],
                     "verdict": "passed"},
        },
        "utility": {
            "kl_loss": 1.8734, "normalized_loss": 0.3312, "iyengar_loss": 0.4127,
            "per_qi": [{"qi": "age", "information_kept": 0.52}, {"qi": "sex", "information_kept": 1.0},
                       {"qi": "race", "information_kept": 1.0}, {"qi": "zip", "information_kept": 0.0}],
            "marginals": [
                {"qi": "age", "before": ages, "after": _binned(ages, 10)},
                {"qi": "sex", "before": [{"label": "Female", "share": 0.5065}, {"label": "Male", "share": 0.4935}],
                 "after": [{"label": "Female", "share": 0.5065}, {"label": "Male", "share": 0.4935}]},
                {"qi": "race", "before": [{"label": r, "share": s} for r, s in zip(RACES, [.765, .155, .045, .015,
                                                                                            .02])],
                 "after": [{"label": r, "share": s} for r, s in zip(RACES, [.765, .155, .045, .015, .02])]},
                {"qi": "zip", "before": zip_before, "after": [{"label": "372**", "share": 1.0}]},
            ],
        },
        "frontier": None,
        "method": {
            "papers": [
                {"authors": "Benitez, Loukides, Malin", "title": "Beyond Safe Harbor: automatic discovery of "
                 "health information de-identification policy alternatives", "venue": "ACM IHI", "year": 2010,
                 "used_for": "population-based record risk; Safe Harbor as a policy"},
                {"authors": "Xia, Heatherly, Ding, Li, Malin", "title": "R-U policy frontiers for health data "
                 "de-identification", "venue": "JAMIA (CODASPY 2013)", "year": 2013,
                 "used_for": "policy lattice, normalized risk, KL-divergence utility loss"},
            ],
            "parameters": {"gamma": 1.0, "population": "census cells, g = max(census, sample)",
                           "criteria": {"max_record_risk": 0.05, "k": 5}},
            "commands": {"release": "deid-sql anonymize deid-sql-demo/demo.toml --policy policy.json "
                                    "--out deid-sql-demo/release.parquet",
                         "report": "deid-sql report deid-sql-demo/demo.toml --policy policy.json "
                                   "--out deid-sql-demo/report.html"},
        },
        "attestation": {"fields": ["Name", "Role", "Organization", "Date", "Signature"]},
        "unit": {"one": "record", "many": "records", "risk": "record risk"},
    }


def sample_report_with_frontier(n: int = 2000) -> dict[str, Any]:
    """The same report placed on a frontier run of ``n`` searched policies (a deterministic cloud)."""
    report = copy.deepcopy(sample_report())
    points = []
    for i in range(n):
        t = (i * 0.618034) % 1.0
        risk = 10 ** (-5 + 5 * t)
        loss = min(1.0, max(0.0, 0.9 - 0.17 * math.log10(risk) * -1 + 0.25 * ((i * 0.414214) % 1.0)))
        points.append([risk, loss])
    report["frontier"] = {"folder": "deid-sql-demo/frontier", "points": points, "this": [0.000232, 0.3121],
                          "safe_harbor": [0.0158, 0.2034], "dominated_by": 0, "evaluations": n,
                          "baselines": 15, "dominated_by_baselines": []}
    return report
