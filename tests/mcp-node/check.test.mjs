// Drives clasp's MCP server with third-party clients: the TypeScript MCP SDK
// client and the MCP Inspector CLI, over stdio (`clasp mcp`) and over the
// Streamable HTTP endpoint /mcp of `clasp serve`. Each transport: list the
// tools, claim an issue, a second session's checkout of it is an isError
// conflict naming the holder, done, shutdown.
//
// CLASP_BIN names the clasp binary (the Go test TestNodeClients builds it).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const inspector = join(here, "node_modules", ".bin", "mcp-inspector");
const bin = process.env.CLASP_BIN;
assert.ok(bin, "CLASP_BIN must name the clasp binary");

let server, url, board, dataDir;
const keys = {};

// api calls the clasp REST API with a bearer token.
async function api(token, method, path, body) {
  const res = await fetch(url + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", Accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "clasp-mcp-node-"));
  server = spawn(bin, ["serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir], {
    env: { ...process.env, CLASP_DATA_DIR: "", CLASP_LISTEN: "" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: server.stdout });
  for await (const line of lines) {
    if (line.startsWith("board token: ")) board = line.slice("board token: ".length);
    if (line.startsWith("clasp listening on ")) {
      url = line.slice("clasp listening on ".length);
      break;
    }
  }
  assert.ok(url && board?.startsWith("clasp_bt_"), "server banner");
  const co = await api(board, "POST", "/api/companies", { name: "Node check", issuePrefix: "NODE" });
  for (const name of ["coder", "reviewer"]) {
    const a = await api(board, "POST", `/api/companies/${co.id}/agents`, { name });
    keys[name] = (await api(board, "POST", `/api/agents/${a.id}/keys`, {})).token;
  }
  for (let i = 1; i <= 6; i++) {
    await api(board, "POST", `/api/companies/${co.id}/issues`, { title: `task ${i}`, status: "todo" });
  }
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server.once("exit", resolve));
    server.kill("SIGTERM");
    const code = await exited;
    assert.equal(code, 0, "clasp serve exit after SIGTERM");
  }
  rmSync(dataDir, { recursive: true, force: true });
});

const tools = ["add_comment", "checkout_issue", "claim_next_issue", "create_issue", "get_issue", "list_my_issues", "release_issue", "session_status", "update_issue_status"];

async function connect(transport) {
  const c = new Client({ name: "clasp-node-check", version: "1.0.0" });
  await c.connect(transport);
  return c;
}

function stdioTransport(key) {
  return new StdioClientTransport({ command: bin, args: ["mcp"], env: { CLASP_URL: url, CLASP_API_KEY: key, PATH: process.env.PATH }, stderr: "inherit" });
}

// scenario: list, claim, conflict from a second session, done, close.
async function scenario(first, second, firstRun) {
  const listed = await first.listTools();
  assert.deepEqual(listed.tools.map((t) => t.name).sort(), tools);
  for (const t of listed.tools) {
    assert.ok(t.outputSchema, `${t.name} has an output schema`);
    assert.equal(typeof t.annotations?.readOnlyHint, "boolean", `${t.name} annotations`);
  }
  const claim = await first.callTool({ name: "claim_next_issue", arguments: {} });
  assert.ok(!claim.isError, JSON.stringify(claim));
  const s = claim.structuredContent;
  assert.equal(s.outcome, "claimed");
  assert.match(s.issue.identifier, /^NODE-\d+$/);
  assert.equal(s.stamp, `Clasp-Issue: ${s.issue.identifier}@${s.checkoutEpoch}`);
  if (firstRun) assert.equal(s.runId, firstRun);

  const conflict = await second.callTool({ name: "checkout_issue", arguments: { issue: s.issue.identifier } });
  assert.equal(conflict.isError, true, "a held issue's checkout is an isError result");
  assert.equal(conflict.structuredContent.outcome, "conflict");
  assert.equal(conflict.structuredContent.heldBy.agent, "coder");
  assert.equal(conflict.structuredContent.heldBy.runId, s.runId);
  assert.match(conflict.content[0].text, new RegExp(`${s.issue.identifier} is held by agent coder`));

  const done = await first.callTool({ name: "update_issue_status", arguments: { issue: s.issue.identifier, status: "done", comment: "done from node" } });
  assert.ok(!done.isError, JSON.stringify(done));
  assert.equal(done.structuredContent.issue.status, "done");
  return s;
}

test("TypeScript SDK client over stdio", async () => {
  const a = await connect(stdioTransport(keys.coder));
  const b = await connect(stdioTransport(keys.coder)); // a second session of the same agent
  const s = await scenario(a, b);
  await a.close();
  await b.close();
  // stdin EOF finished the session's run.
  let r;
  for (let i = 0; i < 100; i++) {
    r = await api(board, "GET", `/api/runs/${s.runId}`);
    if (r.status !== "running") break;
    await new Promise((res) => setTimeout(res, 50));
  }
  assert.equal(r.status, "succeeded");
  assert.equal(r.invocationSource, "mcp");
});

