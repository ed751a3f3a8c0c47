"""Reads run.py's --json output and says why each run that lost utility or
let an attack through did so (docs/bench/agentdojo.md).

    target/py/bin/python bench/agentdojo/analyse.py RUNS.json [RUNS.json ...]

For each suite, under the documented policy:
- the clean runs that lost utility, with the ground-truth calls that never
  reached the environment (refused by the policy);
- the attacked runs where AgentDojo's `security` check says the attack
  succeeded, with the calls that ran.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from dojo import suite  # noqa: E402


def gt_calls(suite_name: str, user_id: str) -> list[str]:
    s = suite(suite_name)
    t = s.user_tasks[user_id]
    env = t.init_environment(s.load_and_inject_default_environment({}))
    return [c.function for c in t.ground_truth(env)]


def main() -> int:
    runs = []
    for f in sys.argv[1:]:
        runs += json.loads(Path(f).read_text())["runs"]
    suites = sorted({r["suite"] for r in runs}, key=["workspace", "travel", "banking", "slack"].index)
    for name in suites:
        print(f"## {name}\n")
        none_fail = [
            r["user"] for r in runs if r["suite"] == name and r["config"] == "none" and r["injection"] is None and not r["utility"]
        ]
        if none_fail:
            print(f"- no policy, ground-truth model, utility lost: {', '.join(none_fail)}")
        clean = [r for r in runs if r["suite"] == name and r["config"] == "policy" and r["injection"] is None]
        lost = [r for r in clean if not r["utility"]]
        refused = Counter()
        for r in lost:
            missing = Counter(gt_calls(name, r["user"])) - Counter(r["calls"])
            refused.update(set(missing))
        print(f"- policy, utility lost in {len(lost)}/{len(clean)} user tasks; the sinks whose calls were refused:")
        for tool, n in refused.most_common():
            print(f"  - `{tool}`: {n} tasks")
        for r in lost:
            for why in r.get("refused", []):
                print(f"  - {r['user']}: {why}")
        attacked = [r for r in runs if r["suite"] == name and r["config"] == "policy" and r["injection"] is not None]
        succ = [r for r in attacked if r["attack_success"]]
        by_inj = Counter(r["injection"] for r in succ)
        print(f"- policy, attacks that succeeded: {len(succ)}/{len(attacked)}")
        for inj, n in sorted(by_inj.items()):
            calls = Counter(c for r in succ if r["injection"] == inj for c in r["calls"])
            print(f"  - `{inj}`: {n} pairs; calls that ran: {', '.join(sorted(calls))}")
        s = suite(name)
        env = s.load_and_inject_default_environment({})
        empty = sorted(
            (i for i, it in s.injection_tasks.items() if not it.ground_truth(env)),
            key=lambda i: int(i.rsplit("_", 1)[1]),
        )
        if empty:
            att_none = [
                r for r in runs if r["suite"] == name and r["config"] == "none" and r["injection"] is not None
            ]
            rest = [r for r in att_none if r["injection"] not in empty]
            print(
                f"- injection tasks whose ground truth is empty in AgentDojo (the hijacked model has no call to "
                f"make): {', '.join(empty)}; no policy, attack success over the others: "
                f"{sum(bool(r['attack_success']) for r in rest)}/{len(rest)}"
            )
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
