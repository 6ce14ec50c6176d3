// codeagent's page: a run drawn from its events, live or replayed from the
// store, and a session's earlier runs (GET /v1/sessions/{id} lists them, GET
// /v1/runs/{id}/events replays each one's events). Loaded before app.js,
// whose helpers (el, api, highlight, fileURL, ...) it calls. Everything a
// model or a program chose goes in as text (textContent), never as HTML;
// images are the session's files, fetched from the server as blobs.
"use strict";

// Object URLs of the images drawn, revoked when their runs (or the
// session's kept cells) are redrawn.
const blobs = { live: [], history: [], cells: [] };

function revokeAll(urls) {
  for (const u of urls.splice(0)) URL.revokeObjectURL(u);
}

function blobImage(blob, alt, urls) {
  const img = el("img");
  img.alt = alt;
  img.src = URL.createObjectURL(blob);
  urls.push(img.src);
  return img;
}

// A view is where one run is drawn: its attempts, its outcome and its files.
// live, for the run followed live, is its ID: its approvals get buttons.
const runView = (progress, outcome, artifacts, live) => ({ progress, outcome, artifacts, live });
const liveView = (runID) => runView($("progress"), $("outcome"), $("artifacts"), runID);

function attemptItem(view, n, max) {
  let li = [...view.progress.children].find((c) => c.dataset.attempt === String(n));
  if (!li) {
    li = el("li", "attempt");
    li.dataset.attempt = n;
    li.append(el("h4", "", "Attempt " + n + (max ? " of " + max : "")));
    view.progress.append(li);
  }
  return li;
}

// stepItem is the block of a tool call in tool mode: the call, its check,
// its execution (a cell of the session's kernel for Python) and its result.
function stepItem(li, e) {
  const id = String(e.call_id || e.step);
  let box = [...li.querySelectorAll(".step")].find((c) => c.dataset.call === id);
  if (!box) {
    box = el("div", "step");
    box.dataset.call = id;
    box.append(el("h4", "", "Step " + e.step + (e.max_steps ? " of " + e.max_steps : "") + ": " + (e.tool || "a tool call")));
    li.append(box);
  }
  return box;
}

const STEP_EVENTS = new Set(["tool_call", "checked", "executed", "tool_result"]);

function showArguments(box, tool, args) {
  if (!args || typeof args !== "object") {
    box.append(el("pre", "args", JSON.stringify(args)));
    return;
  }
  for (const [k, v] of Object.entries(args)) {
    if (k === "code" && typeof v === "string") box.append(highlight(v, String(tool || "").replace(/^execute_/, "")));
    else {
      const text = typeof v === "string" ? v : JSON.stringify(v);
      box.append(el(text.includes("\n") ? "pre" : "p", "args", k + ": " + text));
    }
  }
}

function showResult(box, r, what, cls) {
  box.append(el("p", r.status === "ok" && !cls ? "good" : "bad",
    what + ": " + r.status + " (exit " + r.exit_code + ", " + r.wall_ms + " ms)" + (cls ? " · error class " + cls : "")));
  if (r.stdout) box.append(el("pre", "out", r.stdout));
  if (r.stderr) box.append(el("pre", "err", r.stderr));
}

function onEvent(view, e) {
  const li = e.type === "done" ? null : attemptItem(view, e.attempt || 1, e.max_attempts);
  const at = e.step && STEP_EVENTS.has(e.type) ? stepItem(li, e) : li;
  switch (e.type) {
    case "attempt_start":
      if (e.mode) li.append(el("p", "muted", "mode: " + e.mode));
      if (e.phase && e.phase !== "code") li.append(el("p", "muted", "phase: " + e.phase));
      if (e.fresh_start) li.append(el("p", "muted", "starting afresh from the task"));
      break;
    case "generated":
      li.append(el("p", "muted", "model answered in " + (e.duration_ms || 0) + " ms"));
      if (e.code) li.append(highlight(e.code, "python"));
      else if (e.phase === "tool" && !e.error_class) { if (e.message) li.append(el("p", "said", e.message)); }
      else li.append(el("p", "bad", "no usable code in the answer" + (e.error_class ? " (" + e.error_class + ")" : "") + (e.message ? ": " + e.message : "")));
      break;
    case "tool_call":
      showArguments(at, e.tool, e.arguments);
      break;
    case "checked": {
      // Findings stop a program; lint warnings (kind "lint") are listed
      // with them, and never make the check look clean.
      const all = e.findings || [];
      const warnings = all.filter((f) => f.kind === "lint").length;
      if (e.safe && !warnings) { at.append(el("p", "good", "check: no findings")); break; }
      const ul = el("ul", "findings");
      for (const f of all) {
        ul.append(el("li", f.kind === "lint" ? "warn" : "", (f.kind === "lint" ? "warning: " : "") +
          (f.line ? "line " + f.line + ": " : "") + (f.rule || "") + " " + (f.message || "")));
      }
      const head = e.safe ? el("p", "warn", "check: passed with " + warnings + " warning" + (warnings > 1 ? "s" : ""))
        : el("p", "bad", "check findings" + (e.error_class ? " (" + e.error_class + ")" : ""));
      at.append(head, ul);
      break;
    }
    case "executed":
      at.dataset.ran = "1";
      showResult(at, e.result || {}, "ran", e.error_class);
      break;
    case "tool_result":
      // An execution's result is drawn above; the other tools' is this.
      if (!at.dataset.ran) at.append(el("pre", e.error_class ? "err" : "result", e.tool_result || ""));
      break;
    case "replayed":
      li.append(el("p", "muted", "the successful cells, replayed as one program in a fresh sandbox:"));
      if (e.code) li.append(highlight(e.code, "python"));
      showResult(li, e.result || {}, "replayed", e.error_class);
      if (e.message) li.append(el("pre", "err", e.message));
      break;
    case "reviewed": {
      const rv = e.review || {};
      li.append(el("p", rv.approve ? "good" : "bad", "reviewer: " + (rv.approve ? "approved" : "rejected") +
        ((rv.concerns || []).length ? ": " + rv.concerns.join("; ") : "")));
      break;
    }
    case "approval_required":
      if (e.approval) showApproval(li, e.approval, view.live);
      break;
    case "approval":
      if (e.decision) showDecision(li, e.decision);
      break;
    case "verified":
      li.append(el("p", e.verdict && e.verdict.task_complete ? "good" : "bad",
        "verifier: " + (e.verdict && e.verdict.task_complete ? "task complete" : "incomplete: " + ((e.verdict && e.verdict.missing) || ""))));
      break;
    case "done":
      view.outcome.replaceChildren(el("p", e.success ? "good big" : "bad big",
        (e.success ? "Done after " + e.attempt + " attempt(s)" : "Failed: " + (e.message || "the task was not achieved")) +
        (e.mode ? " (" + e.mode + " mode)" : "") + (e.success ? "." : "")));
      break;
  }
}

