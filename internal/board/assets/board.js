// The board's live layer (an ES module, no dependencies).
//
// - One EventSource per tab on /api/companies/{id}/events. The browser
//   resumes a dropped stream with Last-Event-ID; when the stream is closed
//   for good (an HTTP error during a restart) a new one resumes with
//   ?after=<last id seen>. Events are applied once: the feed keeps the ids
//   it has shown.
// - Events are coalesced: at most one fragment request per 200 ms, whatever
//   the event rate; the fragment replaces the page's [data-live] region.
// - One page-wide ticker updates lease countdowns, corrected by the
//   server's clock (data-server-now on each render).
// - Actions: forms and buttons marked as actions are confirmed in the
//   <dialog>, then sent to the public API as JSON with fetch(); errors are
//   shown as the API's message (a 409 names the holder).
// - Agent-written text is only ever set with textContent.

const body = document.body;
const company = body.dataset.company || "";
const actions = (body.dataset.actions || "").split(",").filter(Boolean);
const conn = document.getElementById("conn");
const stale = document.getElementById("stale");

// ---- the server's clock ----------------------------------------------
let skew = 0; // server time minus local time, in ms
function syncClock(root) {
  const el = root.querySelector("[data-server-now]") || body;
  const n = Number(el.dataset.serverNow);
  if (n > 0) skew = n - Date.now();
}
const serverNow = () => Date.now() + skew;

function fmtSecs(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return Math.round(s / 3600) + " h";
}

// fmtAgo says how long ms is for relative times ("3 min", "2 h", "5 days").
function fmtAgo(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.round(s / 60) + " min";
  if (s < 172800) return Math.round(s / 3600) + " h";
  return Math.round(s / 86400) + " days";
}

function tick() {
  const now = serverNow();
  for (const el of document.querySelectorAll("[data-expires]")) {
    const exp = Date.parse(el.dataset.expires);
    if (Number.isNaN(exp)) continue;
    const left = exp - now;
    if (el.tagName === "METER") {
      const from = Date.parse(el.dataset.from);
      const span = Number.isNaN(from) ? 60000 : Math.max(exp - from, 1000);
      el.max = span / 1000;
      el.value = Math.max(left, 0) / 1000;
    } else {
      el.textContent = left > 0 ? fmtSecs(left) + " left" : "expired " + fmtSecs(left) + " ago";
      el.classList.toggle("expired", left <= 0);
    }
  }
  for (const el of document.querySelectorAll("time[data-rel]")) {
    const t = Date.parse(el.getAttribute("datetime"));
    if (Number.isNaN(t)) continue;
    const d = now - t;
    el.textContent = d >= 0 && d < 10000 ? "just now" : d > 0 ? fmtAgo(d) + " ago" : "in " + fmtAgo(d);
  }
  for (const el of document.querySelectorAll("[data-since]")) {
    const t = Date.parse(el.dataset.since);
    if (!Number.isNaN(t)) el.textContent = "held " + fmtSecs(now - t);
  }
}

// ---- live updates ----------------------------------------------------
// The newest event the page reflects: the render's, then each one applied.
let lastId = body.dataset.lastEventId ? Number(body.dataset.lastEventId) : null;
const seen = new Set();
let es = null;
let down = false;
let downSince = 0;
const staleReload = 10 * 60 * 1000; // ms disconnected after which a reconnect reloads the page
let timer = null;
let inflight = false;
let again = false;
let refreshes = 0;

function setConn(state, text) {
  if (!conn) return;
  conn.dataset.state = state;
  conn.textContent = text;
  if (stale) stale.hidden = state !== "down";
  body.classList.toggle("is-stale", state === "down");
}

