#!/usr/bin/env node
// An agent on the TypeScript client: like `clasp agent work`, it claims issues until none is left and, for each,
// writes the SHA-256 of the file whose path is the issue's description as the result comment "sha256 <hex>" (status
// done, one write). It prints `event=checked_out ...` lines, which `clasp swarm --agent-cmd` times its kills by;
// `--slow 200ms` stretches each issue's work. Environment: CLASP_URL, and CLASP_API_KEY or CLASP_TOKEN (an agent key).
// Build the client first: (cd sdk/typescript && npm ci && npm run build).
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { Client } from "../../sdk/typescript/dist/index.js";

const i = process.argv.indexOf("--slow");
const arg = i > 0 ? process.argv[i + 1] : "0s";
const slowMs = arg.endsWith("ms") ? Number(arg.slice(0, -2)) : Number(arg.replace(/s$/, "") || 0) * 1000;

async function hashFile(issue, run) {
  console.log(`event=checked_out issue=${issue.identifier} run=${run.id} epoch=${issue.checkoutEpoch}`);
  const h = createHash("sha256");
  for await (const chunk of createReadStream(issue.description)) h.update(chunk);
  await sleep(slowMs);
  return "sha256 " + h.digest("hex");
}

const done = await new Client().work(hashFile, { idleWaitMs: 250 });
console.log(`event=exit reason=no_work done=${done}`);
