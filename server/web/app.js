// codeagent's page: sessions, files, a task and its mode, live progress and
// artifacts, the session's kernel cells (live, and the earlier ones from the
// store); runs.js draws the runs, live and
// earlier ones. Plain DOM, no dependencies; every text from the server goes
// through textContent, never innerHTML.
"use strict";

const $ = (id) => document.getElementById(id);
// run is the run under way that the page follows; shown is the run drawn
// under Progress (live); abort stops following it.
const state = { key: sessionStorage.getItem("codeagent-key") || "", session: null, run: null, shown: null, abort: null };

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

// HIDDEN matches the characters that would show code other than it is:
// controls but tab and newline, and the invisible and bidirectional
// format characters that hide text or reorder what is shown (Trojan
// Source). highlight shows each as a visible \uXXXX mark instead.
const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

// appendVisible appends text to parent (in a span of class cls when one
// is given), with HIDDEN characters shown as marks.
function appendVisible(parent, text, cls) {
  const target = cls ? el("span", cls) : parent;
  let last = 0;
  for (const m of text.matchAll(HIDDEN)) {
    if (m.index > last) target.append(text.slice(last, m.index));
    const mark = el("span", "hidden-char", "\\u" + m[0].codePointAt(0).toString(16).padStart(4, "0"));
    mark.title = "an invisible or bidirectional character, shown escaped";
    target.append(mark);
    last = m.index + m[0].length;
  }
  target.append(text.slice(last));
  if (cls) parent.append(target);
}

function highlight(code, lang) {
  const pre = el("pre", "code");
  const out = el("code");
  let last = 0;
  for (const m of code.matchAll(TOKEN)) {
    if (m.index > last) appendVisible(out, code.slice(last, m.index));
    let cls = "";
    if (m[1]) cls = m[1].startsWith("#") === (lang !== "javascript") ? "tok-comment" : "";
    else if (m[2]) cls = "tok-string";
    else if (m[3]) cls = "tok-number";
    else if (m[4] && KEYWORDS.has(m[4])) cls = "tok-keyword";
    else if (m[4] && code[m.index + m[0].length] === "(") cls = "tok-call";
    appendVisible(out, m[0], cls);
    last = m.index + m[0].length;
  }
  appendVisible(out, code.slice(last));
  pre.append(out);
  return pre;
}

// --- sessions ---
// loadSessions lists the sessions and returns them.
async function loadSessions() {
  const { sessions } = await apiJSON("/v1/sessions");
  const list = $("session-list");
  list.replaceChildren();
  for (const s of sessions) {
    const li = el("li");
    const b = el("button", "link", s.name);
    b.type = "button";
    b.setAttribute("aria-current", state.session && state.session.id === s.id ? "true" : "false");
    b.addEventListener("click", guard(() => openSession(s)));
    li.append(b, el("span", "muted", " " + s.turns + " turn(s)"));
    list.append(li);
  }
  return sessions;
}

// openSession shows a session: its files, its kernel, its earlier runs
// from the store, and the run under way in it, if any. The tab reopens it
// after a reload.
async function openSession(s) {
  if (state.abort) state.abort.abort(); // another session's run: stop following it
  state.abort = state.run = state.shown = null;
  $("cancel").disabled = true;
  $("run").disabled = false;
  state.session = s;
  sessionStorage.setItem("codeagent-session", s.id);
  $("workspace").hidden = false;
  $("session-title").textContent = "Session " + s.name;
  for (const id of ["progress", "outcome", "artifacts", "cells", "history"]) $(id).replaceChildren();
  revokeAll(blobs.live);
  revokeAll(blobs.cells);
  $("cells-older").hidden = true;
  await Promise.all([loadFiles(), loadSessions(), loadCells()]);
  const full = await apiJSON("/v1/sessions/" + s.id);
  showKernel(full.kernel);
  showHistory(full.history, full.active_run);
  if (full.active_run) follow(full.active_run);
}