function connect() {
  if (!company) return;
  const url = "/api/companies/" + encodeURIComponent(company) + "/events" + (lastId !== null ? "?after=" + lastId : "");
  es = new EventSource(url);
  es.onopen = () => {
    setConn("live", "live");
    if (down) {
      down = false;
      // Away too long: the replay would be a history, not an update;
      // the page is read again whole instead.
      if (Date.now() - downSince > staleReload) { location.reload(); return; }
      schedule();
    }
  };
  es.onerror = () => {
    if (!down) downSince = Date.now();
    down = true;
    setConn("down", "disconnected");
    if (es.readyState === EventSource.CLOSED) {
      es = null;
      setTimeout(connect, 2000);
    }
  };
  es.onmessage = onEvent;
  for (const a of actions) es.addEventListener(a, onEvent);
}

function onEvent(ev) {
  const id = Number(ev.lastEventId);
  if (!Number.isFinite(id) || seen.has(id)) return;
  seen.add(id);
  if (lastId === null || id > lastId) lastId = id;
  body.dataset.applied = String(seen.size); // events applied by this page, and the newest:
  body.dataset.appliedLast = String(lastId); // read by the tests and by people debugging
  let a = {};
  try { a = JSON.parse(ev.data); } catch { /* shown without details */ }
  const feed = document.getElementById("feed");
  if (feed) {
    const li = document.createElement("li");
    li.dataset.id = String(id);
    li.dataset.action = ev.type;
    li.textContent = "#" + id + " " + ev.type + " " + (a.entityType || "") + " " + (a.details && a.details.title ? a.details.title : "");
    feed.prepend(li);
    const none = document.getElementById("feed-empty");
    if (none) none.hidden = true;
    while (feed.children.length > 100) feed.lastElementChild.remove();
  }
  if (ev.type === "issue.stale_lock_cleared" && a.entityId) { swept.set(a.entityId, id); markSwept(); }
  schedule();
}

// Issues whose lock the sweeper cleared while this page was open: their
// cards carry a "lock swept" mark (re-applied after every refresh).
const swept = new Map();
function markSwept() {
  for (const [issue, id] of swept) {
    const card = document.querySelector('.card[data-issue-id="' + CSS.escape(issue) + '"]');
    if (!card || card.querySelector(".swept")) continue;
    const s = document.createElement("p");
    s.className = "swept";
    s.textContent = "lock swept by the sweeper (event #" + id + ")";
    card.append(s);
  }
}

function schedule() {
  if (timer !== null) return;
  timer = setTimeout(refresh, 200);
}

async function refresh() {
  timer = null;
  if (inflight) { again = true; return; }
  const live = document.getElementById("live");
  if (!live) return;
  inflight = true;
  try {
    const res = await fetch(location.href, { headers: { "X-Board-Fragment": "1" }, credentials: "same-origin", cache: "no-store" });
    if (res.ok) {
      const html = await res.text();
      const doc = new DOMParser().parseFromString("<div>" + html + "</div>", "text/html");
      const focused = document.activeElement;
      const key = focused && focused.closest("#live") ? focusKey(focused) : null;
      live.replaceChildren(...doc.body.firstChild.childNodes);
      syncClock(live);
      markSwept();
      tick();
      if (key) { const el = live.querySelector(key); if (el) el.focus(); }
      refreshes++;
      body.dataset.refreshes = String(refreshes);
    }
  } catch { /* the event stream reports the disconnection */ }
  inflight = false;
  if (again) { again = false; schedule(); }
}

function focusKey(el) {
  if (el.id) return "#" + CSS.escape(el.id);
  if (el.dataset.path) return '[data-path="' + CSS.escape(el.dataset.path) + '"]';
  if (el.getAttribute("href")) return 'a[href="' + CSS.escape(el.getAttribute("href")) + '"]';
  return null;
}

// ---- actions ---------------------------------------------------------
const dlg = document.getElementById("confirm");

function show(el, text) {
  if (!el) return;
  el.textContent = text || "";
  el.hidden = !text;
}

