"""The analysis kinds as registered plug-ins (dchlab.experiments.analyses): every kind a
campaign file may name has one, each in its own file saying what it computes, and
`summarize` puts a kind's findings after the counts every campaign gets."""

from __future__ import annotations

import dataclasses
import importlib
import re
import textwrap
from pathlib import Path

import pytest

from dchlab.experiments import analyses
from dchlab.experiments.analyses import Analysis, Findings, get_analysis, known_analyses
from dchlab.experiments.campaign import Campaign, CampaignError, load_campaign
from dchlab.experiments.summary import summarize
from dchlab.experiments.tables import Table


def campaign(tmp_path: Path, text: str) -> Campaign:
    p = tmp_path / "c.yaml"
    p.write_text(textwrap.dedent(text))
    return load_campaign(p, check_channels=False)


GAIN = """
name: k
schemes: [all-hbc, dchannel]
conditions:
  - {name: c1, hbc: embb, llc: urllc}
workload: {kind: pageload, corpus: synthetic:1, pages: [p1]}
analysis: {kind: KIND}
"""


def test_every_kind_a_campaign_may_name_has_a_plugin(tmp_path):
    """The campaign parser's list of kinds (its error names them) is the registry's."""
    with pytest.raises(CampaignError) as e:
        campaign(tmp_path, GAIN.replace("KIND", "no-such-kind"))
    listed = re.search(r"expected one of ([^,]+(?:, [^,]+)*), got", str(e.value))
    assert listed is not None, str(e.value)
    assert set(listed.group(1).split(", ")) == set(known_analyses())
    assert len(known_analyses()) == 11  # issue 41 added `users`, issue 40 `realtime`


def test_each_kind_is_its_own_file_that_says_what_it_computes():
    for kind, help_line in known_analyses().items():
        a = get_analysis(kind)
        assert a.kind == kind and help_line
        module = importlib.import_module(type(a).__module__)
        assert module.__name__ == f"dchlab.experiments.analyses.{kind.replace('-', '_')}"
        assert (module.__doc__ or "").startswith(f"Analysis kind `{kind}`"), module.__name__
        assert type(a).__doc__


def test_an_unknown_kind_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown analysis kind 'nope'.*gain, heatmap"):
        get_analysis("nope")


def test_a_new_kind_is_one_registration(tmp_path, monkeypatch):
    """A kind registered from its own file is what summarize runs: its tables, its plot
    data after the kind, its notes after the paper's; the counts come first."""

    class Counted(Analysis):
        """One table of how many rows it was given."""

        def analyze(self, c, rows, reruns):
            return Findings([Table("rows", ["n"], [[str(len(rows))]])], {"n": 3}, ["mine"])

    c = campaign(tmp_path, GAIN.replace("KIND", "gain"))  # parsed against the real registry
    monkeypatch.setattr(analyses, "_REGISTRY", analyses.Registry(analyses.__name__))
    analyses.register("counted", help="rows counted")(Counted)
    c = dataclasses.replace(
        c, analysis={**c.analysis, "kind": "counted"}, paper={"notes": ["paper's"]}
    )
    rows = [
        {"cell": "a", "valid": True, "plt_ms": 1.0},
        {"cell": "b", "valid": False, "invalid_reason": "2 timeouts"},
        {"cell": "c", "error": "runner died"},
    ]
    s = summarize(c, rows)
    assert [(t.title, t.rows) for t in s.tables] == [("rows", [["3"]])]
    assert s.plot == {"kind": "counted", "n": 3}
    assert s.notes == ["paper's", "mine"]
    assert (s.loads, s.invalid, s.failed, s.excluded) == (2, 1, 1, {"timeouts": 1})


PHASES = """
name: ph
paper:
  metric: phases
  values:
    c1: {all-hbc: {dns_ms: 44}}
schemes: [all-hbc, dchannel]
conditions:
  - {name: c1, hbc: embb, llc: urllc}
workload: {kind: curl-phases, url: https://server.test/bytes/100}
trials: 2
analysis: {kind: phases, metrics: [dns_ms, total_ms]}
"""