// readEvents reads a run's Server-Sent Events to their end, giving each to fn.
async function readEvents(resp, fn) {
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
      if (data) fn(JSON.parse(data));
    }
  }
}

async function sha256(blob) {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", await blob.arrayBuffer()));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

// showArtifacts draws a run's files: images fetched from the session's
// files, the others as downloads. An earlier run's file (with its sha256)
// is the workspace's file now, said when it changed since.
async function showArtifacts(box, arts, urls) {
  box.replaceChildren();
  if (!arts.length) box.append(el("p", "muted", "no files created"));
  for (const a of arts) {
    const fig = el("figure");
    let note = a.change ? ", " + a.change : "";
    if (/\.(png|jpe?g|gif|svg)$/i.test(a.path)) {
      try {
        const blob = await (await api(fileURL(a.path))).blob();
        fig.append(blobImage(blob, a.path, urls));
        if (a.sha256 && window.crypto && crypto.subtle && (await sha256(blob)) !== a.sha256) note += ", changed since this run";
      } catch (e) { fig.append(el("p", "bad", e.message)); }
    }
    const cap = el("figcaption");
    cap.append(downloadButton(a.path), el("span", "muted", " " + formatSize(a.size) + note));
    fig.append(cap);
    box.append(fig);
  }
}

// --- a session's earlier runs ---
const HISTORY_OPEN = 3; // the newest runs replayed at once; the others when opened

// showHistory draws the session's runs from its turns (oldest first, as
// GET /v1/sessions/{id} lists them), newest first, all but skip (the run
// followed live).
function showHistory(turns, skip) {
  revokeAll(blobs.history);
  const list = (turns || []).filter((t) => t.id !== skip).reverse();
  $("history").replaceChildren(...list.map((t, i) => historyItem(t, i < HISTORY_OPEN)));
  $("history-none").hidden = list.length > 0;
}

async function refreshHistory(skip) {
  try {
    const full = await apiJSON("/v1/sessions/" + state.session.id);
    showHistory(full.history, skip);
  } catch (e) { setStatus(e.message, true); }
}

const STATUS_CLASS = { succeeded: "good", running: "muted" };

function historyItem(t, open) {
  const li = el("li", "run");
  li.dataset.run = t.id;
  const det = el("details");
  const sum = el("summary");
  const task = t.task.length > 100 ? t.task.slice(0, 100) + "…" : t.task;
  sum.append(el("strong", "", "Run " + t.seq + " "), el("span", STATUS_CLASS[t.status] || "bad", t.status),
    el("span", "muted", " " + new Date(t.started_at).toLocaleString() + " · "), el("span", "task-line", task));
  const view = runView(el("ol", "progress"), el("div", "outcome"), el("div", "artifacts"));
  det.append(sum, el("p", "task", t.task), view.progress, view.outcome, view.artifacts);
  let loaded = false;
  const load = async () => {
    if (loaded) return;
    loaded = true;
    try { await replayRun(t, view); } catch (e) { view.outcome.append(el("p", "bad", "could not show the run: " + e.message)); }
  };
  det.addEventListener("toggle", () => { if (det.open) load(); });
  det.open = open;
  if (open) load();
  li.append(det);
  return li;
}

// replayRun draws a finished run from its stored events and its turn.
async function replayRun(t, view) {
  await readEvents(await api("/v1/runs/" + encodeURIComponent(t.id) + "/events"), (e) => onEvent(view, e));
  if (t.code && !view.progress.querySelector("pre.code")) {
    // A run whose events were not kept: its final program and output.
    const li = attemptItem(view, t.attempts || 1);
    li.append(el("p", "muted", "the final program"), highlight(t.code, "python"));
    if (t.output) li.append(el("pre", "out", t.output));
  }
  await showArtifacts(view.artifacts, t.artifacts || [], blobs.history);
}