// confirmDialog opens the dialog with text (and a warning) and resolves
// with a function that sends the request, or null when cancelled. The send
// function reports errors inside the dialog and resolves true on success.
function confirmDialog(text, warn, send, secretField) {
  show(document.getElementById("confirm-text"), text);
  show(document.getElementById("confirm-warn"), warn);
  show(document.getElementById("confirm-error"), "");
  document.getElementById("confirm-result").hidden = true;
  const ok = document.getElementById("confirm-ok");
  const cancel = document.getElementById("confirm-cancel");
  ok.hidden = false;
  ok.disabled = false;
  cancel.textContent = "Cancel";
  dlg.returnValue = "";
  dlg.showModal();
  ok.focus();
  return new Promise((resolve) => {
    const onSubmit = async (ev) => {
      const v = ev.submitter ? ev.submitter.value : "cancel";
      if (v !== "ok") { cleanup(); resolve(false); return; }
      ev.preventDefault();
      ok.disabled = true;
      const r = await send();
      ok.disabled = false;
      if (!r.ok) { show(document.getElementById("confirm-error"), r.message); return; }
      if (secretField && r.data && r.data[secretField]) {
        document.getElementById("confirm-secret").textContent = r.data[secretField];
        document.getElementById("confirm-result").hidden = false;
        ok.hidden = true;
        cancel.textContent = "Close";
        cancel.focus();
        return;
      }
      cleanup();
      dlg.close("ok");
      resolve(true);
    };
    const onClose = () => { cleanup(); resolve(false); };
    const cleanup = () => {
      dlg.querySelector("form").removeEventListener("submit", onSubmit);
      dlg.removeEventListener("close", onClose);
    };
    dlg.querySelector("form").addEventListener("submit", onSubmit);
    dlg.addEventListener("close", onClose);
  });
}

// call sends one API request; it resolves {ok, status, data, message}.
async function call(method, path, payload) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (payload !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(payload);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    return { ok: false, status: 0, message: "The server could not be reached: " + e.message };
  }
  let data = null;
  const text = await res.text();
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (res.ok) return { ok: true, status: res.status, data };
  return { ok: false, status: res.status, data, message: errorMessage(res.status, data, text) };
}

function errorMessage(status, data, text) {
  if (!data || typeof data.error !== "string") return "The server answered " + status + ": " + (text || "no details").slice(0, 300);
  let m = data.error;
  const d = data.details || {};
  if (status === 409) {
    const holder = d.checkoutRunId || d.executionRunId || d.holderRunId || (d.activeRun && d.activeRun.id);
    const agent = d.holderAgentId || d.checkoutAgentId || (d.activeRun && d.activeRun.agentId);
    if (holder && !m.includes(holder)) m += " Held by run " + holder + (agent ? " of agent " + agentName(agent) : "") + ".";
    if (d.assigneeAgentId) m += " Assigned to " + agentName(d.assigneeAgentId) + ".";
  }
  return m + " (" + status + " " + (data.code || "") + ")";
}

// agentName maps an agent id to the name the page knows for it.
function agentName(id) {
  for (const o of document.querySelectorAll("option")) if (o.value === id) return o.textContent + " (" + id + ")";
  const p = document.getElementById("lock-panel");
  if (p && p.dataset.agentId === id && p.dataset.agentName) return p.dataset.agentName + " (" + id + ")";
  return id;
}

function payloadOf(form) {
  const out = form.dataset.extra ? JSON.parse(form.dataset.extra) : {};
  for (const el of form.elements) {
    if (!el.name || el.disabled) continue;
    if (form.hasAttribute("data-changed-only")) {
      const changed = el.tagName === "SELECT" ? [...el.options].some((o) => o.selected !== o.defaultSelected) : el.value !== el.defaultValue;
      if (!changed) continue;
    }
    if (el.type === "checkbox") { out[el.name] = el.checked; continue; }
    if (el.hasAttribute("data-list")) { out[el.name] = el.value.split(",").map((s) => s.trim()).filter(Boolean); continue; }
    if (el.value === "" && el.hasAttribute("data-null-empty")) { out[el.name] = null; continue; }
    out[el.name] = el.value;
  }
  return out;
}

