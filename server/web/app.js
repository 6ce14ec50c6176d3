// codeagent's page: sessions, files, a task, live progress and artifacts.
// Plain DOM, no dependencies; every text from the server goes through
// textContent, never innerHTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { key: sessionStorage.getItem("codeagent-key") || "", session: null, run: null, abort: null };

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function setStatus(msg, bad) {
  const s = $("status");
  s.textContent = msg;
  s.classList.toggle("bad", !!bad);
}

async function api(path, opts = {}) {
  opts.headers = Object.assign({}, opts.headers || {});
  if (state.key) opts.headers["Authorization"] = "Bearer " + state.key;
  const resp = await fetch(path, opts);
  if (!resp.ok) {
    let msg = resp.status + " " + resp.statusText;
    try { msg = (await resp.json()).error.message; } catch (_) { /* not JSON */ }
    if (resp.status === 401) {
      $("key-form").hidden = false;
      msg = "enter an API key, or open the address `codeagent serve` printed (/?token=...)";
    }
    throw new Error(msg);
  }
  return resp;
}

const apiJSON = async (path, opts) => (await api(path, opts)).json();

// --- syntax highlighting: a small tokenizer for python, javascript, bash ---
const KEYWORDS = new Set(("False None True and as assert async await break class continue def del elif else except " +
  "finally for from global if import in is lambda nonlocal not or pass raise return try while with yield " +
  "const let var function new this typeof instanceof null undefined true false switch case default do " +
  "then fi done esac echo export local").split(" "));
