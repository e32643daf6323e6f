#!/usr/bin/env python3
"""Demo backend of the "courier" tool pack, speaking toolgate's command protocol.

The arguments object arrives on stdin; one JSON object goes to stdout:
{"ok": true, "result": ...} or {"ok": false, "error": "not_found" | "refused" |
"invalid_arguments", "detail": "..."}. Diagnostics go to stderr. Stateless:
the parcels below are fixed demo data.
"""
import json
import sys

PARCELS = {
    "PK-1001": {"status": "in transit", "due_day": 3, "city": "Lyon"},
    "PK-1002": {"status": "delivered", "due_day": 1, "city": "Paris"},
    "PK-1003": {"status": "held at depot", "due_day": 5, "city": "Lille"},
}
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def reply(payload):
    json.dump(payload, sys.stdout)
    sys.stdout.write("\n")


def main():
    action = sys.argv[1] if len(sys.argv) > 1 else ""
    args = json.load(sys.stdin)
    parcel = PARCELS.get(args.get("code"))
    if parcel is None:
        return reply({"ok": False, "error": "not_found", "detail": f"no parcel with tracking code {args.get('code')}"})
    if action == "track":
        return reply({"ok": True, "result": {"code": args["code"], "status": parcel["status"],
                                             "city": parcel["city"], "due": DAYS[parcel["due_day"] - 1]}})
    if action == "reschedule":
        if parcel["status"] == "delivered":
            return reply({"ok": False, "error": "refused", "detail": "this parcel was already delivered"})
        day = args["day"]
        print(f"rescheduling {args['code']} to day {day}", file=sys.stderr)
        return reply({"ok": True, "result": {"code": args["code"], "due": DAYS[day - 1],
                                             "note": args.get("note", "")}})
    print(f"unknown action {action!r}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
