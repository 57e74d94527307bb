#!/usr/bin/env python3
"""Check a results file (cepheus-conformance-results/v1) against the expectations in case files.

Usage: check_results.py --cases <dir|file.json> --results <results.json> [-v]

Stdlib only. For every case it checks what the case asserts:

* matches: expected_matches_seq against the produced matches, as a multiset of sorted seq
  lists. When the seq lists differ but the events are equal by value (Flink's Event.equals:
  id, name, price, plus volume for SubEvent; the README says seq lists are then only one
  valid assignment), the case agrees "by value".
* expected_match_count, when given instead of match contents.
* expects_error (or expected_error): the case's error must be non-null; otherwise error
  must be null.
* timeouts: expected_timeouts_seq as a multiset of sorted seq lists, with
  expected_timeout_timestamps paired in when given.
* expected_output_sequence: exact order of watermarks and matches (stage order).
* expected_late_events_seq: the late list, in order.
* expected_stage_map_seq: each match's stage -> seqs map.

Exit status 0 when every case agrees, 1 otherwise, 2 on bad input.
"""

import argparse
import glob
import json
import os
import sys
from collections import Counter


def load_cases(path):
    files = sorted(glob.glob(os.path.join(path, "*.json"))) if os.path.isdir(path) else [path]
    cases = {}
    for f in files:
        with open(f) as fh:
            for c in json.load(fh).get("cases", []):
                cases.setdefault(c["id"], c)
    return cases


def value_key(ev):
    """Flink's Event.equals: id, name, price (+ volume for SubEvent)."""
    return (ev.get("type", "Event"), ev["id"], ev["name"], float(ev["price"]), ev.get("volume"))


def flat(stages):
    out = []
    for seqs in stages.values():
        out.extend(seqs)
    return out


def multiset(lists, key=lambda s: s):
    return Counter(tuple(sorted(key(s) for s in lst)) for lst in lists)


def check_case(case, res):
    """Returns (status, problems): status is 'agree', 'agree-by-value' or 'disagree'."""
    problems = []
    by_value_only = False
    events = {e["seq"]: e for e in case["events"]}

    def vkey(seq):
        return value_key(events[seq]) if seq in events else ("?", seq)

    mode = case.get("compare_mode")
    expects_error = mode == "expects_error" or case.get("expected_error") is not None
    err = res.get("error")
    if expects_error:
        if err is None:
            problems.append("expected an error (%s), got none" % case.get("expected_error"))
    elif err is not None:
        problems.append("unexpected error: %s" % err)

    produced = [flat(m["stages"]) for m in res.get("matches", [])]
    exp = case.get("expected_matches_seq")
    if exp is not None and not expects_error:
        if mode == "set_of_maps":
            same_seq = set(multiset(exp)) == set(multiset(produced))
            same_val = set(multiset(exp, vkey)) == set(multiset(produced, vkey))
        else:
            same_seq = multiset(exp) == multiset(produced)
            same_val = multiset(exp, vkey) == multiset(produced, vkey)
        if not same_seq:
            if same_val:
                by_value_only = True
            else:
                missing = multiset(exp) - multiset(produced)
                extra = multiset(produced) - multiset(exp)
                problems.append("matches differ: expected %d, got %d; missing %s; extra %s"
                                % (len(exp), len(produced), sorted(missing.elements()),
                                   sorted(extra.elements())))
    if case.get("expected_match_count") is not None and len(produced) != case["expected_match_count"]:
        problems.append("match count: expected %d, got %d" % (case["expected_match_count"], len(produced)))

    exp_to = case.get("expected_timeouts_seq")
    if exp_to is not None:
        got_to = res.get("timeouts", [])
        ts = case.get("expected_timeout_timestamps")
        if ts is not None:
            want = Counter((tuple(sorted(s)), t) for s, t in zip(exp_to, ts))
            got = Counter((tuple(sorted(flat(t["stages"]))), t["timestamp"]) for t in got_to)
        else:
            want = multiset(exp_to)
            got = multiset([flat(t["stages"]) for t in got_to])
        if want != got:
            problems.append("timeouts differ: expected %s, got %s"
                            % (sorted(want.elements()), sorted(got.elements())))

    exp_out = case.get("expected_output_sequence")
    if exp_out is not None:
        want = [("w", o["watermark"]) if "watermark" in o else ("m", tuple(o["match_seq"])) for o in exp_out]
        got = [("w", o["watermark"]) if "watermark" in o else ("m", tuple(o["match"]))
               for o in (res.get("output") or [])]
        if want != got:
            problems.append("output sequence differs:\n      expected %s\n      got      %s" % (want, got))

    exp_late = case.get("expected_late_events_seq")
    if exp_late is not None and list(exp_late) != list(res.get("late") or []):
        problems.append("late events: expected %s, got %s" % (exp_late, res.get("late")))

    exp_maps = case.get("expected_stage_map_seq")
    if exp_maps is not None:
        want = sorted(json.dumps(m, sort_keys=True) for m in exp_maps)
        got = sorted(json.dumps(m["stages"], sort_keys=True) for m in res.get("matches", []))
        if want != got:
            problems.append("stage maps: expected %s, got %s" % (want, got))

    if problems:
        return "disagree", problems
    return ("agree-by-value" if by_value_only else "agree"), []


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", required=True, help="case directory or file")
    ap.add_argument("--results", required=True, help="results file")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every case")
    args = ap.parse_args()

    cases = load_cases(args.cases)
    with open(args.results) as fh:
        results = json.load(fh)
    if results.get("format") != "cepheus-conformance-results/v1":
        print("unexpected results format: %r" % results.get("format"), file=sys.stderr)
        return 2
    results = results.get("results", {})

    tally = Counter()
    for cid, case in cases.items():
        res = results.get(cid)
        if res is None:
            status, problems = "disagree", ["no result for this case"]
        else:
            status, problems = check_case(case, res)
        tally[status] += 1
        if problems or args.verbose or status != "agree":
            print("%-15s %s" % (status, cid))
            for p in problems:
                print("    " + p)
    total = sum(tally.values())
    agree = tally["agree"] + tally["agree-by-value"]
    print("%d/%d cases agree (%d by seq, %d only by event value), %d disagree"
          % (agree, total, tally["agree"], tally["agree-by-value"], tally["disagree"]))
    return 0 if tally["disagree"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
