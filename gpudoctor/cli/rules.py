"""`gpudoctor rules [ID]`: the catalogue, and one rule's documentation."""

from __future__ import annotations

import sys

from ..knowledge import load_catalogue


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("rules", help="list the rule catalogue or print one rule's documentation")
    parser.add_argument("rule_id", nargs="?", help="a rule id, e.g. libcuda-unversioned-missing")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--features", action="store_true",
                        help="list the features `check --require` and preflight(require=...) verify")
    parser.set_defaults(run=run)


def _features(as_json: bool) -> int:
    import json

    from ..requirements import FEATURES

    if as_json:
        print(json.dumps([{"feature": name, "form": form, "verifies": text} for name, (form, text) in FEATURES.items()],
                         indent=2))
        return 0
    width = max(len(form) for form, _ in FEATURES.values())
    for form, text in FEATURES.values():
        print(f"{form:<{width}}  {text}")
    return 0


def run(args) -> int:
    import json

    if args.features:
        if args.rule_id:
            sys.stderr.write("gpudoctor: error: --features lists the feature vocabulary; it takes no rule id\n")
            return 2
        return _features(args.json)
    catalogue = load_catalogue()
    if args.rule_id:
        rule = catalogue.get(args.rule_id)
        if rule is None:
            sys.stderr.write(f"gpudoctor: error: unknown rule {args.rule_id!r} (see `gpudoctor rules`)\n")
            return 2
        if args.json:
            print(json.dumps({**rule.__dict__, "severity": rule.severity.value}, indent=2))
            return 0
        print(f"{rule.id}  [{rule.severity.value}, {rule.area}, detected by: {', '.join(rule.detected_by)}]")
        print(rule.title)
        for section, text in (("What it checks", rule.what), ("Why it breaks training", rule.why), ("Fix", rule.fix)):
            print(f"\n## {section}\n{text}")
        print("\n## References")
        for ref in rule.references or ("(none)",):
            print(f"- {ref}")
        return 0
    if args.json:
        print(json.dumps([{"id": r.id, "severity": r.severity.value, "area": r.area, "title": r.title,
                           "detected_by": list(r.detected_by)} for r in catalogue.values()], indent=2))
        return 0
    width = max(len(r) for r in catalogue)
    for rule in catalogue.values():
        print(f"{rule.id:<{width}}  {rule.severity.value:<7}  {rule.area:<13}  {rule.title}")
    return 0