test("TypeScript SDK client over /mcp (Streamable HTTP)", async () => {
  const r1 = await openRun(keys.coder);
  const r2 = await openRun(keys.coder);
  const http = (token) => new StreamableHTTPClientTransport(new URL(url + "/mcp"), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  const a = await connect(http(r1.runToken));
  const b = await connect(http(r2.runToken));
  await scenario(a, b, r1.id);
  await a.close();
  await b.close();
  for (const r of [r1, r2]) await r.finish("succeeded");
});

// inspect runs the Inspector CLI and returns its JSON output once it has
// exited. It sets no deadline of its own: how long the Inspector (two Node
// processes) takes to start depends on the machine's load, and the Go test
// that runs this script bounds the whole check.
async function inspect(args) {
  const { stdout } = await run(inspector, ["--cli", ...args], { env: { ...process.env, CLASP_URL: "", CLASP_API_KEY: "" } });
  const start = stdout.indexOf("{");
  assert.ok(start >= 0, `inspector output: ${stdout}`);
  return JSON.parse(stdout.slice(start));
}

// openRun opens a run of the agent whose key is given, as a launcher does,
// and heartbeats it every third of its lease until stop() (which finish
// calls), as a launcher does while its agent works: a run handed to a
// client that only calls in now and then (a stateless /mcp session) would
// otherwise be swept once its lease ran out, however slowly the client
// started. Returns the run with finish(status).
async function openRun(key) {
  const r = await api(key, "POST", "/api/agents/me/runs", { invocationSource: "node-check" });
  const ttl = Date.parse(r.leaseExpiresAt) - Date.parse(r.lastSignOfLifeAt ?? r.startedAt);
  const beat = setInterval(() => {
    api(r.runToken, "POST", `/api/runs/${r.id}/heartbeat`, {}).catch((err) => console.error(`heartbeat of run ${r.id}: ${err.message}`));
  }, Math.max(ttl / 3, 100));
  r.finish = async (status) => {
    clearInterval(beat);
    await api(r.runToken, "POST", `/api/runs/${r.id}/finish`, { status });
  };
  return r;
}

test("Inspector CLI over stdio", async () => {
  const env = ["-e", `CLASP_URL=${url}`, "-e", `CLASP_API_KEY=${keys.reviewer}`];
  const listed = await inspect([bin, "mcp", ...env, "--method", "tools/list"]);
  assert.deepEqual(listed.tools.map((t) => t.name).sort(), tools);
  const claim = await inspect([bin, "mcp", ...env, "--method", "tools/call", "--tool-name", "claim_next_issue"]);
  assert.equal(claim.structuredContent.outcome, "claimed", JSON.stringify(claim));
  // The inspector's session ended: its run finished and the issue is free again.
  const got = await inspect([bin, "mcp", ...env, "--method", "tools/call", "--tool-name", "get_issue", "--tool-arg", `issue=${claim.structuredContent.issue.identifier}`]);
  assert.equal(got.structuredContent.issue.heldBy, undefined, JSON.stringify(got));
});

test("Inspector CLI over /mcp", async () => {
  const r = await openRun(keys.reviewer);
  const common = [url + "/mcp", "--transport", "http", "--header", `Authorization: Bearer ${r.runToken}`];
  const listed = await inspect([...common, "--method", "tools/list"]);
  assert.deepEqual(listed.tools.map((t) => t.name).sort(), tools);
  const claim = await inspect([...common, "--method", "tools/call", "--tool-name", "claim_next_issue"]);
  assert.equal(claim.structuredContent.outcome, "claimed", JSON.stringify(claim));
  assert.equal(claim.structuredContent.runId, r.id);
  const other = await openRun(keys.reviewer);
  const conflict = await inspect([url + "/mcp", "--transport", "http", "--header", `Authorization: Bearer ${other.runToken}`,
    "--method", "tools/call", "--tool-name", "checkout_issue", "--tool-arg", `issue=${claim.structuredContent.issue.identifier}`]);
  assert.equal(conflict.isError, true, JSON.stringify(conflict));
  assert.equal(conflict.structuredContent.heldBy.runId, r.id);
  const done = await inspect([...common, "--method", "tools/call", "--tool-name", "update_issue_status",
    "--tool-arg", `issue=${claim.structuredContent.issue.identifier}`, "--tool-arg", "status=done", "--tool-arg", "comment=done from the inspector"]);
  assert.equal(done.structuredContent.outcome, "updated", JSON.stringify(done));
  for (const x of [r, other]) await x.finish("succeeded");
});