function lockWarning() {
  const p = document.getElementById("lock-panel");
  if (!p) return "";
  const epoch = p.dataset.epoch;
  if (p.dataset.liveness === "live") {
    return "The holder's run is live: it is still working and will lose its lock. Checkout epoch " + epoch + " is fenced off; the next checkout gets epoch " + (Number(epoch) + 1) + ".";
  }
  if (p.dataset.liveness === "none") return "The issue holds no lock now.";
  return "The holder's run is " + p.dataset.liveness + ". Checkout epoch " + epoch + " is fenced off.";
}

document.addEventListener("submit", async (ev) => {
  const form = ev.target.closest("form.action");
  if (!form) return;
  ev.preventDefault();
  const msg = form.querySelector("output.msg");
  show(msg, "");
  if (msg) msg.classList.remove("ok"); // set again on success only: errors keep the error style
  for (const el of form.querySelectorAll("[data-required],[required]")) {
    if (!el.value.trim()) {
      show(msg, (el.labels && el.labels[0] ? el.labels[0].textContent.replace(/\s*\(.*\)\s*/, "").trim() : el.name) + " is required.");
      el.focus();
      return;
    }
  }
  const payload = payloadOf(form);
  if (form.hasAttribute("data-changed-only") && Object.keys(payload).length === 0) {
    show(msg, "Nothing changed.");
    return;
  }
  const warn = form.hasAttribute("data-lock-warning") ? lockWarning() : "";
  let last = null;
  const done = await confirmDialog(form.dataset.confirm, warn, async () => (last = await call(form.dataset.method, form.dataset.path, payload)));
  if (done) {
    const shown = form.dataset.show && last && last.data ? last.data[form.dataset.show] : "";
    show(msg, shown ? "Done. Shown only this once, store it now: " + shown : "Done.");
    if (msg) msg.classList.add("ok");
    if (form.id === "create-issue" || form.id === "comment" || form.id === "force-release" || form.id === "create-webhook") form.reset();
    schedule();
  } else if (last && !last.ok) {
    show(msg, last.message);
  }
});

document.addEventListener("click", async (ev) => {
  const btn = ev.target.closest("button.action-btn");
  if (btn) {
    const payload = btn.dataset.body ? JSON.parse(btn.dataset.body) : undefined;
    const done = await confirmDialog(btn.dataset.confirm, "", () => call(btn.dataset.method, btn.dataset.path, payload), btn.dataset.show);
    if (done || btn.dataset.show) schedule();
    return;
  }
  const lg = ev.target.closest("button.log-toggle");
  if (lg) toggleLog(lg);
});

// ---- run logs (followed while shown) ------------------------------------
const logs = new Map(); // run id -> {pre, offset, timer}
async function pollLog(id) {
  const st = logs.get(id);
  if (!st) return;
  try {
    const res = await fetch("/api/runs/" + encodeURIComponent(id) + "/log?offset=" + st.offset, { credentials: "same-origin" });
    if (res.ok) {
      const text = await res.text();
      st.offset += new TextEncoder().encode(text).length;
      // The log opens at its end and follows it while the reader stays there.
      const atEnd = st.pre.scrollTop + st.pre.clientHeight >= st.pre.scrollHeight - 4;
      st.pre.textContent = (st.pre.textContent + text).slice(-20000);
      if (atEnd) st.pre.scrollTop = st.pre.scrollHeight;
      const status = res.headers.get("X-Clasp-Run-Status") || "";
      if (["succeeded", "failed", "cancelled", "timed_out"].includes(status)) return;
    } else {
      st.pre.textContent = "No log (" + res.status + ").";
      return;
    }
  } catch { /* retried */ }
  st.timer = setTimeout(() => pollLog(id), 2000);
}
function toggleLog(btn) {
  const id = btn.dataset.log;
  const row = btn.closest("tr");
  if (logs.has(id)) {
    const st = logs.get(id);
    clearTimeout(st.timer);
    st.row.remove();
    logs.delete(id);
    btn.setAttribute("aria-expanded", "false");
    return;
  }
  const tr = document.createElement("tr");
  const td = document.createElement("td");
  td.colSpan = 8;
  const pre = document.createElement("pre");
  pre.className = "log";
  td.append(pre);
  tr.append(td);
  row.after(tr);
  logs.set(id, { pre, row: tr, offset: 0, timer: null });
  btn.setAttribute("aria-expanded", "true");
  pollLog(id);
}

