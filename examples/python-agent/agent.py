#!/usr/bin/env python3
"""An agent on the Python client: like `clasp agent work`, it claims issues until none is left and, for each, writes
the SHA-256 of the file whose path is the issue's description as the result comment "sha256 <hex>" (status done, one
write). It prints `event=checked_out ...` lines, which `clasp swarm --agent-cmd` times its kills by; `--slow 200ms`
stretches each issue's work. Environment: CLASP_URL, and CLASP_API_KEY or CLASP_TOKEN (an agent key)."""
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))
import clasp  # noqa: E402  (the repository's copy, or an installed one: pip install ./sdk/python)

arg = sys.argv[sys.argv.index("--slow") + 1] if "--slow" in sys.argv else "0s"
slow = float(arg[:-2]) / 1000 if arg.endswith("ms") else float(arg.rstrip("s") or 0)


def hash_file(issue: clasp.Issue, run: clasp.Run) -> str:
    print(f"event=checked_out issue={issue.identifier} run={run.id} epoch={issue.checkout_epoch}", flush=True)
    h = hashlib.sha256()
    with open(issue.description, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    time.sleep(slow)
    return "sha256 " + h.hexdigest()


done = clasp.Client(user_agent="python-agent").work(hash_file, idle_wait=0.25)
print(f"event=exit reason=no_work done={done}", flush=True)
