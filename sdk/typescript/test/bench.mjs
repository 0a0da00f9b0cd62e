// Overhead of the TypeScript client per checkout+release cycle, next to the
// same two requests sent with fetch (scripts/sdk-bench.sh runs it).
// Environment: CLASP_URL, CLASP_API_KEY (an agent key), SCN_ISSUE; argv[2]
// the number of cycles. Prints one JSON line: ms per cycle of each.
import { Client } from "../dist/index.js";

const n = Number(process.argv[2] ?? 200);
const ref = process.env.SCN_ISSUE;
const c = new Client();
const res = { cycles: n };
await c.withRun(async (run) => {
  const h = { Authorization: "Bearer " + run.token, "Content-Type": "application/json", Accept: "application/json" };
  const checkout = JSON.stringify({ agentId: run.agentId, expectedStatuses: ["todo"] });
  async function raw() {
    for (const [path, body] of [[`/api/issues/${ref}/checkout`, checkout], [`/api/issues/${ref}/release`, "{}"]]) {
      const r = await fetch(c.url + path, { method: "POST", headers: h, body });
      const data = await r.json();
      if (r.status !== 200) throw new Error(`raw ${path}: ${r.status} ${JSON.stringify(data)}`);
    }
  }
  async function sdk() {
    await run.checkout(ref);
    await run.release(ref);
  }
  // Interleaved blocks of 10 cycles, so that the machine's drift hits both alike.
  const spent = { raw: 0, client: 0 };
  const cpu = { raw: 0, client: 0 }; // this process's CPU time: the client's own cost, without the server's
  for (let i = 0; i < 10; i++) { await raw(); await sdk(); } // warm up
  const blocks = Math.max(Math.floor(n / 10), 1);
  for (let b = 0; b < blocks; b++) {
    for (const [name, f] of [["raw", raw], ["client", sdk]]) {
      const t = performance.now();
      const c0 = process.cpuUsage();
      for (let i = 0; i < 10; i++) await f();
      spent[name] += performance.now() - t;
      const c1 = process.cpuUsage(c0);
      cpu[name] += (c1.user + c1.system) / 1000;
    }
  }
  for (const [name, ms] of Object.entries(spent)) res[name + "MsPerCycle"] = Number((ms / (blocks * 10)).toFixed(3));
  for (const [name, ms] of Object.entries(cpu)) res[name + "CpuMsPerCycle"] = Number((ms / (blocks * 10)).toFixed(3));
  res.overheadMsPerCycle = Number((res.clientMsPerCycle - res.rawMsPerCycle).toFixed(3));
});
console.log(JSON.stringify({ typescript: res }));