// A run's page follows its log from the start, in the page's own <pre>.
for (const pre of document.querySelectorAll("pre[data-follow-log]")) {
  logs.set(pre.dataset.followLog, { pre, row: null, offset: 0, timer: null });
  pollLog(pre.dataset.followLog);
}

// ---- keyboard shortcuts ------------------------------------------------
// / search, c create, j/k move the selection through the page's cards or
// rows, ? this help. Keys typed into a field, with a modifier, or while a
// dialog is open are left alone.
const help = document.getElementById("help");
const helpOpen = document.getElementById("help-open");
if (helpOpen) helpOpen.addEventListener("click", () => help.showModal());
const itemSel = ".card, tr[data-run], table.activity tbody tr[data-id], section[data-agent], ul.held > li:not(.empty)";
function typing(el) {
  return el && (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName));
}
function move(step) {
  const items = [...document.querySelectorAll(itemSel)].filter(el => el.offsetParent !== null);
  if (!items.length) return;
  const cur = document.activeElement ? document.activeElement.closest(itemSel) : null;
  let i = items.indexOf(cur);
  i = i < 0 ? (step > 0 ? 0 : items.length - 1) : Math.min(Math.max(i + step, 0), items.length - 1);
  const item = items[i];
  const target = item.querySelector("a[href]") || item;
  if (target === item) item.tabIndex = -1;
  target.focus();
  item.scrollIntoView({ block: "nearest" });
}
// swallow is the key of the shortcut just handled: its character (a
// keypress sent apart from its keydown) must not land in the field the
// shortcut focused. Cleared when the key is released.
let swallow = null;
document.addEventListener("keypress", (ev) => { if (swallow !== null && ev.key === swallow) ev.preventDefault(); }, true);
document.addEventListener("keyup", (ev) => { if (ev.key === swallow) swallow = null; }, true);
document.addEventListener("keydown", (ev) => {
  // Esc leaves a field (outside a dialog), so that the shortcuts work again.
  if (ev.key === "Escape" && typing(ev.target) && !ev.target.closest("dialog")) { ev.target.blur(); return; }
  if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) return;
  if (document.querySelector("dialog[open]")) return;
  switch (ev.key) {
    case "/": {
      const q = document.getElementById("search");
      if (q) { ev.preventDefault(); q.focus(); q.select(); }
      else if (company) { ev.preventDefault(); location.href = "/?company=" + encodeURIComponent(company) + "#search"; }
      break;
    }
    case "c": {
      const t = document.getElementById("new-title");
      if (t) { ev.preventDefault(); t.focus(); }
      else if (company && !body.dataset.readonly) { ev.preventDefault(); location.href = "/?company=" + encodeURIComponent(company) + "#new-title"; }
      break;
    }
    case "j": ev.preventDefault(); move(1); break;
    case "k": ev.preventDefault(); move(-1); break;
    case "?": ev.preventDefault(); help.showModal(); break;
  }
  if (ev.defaultPrevented) swallow = ev.key;
});
// Arriving with #search or #new-title (from / or c on another page) focuses that field.
if (location.hash === "#search" || location.hash === "#new-title") {
  const el = document.getElementById(location.hash.slice(1));
  if (el) el.focus();
}

// ---- company picker --------------------------------------------------
const pick = document.getElementById("company-pick");
if (pick) pick.addEventListener("change", () => pick.form.requestSubmit());

syncClock(document);
tick();
setInterval(tick, 1000);
connect();