const TOKEN = /(#[^\n]*|\/\/[^\n]*)|("""[\s\S]*?"""|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)|(\b\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)/g;

function highlight(code, lang) {
  const pre = el("pre", "code");
  const out = el("code");
  let last = 0;
  for (const m of code.matchAll(TOKEN)) {
    if (m.index > last) out.append(code.slice(last, m.index));
    let cls = "";
    if (m[1]) cls = m[1].startsWith("#") === (lang !== "javascript") ? "tok-comment" : "";
    else if (m[2]) cls = "tok-string";
    else if (m[3]) cls = "tok-number";
    else if (m[4] && KEYWORDS.has(m[4])) cls = "tok-keyword";
    else if (m[4] && code[m.index + m[0].length] === "(") cls = "tok-call";
    if (cls) out.append(el("span", cls, m[0])); else out.append(m[0]);
    last = m.index + m[0].length;
  }
  out.append(code.slice(last));
  pre.append(out);
  return pre;
}

// --- sessions ---
async function loadSessions() {
  const { sessions } = await apiJSON("/v1/sessions");
  const list = $("session-list");
  list.replaceChildren();
  for (const s of sessions) {
    const li = el("li");
    const b = el("button", "link", s.name);
    b.type = "button";
    b.setAttribute("aria-current", state.session && state.session.id === s.id ? "true" : "false");
    b.addEventListener("click", () => openSession(s));
    li.append(b, el("span", "muted", " " + s.turns + " turn(s)"));
    list.append(li);
  }
}

async function openSession(s) {
  state.session = s;
  $("workspace").hidden = false;
  $("session-title").textContent = "Session " + s.name;
  $("progress").replaceChildren();
  $("outcome").replaceChildren();
  $("artifacts").replaceChildren();
  $("cells").replaceChildren();
  await Promise.all([loadFiles(), loadSessions()]);
  const full = await apiJSON("/v1/sessions/" + s.id);
  $("kernel-status").textContent = full.kernel && full.kernel.alive ? "kernel alive" : "no kernel running";
  if (full.active_run) follow(full.active_run);
}

async function loadFiles() {
  const { files } = await apiJSON("/v1/sessions/" + state.session.id + "/files");
  const ul = $("files");
  ul.replaceChildren();
  for (const f of files) {
    const li = el("li");
    li.append(downloadButton(f.path), el("span", "muted", " " + formatSize(f.size) + " "));
    const del = el("button", "small", "Delete");
    del.type = "button";
    del.setAttribute("aria-label", "Delete " + f.path);
    del.addEventListener("click", async () => {
      try { await api(fileURL(f.path), { method: "DELETE" }); await loadFiles(); } catch (e) { setStatus(e.message, true); }
    });
    li.append(del);
    ul.append(li);
  }
  if (!files.length) ul.append(el("li", "muted", "no files yet"));
}

const fileURL = (p) => "/v1/sessions/" + state.session.id + "/files/" + p.split("/").map(encodeURIComponent).join("/");

function formatSize(n) {
  if (n < 1024) return n + " B";
  if (n < 1 << 20) return (n / 1024).toFixed(1) + " KiB";
  return (n / (1 << 20)).toFixed(1) + " MiB";
}

function downloadButton(path) {
  const b = el("button", "link", path);
  b.type = "button";
  b.setAttribute("aria-label", "Download " + path);
  b.addEventListener("click", async () => {
    try {
      const blob = await (await api(fileURL(path) + "?download=1")).blob();
      const a = el("a");
      a.href = URL.createObjectURL(blob);
      a.download = path.split("/").pop();
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    } catch (e) { setStatus(e.message, true); }
  });
  return b;
}

// --- runs and their events ---
function attemptItem(n, max) {
  let li = document.querySelector('#progress li[data-attempt="' + n + '"]');
  if (!li) {
    li = el("li", "attempt");
    li.dataset.attempt = n;
    li.append(el("h4", "", "Attempt " + n + (max ? " of " + max : "")));
    $("progress").append(li);
  }
  return li;
}

function onEvent(e) {
  const li = e.type === "done" ? null : attemptItem(e.attempt || 1, e.max_attempts);
  switch (e.type) {
    case "attempt_start":
      if (e.phase && e.phase !== "code") li.append(el("p", "muted", "phase: " + e.phase));
      if (e.fresh_start) li.append(el("p", "muted", "starting afresh from the task"));
      break;
    case "generated":
      li.append(el("p", "muted", "model answered in " + (e.duration_ms || 0) + " ms"));
      if (e.code) li.append(highlight(e.code, "python"));
      else li.append(el("p", "bad", "no code in the answer" + (e.error_class ? " (" + e.error_class + ")" : "")));
      break;
    case "checked": {
      if (e.safe) { li.append(el("p", "good", "check: no findings")); break; }
      const ul = el("ul", "findings");
      for (const f of e.findings || []) ul.append(el("li", "", (f.line ? "line " + f.line + ": " : "") + (f.rule || "") + " " + (f.message || "")));
      li.append(el("p", "bad", "check findings" + (e.error_class ? " (" + e.error_class + ")" : "")), ul);
      break;
    }
    case "executed": {
      const r = e.result || {};
      li.append(el("p", r.status === "ok" ? "good" : "bad",
        "ran: " + r.status + " (exit " + r.exit_code + ", " + r.wall_ms + " ms)" + (e.error_class ? " · error class " + e.error_class : "")));
      if (r.stdout) li.append(el("pre", "out", r.stdout));
      if (r.stderr) li.append(el("pre", "err", r.stderr));
      break;
    }
    case "verified":
      li.append(el("p", e.verdict && e.verdict.task_complete ? "good" : "bad",
        "verifier: " + (e.verdict && e.verdict.task_complete ? "task complete" : "incomplete: " + ((e.verdict && e.verdict.missing) || ""))));
      break;
    case "done":
      $("outcome").replaceChildren(el("p", e.success ? "good big" : "bad big",
        e.success ? "Done after " + e.attempt + " attempt(s)." : "Failed: " + (e.message || "the task was not achieved")));
      break;
  }
}

async function follow(runID) {
  state.run = runID;
  $("cancel").disabled = false;
  $("run").disabled = true;
  $("progress").replaceChildren();
  $("outcome").replaceChildren();
  setStatus("running…");
  const ctrl = new AbortController();
  state.abort = ctrl;
  try {
    const resp = await api("/v1/runs/" + runID + "/events", { signal: ctrl.signal });
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data) onEvent(JSON.parse(data));
      }
    }
    const run = await apiJSON("/v1/runs/" + runID);
    setStatus("run " + run.status);
    await showArtifacts(run.result);
    await Promise.all([loadFiles(), loadSessions()]);
  } catch (e) {
    if (e.name !== "AbortError") setStatus(e.message, true);
  } finally {
    $("cancel").disabled = true;
    $("run").disabled = false;
    state.run = null;
  }
}

async function showArtifacts(result) {
  const box = $("artifacts");
  box.replaceChildren();
  const arts = (result && result.artifacts) || [];
  if (!arts.length) box.append(el("p", "muted", "no files created"));
  for (const a of arts) {
    const fig = el("figure");
    if (/\.(png|jpe?g|gif|svg)$/i.test(a.path)) {
      try {
        const blob = await (await api(fileURL(a.path))).blob();
        const img = el("img");
        img.alt = a.path;
        img.src = URL.createObjectURL(blob);
        fig.append(img);
      } catch (e) { fig.append(el("p", "bad", e.message)); }
    }
    const cap = el("figcaption");
    cap.append(downloadButton(a.path), el("span", "muted", " " + formatSize(a.size) + ", " + a.change));
    fig.append(cap);
    box.append(fig);
  }
}

// --- the session's kernel: cells ---
// A cell's text/html comes from code in the sandbox: it is never inserted
// as HTML. A table in it (pandas' DataFrame) is rebuilt cell by cell from
// its text, nothing else is taken; images are PNG bytes shown as blobs.
function safeTable(html) {
  const doc = new DOMParser().parseFromString(html, "text/html"); // inert: no script runs, nothing loads
  const src = doc.querySelector("table");
  if (!src) return null;
  const table = el("table", "df");
  let rows = 0;
  for (const tr of src.querySelectorAll("tr")) {
    if (++rows > 200) break;
    const row = el("tr");
    for (const c of tr.children) {
      if (c.tagName !== "TH" && c.tagName !== "TD") continue;
      row.append(el(c.tagName === "TH" ? "th" : "td", "", c.textContent));
    }
    table.append(row);
  }
  return table;
}