def test_phases_are_means_over_trials_beside_the_paper_by_hand(tmp_path):
    c = campaign(tmp_path, PHASES)
    rows = [
        {"arm": "all-hbc", "condition": "c1", "item": "u", "trial": t, "cell": f"t{t}",
         "valid": True, "dns_ms": dns, "total_ms": total}
        for t, (dns, total) in enumerate([(10.0, 100.0), (30.0, 200.0)])
    ]  # fmt: skip
    s = summarize(c, rows)
    (t,) = s.tables
    assert t.columns == ["condition", "scheme", "dns", "total", "loads (invalid)"]
    # one URL: the mean over trials, the CI resampling trials ({10, 30}: 10 to 30)
    assert t.rows == [
        ["c1", "all-hbc", "20 [10, 30] / 44", "150 [100, 200] / —", "2 (0)"],
        ["c1", "dchannel", "— / —", "— / —", "0"],
    ]
    assert s.plot["metrics"] == ["dns_ms", "total_ms"]
    assert s.plot["means"][("c1", "all-hbc", "total_ms")].value.mean == 150.0


REWARD = """
name: rw
paper:
  metric: reward_error_p90_ms
  values:
    c1: {dchannel: {reward_error_p90_ms: 12}}
schemes: [all-hbc, dchannel]
conditions:
  - {name: c1, hbc: embb, llc: urllc}
workload: {kind: pageload, corpus: synthetic:1, pages: [p1]}
analysis: {kind: reward-error, stat: [agents.client.err, agents.gateway.err]}
"""


def test_reward_error_pools_both_agents_samples_by_hand(tmp_path):
    c = campaign(tmp_path, REWARD)

    def load(trial: int, client: list[float], gateway: list[float], valid: bool = True) -> dict:
        stats = {"agents": {"client": {"err": client}, "gateway": {"err": gateway}}}
        return {"arm": "dchannel", "condition": "c1", "item": "p1", "trial": trial,
                "cell": f"t{trial}", "valid": valid, "stats": stats}  # fmt: skip

    # 1..10 over two loads and both agents; the invalid load's 100s are left out
    rows = [load(0, [1, 2, 3], [4, 5]), load(1, [6, 7], [8, 9, 10]), load(2, [100], [100], False)]
    s = summarize(c, rows)
    (t,) = s.tables
    # p50 of 1..10 = 5.5; p90 (linear) = 9.1
    assert t.rows == [["c1", "dchannel", "10", "5.5", "9.1", "12.0"]]
    assert sorted(s.plot["samples"][("c1", "dchannel")]) == [float(x) for x in range(1, 11)]
    assert not s.notes

    no_stat = summarize(c, [dict(r, stats={}) for r in rows])
    assert no_stat.tables[0].rows == []
    assert no_stat.notes == [
        "No row carries agents.client.err + agents.gateway.err in its stats: the agents' "
        "decision log is not in the results yet."
    ]
    assert summarize(c, []).notes == []  # nothing measured: nothing to say


def test_a_kind_says_whether_it_needs_a_baseline_as_the_campaign_parser_checks(tmp_path):
    """A baseline that is not one of the schemes is an error exactly for the kinds that
    compare with one (`uses_baseline`)."""
    text = GAIN.replace("{kind: KIND}", "{kind: KIND, baseline: nope, singles: [all-hbc]}")
    for kind in known_analyses():
        if get_analysis(kind).uses_baseline:
            with pytest.raises(CampaignError, match=r"analysis\.baseline"):
                campaign(tmp_path, text.replace("KIND", kind))
        else:
            assert campaign(tmp_path, text.replace("KIND", kind)).analysis["baseline"] == "nope"


def test_only_the_reward_error_kind_needs_the_agents_decision_logs():
    needs = {k for k in known_analyses() if get_analysis(k).needs_decision_logs}
    assert needs == {"reward-error"}