// reopen opens the session this tab showed before a reload, if it is still there.
async function reopen(sessions) {
  const id = sessionStorage.getItem("codeagent-session");
  const s = sessions.find((x) => x.id === id);
  if (s) await openSession(s);
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

// --- the run followed live (runs.js draws it) ---
async function follow(runID) {
  const prev = state.shown;
  state.shown = state.run = runID;
  $("cancel").disabled = false;
  $("run").disabled = true;
  $("progress").replaceChildren();
  $("outcome").replaceChildren();
  revokeAll(blobs.live);
  // The run shown before joins the earlier ones, from the store.
  if (prev && prev !== runID) refreshHistory(runID);
  setStatus("running…");
  const ctrl = new AbortController();
  state.abort = ctrl;
  try {
    const view = liveView(runID);
    await readEvents(await api("/v1/runs/" + runID + "/events", { signal: ctrl.signal }), (e) => onEvent(view, e));
    const run = await apiJSON("/v1/runs/" + runID);
    setStatus("run " + run.status);
    await showArtifacts($("artifacts"), (run.result && run.result.artifacts) || [], blobs.live);
    await Promise.all([loadFiles(), loadSessions()]);
  } catch (e) {
    if (e.name !== "AbortError") setStatus(e.message, true);
  } finally {
    if (state.abort === ctrl) {
      $("cancel").disabled = true;
      $("run").disabled = false;
      state.run = null;
      state.abort = null;
    }
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

// cellItem draws a cell: live, r is the kernel's answer; from the store
// (stored), a kept cell, whose figures are the workspace's files, fetched
// as blobs like a run's images.
function cellItem(code, r, stored) {
  const li = el("li", "cell");
  if (stored) li.dataset.cell = r.n;
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
    } else if (stored && d.kind === "figure" && d.file) {
      const fig = el("figure");
      fig.append(el("figcaption", "muted", "saved as " + d.file));
      li.append(fig);
      api(fileURL(d.file)).then((resp) => resp.blob())
        .then((blob) => fig.prepend(blobImage(blob, d.file, blobs.cells)))
        .catch((e) => fig.prepend(el("p", "bad", d.file + ": " + e.message)));
    } else if (data["text/html"] && safeTable(data["text/html"])) {
      li.append(safeTable(data["text/html"]));
    } else if (data["text/plain"] !== undefined) {
      li.append(el("pre", "result", data["text/plain"]));
    }
  }
  if (r.status !== "ok") li.append(el("p", "bad", r.status + (r.message ? ": " + r.message : "")));
  li.append(el("p", "muted", r.wall_ms + " ms" + (stored ? " · " + new Date(r.started_at).toLocaleString() : "")));
  return li;
}

// loadCells draws the session's cells kept in the store (GET
// /v1/sessions/{id}/cells, oldest first) under the cell box, newest on
// top: the newest page, or with before the page of older ones below.
const CELLS_PAGE = 50;

async function loadCells(before) {
  const sid = state.session.id;
  const { cells, more } = await apiJSON("/v1/sessions/" + sid + "/cells?limit=" + CELLS_PAGE + (before ? "&before=" + before : ""));
  if (!state.session || state.session.id !== sid) return; // another session was opened meanwhile
  const list = $("cells");
  for (const c of cells.slice().reverse()) list.append(cellItem(c.code, c, true));
  const older = $("cells-older");
  older.hidden = !more;
  if (cells.length) older.dataset.before = cells[0].n;
}

$("cells-older").addEventListener("click", guard(() => loadCells($("cells-older").dataset.before)));

function showKernel(k) {
  $("kernel-status").textContent = k && k.alive ? "kernel alive, " + formatSize(k.rss_bytes) + " resident, " + k.execution_count + " cell(s)" : "no kernel running";
}

async function kernelStatus() {
  showKernel((await apiJSON("/v1/sessions/" + state.session.id)).kernel);
}

$("cell-form").addEventListener("submit", guard(async () => {
  const code = $("cell").value;
  if (!code.trim()) throw new Error("write some code first");
  $("cell-run").disabled = true;
  setStatus("running the cell…");
  try {
    const r = await apiJSON("/v1/sessions/" + state.session.id + "/exec", { method: "POST",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify({ language: "python", code, state: "keep" }) });
    $("cells").prepend(cellItem(code, r));
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
  const sessions = await loadSessions();
  $("key-form").hidden = true;
  setStatus("key accepted");
  await reopen(sessions);
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
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ task, mode: $("mode").value, approve: $("approve").checked }) });
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
    await reopen(await loadSessions());
  } catch (e) { setStatus(e.message, true); }
})();