function pngImage(b64, alt) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const img = el("img");
  img.alt = alt;
  img.src = URL.createObjectURL(new Blob([bytes], { type: "image/png" }));
  return img;
}

function showCell(code, r) {
  const li = el("li", "cell");
  li.append(el("h4", "", "In [" + (r.execution_count || "?") + "]"), highlight(code, "python"));
  if (r.kernel_restarted) li.append(el("p", "bad", "The kernel had ended (" + r.restart_reason + "): this cell ran in a fresh one, without the earlier state."));
  if (r.stdout) li.append(el("pre", "out", r.stdout));
  if (r.stderr) li.append(el("pre", "err", r.stderr));
  for (const d of r.display || []) {
    const data = d.data || {};
    if (data["image/png"]) {
      const fig = el("figure");
      fig.append(pngImage(data["image/png"], d.file || "figure"));
      if (d.file) fig.append(el("figcaption", "muted", "saved as " + d.file));
      li.append(fig);
    } else if (data["text/html"] && safeTable(data["text/html"])) {
      li.append(safeTable(data["text/html"]));
    } else if (data["text/plain"] !== undefined) {
      li.append(el("pre", "result", data["text/plain"]));
    }
  }
  if (r.status !== "ok") li.append(el("p", "bad", r.status + (r.message ? ": " + r.message : "")));
  li.append(el("p", "muted", r.wall_ms + " ms"));
  $("cells").prepend(li);
}

async function kernelStatus() {
  const full = await apiJSON("/v1/sessions/" + state.session.id);
  const k = full.kernel;
  $("kernel-status").textContent = k && k.alive ? "kernel alive, " + formatSize(k.rss_bytes) + " resident, " + k.execution_count + " cell(s)" : "no kernel running";
}

$("cell-form").addEventListener("submit", guard(async () => {
  const code = $("cell").value;
  if (!code.trim()) throw new Error("write some code first");
  $("cell-run").disabled = true;
  setStatus("running the cell…");
  try {
    const r = await apiJSON("/v1/sessions/" + state.session.id + "/exec", { method: "POST",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify({ language: "python", code, state: "keep" }) });
    showCell(code, r);
    setStatus("cell " + r.status);
    await Promise.all([kernelStatus(), loadFiles()]);
  } finally {
    $("cell-run").disabled = false;
  }
}));

$("kernel-restart").addEventListener("click", guard(async () => {
  await api("/v1/sessions/" + state.session.id + "/kernel", { method: "DELETE" });
  await kernelStatus();
  setStatus("kernel restarted: the next cell starts afresh");
}));

// --- wiring ---
function guard(fn) {
  return async (ev) => {
    ev.preventDefault();
    try { await fn(ev); } catch (e) { setStatus(e.message, true); }
  };
}

$("key-form").addEventListener("submit", guard(async () => {
  state.key = $("api-key").value.trim();
  sessionStorage.setItem("codeagent-key", state.key);
  await loadSessions();
  $("key-form").hidden = true;
  setStatus("key accepted");
}));

$("session-form").addEventListener("submit", guard(async () => {
  const name = $("new-session-name").value.trim();
  const s = await apiJSON("/v1/sessions", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify(name ? { name } : {}) });
  $("new-session-name").value = "";
  await openSession(s);
  setStatus("session " + s.name + " created");
}));

$("upload-form").addEventListener("submit", guard(async () => {
  const files = $("file-input").files;
  if (!files.length) throw new Error("choose a file first");
  const fd = new FormData();
  for (const f of files) fd.append("file", f, f.name);
  await api("/v1/sessions/" + state.session.id + "/files", { method: "POST", body: fd });
  $("file-input").value = "";
  await loadFiles();
  setStatus("uploaded " + files.length + " file(s)");
}));

$("task-form").addEventListener("submit", guard(async () => {
  const task = $("task").value.trim();
  const run = await apiJSON("/v1/sessions/" + state.session.id + "/runs", { method: "POST",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ task }) });
  $("artifacts").replaceChildren();
  follow(run.id);
}));

$("cancel").addEventListener("click", guard(async () => {
  if (state.run) await api("/v1/runs/" + state.run + "/cancel", { method: "POST" });
}));

(async () => {
  try {
    // Authentication is the key entered below, or the cookie that opening
    // the address printed by `codeagent serve` (/?token=...) set: the
    // first request says which is missing.
    const h = await (await fetch("/v1/health")).json();
    if (!h.model) setStatus("no model is configured on the server: runs will fail", true);
    await loadSessions();
  } catch (e) { setStatus(e.message, true); }
})();
