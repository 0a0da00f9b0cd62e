"""Overhead of the Python client per checkout+release cycle, next to the same
two requests sent with http.client on one kept-alive connection (scripts/sdk-bench.sh
runs it). Environment: CLASP_URL, CLASP_API_KEY (an agent key), SCN_ISSUE; argv[1]
the number of cycles. Prints one JSON line: ms per cycle of each."""

import http.client
import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import clasp  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
ref = os.environ["SCN_ISSUE"]
c = clasp.Client()
res = {"cycles": n}
with c.run() as run:
    u = urllib.parse.urlsplit(c.url)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    h = {"Authorization": "Bearer " + run.token, "Content-Type": "application/json", "Accept": "application/json"}
    checkout = json.dumps({"agentId": run.agent_id, "expectedStatuses": ["todo"]})

    def raw():
        for path, body in ((f"/api/issues/{ref}/checkout", checkout), (f"/api/issues/{ref}/release", "{}")):
            conn.request("POST", path, body=body, headers=h)
            r = conn.getresponse()
            data = json.loads(r.read())
            if r.status != 200:
                raise SystemExit(f"raw {path}: {r.status} {data}")

    def sdk():
        run.checkout(ref)
        run.release(ref)

    # Interleaved blocks of 10 cycles, so that the machine's drift hits both alike.
    spent = {"raw": 0.0, "client": 0.0}
    cpu = {"raw": 0.0, "client": 0.0}  # this process's CPU time: the client's own cost, without the server's
    for _ in range(10):
        raw(), sdk()  # warm up
    for _ in range(max(n // 10, 1)):
        for name, f in (("raw", raw), ("client", sdk)):
            t, c0 = time.perf_counter(), time.process_time()
            for _ in range(10):
                f()
            spent[name] += time.perf_counter() - t
            cpu[name] += time.process_time() - c0
    for name, s in spent.items():
        res[name + "MsPerCycle"] = round(s * 1000 / (max(n // 10, 1) * 10), 3)
    for name, s in cpu.items():
        res[name + "CpuMsPerCycle"] = round(s * 1000 / (max(n // 10, 1) * 10), 3)
    res["overheadMsPerCycle"] = round(res["clientMsPerCycle"] - res["rawMsPerCycle"], 3)
print(json.dumps({"python": res}))
